// AVX-512 (F, BW, VL, VNNI) KV-cache segment kernels (KernelTable::attn_seg_*): the
// chunked online softmax of generic/attention_kv_scalar.cpp for n_q query heads sharing
// one kv head, every cache format decoded in registers while the segment is streamed once.
//
// Per chunk of kChunk tokens: (1) scores 16 tokens at a time for every head, one 16-lane
// accumulator per token (16 independent chains) and one transpose-reduction for all
// sixteen; with several heads the block's key rows are decoded once into a small f32
// tile (f16, q4; f32 rows and q8 codes are read in place, L1-resident after the first
// head); a partial last block re-reads the chunk's last row (never reads past the
// segment) and its lanes are masked to -inf; (2) per head the chunk maximum and at most
// one rescale of acc and l; (3) p = exp(s - m), a 16-lane Cephes polynomial; (4) acc_h +=
// p_ht v_t in blocks of 64 (f32/f16/q8) or 32 (q4) output dims for up to 4 heads at
// once: each value row is decoded once per block of heads (two tokens per step when the
// heads' accumulators leave room for a second set of chains).
//   q8: each query is quantised once per call exactly like kv_quantize_q8; q.k per group
//       is VPDPBUSD of (k XOR 0x80) as unsigned bytes with the signed query codes, i.e.
//       q.k + 128 * sum(q), corrected by the per-head constant: exact in int32.
//       Values: acc += (p_t * scale_tg) * code.
//   q4: keys as q'.code + bias with q'_c = q_c * k_scale_c and bias = sum q_c * k_min_c
//       computed once per call and head; values as acc += (p_t * scale_tb) * code per
//       token and sum_t p_t * min_tb added once per 32-channel block.
//
// Namespaces as in avx2.cpp (shared: simd_avx512.h, drivers/attn_seg.h: the softmax loop,
// the value accumulation, the f32 / f16 source and the q4 query constants).
#include <immintrin.h>

#include <cstdint>

#include "kernels/drivers/attn_seg.h"
#include "kernels/internal.h"
#include "kernels/x86/simd_avx512.h"

namespace pllm::kern {

namespace {

#define PLLM_AI inline __attribute__((always_inline))

constexpr int kChunk = kAttnChunk;  // tokens per online-softmax step (kv_format.h)
constexpr int kMaxQ = drivers::kAttnMaxQ;    // query heads per call
constexpr int kQGroups = kMaxHeadDim / kKvQ8Group;  // q8 scale groups per query head

using avx512::h2f;

// exp(x) for x <= 0; see x86/attention_kv_avx2.cpp (same reduction and polynomial; 2^n
// applied with vscalefps). x < -87 (incl. -inf) gives 0.
PLLM_AI __m512 exp_neg(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.0f);
  const __mmask16 keep = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
  x = _mm512_max_ps(x, lo);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 y = _mm512_set1_ps(1.9875691500e-4f);
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_maskz_mov_ps(keep, _mm512_scalef_ps(y, n));
}

// Lane i of the result = sum of the 16 lanes of v[i]. Pairs are interleaved and added
// (32-bit, then 64-bit), leaving four tokens per 128-bit lane, then the 128-bit lanes
// are folded with two rounds of shuffle_x32x4.
PLLM_AI __m512 reduce16(const __m512* v) {
  __m512 w[8], x[4];
  for (int i = 0; i < 8; ++i)
    w[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(w[2 * i]), b = _mm512_castps_pd(w[2 * i + 1]);
    x[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  const __m512 y0 = _mm512_add_ps(_mm512_shuffle_f32x4(x[0], x[1], 0x88), _mm512_shuffle_f32x4(x[0], x[1], 0xDD));
  const __m512 y1 = _mm512_add_ps(_mm512_shuffle_f32x4(x[2], x[3], 0x88), _mm512_shuffle_f32x4(x[2], x[3], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(y0, y1, 0x88), _mm512_shuffle_f32x4(y0, y1, 0xDD));
}

// Same for int32 lanes (exact).
PLLM_AI __m512i reduce16i(const __m512i* v) {
  __m512i w[8], x[4];
  for (int i = 0; i < 8; ++i)
    w[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]),
                            _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i)
    x[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(w[2 * i], w[2 * i + 1]),
                            _mm512_unpackhi_epi64(w[2 * i], w[2 * i + 1]));
  const __m512i y0 =
      _mm512_add_epi32(_mm512_shuffle_i32x4(x[0], x[1], 0x88), _mm512_shuffle_i32x4(x[0], x[1], 0xDD));
  const __m512i y1 =
      _mm512_add_epi32(_mm512_shuffle_i32x4(x[2], x[3], 0x88), _mm512_shuffle_i32x4(x[2], x[3], 0xDD));
  return _mm512_add_epi32(_mm512_shuffle_i32x4(y0, y1, 0x88), _mm512_shuffle_i32x4(y0, y1, 0xDD));
}

// Codes of 32 channels (16 bytes, ggml nibble order) -> channels 0..15 and 16..31 as f32.
PLLM_AI void q4_decode32(const uint8_t* p, __m512& lo, __m512& hi) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  lo = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(b, m4)));
  hi = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(b, 4), m4)));
}

// The vector traits of the drivers (online_softmax.h, attn_values.h, attn_seg.h).
struct AttnSimd : avx512::F32x16 {
  static constexpr int kDotChains = 1;  // one chain per key row: 16 rows, 16 chains
  static constexpr int kPlainVecs = 4;  // values in blocks of 64 dims
  // Two tokens per step while their accumulators fit with room for the decoded row.
  static constexpr int tokens_per_step(int vecs) { return vecs <= 8 ? 2 : 1; }
  static PLLM_AI V exp_neg(V x) { return pllm::kern::exp_neg(x); }
  static PLLM_AI V keep_first(V x, int k, V fill) {
    return _mm512_mask_mov_ps(fill, k >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << k) - 1), x);
  }
  static PLLM_AI V reduce(const V* v) { return reduce16(v); }
  static PLLM_AI void q4_codes32(const uint8_t* p, V* c) { q4_decode32(p, c[0], c[1]); }
};

// ---- q8 ----
struct Q8Src {
  static constexpr bool kScaled = true, kAffine = false;
  const int8_t* qi;     // query codes, head h at qi + h * kMaxHeadDim (64-byte aligned)
  const float* dq;      // query scale per head and group, [h * kQGroups + g]
  const int32_t* corr;  // 128 * sum of the query codes per head and group
  const int8_t* k;
  const float* ks;
  const int8_t* v;
  const float* vs;
  int64_t stride, sstride;
  int hd;

  PLLM_AI void scores(int t0, const int* row, int n_q, float* s) const {
    const int8_t* kr[16];
    for (int i = 0; i < 16; ++i) kr[i] = k + (t0 + row[i]) * stride;
    const __m512i sidx = _mm512_mullo_epi32(_mm512_loadu_si512(row), _mm512_set1_epi32(int32_t(sstride)));
    const float* ks0 = ks + t0 * sstride;
    const int ng = hd / kKvQ8Group;
    __m512 dk[kMaxHeadDim / kKvQ8Group];  // key scales of the block, per group
    for (int g = 0; g < ng; ++g) dk[g] = _mm512_i32gather_ps(sidx, ks0 + g, 4);
    const __m512i flip = _mm512_set1_epi8(char(0x80));
    for (int h = 0; h < n_q; ++h) {
      __m512 sc = _mm512_setzero_ps();
      for (int g = 0; g < ng; ++g) {
        const __m512i qg = _mm512_load_si512(qi + h * kMaxHeadDim + g * kKvQ8Group);
        __m512i acc[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) {
          const __m512i kb = _mm512_xor_si512(_mm512_loadu_si512(kr[i] + g * kKvQ8Group), flip);
          acc[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), kb, qg);
        }
        const __m512i isum = _mm512_sub_epi32(reduce16i(acc), _mm512_set1_epi32(corr[h * kQGroups + g]));
        sc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dk[g], _mm512_set1_ps(dq[h * kQGroups + g])), sc);
      }
      _mm512_store_ps(s + h * kChunk, sc);
    }
  }

  // NV = 4: one 64-channel group, weight p_t * scale_tg.
  template <int NV>
  PLLM_AI void vrow(int t, int d, __m512* x, float& mul, float&) const {
    const int8_t* vt = v + t * stride + d;
    mul = vs[t * sstride + d / kKvQ8Group];
    for (int c = 0; c < NV; ++c)
      x[c] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(vt + 16 * c))));
  }

  void accumulate(int t0, const float* p, int cn, int n_q, AttnAccum* a) const {
    drivers::accumulate_values<AttnSimd, 4>(*this, t0, p, cn, n_q, hd, a);
  }
};

// ---- q4 ----
struct Q4Src : drivers::Q4Data {
  PLLM_AI void scores(int t0, const int* row, int n_q, float* s) const {
    t0 += base;
    const uint8_t* kr[16];
    for (int i = 0; i < 16; ++i) kr[i] = g->k_codes + (t0 + row[i]) * g->code_stride;
    if (n_q > 1) return drivers::q4_scores_tiled<AttnSimd>(kr, qp, bias, n_q, hd, s);
    // One head: the codes decoded inside the dot product.
    __m512 acc[16];
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
    for (int b = 0; b < hd / 32; ++b) {
      const __m512 qa = _mm512_load_ps(qp + 32 * b), qb = _mm512_load_ps(qp + 32 * b + 16);
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        __m512 lo, hi;
        q4_decode32(kr[i] + 16 * b, lo, hi);
        acc[i] = _mm512_fmadd_ps(qb, hi, _mm512_fmadd_ps(qa, lo, acc[i]));
      }
    }
    _mm512_store_ps(s, _mm512_add_ps(reduce16(acc), _mm512_set1_ps(bias[0])));
  }

  // NV = 2: one 32-channel block, weight p_t * scale_tb, plus p_t * min_tb.
  template <int NV>
  PLLM_AI void vrow(int t, int d, __m512* x, float& mul, float& add) const {
    static_assert(NV == 2, "one block");
    const int64_t tt = base + t;
    const int b = d / 32;
    mul = h2f(g->v_scale[tt * g->vs_stride + b]);
    add = h2f(g->v_min[tt * g->vs_stride + b]);
    q4_decode32(g->v_codes + tt * g->code_stride + 16 * b, x[0], x[1]);
  }

  void accumulate(int t0, const float* p, int cn, int n_q, AttnAccum* a) const {
    drivers::accumulate_values<AttnSimd, 2>(*this, t0, p, cn, n_q, hd, a);
  }
};

void attn_seg_q8(const float* q, int n_q, const int8_t* k, const float* k_scale, const int8_t* v,
                 const float* v_scale, int64_t stride, int64_t scale_stride, int n, int hd, AttnScore score,
                 AttnAccum* a) {
  if (n <= 0) return;
  // Each query in the cache's format, as kv_quantize_q8 does it: scale amax / 127 (a true
  // division), codes round-to-nearest-even of q / scale (cvtps2dq in the default MXCSR
  // mode), an all-zero group gets codes 0.
  alignas(64) int8_t qi[kMaxQ * kMaxHeadDim];
  float dq[kMaxQ * kQGroups];
  int32_t corr[kMaxQ * kQGroups];
  for (int h = 0; h < n_q; ++h)
    for (int g = 0; g < hd / kKvQ8Group; ++g) {
      const float* qg = q + h * hd + g * kKvQ8Group;
      __m512 x[4], amax = _mm512_setzero_ps();
      for (int c = 0; c < 4; ++c) {
        x[c] = _mm512_loadu_ps(qg + 16 * c);
        amax = _mm512_max_ps(amax, _mm512_abs_ps(x[c]));
      }
      const float s = _mm512_reduce_max_ps(amax) / 127.0f;
      dq[h * kQGroups + g] = s;
      __m512i sum = _mm512_setzero_si512();
      for (int c = 0; c < 4; ++c) {
        __m512i ci = _mm512_setzero_si512();
        if (s != 0.0f) {
          ci = _mm512_cvtps_epi32(_mm512_div_ps(x[c], _mm512_set1_ps(s)));
          ci = _mm512_max_epi32(_mm512_min_epi32(ci, _mm512_set1_epi32(127)), _mm512_set1_epi32(-127));
        }
        sum = _mm512_add_epi32(sum, ci);
        _mm_store_si128(reinterpret_cast<__m128i*>(qi + h * kMaxHeadDim + g * kKvQ8Group + 16 * c), _mm512_cvtepi32_epi8(ci));
      }
      corr[h * kQGroups + g] = 128 * _mm512_reduce_add_epi32(sum);
    }
  drivers::fold_segment<AttnSimd>(Q8Src{qi, dq, corr, k, k_scale, v, v_scale, stride, scale_stride, hd}, n_q, n, hd, score, a);
}

#undef PLLM_AI

}  // namespace

void fill_attention_kv_avx512(KernelTable& t) { drivers::set_attn_seg<AttnSimd, Q4Src>(t, attn_seg_q8); }

}  // namespace pllm::kern
