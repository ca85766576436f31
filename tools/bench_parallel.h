// `pocketllm bench --parallel N`: N sequences on one engine, advanced together, each
// forward pass carrying a row (decode) or a chunk (prefill) of every sequence.
#pragma once
#include <functional>
#include <vector>

#include "cli_common.h"

namespace cli {

struct ParallelBench {
  std::vector<double> pp_agg, tg_agg, tg_step_ms, ttft_ms;  // one per repetition
};

// Each repetition resets the sessions, prefills every sequence's prompt (prompts[i], all the
// same length) in steps that take a chunk of each, then decodes n_gen greedy tokens per
// sequence, one step per token for all of them. `next` maps an argmax to the next input (an
// end-of-generation token is replaced). One untimed warm-up first.
ParallelBench bench_parallel(Model& model, const SessionOptions& so, int threads,
                             const std::vector<std::vector<pllm_token>>& prompts, int n_gen, int reps,
                             const std::function<pllm_token(pllm_token)>& next);

}  // namespace cli
