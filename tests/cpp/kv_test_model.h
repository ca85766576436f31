// The small model shape the KV cache tests (test_kv_cache.cpp, test_kv_sharing.cpp) build caches
// for: 2 KV heads of 64, and RoPE frequencies of such a head.
#pragma once
#include <cmath>
#include <vector>

#include "model/config.h"

namespace pllm::kvtest {

constexpr int kHd = 64;
constexpr int kKvHeads = 2;
constexpr int kDim = kHd * kKvHeads;

inline ModelConfig tiny_config(int n_layer) {
  ModelConfig c;
  c.n_layer = n_layer;
  c.n_embd = 128;
  c.n_head = 4;
  c.n_head_kv = kKvHeads;
  c.head_dim = kHd;
  c.n_rot = kHd;
  c.n_ff = 256;
  return c;
}

// RoPE frequencies of a kHd-wide head, base 10000 (the tests' RopeSpec points into them).
inline std::vector<float> rope_inv_freq() {
  std::vector<float> f(kHd / 2);
  for (int i = 0; i < kHd / 2; ++i) f[size_t(i)] = float(std::pow(10000.0, -2.0 * i / kHd));
  return f;
}

}  // namespace pllm::kvtest
