// One forward step's work as the runtime hands it to a backend: the rows of one or more
// sequences, each sequence with its own KV cache and position.
#pragma once
#include <atomic>
#include <cstdint>
#include <span>

#include "base/result.h"
#include "base/trace.h"
#include "model/act_mode.h"
#include "model/act_observer.h"
#include "model/kv_cache.h"

namespace pllm {

// One sequence's part of a step: tokens at positions kv->end() .. kv->end() + n - 1.
struct SeqStep {
  KvCache* kv = nullptr;
  std::span<const int32_t> tokens;
  // null, or n_vocab floats for the last row, or n * n_vocab floats with all_logits.
  float* logits = nullptr;
  bool all_logits = false;
  const std::atomic<bool>* cancel = nullptr;  // this sequence's cancel flag, or null
  // Each row computed as this sequence's one-row decode step at its position would be, bit for
  // bit (a speculative verify pass: its rows must be plain decoding's logits).
  bool as_decode_steps = false;
  // Image rows (vision/): tokens.size() rows of n_embd floats taken as the rows' embeddings,
  // without the table lookup and without the architecture's embedding scale (llama.cpp scales
  // looked-up tokens only). tokens then hold the rows' history ids: negative ids naming the
  // image (vision/image_rows.h), which no table lookup accepts. null: look tokens up.
  const float* embeddings = nullptr;
  // The step's rows see each other in both directions (gemma3's image rows): each row attends
  // to what its own position sees in the cache before the step and to every row of the step.
  // The rows must all be in this one step; q4 caches refuse it.
  bool bidirectional = false;
  bool cancelled() const { return cancel && cancel->load(std::memory_order_relaxed); }
};

// The checks every backend makes before a step: at least one sequence, each non-empty, with a
// cache, at most once, fitting its context; the total row count within limits. Returns the
// step's rows and the logit rows it wants.
struct StepShape {
  int rows = 0;
  int out_rows = 0;
};
Result<StepShape> check_step(std::span<const SeqStep> seqs);

// What is common to every row of a step.
struct StepOptions {
  ActMode act_mode = kDefaultActMode;
  bool fuse = true;                   // one pool job for Q/K/V and for gate/up
  Tracer* tracer = nullptr;           // op timings, or null
  ActObserver* observer = nullptr;    // sees every product's input (calibration), or null
  // Self-speculative drafts (runtime/speculative.h): skip_layers[l] != 0 leaves layer l out (its
  // cache slots of these positions stay unwritten: the verify pass that follows rewrites them).
  // Empty: every layer.
  std::span<const uint8_t> skip_layers = {};
  bool skipped(int l) const { return size_t(l) < skip_layers.size() && skip_layers[size_t(l)] != 0; }
};

}  // namespace pllm
