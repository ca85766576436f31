// Sampling parameters (runtime/sampler.h draws with them). Here because a model file can
// carry its preferred values (general.sampling.*, Model::sampling_defaults).
#pragma once
#include <cstdint>

namespace pllm {

// The sampler's generic defaults (llama.cpp's), pllm_sampling_default_params().
struct SamplingConfig {
  float temperature = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  int repeat_last_n = 64;
  uint64_t seed = 0;
  bool operator==(const SamplingConfig&) const = default;
};

// What suits a model whose file names no sampling (general.sampling.*): greedy, with the
// generic cuts kept for when a caller raises the temperature. Small instruct models put
// factual answers on near-ties (SmolLM2-135M Q4_1: the first token of "What is the capital of
// France?" leads by 0.085 logits), which any temperature turns into a coin flip: at 0.2 half
// the seeded runs answer wrong (docs/PERFORMANCE.md, "Default activation mode").
inline constexpr SamplingConfig kModelDefaultSampling = [] {
  SamplingConfig c;
  c.temperature = 0.0f;
  return c;
}();

}  // namespace pllm
