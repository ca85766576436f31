#include "quantizer/kl_calib.h"

#include <algorithm>
#include <cmath>

namespace pllm {

namespace {
int pow2_at_least(int n) {
  int p = 2;
  while (p < n && p < (1 << 24)) p *= 2;
  return p;
}
}  // namespace

AbsHistogram::AbsHistogram(int n_bins) : counts_(size_t(pow2_at_least(n_bins)), 0) {}

void AbsHistogram::grow_to(double v) {
  if (range_ == 0.0) {  // first non-zero value: bin 0 already holds the zeros, which stay there
    range_ = v;
    return;
  }
  const size_t n = counts_.size();
  while (range_ < v) {
    // [0, 2r] in n bins: new bin j covers old bins 2j and 2j + 1.
    for (size_t j = 0; j < n / 2; ++j) counts_[j] = counts_[2 * j] + counts_[2 * j + 1];
    std::fill(counts_.begin() + std::ptrdiff_t(n / 2), counts_.end(), uint64_t(0));
    range_ *= 2.0;
  }
}

int AbsHistogram::bin_of(double a) const {
  // (|x| / range) * n: the multiplication by a power of two is exact and so is halving
  // range, so a value's bin after a doubling is exactly its old bin / 2 (merging is exact).
  const double y = a / range_ * double(counts_.size());
  const double b = std::ceil(y) - 1.0;
  return b <= 0.0 ? 0 : int(std::min(b, double(counts_.size() - 1)));
}

void AbsHistogram::add(const float* x, int64_t n) {
  // The block's largest |x| first, so the range grows once per call at most.
  double m = 0.0;
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(x[i])) m = std::max(m, double(std::fabs(x[i])));
  if (m > range_) grow_to(m);
  max_abs_ = std::max(max_abs_, m);
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) {
      ++non_finite_;
      continue;
    }
    const double a = std::fabs(double(x[i]));
    ++counts_[size_t(a == 0.0 ? 0 : bin_of(a))];
    ++total_;
  }
}

namespace {
constexpr double kEmptyGroupMass = 0.1;
}  // namespace

Result<KlChoice> kl_threshold(std::span<const uint64_t> hist, double bin_width, int levels) {
  if (levels < 1) return make_error(Status::invalid_argument, "KL calibration: levels must be >= 1");
  if (!(bin_width > 0.0) || !std::isfinite(bin_width))
    return make_error(Status::invalid_argument, "KL calibration: bin width must be positive");
  int used = 0;  // last non-empty bin + 1
  for (size_t b = 0; b < hist.size(); ++b)
    if (hist[b] != 0) used = int(b) + 1;
  if (used == 0) return make_error(Status::invalid_argument, "KL calibration: empty histogram");
  if (used <= levels) return KlChoice{used, (used + 0.5) * bin_width, 0.0};

  // suffix[i] = mass of hist[i, used): the outliers clipped into bin i - 1.
  std::vector<double> suffix(size_t(used) + 1, 0.0);
  for (int b = used - 1; b >= 0; --b) suffix[size_t(b)] = suffix[size_t(b) + 1] + double(hist[size_t(b)]);

  std::vector<double> p(static_cast<size_t>(used)), q(static_cast<size_t>(used));
  KlChoice best{0, 0.0, 0.0};
  for (int i = levels; i <= used; ++i) {
    for (int b = 0; b < i; ++b) p[size_t(b)] = double(hist[size_t(b)]);
    p[size_t(i) - 1] += suffix[size_t(i)];

    // Q: the bins below the threshold as they are (without the clipped mass: that is
    // what the quantised tensor cannot represent), merged and spread back.
    const int per = i / levels;  // bins per group; the last group takes the remainder too
    for (int g = 0; g < levels; ++g) {
      const int lo = g * per, hi = g == levels - 1 ? i : lo + per;
      double mass = 0.0;
      int nonzero = 0;
      for (int b = lo; b < hi; ++b) {
        mass += double(hist[size_t(b)]);
        nonzero += p[size_t(b)] != 0.0;
      }
      const double each = nonzero ? mass / nonzero : 0.0;
      for (int b = lo; b < hi; ++b) q[size_t(b)] = p[size_t(b)] != 0.0 ? each : 0.0;
    }
    // Only the last bin can have P > 0 and Q = 0 (outliers folded into an empty group):
    // a tenth of a count there keeps the divergence finite and large.
    if (p[size_t(i) - 1] != 0.0 && q[size_t(i) - 1] == 0.0) q[size_t(i) - 1] = kEmptyGroupMass;

    double sp = 0.0, sq = 0.0;
    for (int b = 0; b < i; ++b) {
      sp += p[size_t(b)];
      sq += q[size_t(b)];
    }
    double kl = 0.0;
    for (int b = 0; b < i; ++b) {
      if (p[size_t(b)] == 0.0) continue;
      const double pb = p[size_t(b)] / sp, qb = q[size_t(b)] / sq;
      kl += pb * std::log(pb / qb);
    }
    if (best.bins == 0 || kl < best.kl) best = KlChoice{i, (i + 0.5) * bin_width, kl};
  }
  return best;
}

Result<double> percentile_threshold(std::span<const uint64_t> hist, double bin_width, double fraction) {
  if (!(fraction > 0.0 && fraction <= 1.0))
    return make_error(Status::invalid_argument, "percentile calibration: fraction must be in (0, 1]");
  if (!(bin_width > 0.0) || !std::isfinite(bin_width))
    return make_error(Status::invalid_argument, "percentile calibration: bin width must be positive");
  double total = 0.0;
  for (uint64_t c : hist) total += double(c);
  if (total == 0.0) return make_error(Status::invalid_argument, "percentile calibration: empty histogram");
  double acc = 0.0;
  for (size_t b = 0; b < hist.size(); ++b) {
    acc += double(hist[b]);
    if (acc >= fraction * total && hist[b] != 0) return double(b + 1) * bin_width;
  }
  return double(hist.size()) * bin_width;  // rounding of fraction * total: everything
}

Result<ActCalibMethod> parse_act_calib_method(const std::string& name) {
  if (name == "minmax") return ActCalibMethod::minmax;
  if (name == "kl") return ActCalibMethod::kl;
  if (name == "percentile") return ActCalibMethod::percentile;
  return make_error(Status::invalid_argument,
                    "unknown activation calibration method '" + name + "' (minmax, kl, percentile)");
}

Result<double> act_threshold(const AbsHistogram& h, ActCalibMethod method, double fraction) {
  if (h.total() == 0) return make_error(Status::invalid_argument, "no finite activations were observed");
  if (h.max_abs() == 0.0) return 0.0;  // all zeros: any scale is exact
  switch (method) {
    case ActCalibMethod::minmax: return h.max_abs();
    case ActCalibMethod::percentile: {
      PLLM_ASSIGN(double t, percentile_threshold(h.counts(), h.bin_width(), fraction));
      return std::min(t, h.max_abs());
    }
    case ActCalibMethod::kl: {
      PLLM_ASSIGN(KlChoice c, kl_threshold(h.counts(), h.bin_width()));
      return std::min(c.threshold, h.max_abs());
    }
  }
  return make_error(Status::internal, "unknown calibration method");
}

float act_scale_for_threshold(double threshold) {
  const double s = threshold / 127.0;
  if (!(s >= double(kMinActScale))) return kMinActScale;  // also NaN and 0
  if (s > double(kMaxActScale)) return kMaxActScale;
  return float(s);
}

}  // namespace pllm
