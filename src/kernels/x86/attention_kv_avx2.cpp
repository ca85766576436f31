// AVX2 + FMA + F16C KV-cache segment kernels (KernelTable::attn_seg_*): the chunked
// online softmax of generic/attention_kv_scalar.cpp with the cache decoded in registers;
// same structure as x86/attention_kv_avx512.cpp with 8-lane registers:
//   scores 8 tokens at a time, one accumulator per token and one hadd transpose-
//   reduction for all eight (a partial last block re-reads the chunk's last row and
//   masks those lanes to -inf); one rescale per chunk; vectorised exp; acc += p_t v_t
//   in blocks of 32 output dims x two tokens (eight FMA chains).
//   q8: the query quantised once per call like kv_quantize_q8; q.k per 32 bytes with the
//       usual sign trick (|k| unsigned x sign(q, k) signed -> VPMADDUBSW, pairs of
//       products <= 2 * 127 * 127 so no int16 saturation; VPMADDWD by 1 widens): exact.
//   q4: keys as q'.code + bias (q'_c = q_c * k_scale_c, bias = sum q_c * k_min_c, once
//       per call); values as (p_t * scale_tb) * code plus sum_t p_t * min_tb per block.
//
// As in avx2.cpp: anonymous namespace only, no shared inline functions.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/internal.h"

namespace pllm::kern {

namespace {

#define PLLM_AI inline __attribute__((always_inline))

constexpr int kChunk = 64;  // tokens per online-softmax step (multiple of 8)

PLLM_AI __m256 ld8(const float* p) { return _mm256_loadu_ps(p); }
PLLM_AI __m256 ld8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
PLLM_AI float h2f(uint16_t h) { return _cvtsh_ss(h); }

// exp(x) for x <= 0; see x86/attention_avx2.cpp (identical). x < -87 (incl. -inf) gives 0.
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

PLLM_AI float hsum(__m256 a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

PLLM_AI float hmax(__m256 a) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
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

// Rows of an 8-token score block at chunk token j; rows past cn - 1 repeat it.
PLLM_AI void block_rows(int j, int cn, int* row) {
  for (int i = 0; i < 8; ++i) row[i] = j + i < cn ? j + i : cn - 1;
}

// The chunked online softmax over n tokens (see attention_kv_avx512.cpp for Src).
template <class Src>
PLLM_AI void fold_segment(const Src& src, int n, int hd, float scale, AttnAccum& a) {
  alignas(32) float s[kChunk];
  float m = a.m, l = a.l;
  const __m256 vscale = _mm256_set1_ps(scale), ninf = _mm256_set1_ps(-INFINITY);
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int t0 = 0; t0 < n; t0 += kChunk) {
    const int cn = n - t0 < kChunk ? n - t0 : kChunk;
    const int cn8 = (cn + 7) & ~7;
    __m256 vm = ninf;
    for (int j = 0; j < cn; j += 8) {
      int row[8];
      block_rows(j, cn, row);
      __m256 sc = _mm256_mul_ps(src.scores8(t0, row), vscale);
      const __m256 valid = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(cn - j), iota));
      sc = _mm256_blendv_ps(ninf, sc, valid);
      _mm256_store_ps(s + j, sc);
      vm = _mm256_max_ps(vm, sc);
    }
    const float cm = hmax(vm);
    if (cm > m) {  // new running maximum: rescale once per chunk (exp(-inf) = 0 at the start)
      const float r = std::exp(m - cm);
      const __m256 vr = _mm256_set1_ps(r);
      for (int d = 0; d < hd; d += 8) _mm256_storeu_ps(a.acc + d, _mm256_mul_ps(_mm256_loadu_ps(a.acc + d), vr));
      l *= r;
      m = cm;
    }
    const __m256 vmax = _mm256_set1_ps(m);
    __m256 vl = _mm256_setzero_ps();
    for (int j = 0; j < cn8; j += 8) {
      const __m256 p = exp_neg(_mm256_sub_ps(_mm256_load_ps(s + j), vmax));
      _mm256_store_ps(s + j, p);
      vl = _mm256_add_ps(vl, p);
    }
    l += hsum(vl);
    src.accumulate(t0, s, cn, a.acc);
  }
  a.m = m;
  a.l = l;
}

// ---- f32 / f16 rows ----
template <class T>
struct PlainSrc {
  const float* q;
  const T* k;
  const T* v;
  int64_t stride;
  int hd;

  PLLM_AI __m256 scores8(int t0, const int* row) const {
    const T* kr[8];
    for (int i = 0; i < 8; ++i) kr[i] = k + (t0 + row[i]) * stride;
    __m256 acc[8];
    for (int i = 0; i < 8; ++i) acc[i] = _mm256_setzero_ps();
    for (int d = 0; d < hd; d += 8) {
      const __m256 qd = _mm256_loadu_ps(q + d);
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) acc[i] = _mm256_fmadd_ps(qd, ld8(kr[i] + d), acc[i]);
    }
    return reduce8(acc);
  }

  // acc += sum_{j < cn} p[j] v_{t0+j}: blocks of 32 dims x two tokens, then 16 dims.
  PLLM_AI void accumulate(int t0, const float* p, int cn, float* acc) const {
    const T* v0 = v + t0 * stride;
    int d = 0;
    for (; d + 32 <= hd; d += 32) {
      __m256 x[4], y[4];
      for (int c = 0; c < 4; ++c) x[c] = _mm256_loadu_ps(acc + d + 8 * c), y[c] = _mm256_setzero_ps();
      const T* vt = v0 + d;
      int j = 0;
      for (; j + 2 <= cn; j += 2, vt += 2 * stride) {
        const __m256 p0 = _mm256_broadcast_ss(p + j), p1 = _mm256_broadcast_ss(p + j + 1);
        for (int c = 0; c < 4; ++c) x[c] = _mm256_fmadd_ps(p0, ld8(vt + 8 * c), x[c]);
        for (int c = 0; c < 4; ++c) y[c] = _mm256_fmadd_ps(p1, ld8(vt + stride + 8 * c), y[c]);
      }
      if (j < cn) {
        const __m256 p0 = _mm256_broadcast_ss(p + j);
        for (int c = 0; c < 4; ++c) x[c] = _mm256_fmadd_ps(p0, ld8(vt + 8 * c), x[c]);
      }
      for (int c = 0; c < 4; ++c) _mm256_storeu_ps(acc + d + 8 * c, _mm256_add_ps(x[c], y[c]));
    }
    if (d < hd) {  // hd % 32 == 16
      __m256 x0 = _mm256_loadu_ps(acc + d), x1 = _mm256_loadu_ps(acc + d + 8);
      __m256 y0 = _mm256_setzero_ps(), y1 = y0;
      const T* vt = v0 + d;
      int j = 0;
      for (; j + 2 <= cn; j += 2, vt += 2 * stride) {
        const __m256 p0 = _mm256_broadcast_ss(p + j), p1 = _mm256_broadcast_ss(p + j + 1);
        x0 = _mm256_fmadd_ps(p0, ld8(vt), x0);
        x1 = _mm256_fmadd_ps(p0, ld8(vt + 8), x1);
        y0 = _mm256_fmadd_ps(p1, ld8(vt + stride), y0);
        y1 = _mm256_fmadd_ps(p1, ld8(vt + stride + 8), y1);
      }
      if (j < cn) {
        const __m256 p0 = _mm256_broadcast_ss(p + j);
        x0 = _mm256_fmadd_ps(p0, ld8(vt), x0);
        x1 = _mm256_fmadd_ps(p0, ld8(vt + 8), x1);
      }
      _mm256_storeu_ps(acc + d, _mm256_add_ps(x0, y0));
      _mm256_storeu_ps(acc + d + 8, _mm256_add_ps(x1, y1));
    }
  }
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
  const int8_t* qi;  // query codes (32-byte aligned)
  const float* dq;   // query scale per group
  const int8_t* k;
  const float* ks;
  const int8_t* v;
  const float* vs;
  int64_t stride, sstride;
  int hd;

  PLLM_AI __m256 scores8(int t0, const int* row) const {
    const int8_t* kr[8];
    for (int i = 0; i < 8; ++i) kr[i] = k + (t0 + row[i]) * stride;
    const __m256i sidx =
        _mm256_mullo_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row)), _mm256_set1_epi32(int32_t(sstride)));
    const float* ks0 = ks + t0 * sstride;
    __m256 s = _mm256_setzero_ps();
    for (int g = 0; g < hd / kKvQ8Group; ++g) {
      const int8_t* qg = qi + g * kKvQ8Group;
      const __m256i q0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(qg));
      const __m256i q1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(qg + 32));
      __m256i acc[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const int8_t* kg = kr[i] + g * kKvQ8Group;
        acc[i] = _mm256_add_epi32(dot32_i8(q0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kg))),
                                  dot32_i8(q1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kg + 32))));
      }
      const __m256 dk = _mm256_i32gather_ps(ks0 + g, sidx, 4);
      s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(reduce8i(acc)), _mm256_mul_ps(dk, _mm256_set1_ps(dq[g])), s);
    }
    return s;
  }

  // Half a group (32 dims, four registers) x two tokens per step.
  PLLM_AI void accumulate(int t0, const float* p, int cn, float* acc) const {
    for (int d = 0; d < hd; d += 32) {
      const int g = d / kKvQ8Group;
      __m256 x[4], y[4];
      for (int c = 0; c < 4; ++c) x[c] = _mm256_loadu_ps(acc + d + 8 * c), y[c] = _mm256_setzero_ps();
      const int8_t* vt = v + t0 * stride + d;
      const float* st = vs + t0 * sstride + g;
      int j = 0;
      for (; j + 2 <= cn; j += 2, vt += 2 * stride, st += 2 * sstride) {
        const __m256 w0 = _mm256_set1_ps(p[j] * st[0]), w1 = _mm256_set1_ps(p[j + 1] * st[sstride]);
        for (int c = 0; c < 4; ++c) {
          x[c] = _mm256_fmadd_ps(w0, i8x8_to_ps(vt + 8 * c), x[c]);
          y[c] = _mm256_fmadd_ps(w1, i8x8_to_ps(vt + stride + 8 * c), y[c]);
        }
      }
      if (j < cn) {
        const __m256 w0 = _mm256_set1_ps(p[j] * st[0]);
        for (int c = 0; c < 4; ++c) x[c] = _mm256_fmadd_ps(w0, i8x8_to_ps(vt + 8 * c), x[c]);
      }
      for (int c = 0; c < 4; ++c) _mm256_storeu_ps(acc + d + 8 * c, _mm256_add_ps(x[c], y[c]));
    }
  }
};

// ---- q4 ----
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

struct Q4Src {
  const float* qp;  // q_c * k_scale_c (32-byte aligned)
  float bias;       // sum_c q_c * k_min_c
  const KvQ4GroupView* g;
  int hd;
  int base;  // group token of the segment's first token

  PLLM_AI __m256 scores8(int t0, const int* row) const {
    t0 += base;
    const uint8_t* kr[8];
    for (int i = 0; i < 8; ++i) kr[i] = g->k_codes + (t0 + row[i]) * g->code_stride;
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
    return _mm256_add_ps(reduce8(acc), _mm256_set1_ps(bias));
  }

  PLLM_AI void accumulate(int t0, const float* p, int cn, float* acc) const {
    t0 += base;
    for (int b = 0; b < hd / 32; ++b) {
      __m256 x[4], y[4];
      for (int c = 0; c < 4; ++c) x[c] = _mm256_loadu_ps(acc + 32 * b + 8 * c), y[c] = _mm256_setzero_ps();
      float bias = 0.0f;  // sum_t p_t * min_tb, added once for the block
      int j = 0;
      for (; j + 2 <= cn; j += 2) {
        const int64_t t = t0 + j;
        const uint16_t* sc = g->v_scale + t * g->vs_stride + b;
        const uint16_t* mn = g->v_min + t * g->vs_stride + b;
        const __m256 w0 = _mm256_set1_ps(p[j] * h2f(sc[0])), w1 = _mm256_set1_ps(p[j + 1] * h2f(sc[g->vs_stride]));
        bias += p[j] * h2f(mn[0]) + p[j + 1] * h2f(mn[g->vs_stride]);
        __m256 c0[4], c1[4];
        q4_decode32(g->v_codes + t * g->code_stride + 16 * b, c0);
        q4_decode32(g->v_codes + (t + 1) * g->code_stride + 16 * b, c1);
        for (int c = 0; c < 4; ++c) {
          x[c] = _mm256_fmadd_ps(w0, c0[c], x[c]);
          y[c] = _mm256_fmadd_ps(w1, c1[c], y[c]);
        }
      }
      if (j < cn) {
        const int64_t t = t0 + j;
        const __m256 w0 = _mm256_set1_ps(p[j] * h2f(g->v_scale[t * g->vs_stride + b]));
        bias += p[j] * h2f(g->v_min[t * g->vs_stride + b]);
        __m256 c0[4];
        q4_decode32(g->v_codes + t * g->code_stride + 16 * b, c0);
        for (int c = 0; c < 4; ++c) x[c] = _mm256_fmadd_ps(w0, c0[c], x[c]);
      }
      const __m256 vb = _mm256_set1_ps(bias);
      for (int c = 0; c < 4; ++c) _mm256_storeu_ps(acc + 32 * b + 8 * c, _mm256_add_ps(_mm256_add_ps(x[c], y[c]), vb));
    }
  }
};

void attn_seg_f32(const float* q, const float* k, const float* v, int64_t stride, int n, int hd, float scale,
                  AttnAccum& a) {
  if (n <= 0) return;
  fold_segment(PlainSrc<float>{q, k, v, stride, hd}, n, hd, scale, a);
}

void attn_seg_f16(const float* q, const uint16_t* k, const uint16_t* v, int64_t stride, int n, int hd, float scale,
                  AttnAccum& a) {
  if (n <= 0) return;
  fold_segment(PlainSrc<uint16_t>{q, k, v, stride, hd}, n, hd, scale, a);
}

void attn_seg_q8(const float* q, const int8_t* k, const float* k_scale, const int8_t* v, const float* v_scale,
                 int64_t stride, int64_t scale_stride, int n, int hd, float scale, AttnAccum& a) {
  if (n <= 0) return;
  // The query in the cache's format, as kv_quantize_q8 does it: scale amax / 127 (a true
  // division), codes round-to-nearest-even of q / scale (cvtps2dq, default MXCSR mode),
  // an all-zero group gets codes 0.
  alignas(32) int8_t qi[256];
  float dq[256 / kKvQ8Group];
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int g = 0; g < hd / kKvQ8Group; ++g) {
    __m256 x[8], amax = _mm256_setzero_ps();
    for (int c = 0; c < 8; ++c) {
      x[c] = _mm256_loadu_ps(q + g * kKvQ8Group + 8 * c);
      amax = _mm256_max_ps(amax, _mm256_and_ps(x[c], absmask));
    }
    const float s = hmax(amax) / 127.0f;
    dq[g] = s;
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
      _mm_store_si128(reinterpret_cast<__m128i*>(qi + g * kKvQ8Group + 8 * c), b);
    }
  }
  fold_segment(Q8Src{qi, dq, k, k_scale, v, v_scale, stride, scale_stride, hd}, n, hd, scale, a);
}

void attn_seg_q4(const float* q, const KvQ4GroupView& g, int t0, int t1, int hd, float scale, AttnAccum& a) {
  if (t1 <= t0) return;
  alignas(32) float qp[256];
  __m256 vb = _mm256_setzero_ps();
  for (int d = 0; d < hd; d += 8) {
    const __m256 qd = _mm256_loadu_ps(q + d);
    _mm256_store_ps(qp + d, _mm256_mul_ps(qd, ld8(g.k_scale + d)));
    vb = _mm256_fmadd_ps(qd, ld8(g.k_min + d), vb);
  }
  fold_segment(Q4Src{qp, hsum(vb), &g, hd, t0}, t1 - t0, hd, scale, a);
}

#undef PLLM_AI

}  // namespace

void fill_attention_kv_avx2(KernelTable& t) {
  t.attn_seg_f32 = attn_seg_f32;
  t.attn_seg_f16 = attn_seg_f16;
  t.attn_seg_q8 = attn_seg_q8;
  t.attn_seg_q4 = attn_seg_q4;
}

}  // namespace pllm::kern
