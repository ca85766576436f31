// Static activation scales: a histogram of |x| per tensor input, and the thresholds
// derived from it (TensorRT's entropy / KL-divergence calibration, plain max, percentile).
// Pure functions and a value type; no I/O.
//
// A static scale d replaces the dynamic per-block absmax/127 of the int8 activation path:
// q = clamp(round(x / d), -127, 127), so everything beyond the threshold 127 * d is clipped.
// The calibration picks that threshold from activations observed offline.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/act_scales.h"

namespace pllm {

// Histogram of |x| over [0, range] in n_bins equal bins, bin b holding (b*w, (b+1)*w]
// (w = range / n_bins) and bin 0 also the zeros. The range starts at the largest |x| of
// the first non-zero data and doubles whenever a larger value arrives; doubling merges
// adjacent bin pairs, so re-binning is exact (no interpolation: every value ends in the
// bin it would have had with the final range from the start) and the data always
// reaches the upper half of the bins. Non-finite values are counted apart, never binned.
class AbsHistogram {
 public:
  // n_bins is rounded up to a power of two (>= 2); the KL search wants >= 128.
  explicit AbsHistogram(int n_bins = 2048);

  void add(const float* x, int64_t n);

  int n_bins() const { return int(counts_.size()); }
  double range() const { return range_; }
  double bin_width() const { return range_ / double(counts_.size()); }
  const std::vector<uint64_t>& counts() const { return counts_; }
  double max_abs() const { return max_abs_; }  // exact largest finite |x| seen
  uint64_t total() const { return total_; }    // finite values binned
  uint64_t non_finite() const { return non_finite_; }

 private:
  void grow_to(double v);
  int bin_of(double a) const;  // a > 0
  std::vector<uint64_t> counts_;
  double range_ = 0.0;
  double max_abs_ = 0.0;
  uint64_t total_ = 0;
  uint64_t non_finite_ = 0;
};

struct KlChoice {
  int bins = 0;            // i: the bins kept below the threshold
  double threshold = 0.0;  // (i + 0.5) * bin_width
  double kl = 0.0;         // KL(P || Q) at that i
};

// TensorRT's entropy calibration (as in its published description and MXNet's port).
// For every candidate i from `levels` to the last non-empty bin + 1 (a threshold past
// the largest value clips nothing more and only coarsens the step):
//   P = hist[0, i) with the mass of hist[i, n) added to bin i - 1 (clipping);
//   Q = hist[0, i) (without that mass) merged into `levels` groups of i / levels bins
//       (the last group also takes the remainder) and expanded back, each group's mass
//       spread evenly over the bins where P is non-zero (zero bins stay zero); where P's
//       last bin is non-zero but its group is empty, Q gets a tenth of a count there;
// both normalised; the i with the least KL(P || Q) wins (the smallest on ties).
// Q is merged from the unclipped slice, not from P: merged from P, i = levels would
// always give Q = P and KL = 0, so the search would never look past it.
// A histogram whose data fits in at most `levels` bins keeps everything
// (i = last non-empty bin + 1, kl = 0).
// Errors: an empty histogram, levels < 1, bin_width <= 0.
Result<KlChoice> kl_threshold(std::span<const uint64_t> hist, double bin_width, int levels = 128);

// The smallest upper bin edge below which at least `fraction` (0 < f <= 1) of the mass lies.
Result<double> percentile_threshold(std::span<const uint64_t> hist, double bin_width, double fraction);

enum class ActCalibMethod { minmax, kl, percentile };
Result<ActCalibMethod> parse_act_calib_method(const std::string& name);

// Threshold of one histogram by `method` (minmax: the exact max |x|; percentile uses
// `fraction`). Errors: no finite data.
Result<double> act_threshold(const AbsHistogram& h, ActCalibMethod method, double fraction = 0.9999);

// Scale for a threshold: threshold / 127, kept within [kMinActScale, kMaxActScale]
// (model/act_scales.h) so it is never 0 and stays a normal fp16 number.
float act_scale_for_threshold(double threshold);

}  // namespace pllm
