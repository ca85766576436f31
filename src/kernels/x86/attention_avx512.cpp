// AVX-512 (F) attention kernels; same algorithm as attention_avx2.cpp with 16-lane
// registers: scores four positions at a time with two 16-lane accumulators each
// (32 partial sums per dot), exp via a 16-lane Cephes polynomial + vscalefps, and
// acc += p_t v_t in blocks of 64 output dims x two positions (eight FMA chains).
// Uses only AVX512F instructions (plus AVX/F16C), which every table-eligible CPU has.
//
// As in avx512.cpp: anonymous namespace only, no shared inline functions.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/internal.h"

namespace pllm::kern {

namespace {

#define PLLM_AI inline __attribute__((always_inline))

constexpr int kChunk = 64;  // positions per online-softmax step (multiple of 16)

PLLM_AI __m512 ld16(const float* p) { return _mm512_loadu_ps(p); }
PLLM_AI __m512 ld16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// exp(x) for x <= 0; see attention_avx2.cpp (same reduction and polynomial; 2^n
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

// Upper 256 bits + lower 256 bits (AVX512F only: no extractf32x8).
PLLM_AI __m256 fold(__m512 a) {
  return _mm256_add_ps(_mm512_castps512_ps256(a), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
}

PLLM_AI float hsum8(__m256 a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

PLLM_AI __m128 hsum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

template <class T>
PLLM_AI __m128 dot4(const float* q, const T* k0, int64_t stride, int hd) {
  const T* k1 = k0 + stride;
  const T* k2 = k1 + stride;
  const T* k3 = k2 + stride;
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
  int d = 0;
  for (; d + 32 <= hd; d += 32) {
    const __m512 qa = _mm512_loadu_ps(q + d), qb = _mm512_loadu_ps(q + d + 16);
    a0 = _mm512_fmadd_ps(qa, ld16(k0 + d), a0);
    b0 = _mm512_fmadd_ps(qb, ld16(k0 + d + 16), b0);
    a1 = _mm512_fmadd_ps(qa, ld16(k1 + d), a1);
    b1 = _mm512_fmadd_ps(qb, ld16(k1 + d + 16), b1);
    a2 = _mm512_fmadd_ps(qa, ld16(k2 + d), a2);
    b2 = _mm512_fmadd_ps(qb, ld16(k2 + d + 16), b2);
    a3 = _mm512_fmadd_ps(qa, ld16(k3 + d), a3);
    b3 = _mm512_fmadd_ps(qb, ld16(k3 + d + 16), b3);
  }
  if (d < hd) {  // hd % 32 == 16
    const __m512 qa = _mm512_loadu_ps(q + d);
    a0 = _mm512_fmadd_ps(qa, ld16(k0 + d), a0);
    a1 = _mm512_fmadd_ps(qa, ld16(k1 + d), a1);
    a2 = _mm512_fmadd_ps(qa, ld16(k2 + d), a2);
    a3 = _mm512_fmadd_ps(qa, ld16(k3 + d), a3);
  }
  return hsum4(fold(_mm512_add_ps(a0, b0)), fold(_mm512_add_ps(a1, b1)), fold(_mm512_add_ps(a2, b2)),
               fold(_mm512_add_ps(a3, b3)));
}

template <class T>
PLLM_AI float dot1(const float* q, const T* k, int hd) {
  __m512 a = _mm512_setzero_ps(), b = a;
  int d = 0;
  for (; d + 32 <= hd; d += 32) {
    a = _mm512_fmadd_ps(_mm512_loadu_ps(q + d), ld16(k + d), a);
    b = _mm512_fmadd_ps(_mm512_loadu_ps(q + d + 16), ld16(k + d + 16), b);
  }
  if (d < hd) a = _mm512_fmadd_ps(_mm512_loadu_ps(q + d), ld16(k + d), a);
  return hsum8(fold(_mm512_add_ps(a, b)));
}

// acc[0..hd) += sum_{j < cn} p[j] * v[j * stride + .]
template <class T>
PLLM_AI void accumulate(const float* p, const T* v, int64_t stride, int cn, int hd, float* acc) {
  int d = 0;
  for (; d + 64 <= hd; d += 64) {
    __m512 x0 = _mm512_loadu_ps(acc + d), x1 = _mm512_loadu_ps(acc + d + 16);
    __m512 x2 = _mm512_loadu_ps(acc + d + 32), x3 = _mm512_loadu_ps(acc + d + 48);
    __m512 y0 = _mm512_setzero_ps(), y1 = y0, y2 = y0, y3 = y0;
    const T* vt = v + d;
    int j = 0;
    for (; j + 2 <= cn; j += 2, vt += 2 * stride) {
      const __m512 p0 = _mm512_set1_ps(p[j]), p1 = _mm512_set1_ps(p[j + 1]);
      x0 = _mm512_fmadd_ps(p0, ld16(vt), x0);
      x1 = _mm512_fmadd_ps(p0, ld16(vt + 16), x1);
      x2 = _mm512_fmadd_ps(p0, ld16(vt + 32), x2);
      x3 = _mm512_fmadd_ps(p0, ld16(vt + 48), x3);
      y0 = _mm512_fmadd_ps(p1, ld16(vt + stride), y0);
      y1 = _mm512_fmadd_ps(p1, ld16(vt + stride + 16), y1);
      y2 = _mm512_fmadd_ps(p1, ld16(vt + stride + 32), y2);
      y3 = _mm512_fmadd_ps(p1, ld16(vt + stride + 48), y3);
    }
    if (j < cn) {
      const __m512 p0 = _mm512_set1_ps(p[j]);
      x0 = _mm512_fmadd_ps(p0, ld16(vt), x0);
      x1 = _mm512_fmadd_ps(p0, ld16(vt + 16), x1);
      x2 = _mm512_fmadd_ps(p0, ld16(vt + 32), x2);
      x3 = _mm512_fmadd_ps(p0, ld16(vt + 48), x3);
    }
    _mm512_storeu_ps(acc + d, _mm512_add_ps(x0, y0));
    _mm512_storeu_ps(acc + d + 16, _mm512_add_ps(x1, y1));
    _mm512_storeu_ps(acc + d + 32, _mm512_add_ps(x2, y2));
    _mm512_storeu_ps(acc + d + 48, _mm512_add_ps(x3, y3));
  }
  for (; d < hd; d += 16) {  // remaining 16..48 dims, one register at a time
    __m512 x0 = _mm512_loadu_ps(acc + d), y0 = _mm512_setzero_ps(), x1 = y0, y1 = y0;
    const T* vt = v + d;
    int j = 0;
    for (; j + 4 <= cn; j += 4, vt += 4 * stride) {
      x0 = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), ld16(vt), x0);
      y0 = _mm512_fmadd_ps(_mm512_set1_ps(p[j + 1]), ld16(vt + stride), y0);
      x1 = _mm512_fmadd_ps(_mm512_set1_ps(p[j + 2]), ld16(vt + 2 * stride), x1);
      y1 = _mm512_fmadd_ps(_mm512_set1_ps(p[j + 3]), ld16(vt + 3 * stride), y1);
    }
    for (; j < cn; ++j, vt += stride) x0 = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), ld16(vt), x0);
    _mm512_storeu_ps(acc + d, _mm512_add_ps(_mm512_add_ps(x0, y0), _mm512_add_ps(x1, y1)));
  }
}

template <class T>
void attn_head(const float* q, const T* k, const T* v, int64_t stride, int n_pos, int hd, float scale, float* out) {
  if (n_pos <= 0) {
    for (int d = 0; d < hd; ++d) out[d] = 0.0f;
    return;
  }
  alignas(64) float acc[256];
  alignas(64) float s[kChunk];
  for (int d = 0; d < hd; d += 16) _mm512_storeu_ps(acc + d, _mm512_setzero_ps());
  const __m128 vscale = _mm_set1_ps(scale);
  float m = -INFINITY, l = 0.0f;
  for (int t0 = 0; t0 < n_pos; t0 += kChunk) {
    const int cn = n_pos - t0 < kChunk ? n_pos - t0 : kChunk;
    const int cn16 = (cn + 15) & ~15;
    const T* kc = k + t0 * stride;
    int j = 0;
    for (; j + 4 <= cn; j += 4) _mm_store_ps(s + j, _mm_mul_ps(dot4(q, kc + j * stride, stride, hd), vscale));
    for (; j < cn; ++j) s[j] = dot1(q, kc + j * stride, hd) * scale;
    for (; j < cn16; ++j) s[j] = -INFINITY;  // padding: exp_neg gives 0

    __m512 vm = _mm512_load_ps(s);
    for (j = 16; j < cn16; j += 16) vm = _mm512_max_ps(vm, _mm512_load_ps(s + j));
    const float cm = _mm512_reduce_max_ps(vm);
    if (cm > m) {  // new running maximum: rescale once per chunk (exp(-inf) = 0 at the start)
      const float r = std::exp(m - cm);
      const __m512 vr = _mm512_set1_ps(r);
      for (int d = 0; d < hd; d += 16) _mm512_storeu_ps(acc + d, _mm512_mul_ps(_mm512_loadu_ps(acc + d), vr));
      l *= r;
      m = cm;
    }
    const __m512 vmax = _mm512_set1_ps(m);
    __m512 vl = _mm512_setzero_ps();
    for (j = 0; j < cn16; j += 16) {
      const __m512 p = exp_neg(_mm512_sub_ps(_mm512_load_ps(s + j), vmax));
      _mm512_store_ps(s + j, p);
      vl = _mm512_add_ps(vl, p);
    }
    l += hsum8(fold(vl));
    accumulate(s, v + t0 * stride, stride, cn, hd, acc);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / l);
  for (int d = 0; d < hd; d += 16) _mm512_storeu_ps(out + d, _mm512_mul_ps(_mm512_loadu_ps(acc + d), inv));
}

void attn_head_f32(const float* q, const float* k, const float* v, int64_t kv_stride, int n_pos, int head_dim,
                   float scale, float* out) {
  attn_head(q, k, v, kv_stride, n_pos, head_dim, scale, out);
}

void attn_head_f16(const float* q, const uint16_t* k, const uint16_t* v, int64_t kv_stride, int n_pos, int head_dim,
                   float scale, float* out) {
  attn_head(q, k, v, kv_stride, n_pos, head_dim, scale, out);
}

#undef PLLM_AI

}  // namespace

void fill_attention_avx512(KernelTable& t) {
  t.attn_head_f32 = attn_head_f32;
  t.attn_head_f16 = attn_head_f16;
}

}  // namespace pllm::kern
