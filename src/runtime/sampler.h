// The sampler chain: repetition penalty -> top-k -> top-p -> min-p -> temperature -> draw.
// Greedy when temperature <= 0. Seeded, so the same seed gives the same tokens.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace pllm {

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
