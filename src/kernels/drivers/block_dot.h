// Driver of the one-row int8 dot (TypeKernels::vec_dot) for the 32-element block types
// (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 against Q8_0 / Q8_1 activations), written once for
// x86/avx2.cpp, arm/neon.cpp and arm/neon_dotprod.cpp: each ISA supplies a micro-kernel that
// folds one (weight, activation) block pair into an f32 accumulator; the block loop, the
// accumulator chains and the Q8_1 min terms live here. (x86/avx512.cpp folds two blocks per
// 512-bit register and keeps its own loops.)
//
// ODR: a template over the ISA's micro-kernel type only (see fused_dot.h).
#pragma once
#include <cstdint>

namespace pllm::kern::drivers {

// S (the ISA's micro-kernel for one weight type): W, A (weight / activation blocks of 32);
// V (f32 accumulator register); kAccs (1 or 2 accumulators, blocks alternating between
// them: two hide the FMA latency where the integer dot is short); kMin (the weight has a
// min, so the activation is Q8_1 and each block adds m * s); zero(); fold(acc, w, a) = acc +
// the block's scale times its exact integer dot, lane by lane; min(w, a) = m * s; add(V, V);
// hsum(V).
//
// With two accumulators the two min terms of a block pair are added together before they
// join the running sum (one rounding per pair), with one accumulator block by block: the
// order each ISA's kernel had before the driver, so results are unchanged bit for bit.
template <class S>
float block_dot(int64_t n, const void* w_row, const void* xq) {
  static_assert(S::kAccs == 1 || S::kAccs == 2, "one or two accumulator chains");
  using V = typename S::V;
  const auto* w = static_cast<const typename S::W*>(w_row);
  const auto* a = static_cast<const typename S::A*>(xq);
  const int64_t nb = n / 32;
  V acc0 = S::zero(), acc1 = S::zero();
  float summ = 0.0f;
  int64_t b = 0;
  if constexpr (S::kAccs == 2) {
    for (; b + 1 < nb; b += 2) {
      acc0 = S::fold(acc0, w[b], a[b]);
      acc1 = S::fold(acc1, w[b + 1], a[b + 1]);
      if constexpr (S::kMin) summ += S::min(w[b], a[b]) + S::min(w[b + 1], a[b + 1]);
    }
  }
  for (; b < nb; ++b) {
    acc0 = S::fold(acc0, w[b], a[b]);
    if constexpr (S::kMin) summ += S::min(w[b], a[b]);
  }
  float dot;
  if constexpr (S::kAccs == 2) dot = S::hsum(S::add(acc0, acc1));
  else dot = S::hsum(acc0);
  if constexpr (S::kMin) return dot + summ;
  else return dot;
}

}  // namespace pllm::kern::drivers
