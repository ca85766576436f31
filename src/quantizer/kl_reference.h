// The next-token distributions of a model over calibration tokens, kept as the reference
// that a modified model (a weight overridden in memory) is compared with: the mean
// KL(P_reference || P_modified) per position. Used by the per-tensor sensitivity of
// `quantize --target-bpw` and the per-layer sensitivity of `prune --ffn-plan sensitivity`.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/result.h"
#include "base/thread_pool.h"
#include "quantizer/calibration.h"

namespace pllm {

class KlReference {
 public:
  // Runs the model once over the planned tokens of `tokens` and keeps the log-probabilities
  // ([tokens][n_vocab] floats: the caller sizes `calib.max_tokens` to what memory allows).
  static Result<std::unique_ptr<KlReference>> create(std::shared_ptr<const Model> model,
                                                     std::span<const int32_t> tokens, const CalibrationOptions& calib);
  // Mean KL divergence of the model as it is now against the reference.
  Result<double> measure();
  int64_t tokens() const { return n_tok_; }

 private:
  KlReference() = default;
  std::unique_ptr<Calibrator> cal_;
  std::vector<int32_t> tokens_;
  std::vector<float> base_lp_;
  std::vector<double> kl_pos_;
  int64_t n_tok_ = 0;
  int n_vocab_ = 0;
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace pllm
