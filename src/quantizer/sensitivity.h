// Per-tensor sensitivity: for each 2-D weight, quantise only that tensor (to the base type,
// after the row-length fallback, with the chosen method), point the model's view of it at
// the quantised bytes in memory (Model::override_matrix; no file is written) and measure
// the mean KL divergence KL(P_input || P_quantised) of the next-token distributions over
// the calibration tokens, against the unmodified input model.
//
// For the --target-bpw planner each tensor also gets its higher-precision candidates (q6_k
// where the row fits, q8_0 where it fits, f16), whose KL is predicted rather than run:
// KL(U) = KL(base) * E(U) / E(base), E being the tensor's squared weight error (weighted
// by the activation importance when the method is act), since for small perturbations the
// KL grows with the square of the output change.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "model/model.h"
#include "quantizer/act_stats.h"
#include "quantizer/bpw_plan.h"
#include "quantizer/calibration.h"
#include "quantizer/row_quant.h"

namespace pllm {

struct SensitivityOptions {
  TensorType type = TensorType::Q4_0;
  QuantMethod method = QuantMethod::rtn;
  const ActStats* stats = nullptr;  // act: per-column importance
  CalibrationOptions calib;         // max_tokens: the tokens the KL is measured over
  // Called before each tensor (index, count, name) and with the tokens of each run.
  std::function<void(size_t, size_t, std::string_view)> progress;
};

struct SensitivityEntry {
  std::string name;
  uint64_t n_elements = 0;
  double weight_error = 0;               // E(base)
  std::vector<PlanCandidate> candidates;  // [0]: the base type with its measured KL
  double kl() const { return candidates.front().kl; }
  TensorType type() const { return candidates.front().type; }
  uint64_t bytes() const { return candidates.front().bytes; }
};

struct SensitivityReport {
  std::vector<SensitivityEntry> entries;  // in file order
  int64_t tokens = 0;                     // positions the KL is averaged over
};

// model: loaded with Model::load_for_tools (its views are overridden one at a time and
// restored). tokens: the calibration text.
Result<SensitivityReport> measure_sensitivity(const std::shared_ptr<Model>& model, std::span<const int32_t> tokens,
                                              const SensitivityOptions& opts);

// The planner's view of a report.
std::vector<PlanItem> plan_items(const SensitivityReport& r);

}  // namespace pllm
