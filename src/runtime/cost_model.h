// CostModel: what one batched forward step costs (ms), learned from measured steps, so the
// scheduler (runtime/scheduler.h) can size a step to the time left in a UI frame.
//
// The fit: cost = a + b * decode_rows + c * prefill_tokens, by exponentially weighted least
// squares (each observation weighs `forget` times the one after it, so the fit follows a
// machine that slows down when hot) with a faint ridge towards the prior, which only
// matters in directions no step has measured yet.
//
// A fit is only believed near what was measured: the step's leverage x^T (X^T W X)^-1 x
// says how many observations' worth of information back the prediction at x. Below one,
// the fit is used; above (a size never seen, or only far outside what was seen) the
// prediction is an upper bound instead: the prior (meant to be pessimistic) or, tighter,
// a recent measured step scaled up by the size ratio (for a cost with non-negative a, b, c,
// cost(x) <= cost(x0) * max(rows/rows0, tokens/tokens0) when x >= x0). So growing steps
// are explored from below and never extrapolated from a line through two small points.
//
// The safety margin on top: max(min_margin, sigmas * relative error), the relative error an
// EWMA of (measured - predicted) / predicted of the fit before each update, so noise in
// the measurements widens the margin and a steady machine narrows it.
#pragma once
#include <array>

#include "base/result.h"

namespace pllm {

struct CostModelParams {
  // Cost before any measurement. Meant pessimistic: an optimistic prior overruns frames until
  // the first measurements correct it; one so pessimistic that no step fits a frame never
  // learns in frame mode (steps run outside it, e.g. a warm-up, still teach the model).
  double prior_fixed_ms = 4.0;
  double prior_row_ms = 1.0;      // per decode row
  double prior_token_ms = 0.25;   // per prefill token
  double forget = 0.98;           // weight of the past per observation (~50 steps)
  double min_margin = 0.05;       // predictions get at least 5 % on top
  double sigmas = 2.0;            // plus this many relative-error deviations
  double initial_rel_error = 0.1;  // the deviation assumed before any trusted prediction
};

class CostModel {
 public:
  static Result<CostModel> create(const CostModelParams& p);

  // One measured step. Errors on negative counts, an empty step or a cost that is not a
  // finite non-negative number.
  Result<void> observe(int decode_rows, int prefill_tokens, double ms);

  // What a step is expected to cost, margin included: what the scheduler checks against
  // the time left. 0 for an empty step.
  double predict_ms(int decode_rows, int prefill_tokens) const;
  // The fitted line alone (no trust rule, no margin), for reports and tests.
  double fit_ms(int decode_rows, int prefill_tokens) const;
  // True when the fit backs a prediction at this size (leverage <= 1).
  bool trusted(int decode_rows, int prefill_tokens) const;
  double margin() const;
  int observations() const { return n_observed_; }

 private:
  using Vec3 = std::array<double, 3>;
  using Mat3 = std::array<Vec3, 3>;
  struct Anchor {
    int rows = 0, tokens = 0;
    double ms = 0;
  };
  static constexpr int kAnchors = 32;  // recent measured steps the upper bound scales from

  explicit CostModel(const CostModelParams& p);
  static Vec3 features(int decode_rows, int prefill_tokens);
  double prior_ms(int decode_rows, int prefill_tokens) const;
  double scaled_anchor_bound_ms(int decode_rows, int prefill_tokens) const;
  void refit();

  CostModelParams p_;
  Mat3 gram_{};          // sum of w x x^T
  Vec3 moment_{};        // sum of w x y
  Vec3 theta_{};         // fitted (a, b, c) in feature units
  Mat3 inverse_{};       // (gram + ridge)^-1, for leverage
  double rel_var_ = 0;   // EWMA of the squared relative error of trusted predictions
  std::array<Anchor, kAnchors> anchors_{};
  int n_observed_ = 0;
};

}  // namespace pllm
