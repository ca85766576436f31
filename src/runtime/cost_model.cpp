// CostModel: exponentially weighted least squares with a trust rule (see cost_model.h).
#include "runtime/cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace pllm {
namespace {

// Prefill tokens enter the fit in units of 64 (a chunk), so the three features have similar
// magnitudes and the 3x3 system stays well conditioned.
constexpr double kTokenUnit = 64.0;
// Ridge towards the prior: small enough to leave measured directions to the data, large
// enough that a direction never measured has a huge leverage (about 1 / kRidge).
constexpr double kRidge = 1e-6;
// A prediction is trusted when backed by at least one fresh observation's worth of data.
constexpr double kMaxLeverage = 1.0;

bool finite_non_negative(double v) { return std::isfinite(v) && v >= 0; }

}  // namespace

Result<CostModel> CostModel::create(const CostModelParams& p) {
  if (!finite_non_negative(p.prior_fixed_ms) || !finite_non_negative(p.prior_row_ms) ||
      !finite_non_negative(p.prior_token_ms))
    return make_error(Status::invalid_argument, "cost model: prior costs must be finite and >= 0 ms");
  if (!(p.forget > 0 && p.forget <= 1))
    return make_error(Status::invalid_argument, "cost model: forget must be in (0, 1], not " + std::to_string(p.forget));
  if (!finite_non_negative(p.min_margin) || !finite_non_negative(p.sigmas) || !finite_non_negative(p.initial_rel_error))
    return make_error(Status::invalid_argument, "cost model: margins must be finite and >= 0");
  return CostModel(p);
}

CostModel::CostModel(const CostModelParams& p) : p_(p), rel_var_(p.initial_rel_error * p.initial_rel_error) {
  refit();  // no data yet: theta is the prior, inverse the ridge's
}

CostModel::Vec3 CostModel::features(int decode_rows, int prefill_tokens) {
  return {1.0, double(decode_rows), double(prefill_tokens) / kTokenUnit};
}

double CostModel::prior_ms(int decode_rows, int prefill_tokens) const {
  return p_.prior_fixed_ms + p_.prior_row_ms * decode_rows + p_.prior_token_ms * prefill_tokens;
}

double CostModel::fit_ms(int decode_rows, int prefill_tokens) const {
  const Vec3 x = features(decode_rows, prefill_tokens);
  return std::max(0.0, theta_[0] * x[0] + theta_[1] * x[1] + theta_[2] * x[2]);
}

bool CostModel::trusted(int decode_rows, int prefill_tokens) const {
  if (n_observed_ == 0) return false;
  const Vec3 x = features(decode_rows, prefill_tokens);
  double leverage = 0;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) leverage += x[i] * inverse_[i][j] * x[j];
  return leverage <= kMaxLeverage;
}

double CostModel::margin() const { return std::max(p_.min_margin, p_.sigmas * std::sqrt(rel_var_)); }

// The tightest bound that a recent measured step gives by scaling (see the header); the
// prior only when none covers this size (a step with prefill tokens is never bounded by a
// step without them, and likewise for decode rows), so measurements overrule a prior that
// was too optimistic.
double CostModel::scaled_anchor_bound_ms(int decode_rows, int prefill_tokens) const {
  double best = std::numeric_limits<double>::infinity();
  const int n = std::min(n_observed_, kAnchors);
  for (int i = 0; i < n; ++i) {
    const Anchor& a = anchors_[size_t(i)];
    if ((decode_rows > 0 && a.rows == 0) || (prefill_tokens > 0 && a.tokens == 0)) continue;
    double scale = 1.0;
    if (a.rows > 0) scale = std::max(scale, double(decode_rows) / a.rows);
    if (a.tokens > 0) scale = std::max(scale, double(prefill_tokens) / a.tokens);
    best = std::min(best, a.ms * scale);
  }
  return std::isfinite(best) ? best : prior_ms(decode_rows, prefill_tokens);
}

double CostModel::predict_ms(int decode_rows, int prefill_tokens) const {
  if (decode_rows <= 0 && prefill_tokens <= 0) return 0;
  const double base = trusted(decode_rows, prefill_tokens) ? fit_ms(decode_rows, prefill_tokens)
                                                           : scaled_anchor_bound_ms(decode_rows, prefill_tokens);
  return base * (1.0 + margin());
}

Result<void> CostModel::observe(int decode_rows, int prefill_tokens, double ms) {
  if (decode_rows < 0 || prefill_tokens < 0 || decode_rows + prefill_tokens == 0)
    return make_error(Status::invalid_argument, "cost model: a step has >= 1 row or token and no negative counts (" +
                                                    std::to_string(decode_rows) + " rows, " +
                                                    std::to_string(prefill_tokens) + " prefill tokens)");
  if (!finite_non_negative(ms))
    return make_error(Status::invalid_argument, "cost model: a step cost must be finite and >= 0 ms");
  // The error of a prediction made before seeing this step is the honest one: the residual
  // after the update would shrink towards zero with every new point.
  if (trusted(decode_rows, prefill_tokens)) {
    const double predicted = std::max(fit_ms(decode_rows, prefill_tokens), 1e-9);
    const double rel = (ms - predicted) / predicted;
    rel_var_ = p_.forget * rel_var_ + (1.0 - p_.forget) * rel * rel;
  }
  const Vec3 x = features(decode_rows, prefill_tokens);
  for (int i = 0; i < 3; ++i) {
    moment_[i] = p_.forget * moment_[i] + x[i] * ms;
    for (int j = 0; j < 3; ++j) gram_[i][j] = p_.forget * gram_[i][j] + x[i] * x[j];
  }
  anchors_[size_t(n_observed_ % kAnchors)] = Anchor{decode_rows, prefill_tokens, ms};
  ++n_observed_;
  refit();
  return {};
}

// theta = (gram + kRidge I)^-1 (moment + kRidge theta_prior), by Gauss-Jordan elimination
// with partial pivoting on the SPD 3x3 matrix (its inverse is kept for the leverage).
void CostModel::refit() {
  Mat3 a = gram_;
  Mat3 inv{};
  for (int i = 0; i < 3; ++i) {
    a[i][i] += kRidge;
    inv[i][i] = 1.0;
  }
  for (int col = 0; col < 3; ++col) {
    int pivot = col;
    for (int r = col + 1; r < 3; ++r)
      if (std::fabs(a[r][col]) > std::fabs(a[pivot][col])) pivot = r;
    std::swap(a[col], a[pivot]);
    std::swap(inv[col], inv[pivot]);
    const double d = a[col][col];  // > 0: gram is positive semi-definite, plus the ridge
    for (int j = 0; j < 3; ++j) {
      a[col][j] /= d;
      inv[col][j] /= d;
    }
    for (int r = 0; r < 3; ++r) {
      if (r == col) continue;
      const double f = a[r][col];
      for (int j = 0; j < 3; ++j) {
        a[r][j] -= f * a[col][j];
        inv[r][j] -= f * inv[col][j];
      }
    }
  }
  inverse_ = inv;
  const Vec3 prior = {p_.prior_fixed_ms, p_.prior_row_ms, p_.prior_token_ms * kTokenUnit};
  for (int i = 0; i < 3; ++i) {
    theta_[i] = 0;
    for (int j = 0; j < 3; ++j) theta_[i] += inv[i][j] * (moment_[j] + kRidge * prior[j]);
  }
}

}  // namespace pllm
