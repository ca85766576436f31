// Sampling parameters (runtime/sampler.h draws with them). Here because a model file can
// carry its preferred values (general.sampling.*, Model::sampling_defaults).
#pragma once
#include <cstdint>

namespace pllm {

// The documented defaults, used where the model file names none.
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

}  // namespace pllm
