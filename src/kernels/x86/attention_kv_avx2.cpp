// AVX2 + FMA + F16C KV-cache segment kernels (KernelTable::attn_seg_*): the chunked
// online softmax of generic/attention_kv_scalar.cpp for n_q query heads sharing one kv
// head, with the cache decoded in registers; same structure as x86/attention_kv_avx512.cpp
// with 8-lane registers:
//   scores 8 tokens at a time for every head, one accumulator per token and one hadd
//   transpose-reduction for all eight (with several heads the block's f16 / q4 key rows
//   are decoded once into a small f32 tile; a partial last block re-reads the chunk's last
//   row and masks those lanes to -inf); per head one rescale per chunk and a vectorised
//   exp; acc_h += p_ht v_t in blocks of 16 output dims for up to 4 heads at once, each
//   value row decoded once per block of heads (more tokens per step when fewer heads).
//   q8: each query quantised once per call like kv_quantize_q8; q.k per 32 bytes with the
//       usual sign trick (|k| unsigned x sign(q, k) signed -> VPMADDUBSW, pairs of
//       products <= 2 * 127 * 127 so no int16 saturation; VPMADDWD by 1 widens): exact.
//   q4: keys as q'.code + bias (q'_c = q_c * k_scale_c, bias = sum q_c * k_min_c, once
//       per call and head); values as (p_t * scale_tb) * code plus sum_t p_t * min_tb.
//
// Namespaces as in avx2.cpp (shared: simd_avx2.h, drivers/attn_seg.h: the softmax loop,
// the value accumulation, the f32 / f16 source and the q4 query constants).
#include <immintrin.h>

#include <cstdint>

#include "kernels/drivers/attn_seg.h"
#include "kernels/internal.h"
#include "kernels/x86/simd_avx2.h"

namespace pllm::kern {

namespace {

using avx2::h2f;
using avx2::hmax;

#define PLLM_AI inline __attribute__((always_inline))

constexpr int kChunk = kAttnChunk;  // tokens per online-softmax step (kv_format.h)
constexpr int kMaxQ = drivers::kAttnMaxQ;    // query heads per call
constexpr int kQGroups = kMaxHeadDim / kKvQ8Group;  // q8 scale groups per query head

// exp(x) for x <= 0 (the softmax weights). Range reduction x = n ln2 + r with ln2
// split in two (the first part exact in n*C1), |r| <= ln2/2, degree-7 Cephes
// polynomial; relative error <= ~2 ulp for x in [-87, 0]. x < -87 (incl. -inf)
// gives 0: the true value is < 1.7e-38, negligible against l >= 1.
PLLM_AI __m256 exp_neg(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.0f);
  const __m256 keep = _mm256_cmp_ps(x, lo, _CMP_GE_OQ);
  x = _mm256_max_ps(x, lo);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(_mm256_mul_ps(y, _mm256_castsi256_ps(e)), keep);
}

// Lane i = sum of the lanes of v[i]: two hadd levels leave four tokens per 128-bit
// half, the halves are then crossed and added.
PLLM_AI __m256 reduce8(const __m256* v) {
  const __m256 a = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
  const __m256 b = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}
PLLM_AI __m256i reduce8i(const __m256i* v) {  // same for int32 (exact)
  const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

// Codes of 32 channels (16 bytes, ggml nibble order) -> channels 0..7, 8..15, 16..23, 24..31.
PLLM_AI void q4_decode32(const uint8_t* p, __m256* c) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(b, m4), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m4);
  c[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
  c[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(lo, lo)));
  c[2] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
  c[3] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(hi, hi)));
}

// The vector traits of the drivers (online_softmax.h, attn_values.h, attn_seg.h).
struct AttnSimd : avx2::F32x8 {
  static constexpr int kDotChains = 1;  // one chain per key row: 8 rows, 8 chains
  static constexpr int kPlainVecs = 2;  // values in blocks of 16 dims
  // 8 FMA chains: 4 tokens per step for one head, 2 for two (16 registers).
  static constexpr int tokens_per_step(int vecs) { return vecs <= 2 ? 4 : vecs <= 4 ? 2 : 1; }
  static PLLM_AI V exp_neg(V x) { return pllm::kern::exp_neg(x); }
  static PLLM_AI V keep_first(V x, int k, V fill) {
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_blendv_ps(fill, x, _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(k), iota)));
  }
  static PLLM_AI V reduce(const V* v) { return reduce8(v); }
  static PLLM_AI void q4_codes32(const uint8_t* p, V* c) { q4_decode32(p, c); }
};

// ---- q8 ----
// sum over 32 bytes of q * k as 8 int32 lanes (|q|, |k| <= 127).
PLLM_AI __m256i dot32_i8(__m256i q, __m256i k) {
  const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(k, k), _mm256_sign_epi8(q, k));
  return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}
PLLM_AI __m256 i8x8_to_ps(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

struct Q8Src {
  static constexpr bool kScaled = true, kAffine = false;
  const int8_t* qi;  // query codes, head h at qi + h * kMaxHeadDim (32-byte aligned)
  const float* dq;   // query scale per head and group, [h * kQGroups + g]
  const int8_t* k;
  const float* ks;
  const int8_t* v;
  const float* vs;
  int64_t stride, sstride;
  int hd;

  PLLM_AI void scores(int t0, const int* row, int n_q, float* s) const {
    const int8_t* kr[8];
    for (int i = 0; i < 8; ++i) kr[i] = k + (t0 + row[i]) * stride;
    const __m256i sidx =
        _mm256_mullo_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row)), _mm256_set1_epi32(int32_t(sstride)));
    const float* ks0 = ks + t0 * sstride;
    const int ng = hd / kKvQ8Group;
    __m256 dk[kMaxHeadDim / kKvQ8Group];  // key scales of the block, per group
    for (int g = 0; g < ng; ++g) dk[g] = _mm256_i32gather_ps(ks0 + g, sidx, 4);
    for (int h = 0; h < n_q; ++h) {
      __m256 sc = _mm256_setzero_ps();
      for (int g = 0; g < ng; ++g) {
        const int8_t* qg = qi + h * kMaxHeadDim + g * kKvQ8Group;
        const __m256i q0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(qg));
        const __m256i q1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(qg + 32));
        __m256i acc[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) {
          const int8_t* kg = kr[i] + g * kKvQ8Group;
          acc[i] = _mm256_add_epi32(dot32_i8(q0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kg))),
                                    dot32_i8(q1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kg + 32))));
        }
        sc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(reduce8i(acc)), _mm256_mul_ps(dk[g], _mm256_set1_ps(dq[h * kQGroups + g])),
                             sc);
      }
      _mm256_store_ps(s + h * kChunk, sc);
    }
  }

  // 16 dims of one 64-channel group, weight p_t * scale_tg.
  template <int NV>
  PLLM_AI void vrow(int t, int d, __m256* x, float& mul, float&) const {
    static_assert(NV == 2, "16 dims");
    const int8_t* vt = v + t * stride + d;
    mul = vs[t * sstride + d / kKvQ8Group];
    x[0] = i8x8_to_ps(vt);
    x[1] = i8x8_to_ps(vt + 8);
  }

  void accumulate(int t0, const float* p, int cn, int n_q, AttnAccum* a) const {
    drivers::accumulate_values<AttnSimd, 2>(*this, t0, p, cn, n_q, hd, a);
  }
};

// ---- q4 ----
struct Q4Src : drivers::Q4Data {
  PLLM_AI void scores(int t0, const int* row, int n_q, float* s) const {
    t0 += base;
    const uint8_t* kr[8];
    for (int i = 0; i < 8; ++i) kr[i] = g->k_codes + (t0 + row[i]) * g->code_stride;
    if (n_q > 1) return drivers::q4_scores_tiled<AttnSimd>(kr, qp, bias, n_q, hd, s);
    // One head: the codes decoded inside the dot product.
    __m256 acc[8];
    for (int i = 0; i < 8; ++i) acc[i] = _mm256_setzero_ps();
    for (int b = 0; b < hd / 32; ++b) {
      const float* qb = qp + 32 * b;
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        __m256 c[4];
        q4_decode32(kr[i] + 16 * b, c);
        __m256 x = _mm256_fmadd_ps(_mm256_load_ps(qb), c[0], acc[i]);
        x = _mm256_fmadd_ps(_mm256_load_ps(qb + 8), c[1], x);
        x = _mm256_fmadd_ps(_mm256_load_ps(qb + 16), c[2], x);
        acc[i] = _mm256_fmadd_ps(_mm256_load_ps(qb + 24), c[3], x);
      }
    }
    _mm256_store_ps(s, _mm256_add_ps(reduce8(acc), _mm256_set1_ps(bias[0])));
  }

  // 16 channels of one 32-channel block (low nibbles for its first half, high for the
  // second), weight p_t * scale_tb, plus p_t * min_tb.
  template <int NV>
  PLLM_AI void vrow(int t, int d, __m256* x, float& mul, float& add) const {
    static_assert(NV == 2, "16 dims");
    const int64_t tt = base + t;
    const int b = d / 32;
    mul = h2f(g->v_scale[tt * g->vs_stride + b]);
    add = h2f(g->v_min[tt * g->vs_stride + b]);
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(g->v_codes + tt * g->code_stride + 16 * b));
    if (d & 16) c = _mm_srli_epi16(c, 4);
    c = _mm_and_si128(c, _mm_set1_epi8(0x0F));
    x[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(c));
    x[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(c, c)));
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
  // division), codes round-to-nearest-even of q / scale (cvtps2dq, default MXCSR mode),
  // an all-zero group gets codes 0.
  alignas(32) int8_t qi[kMaxQ * kMaxHeadDim];
  float dq[kMaxQ * kQGroups];
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int h = 0; h < n_q; ++h)
    for (int g = 0; g < hd / kKvQ8Group; ++g) {
      const float* qg = q + h * hd + g * kKvQ8Group;
      __m256 x[8], amax = _mm256_setzero_ps();
      for (int c = 0; c < 8; ++c) {
        x[c] = _mm256_loadu_ps(qg + 8 * c);
        amax = _mm256_max_ps(amax, _mm256_and_ps(x[c], absmask));
      }
      const float s = hmax(amax) / 127.0f;
      dq[h * kQGroups + g] = s;
      for (int c = 0; c < 8; c += 2) {
        __m256i c0 = _mm256_setzero_si256(), c1 = c0;
        if (s != 0.0f) {
          const __m256 vs = _mm256_set1_ps(s);
          c0 = _mm256_cvtps_epi32(_mm256_div_ps(x[c], vs));
          c1 = _mm256_cvtps_epi32(_mm256_div_ps(x[c + 1], vs));
        }
        // int32 -> int8 with saturation, then clamp to the symmetric range [-127, 127].
        const __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(c0, c1), 0xD8);  // 16 x int16, in order
        __m128i b = _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
        b = _mm_max_epi8(b, _mm_set1_epi8(-127));
        _mm_store_si128(reinterpret_cast<__m128i*>(qi + h * kMaxHeadDim + g * kKvQ8Group + 8 * c), b);
      }
    }
  drivers::fold_segment<AttnSimd>(Q8Src{qi, dq, k, k_scale, v, v_scale, stride, scale_stride, hd}, n_q, n, hd, score, a);
}

#undef PLLM_AI

}  // namespace

void fill_attention_kv_avx2(KernelTable& t) { drivers::set_attn_seg<AttnSimd, Q4Src>(t, attn_seg_q8); }

}  // namespace pllm::kern
