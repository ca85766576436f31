// Per-tensor sensitivity: for each 2-D weight, quantise only that tensor (to the base type,
// after the row-length fallback, with the chosen method), point the model's view of it at
// the quantised bytes in memory (Model::override_matrix; no file is written) and measure
// the mean KL divergence KL(P_input || P_quantised) of the next-token distributions over
// the calibration tokens, against the unmodified input model.
//
// For the --target-bpw planner each tensor also gets every other type its rows can hold
// (plan_candidate_types: cheaper, as cheap or dearer than the base), whose KL is predicted
// rather than run: KL(U) = KL(base) * E(U) / E(base), E being the tensor's squared weight
// error (weighted by the activation importance when the method is act), since for small
// perturbations the KL grows with the square of the output change. Where E(base) is 0 (a
// lossless base) only candidates that are lossless too can be predicted; the others are
// left out.
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
  // [0]: the base type with its measured KL; then the predicted ones, in the order of
  // plan_candidate_types.
  std::vector<PlanCandidate> candidates;
  double kl() const { return candidates.front().kl; }
  TensorType type() const { return candidates.front().type; }
  uint64_t bytes() const { return candidates.front().bytes; }
};

struct SensitivityReport {
  std::vector<SensitivityEntry> entries;  // in file order
  int64_t tokens = 0;                     // positions the KL is averaged over
};

// The types a --target-bpw plan may give a tensor whose rows hold `cols` elements: first
// the base type after the row-length fallback (fallback_type), then every other output
// type but f32 and bf16 whose block divides the row (no fallbacks), from the fewest bits
// per weight up: q4_0, q4_k, q4_1, q5_0, q5_1, q6_k, q8_0, f16.
std::vector<TensorType> plan_candidate_types(TensorType base, uint64_t cols);

// model: loaded with Model::load_for_tools (its views are overridden one at a time and
// restored). tokens: the calibration text.
Result<SensitivityReport> measure_sensitivity(const std::shared_ptr<Model>& model, std::span<const int32_t> tokens,
                                              const SensitivityOptions& opts);

// The planner's view of a report.
std::vector<PlanItem> plan_items(const SensitivityReport& r);

}  // namespace pllm
