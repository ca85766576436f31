// Per-layer FFN sizes from measured sensitivity (`prune --ffn-plan sensitivity`): instead of
// removing the same fraction everywhere, the global budget of removed channels goes where it
// costs the model least.
//
// Method, per layer l (the layers' channel counts, alignment and cut are those of
// quantizer/prune.h):
//   1. The cut's error curve e_l(k), k removed channels, up to a cap of
//      min(0.9, 2·ratio + 0.05) of the layer (cut_ffn: the compensated fit's residual).
//   2. The probe: the layer alone cut at the uniform count u_l (the fitted columns written
//      into a full-size ffn_down in memory, removed columns zero), and the mean KL divergence
//      of the model's next-token distributions against the unmodified model over the
//      calibration tokens (KlReference), KL_l.
//   3. The prediction KL_l(k) = KL_l · e_l(k) / e_l(u_l): for small changes the KL grows with
//      the squared output change, which is what e measures (as --target-bpw predicts the
//      other types from one measured type).
//   4. The allocation: starting from nothing removed, the next block of `align` channels
//      comes from the layer whose predicted KL grows least by it, until the uniform plan's
//      total is removed (greedy on increments: optimal where the curves are convex).
#pragma once
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "base/result.h"
#include "model/model.h"
#include "quantizer/calibration.h"
#include "quantizer/prune.h"

namespace pllm {

struct FfnPlanLayer {
  int n_ff = 0;
  int uniform_keep = 0;      // u: what --ffn R keeps here
  double probe_kl = 0.0;     // KL_l with only this layer cut to uniform_keep
  int keep = 0;              // the plan's choice
  double predicted_kl = 0.0; // KL_l(n_ff − keep)
};

struct FfnSensitivityPlan {
  std::vector<FfnPlanLayer> layers;
  int64_t tokens = 0;  // positions each KL is averaged over
  std::vector<int> keep() const;
};

// model: loaded with Model::load_for_tools (each layer's ffn_down is overridden in turn and
// restored). opts: as for plan_prune, with ffn_ratio > 0 (the compensation's Gram matrices
// when it compensates). tokens: the calibration text; kl.max_tokens of it measure each KL.
// progress(layer, n_layer) before each probe.
Result<FfnSensitivityPlan> plan_ffn_sensitivity(const std::shared_ptr<Model>& model, const PruneOptions& opts,
                                                std::span<const int32_t> tokens, const CalibrationOptions& kl,
                                                const std::function<void(int, int)>& progress = {});

// Step 4 alone (exposed for tests): costs[l][k] is the predicted cost of removing k·align[l]
// channels of layer l (costs[l][0] = 0); returns the number of blocks removed per layer,
// `blocks` in all (fewer only when every layer is at its last entry).
std::vector<int> allocate_blocks(const std::vector<std::vector<double>>& costs, int blocks);

}  // namespace pllm
