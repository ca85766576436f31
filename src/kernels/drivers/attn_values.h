// Value side of the KV-cache segment kernels (step (4) of online_softmax.h): acc_h += sum_t
// p_ht v_t for the n_q heads of a call, written once for x86/attention_kv_avx2.cpp,
// x86/attention_kv_avx512.cpp and arm/attention_kv_neon.cpp. ODR: templates over the ISA's
// types only (see fused_dot.h).
//
// The dims are walked in blocks of NV vectors (the Src's choice: 16 dims on AVX2 and NEON;
// on AVX-512 a q8 group of 64, a q4 block of 32, f32 / f16 rows 64 and a last 16, 32 or
// 48) and, per block, the heads in groups of kAttnHeadBlock: each value row is decoded
// once per block of heads, and the heads' sums for the block stay in registers over the
// whole chunk.
#pragma once
#include "kernels/drivers/online_softmax.h"

namespace pllm::kern::drivers {

inline constexpr int kAttnHeadBlock = 4;  // heads whose accumulators are held in registers together

// f.template operator()<K>(i) for i in [0, n): steps of K = N, then one step of K = n % N
// (if not 0). K is a template argument so that every block size gets its own unrolled
// code; N <= 4.
template <int N, class F>
inline __attribute__((always_inline)) void in_blocks(int n, F&& f) {
  static_assert(N >= 1 && N <= 4, "remainders 1..3");
  int i = 0;
  for (; i + N <= n; i += N) f.template operator()<N>(i);
  switch (n - i) {
    case 1: if constexpr (N > 1) f.template operator()<1>(i); break;
    case 2: if constexpr (N > 2) f.template operator()<2>(i); break;
    case 3: if constexpr (N > 3) f.template operator()<3>(i); break;
    default: break;
  }
}

// S: the vector traits of online_softmax.h plus tokens_per_step(vecs): how many tokens one
// step of acc_block takes when a token feeds vecs = H * NV accumulators (independent FMA
// chains to hide the latency, few enough that the U * vecs accumulators and the NV decoded
// registers fit the register file). It fixes the order of the sums.
//
// Src::vrow<NV>(t, d, V x[NV], float& mul, float& add): token t's dims [d, d + NV kLanes)
// as NV registers of codes with v = mul * code + add; flags kScaled (mul is set) and
// kAffine (add is set); plain rows set neither (codes = values). The weight of head h is
// then p_ht * mul, and sum_t p_ht * add (f32, token order) is added once per block.

// Token t into one set of accumulators x of the H heads, p = its weights (head h at p[h *
// kAttnChunk]): the row decoded once, then per head one FMA per register.
template <class S, int NV, int H, class Src>
inline __attribute__((always_inline)) void add_token(const Src& src, int t, int d, const float* p,
                                                     typename S::V (&x)[H][NV], float (&bias)[H]) {
  typename S::V v[NV];
  float mul, add;
  src.template vrow<NV>(t, d, v, mul, add);
  for (int h = 0; h < H; ++h) {
    float w = p[h * kAttnChunk];
    if constexpr (Src::kAffine) bias[h] += w * add;
    if constexpr (Src::kScaled) w *= mul;
    const typename S::V vw = S::set1(w);
    for (int c = 0; c < NV; ++c) x[h][c] = S::fma(x[h][c], vw, v[c]);
  }
}

// acc_h[d, d + NV kLanes) += sum_{j < cn} p_h[j] v_{t0+j}[...] for the H heads p + h *
// kAttnChunk, a[h]. Lane by lane: U chains over the tokens (token j in chain j % U while
// U tokens remain, the rest in chain 0), chain 0 started from acc; the chains are summed
// in order, then the bias is added. U is that of a full block of kAttnHeadBlock heads for
// every H, so a head's sums do not depend on how many heads share its call
// (KvCache::attend_rows puts a prompt's rows in one call).
template <class S, int NV, int H, class Src>
void acc_block(const Src& src, int t0, int d, const float* p, int cn, AttnAccum* a) {
  using V = typename S::V;
  constexpr int L = S::kLanes;
  constexpr int U = S::tokens_per_step(kAttnHeadBlock * NV);
  V x[U][H][NV];
  float bias[H];
  for (int h = 0; h < H; ++h) {
    bias[h] = 0.0f;
    for (int c = 0; c < NV; ++c) {
      x[0][h][c] = S::load(a[h].acc + d + L * c);
      for (int u = 1; u < U; ++u) x[u][h][c] = S::zero();
    }
  }
  int j = 0;
  for (; j + U <= cn; j += U) {
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u) add_token<S, NV, H>(src, t0 + j + u, d, p + j + u, x[u], bias);
  }
  for (; j < cn; ++j) add_token<S, NV, H>(src, t0 + j, d, p + j, x[0], bias);
  for (int h = 0; h < H; ++h)
    for (int c = 0; c < NV; ++c) {
      V r = x[0][h][c];
      for (int u = 1; u < U; ++u) r = S::add(r, x[u][h][c]);
      if constexpr (Src::kAffine) r = S::add(r, S::set1(bias[h]));
      S::store(a[h].acc + d + L * c, r);
    }
}

// Dims [d, d + NV kLanes) for all n_q heads, kAttnHeadBlock heads at a time.
template <class S, int NV, class Src>
inline __attribute__((always_inline)) void acc_heads(const Src& src, int t0, int d, const float* p, int cn,
                                                     int n_q, AttnAccum* a) {
  in_blocks<kAttnHeadBlock>(n_q, [&]<int H>(int h) { acc_block<S, NV, H>(src, t0, d, p + h * kAttnChunk, cn, a + h); });
}

// All hd dims in blocks of NV vectors (hd a multiple of NV kLanes), all heads.
template <class S, int NV, class Src>
inline __attribute__((always_inline)) void accumulate_values(const Src& src, int t0, const float* p, int cn,
                                                             int n_q, int hd, AttnAccum* a) {
  for (int d = 0; d < hd; d += NV * S::kLanes) acc_heads<S, NV>(src, t0, d, p, cn, n_q, a);
}

}  // namespace pllm::kern::drivers
