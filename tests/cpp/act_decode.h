// Shared by the static-activation tests: random activations and the int8 activation row
// decoded the way the dot kernels read it. Header-only (the ARM kernels-only build links
// no test library).
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "quant/blocks.h"
#include "quant/types.h"

namespace pllm::testing_act {

inline std::vector<float> activations(std::mt19937& rng, int64_t n, float sigma) {
  std::normal_distribution<float> g(0.0f, sigma);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = g(rng);
  return x;
}

// The activation row as the dot kernels read it: per element the integer q and its
// block's step d (read straight from the blocks, in double: d * q is exact there).
struct DecodedAct {
  std::vector<int> q;
  std::vector<double> d;
  double value(size_t i) const { return d[i] * q[i]; }
};
inline DecodedAct decode(TensorType act, const std::vector<uint8_t>& xq, int64_t n) {
  DecodedAct r{std::vector<int>(size_t(n)), std::vector<double>(size_t(n))};
  for (int64_t i = 0; i < n; ++i) {
    const size_t u = size_t(i);
    switch (act) {
      case TensorType::Q8_0: {
        const auto& b = reinterpret_cast<const block_q8_0*>(xq.data())[i / 32];
        r.q[u] = b.qs[i % 32], r.d[u] = fp16_to_fp32(b.d);
        break;
      }
      case TensorType::Q8_1: {
        const auto& b = reinterpret_cast<const block_q8_1*>(xq.data())[i / 32];
        r.q[u] = b.qs[i % 32], r.d[u] = b.d;
        break;
      }
      case TensorType::Q8_K: {
        const auto& b = reinterpret_cast<const block_q8_K*>(xq.data())[i / 256];
        r.q[u] = b.qs[i % 256], r.d[u] = b.d;
        break;
      }
      default: ADD_FAILURE() << "not an int8 format"; return r;
    }
  }
  return r;
}

}  // namespace pllm::testing_act
