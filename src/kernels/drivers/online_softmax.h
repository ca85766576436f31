// Driver of the KV-cache segment kernels (KernelTable::attn_seg_*), written once for
// x86/attention_kv_avx2.cpp, x86/attention_kv_avx512.cpp and arm/attention_kv_neon.cpp: the
// chunked online softmax of generic/attention_kv_scalar.cpp for n_q query heads sharing one
// kv head. ODR: templates over the ISA's types only (see fused_dot.h).
//
// Per chunk of kAttnChunk tokens: (1) Src::scores fills the raw scores q_h.k_t of kLanes
// tokens for every head (rows past the chunk's last token repeat it: never a read past the
// segment; those lanes are masked to -inf here); (2) per head the chunk maximum and at most
// one rescale of acc and l (exp(-inf) = 0 at the start); (3) p = exp(s - m) with the ISA's
// vectorised exp; (4) Src::accumulate adds p_ht v_t to the heads' accumulators (the
// loops of attn_values.h). The entry points built on it are in attn_seg.h.
#pragma once
#include <cmath>

#include "kernels/kv_format.h"

namespace pllm::kern::drivers {

// kAttnChunk (kv_format.h): tokens per online-softmax step, a multiple of every kLanes.
inline constexpr int kAttnMaxQ = 16;   // query heads per call

// S: the vector traits of fused_dot.h (set1, load, store, mul, sub, add, max, zero, hmax,
// hsum) plus exp_neg(x) (exp for x <= 0, 0 below -87 and for -inf) and keep_first(x, k,
// fill) (lanes >= k replaced by fill). Src: scores(t0, const int row[kLanes], n_q, float* s)
// writes s[h * kAttnChunk + i] = q_h . k_{t0 + row[i]}; accumulate(t0, p, cn, n_q, a).
template <class S, class Src>
void fold_segment(const Src& src, int n_q, int n, int hd, AttnScore score, AttnAccum* a) {
  using V = typename S::V;
  constexpr int kL = S::kLanes;
  static_assert(kAttnChunk % kL == 0, "a chunk is whole score blocks");
  alignas(64) float s[kAttnMaxQ * kAttnChunk];
  const V vscale = S::set1(score.scale), ninf = S::set1(-INFINITY);
  const float cap = score.softcap;
  for (int t0 = 0; t0 < n; t0 += kAttnChunk) {
    const int cn = n - t0 < kAttnChunk ? n - t0 : kAttnChunk;
    for (int j = 0; j < cn; j += kL) {
      int row[kL];
      for (int i = 0; i < kL; ++i) row[i] = j + i < cn ? j + i : cn - 1;
      src.scores(t0, row, n_q, s + j);
    }
    for (int h = 0; h < n_q; ++h) {
      AttnAccum& A = a[h];
      float* sh = s + h * kAttnChunk;
      V vm = ninf;
      for (int j = 0; j < cn; j += kL) {
        V sc = S::mul(S::load(sh + j), vscale);
        if (cap > 0.0f) {  // Gemma 2's soft-capping, as the scalar twin computes it (double tanh)
          S::store(sh + j, sc);
          for (int i = 0; i < kL; ++i) sh[j + i] = float(double(cap) * std::tanh(double(sh[j + i]) / double(cap)));
          sc = S::load(sh + j);
        }
        sc = S::keep_first(sc, cn - j, ninf);
        S::store(sh + j, sc);
        vm = S::max(vm, sc);
      }
      const float cm = S::hmax(vm);
      if (cm > A.m) {  // new running maximum: rescale once per chunk
        const float r = std::exp(A.m - cm);
        const V vr = S::set1(r);
        for (int d = 0; d < hd; d += kL) S::store(A.acc + d, S::mul(S::load(A.acc + d), vr));
        A.l *= r;
        A.m = cm;
      }
      const V vmax = S::set1(A.m);
      V vl = S::zero();
      for (int j = 0; j < cn; j += kL) {
        const V p = S::exp_neg(S::sub(S::load(sh + j), vmax));
        S::store(sh + j, p);
        vl = S::add(vl, p);
      }
      A.l += S::hsum(vl);
    }
    src.accumulate(t0, s, cn, n_q, a);
  }
}

}  // namespace pllm::kern::drivers
