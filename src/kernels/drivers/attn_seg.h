// Entry points of the KV-cache segment kernels (KernelTable::attn_seg_f32 / f16 / q4) shared
// by x86/attention_kv_avx2.cpp, x86/attention_kv_avx512.cpp and arm/attention_kv_neon.cpp,
// on the drivers online_softmax.h and attn_values.h. ODR: templates over the ISA's types
// only (see fused_dot.h). attn_seg_q8 stays in the ISA files: its query quantisation must
// reproduce kv_quantize_q8 with each ISA's own conversions.
#pragma once
#include <cstdint>

#include "kernels/drivers/attn_values.h"

namespace pllm::kern::drivers {

// S (on top of attn_values.h): reduce(const V v[kLanes]) (lane i = the sum of the lanes of
// v[i]), kDotChains (1, 2 or 4 chains per key row in dot_rows), kPlainVecs (vectors per
// block of value dims for f32 / f16 rows) and q4_codes32(p, V c[32 / kLanes]) (the 32
// channels of 16 q4 code bytes, ggml nibble order, as f32 in channel order).

// Lane i = q . rows[i] over hd dims (T = float or uint16_t halves): per row kDotChains
// chains over consecutive vectors, summed pairwise, then one reduce for all kLanes rows.
template <class S, class T>
inline __attribute__((always_inline)) typename S::V dot_rows(const float* q, const T* const* rows, int hd) {
  using V = typename S::V;
  constexpr int L = S::kLanes, C = S::kDotChains;
  static_assert(C == 1 || C == 2 || C == 4, "pairwise sums");
  V acc[L][C], sum[L];
  for (int i = 0; i < L; ++i)
    for (int c = 0; c < C; ++c) acc[i][c] = S::zero();
  for (int d = 0; d < hd; d += C * L) {
    V qd[C];
    for (int c = 0; c < C; ++c) qd[c] = S::load(q + d + L * c);
#pragma GCC unroll 16
    for (int i = 0; i < L; ++i)
      for (int c = 0; c < C; ++c) acc[i][c] = S::fma(acc[i][c], qd[c], S::load(rows[i] + d + L * c));
  }
  for (int i = 0; i < L; ++i) {
    sum[i] = acc[i][0];
    if constexpr (C == 2) sum[i] = S::add(acc[i][0], acc[i][1]);
    if constexpr (C == 4) sum[i] = S::add(S::add(acc[i][0], acc[i][1]), S::add(acc[i][2], acc[i][3]));
  }
  return S::reduce(sum);
}

// The f32 / f16 source: f32 rows, and f16 rows for one head, are read in place; for several
// heads a block's f16 key rows are widened once into a tile.
template <class S, class T>
struct PlainRows {
  static constexpr bool kScaled = false, kAffine = false;
  const float* q;  // n_q heads, q + h * hd
  const T* k;
  const T* v;
  int64_t stride;
  int hd;

  inline __attribute__((always_inline)) void scores(int t0, const int* row, int n_q, float* s) const {
    constexpr int L = S::kLanes;
    const T* kr[L];
    for (int i = 0; i < L; ++i) kr[i] = k + (t0 + row[i]) * stride;
    // Decode reads each cached row once, from DRAM (a few rows of hd values kv_dim apart): the
    // hardware prefetcher left about half of this loop waiting on those loads (perf, 4 sequences
    // at 250 positions). Fetch the key rows 4 L tokens ahead and this block's value rows, which
    // accumulate reads once the chunk's scores are done. Prefetches past the segment are harmless.
    for (int i = 0; i < L; ++i) {
      const char* kn = reinterpret_cast<const char*>(kr[i] + 4 * L * stride);
      const char* vn = reinterpret_cast<const char*>(v + (t0 + row[i]) * stride);
      for (int o = 0; o < hd * int(sizeof(T)); o += 64) {
        __builtin_prefetch(kn + o);
        __builtin_prefetch(vn + o);
      }
    }
    if (sizeof(T) == sizeof(float) || n_q == 1) {
      for (int h = 0; h < n_q; ++h) S::store(s + h * kAttnChunk, dot_rows<S>(q + h * hd, kr, hd));
      return;
    }
    alignas(64) float tile[L * kMaxHeadDim];
    const float* tr[L];
    for (int i = 0; i < L; ++i) {
      for (int d = 0; d < hd; d += L) S::store(tile + i * hd + d, S::load(kr[i] + d));
      tr[i] = tile + i * hd;
    }
    for (int h = 0; h < n_q; ++h) S::store(s + h * kAttnChunk, dot_rows<S>(q + h * hd, tr, hd));
  }

  template <int NV>
  inline __attribute__((always_inline)) void vrow(int t, int d, typename S::V* x, float&, float&) const {
    const T* vt = v + t * stride + d;
    for (int c = 0; c < NV; ++c) x[c] = S::load(vt + S::kLanes * c);
  }

  // Blocks of kPlainVecs vectors. hd is a multiple of 16: where a block is wider (AVX-512:
  // 64 dims) the rest (16, 32 or 48 dims) is one narrower block.
  void accumulate(int t0, const float* p, int cn, int n_q, AttnAccum* a) const {
    constexpr int k16 = 16 / S::kLanes;  // vectors per 16 dims
    in_blocks<S::kPlainVecs / k16>(
        hd / 16, [&]<int K>(int i) { acc_heads<S, K * k16>(*this, t0, 16 * i, p, cn, n_q, a); });
  }
};

// q4 scores of kLanes tokens (key code rows kr) for several heads: the codes widened once
// into an f32 tile, then per head q'.code + bias (the ISA's Q4 source keeps the one-head
// case, which decodes inside the dot product).
template <class S>
inline __attribute__((always_inline)) void q4_scores_tiled(const uint8_t* const* kr, const float* qp,
                                                           const float* bias, int n_q, int hd, float* s) {
  constexpr int L = S::kLanes;
  alignas(64) float tile[L * kMaxHeadDim];
  const float* tr[L];
  for (int i = 0; i < L; ++i) {
    for (int b = 0; b < hd / 32; ++b) {
      typename S::V c[32 / L];
      S::q4_codes32(kr[i] + 16 * b, c);
      for (int e = 0; e < 32 / L; ++e) S::store(tile + i * hd + 32 * b + L * e, c[e]);
    }
    tr[i] = tile + i * hd;
  }
  for (int h = 0; h < n_q; ++h)
    S::store(s + h * kAttnChunk, S::add(dot_rows<S>(qp + h * hd, tr, hd), S::set1(bias[h])));
}

// attn_seg_f32 (T = float) and attn_seg_f16 (T = uint16_t halves).
template <class S, class T>
void attn_seg_plain(const float* q, int n_q, const T* k, const T* v, int64_t stride, int n, int hd, AttnScore score,
                    AttnAccum* a) {
  if (n <= 0) return;
  fold_segment<S>(PlainRows<S, T>{q, k, v, stride, hd}, n_q, n, hd, score, a);
}

// What attn_seg_q4 hands the ISA's q4 source (which derives from it and adds scores and
// vrow): keys enter as q'.code + bias, values as scale_tb * code + min_tb.
struct Q4Data {
  static constexpr bool kScaled = true, kAffine = true;
  const float* qp;    // q'_c = q_c * k_scale_c per head, qp + h * hd (64-byte aligned)
  const float* bias;  // sum_c q_c * k_min_c per head
  const KvQ4GroupView* g;
  int hd;
  int base;  // group token of the segment's first token
};

// attn_seg_q4 with the ISA's source Q4 (a Q4Data): q' and bias once per call and head.
template <class S, class Q4>
void attn_seg_q4(const float* q, int n_q, const KvQ4GroupView& g, int t0, int t1, int hd, AttnScore score,
                 AttnAccum* a) {
  using V = typename S::V;
  if (t1 <= t0) return;
  alignas(64) float qp[kAttnMaxQ * kMaxHeadDim];
  float bias[kAttnMaxQ];
  for (int h = 0; h < n_q; ++h) {
    V vb = S::zero();
    for (int d = 0; d < hd; d += S::kLanes) {
      const V qd = S::load(q + h * hd + d);
      S::store(qp + h * hd + d, S::mul(qd, S::load(g.k_scale + d)));
      vb = S::fma(vb, qd, S::load(g.k_min + d));
    }
    bias[h] = S::hsum(vb);
  }
  fold_segment<S>(Q4{{qp, bias, &g, hd, t0}}, n_q, t1 - t0, hd, score, a);
}

// The KernelTable entries of an ISA: f32, f16 and q4 from here, q8 its own.
template <class S, class Q4, class TK, class Q8>
void set_attn_seg(TK& t, Q8 q8) {
  t.attn_seg_f32 = attn_seg_plain<S, float>;
  t.attn_seg_f16 = attn_seg_plain<S, uint16_t>;
  t.attn_seg_q8 = q8;
  t.attn_seg_q4 = attn_seg_q4<S, Q4>;
}

}  // namespace pllm::kern::drivers
