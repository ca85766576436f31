// The CPU backend: runs one forward step (model/step.h) of a model over the thread pool,
// with the kernels of this CPU, in the engine lane's scratch.
#pragma once
#include <span>

#include "backends/cpu/step_scratch.h"
#include "base/result.h"
#include "base/thread_pool.h"
#include "model/model.h"
#include "model/step.h"

namespace pllm {

// Checks the step (each sequence non-empty, starting at its cache's end, fitting its
// context; no cache twice), stores every row's K/V in its sequence's cache and writes the
// logits each sequence asked for. On error a cache may hold part of the step: the caller
// truncates it back.
Result<void> cpu_forward(const Model& m, StepScratch& scratch, ThreadPool& pool, std::span<const SeqStep> seqs,
                         const StepOptions& opt);

}  // namespace pllm
