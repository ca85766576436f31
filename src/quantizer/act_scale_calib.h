// Static activation scales from calibration: an ActObserver that keeps a histogram of
// |x| per product input (quantizer/kl_calib.h), the per-tensor steps derived from them,
// and a copy of a model file with those steps in its metadata (model/act_scales.h).
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "gguf/gguf.h"
#include "model/act_observer.h"
#include "quantizer/kl_calib.h"

namespace pllm {

// Provenance keys written next to the scales (not under kActScalePrefix).
inline constexpr const char* kActCalibMethodKey = "pocketllm.act_calib.method";
inline constexpr const char* kActCalibTokensKey = "pocketllm.act_calib.tokens";
inline constexpr const char* kActCalibSourceKey = "pocketllm.act_calib.source";

// One histogram per weight whose product was observed, keyed by the weight's tensor name
// (Q, K and V each keep their own, of the same input). Observes on the forward thread.
class ActHistograms final : public ActObserver {
 public:
  explicit ActHistograms(int n_bins = 2048) : n_bins_(n_bins) {}
  void observe(const Matrix& W, const float* X, int n_tok) override;
  const std::map<std::string, AbsHistogram, std::less<>>& histograms() const { return hist_; }

 private:
  int n_bins_;
  std::map<std::string, AbsHistogram, std::less<>> hist_;
};

struct ActScaleOptions {
  ActCalibMethod method = ActCalibMethod::kl;
  double percentile = 0.9999;  // fraction of |x| kept below the threshold (percentile method)
};

struct ActScaleEntry {
  std::string tensor;
  double max_abs = 0.0;    // largest |x| seen
  double threshold = 0.0;  // clip point chosen by the method (<= max_abs)
  float scale = 0.0f;      // threshold / 127, within [kMinActScale, kMaxActScale]
};

// A step per observed weight, in name order. Errors: a histogram without finite data
// (names the tensor), bad options.
Result<std::vector<ActScaleEntry>> compute_act_scales(const ActHistograms& h, const ActScaleOptions& opts);

struct ActCalibProvenance {
  std::string method;  // "kl", "minmax", "percentile:0.9999"
  uint64_t tokens = 0;
  std::string source;  // the calibration text's name
};

// Writes a copy of `in` (every key and tensor unchanged) to out_path with its
// pocketllm.act_scale.* keys replaced by `scales` and the provenance keys set.
Result<void> write_with_act_scales(const GgufFile& in, const std::string& out_path,
                                   std::span<const ActScaleEntry> scales, const ActCalibProvenance& prov);

}  // namespace pllm
