// The sampler chain: repetition penalty -> top-k -> top-p -> min-p -> temperature -> draw.
// Greedy when temperature <= 0. Seeded, so the same seed gives the same tokens.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "model/sampling_config.h"

namespace pllm {

class Sampler {
 public:
  Sampler(const SamplingConfig& cfg, int n_vocab);
  // logits are modified in place (penalties). recent: the previous tokens, oldest first.
  int32_t sample(float* logits, std::span<const int32_t> recent);

 private:
  double next_uniform();  // [0, 1)

  SamplingConfig cfg_;
  uint64_t rng_state_;
  struct Cand {
    int32_t id;
    float logit;
    float p;
  };
  std::vector<Cand> cands_;  // reserved to n_vocab once: no allocation per token
};

}  // namespace pllm
