// Calibration driver: runs text through a model with an activation observer attached
// (C++ tools only; the C API has no observers). The tokens are cut into chunks of n_ctx,
// each evaluated from an empty KV cache at every position (so the output head is
// observed too), in batches of n_batch; BOS replaces a chunk's first token when the model
// adds one, as `pocketllm perplexity` does. Deterministic: the same tokens give the same
// logits, which the sensitivity analysis relies on.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/act_observer.h"
#include "model/model.h"
#include "runtime/session.h"

namespace pllm {

struct CalibrationOptions {
  int n_ctx = 512;            // tokens per chunk (a fresh KV cache each)
  int64_t max_tokens = 8192;  // evaluate at most this many tokens (0: the whole text)
  int n_batch = 64;           // tokens per forward call (and logits rows per callback)
  int n_threads = 0;          // 0: default_thread_count()
};

// One evaluated batch: positions [pos, pos + n) of chunk `chunk`, tokens and logits
// ([n][n_vocab]) of those positions.
struct CalibBatch {
  int64_t chunk = 0;
  int pos = 0;
  int n = 0;
  const int32_t* tokens = nullptr;
  const float* logits = nullptr;
  int n_vocab = 0;
};
using CalibLogitsFn = std::function<Result<void>(const CalibBatch&)>;
using CalibProgressFn = std::function<void(int64_t done, int64_t total)>;

// The whole file as tokens (BOS first when the model adds one). Errors: unreadable or
// empty file.
Result<std::vector<int32_t>> tokenize_text_file(const Model& model, const std::string& path);

class Calibrator {
 public:
  static Result<std::unique_ptr<Calibrator>> create(std::shared_ptr<const Model> model,
                                                    const CalibrationOptions& opts);

  // How many of n_text tokens run() evaluates.
  int64_t planned_tokens(size_t n_text) const;
  // Evaluates the planned tokens with `observer` attached (may be null). Logits are computed
  // when on_logits or observer is set and handed to on_logits batch by batch (an error it
  // returns stops the run). Returns the number of tokens evaluated.
  Result<int64_t> run(std::span<const int32_t> text, ActObserver* observer, const CalibLogitsFn& on_logits,
                      const CalibProgressFn& progress = {});

  const Model& model() const { return session_->model(); }

 private:
  Calibrator() = default;
  CalibrationOptions opts_;
  std::unique_ptr<Session> session_;
  std::vector<float> logits_;  // [n_batch][n_vocab]
};

}  // namespace pllm
