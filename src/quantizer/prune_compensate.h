// Error-compensated structured pruning of one linear layer y = W·x + b (ffn_down, attn_output):
// which input channels (or groups of them: a KV group's columns) to remove, and how to change
// what is kept so that the layer's output on calibration activations moves as little as
// possible. Pure arithmetic over plain arrays; the pruner (quantizer/prune.h) feeds it the
// weights and the Gram matrix of the activations (GramStats below).
//
// Modes (--compensate):
//   none      the removed channels are dropped (the caller ranks them; nothing here runs)
//   bias      the removed channels' mean contribution moves into the bias: b += W_R·mean(x_R)
//             (FLAP). Channels are ranked by ||W[:,j]||²·Var(x_j): what a constant cannot
//             replace.
//   lsq       the kept columns are re-fitted by ridge-regularised least squares:
//             W'_K = argmin ||W·X − W'_K·X_K||² + λ||W'_K − W_K||², removing one group at a
//             time greedily (Optimal Brain Surgeon on the shared input Hessian H = G + λI:
//             remove the group S with the least tr(W_S (H⁻¹)_SS⁻¹ W_Sᵀ), update the others
//             with W −= W_S (H⁻¹)_SS⁻¹ (H⁻¹)_S,: and H⁻¹ by the same Schur step). The greedy
//             order is the importance; the sum of the removed saliencies is the exact
//             remaining error of the final fit.
//   lsq_bias  lsq with the constant input 1 as one more, never removed, channel: the fit
//             moves the bias too (the regression gets an intercept).
// Regularisation (lsq modes): H = G/T + λI + S with λ = ridge · mean of the channels'
// diagonal of G/T (also added to the constant channel), and S = diag(s · Var(x_j)) with
// s = shrink · n / T. λ is a numerical floor; S is what makes the fit hold on text it did
// not see: the fit's cross-channel terms are estimated from T tokens, and their noise
// (relative to each channel's own fluctuation) grows as n / T, so with a few thousand
// tokens for 1536 channels the plain fit chases the calibration text (SmolLM2 at 25 %,
// 6,520 tokens: perplexity +29 %, against +18 % with 32,768). S penalises moving column j
// by s times the output power that change would have on x_j's own fluctuation: scale-free
// per channel (unlike λ, a fraction of the mean power: it barely touches the loudest
// channels and overcharges removing the quiet ones), and as s grows the fit turns into
// `bias` (kept columns untouched, the mean into the bias, channels ranked by
// ||W[:,j]||²·Var(x_j)).
// Everything is computed in double.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "gguf/gguf.h"
#include "model/act_observer.h"

namespace pllm {

enum class Compensate { none, bias, lsq, lsq_bias };
Result<Compensate> parse_compensate(std::string_view s);
const char* compensate_name(Compensate c);
inline bool compensate_has_bias(Compensate c) { return c == Compensate::bias || c == Compensate::lsq_bias; }

// Second moments of one weight's input over the calibration tokens:
// G = Σ_t x̃_t x̃_tᵀ with x̃ = [x; 1], so G's last row holds the channel sums and the count.
struct GramMatrix {
  int n = 0;              // channels, without the constant
  uint64_t count = 0;     // tokens seen
  std::vector<double> g;  // [(n + 1) * (n + 1)], row-major, symmetric
  double at(int i, int j) const { return g[size_t(i) * size_t(n + 1) + size_t(j)]; }
};

// Collects GramMatrix for the weights named at construction (observer of a calibration run).
class GramStats final : public ActObserver {
 public:
  explicit GramStats(std::vector<std::string> weights);
  void observe(const Matrix& W, const float* X, int n_tok) override;
  // Completes the matrices after the last observation; find() answers only after it.
  void finish();
  const GramMatrix* find(std::string_view weight) const;
  // Whether some collected matrix saw fewer than kShortCalibTokensPerChannel tokens per
  // channel; `tokens` and `channels` then name the worst one (after finish()).
  bool short_calibration(uint64_t& tokens, int& channels) const;
  // Bytes the matrices take (n + 1)² doubles each: the caller checks it before a run.
  static uint64_t bytes_for(std::span<const int64_t> cols);

  // A finished collection as a GGUF file, so that several prunes of one model share one
  // calibration run: general.type "pocketllm.gram", pocketllm.gram.version,
  // pocketllm.gram.model_identity (Model::identity()), and per weight W two F32 tensors
  // "W.gram_hi" and "W.gram_lo" of (n + 1)² values whose sum is G (double precision kept).
  Result<void> save(const std::string& path, uint64_t model_identity) const;
  // Validates the file (type, version, identity of `model`, every weight a 2-D tensor of the
  // model with n columns, finite symmetric values, a whole positive token count).
  static Result<std::unique_ptr<GramStats>> load(const std::string& path, const GgufFile& model,
                                                 uint64_t model_identity);

 private:
  static constexpr int kFlushTokens = 1024;
  struct Pending {              // tokens not yet in the double matrix
    std::vector<float> xtx;     // [n][n], lower triangle
    std::vector<double> sums;   // [n]
    int tokens = 0;
  };
  void flush(size_t i);
  std::vector<std::string> names_;
  std::vector<GramMatrix> grams_;  // parallel to names_, sized on first sight
  std::vector<Pending> pending_;
  bool finished_ = false;
};

// The default --ridge and --shrink (SmolLM2 measurements: docs/QUANTIZATION.md, "Short
// calibration"): with the shrinkage doing the regularising, the ridge is only a floor (0.01,
// the default before, cost 1 % of perplexity at 32,768 tokens).
inline constexpr double kDefaultRidge = 1e-4;
inline constexpr double kDefaultShrink = 3.0;
// Calibration with fewer tokens than this many per input channel of a fitted layer is
// "short": the pruner warns (the fit is worse than with more text; see kDefaultShrink).
inline constexpr int kShortCalibTokensPerChannel = 16;

struct CompensateSpec {
  Compensate mode = Compensate::lsq;
  int width = 1;        // channels per removable group (FFN: 1; attention: a KV group's columns)
  int n_remove = 0;     // groups to remove
  double ridge = kDefaultRidge;  // λ = ridge · mean channel diagonal of G/T
  double shrink = kDefaultShrink;  // s = shrink · n / T per channel variance (see above)
};

struct CompensateResult {
  std::vector<int> keep;       // kept groups, ascending
  std::vector<double> w;       // [rows][keep.size() · width]: the kept columns after compensation
  std::vector<double> bias;    // [rows]: the new bias (modes with a bias), else empty
  // Mean squared output error per token, ||W·x + b − (W'·x' + b')||², after 0, 1, …,
  // n_remove removals in the chosen order (error[0] = 0): the sensitivity plan's curve.
  std::vector<double> error;
};

// W: [rows][n] row-major, the layer's weights; bias0: [rows] the current bias or empty (zero).
// G: the Gram matrix of the layer's input (G.n == n, n a multiple of width, G.count > 0).
Result<CompensateResult> compensate_prune(std::span<const double> W, int rows, std::span<const double> bias0,
                                          const GramMatrix& G, const CompensateSpec& s);

}  // namespace pllm
