// AVX2 + FMA (+ F16C for the fp16 cache) attention kernels: one query head over
// n_pos cached positions, single pass with an online softmax updated once per
// chunk of kChunk positions (see KernelTable::attn_head_f32).
//
// Per chunk: (1) scores, four positions at a time, each with two 8-lane FMA
// accumulators (16 partial sums per dot) and one shuffle-reduction for all four;
// (2) the chunk maximum; if it raises the running maximum m, the accumulator and
// the running sum l are rescaled once by exp(m_old - m_new); (3) p = exp(s - m),
// vectorised (Cephes-style polynomial, |rel err| <~ 2^-22); (4) acc += p_t * v_t,
// in blocks of 32 output dims (4 registers) x two positions, so eight independent
// FMA chains, each v element read exactly once. No heap allocation.
//
// As in avx2.cpp: anonymous namespace only, no shared inline functions (a helper
// compiled with AVX2 flags must not be merged into a generic translation unit).
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/internal.h"

namespace pllm::kern {

namespace {

#define PLLM_AI inline __attribute__((always_inline))

constexpr int kChunk = 64;  // positions per online-softmax step (multiple of 8)

PLLM_AI __m256 ld8(const float* p) { return _mm256_loadu_ps(p); }
PLLM_AI __m256 ld8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

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

PLLM_AI float hsum(__m256 a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// {hsum(a0), hsum(a1), hsum(a2), hsum(a3)}
PLLM_AI __m128 hsum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

// Dots of q with four consecutive positions (k0, k0 + stride, ...).
template <class T>
PLLM_AI __m128 dot4(const float* q, const T* k0, int64_t stride, int hd) {
  const T* k1 = k0 + stride;
  const T* k2 = k1 + stride;
  const T* k3 = k2 + stride;
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
  for (int d = 0; d < hd; d += 16) {
    const __m256 qa = _mm256_loadu_ps(q + d), qb = _mm256_loadu_ps(q + d + 8);
    a0 = _mm256_fmadd_ps(qa, ld8(k0 + d), a0);
    b0 = _mm256_fmadd_ps(qb, ld8(k0 + d + 8), b0);
    a1 = _mm256_fmadd_ps(qa, ld8(k1 + d), a1);
    b1 = _mm256_fmadd_ps(qb, ld8(k1 + d + 8), b1);
    a2 = _mm256_fmadd_ps(qa, ld8(k2 + d), a2);
    b2 = _mm256_fmadd_ps(qb, ld8(k2 + d + 8), b2);
    a3 = _mm256_fmadd_ps(qa, ld8(k3 + d), a3);
    b3 = _mm256_fmadd_ps(qb, ld8(k3 + d + 8), b3);
  }
  return hsum4(_mm256_add_ps(a0, b0), _mm256_add_ps(a1, b1), _mm256_add_ps(a2, b2), _mm256_add_ps(a3, b3));
}

template <class T>
PLLM_AI float dot1(const float* q, const T* k, int hd) {
  __m256 a = _mm256_setzero_ps(), b = a;
  for (int d = 0; d < hd; d += 16) {
    a = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), ld8(k + d), a);
    b = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 8), ld8(k + d + 8), b);
  }
  return hsum(_mm256_add_ps(a, b));
}

// acc[0..hd) += sum_{j < cn} p[j] * v[j * stride + .]
template <class T>
PLLM_AI void accumulate(const float* p, const T* v, int64_t stride, int cn, int hd, float* acc) {
  int d = 0;
  for (; d + 32 <= hd; d += 32) {
    __m256 x0 = _mm256_loadu_ps(acc + d), x1 = _mm256_loadu_ps(acc + d + 8);
    __m256 x2 = _mm256_loadu_ps(acc + d + 16), x3 = _mm256_loadu_ps(acc + d + 24);
    __m256 y0 = _mm256_setzero_ps(), y1 = y0, y2 = y0, y3 = y0;
    const T* vt = v + d;
    int j = 0;
    for (; j + 2 <= cn; j += 2, vt += 2 * stride) {
      const __m256 p0 = _mm256_broadcast_ss(p + j), p1 = _mm256_broadcast_ss(p + j + 1);
      x0 = _mm256_fmadd_ps(p0, ld8(vt), x0);
      x1 = _mm256_fmadd_ps(p0, ld8(vt + 8), x1);
      x2 = _mm256_fmadd_ps(p0, ld8(vt + 16), x2);
      x3 = _mm256_fmadd_ps(p0, ld8(vt + 24), x3);
      y0 = _mm256_fmadd_ps(p1, ld8(vt + stride), y0);
      y1 = _mm256_fmadd_ps(p1, ld8(vt + stride + 8), y1);
      y2 = _mm256_fmadd_ps(p1, ld8(vt + stride + 16), y2);
      y3 = _mm256_fmadd_ps(p1, ld8(vt + stride + 24), y3);
    }
    if (j < cn) {
      const __m256 p0 = _mm256_broadcast_ss(p + j);
      x0 = _mm256_fmadd_ps(p0, ld8(vt), x0);
      x1 = _mm256_fmadd_ps(p0, ld8(vt + 8), x1);
      x2 = _mm256_fmadd_ps(p0, ld8(vt + 16), x2);
      x3 = _mm256_fmadd_ps(p0, ld8(vt + 24), x3);
    }
    _mm256_storeu_ps(acc + d, _mm256_add_ps(x0, y0));
    _mm256_storeu_ps(acc + d + 8, _mm256_add_ps(x1, y1));
    _mm256_storeu_ps(acc + d + 16, _mm256_add_ps(x2, y2));
    _mm256_storeu_ps(acc + d + 24, _mm256_add_ps(x3, y3));
  }
  if (d < hd) {  // hd % 32 == 16
    __m256 x0 = _mm256_loadu_ps(acc + d), x1 = _mm256_loadu_ps(acc + d + 8);
    __m256 y0 = _mm256_setzero_ps(), y1 = y0;
    const T* vt = v + d;
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

template <class T>
void attn_head(const float* q, const T* k, const T* v, int64_t stride, int n_pos, int hd, float scale, float* out) {
  if (n_pos <= 0) {
    for (int d = 0; d < hd; ++d) out[d] = 0.0f;
    return;
  }
  alignas(32) float acc[256];
  alignas(32) float s[kChunk];
  for (int d = 0; d < hd; d += 8) _mm256_storeu_ps(acc + d, _mm256_setzero_ps());
  const __m128 vscale = _mm_set1_ps(scale);
  float m = -INFINITY, l = 0.0f;
  for (int t0 = 0; t0 < n_pos; t0 += kChunk) {
    const int cn = n_pos - t0 < kChunk ? n_pos - t0 : kChunk;
    const int cn8 = (cn + 7) & ~7;
    const T* kc = k + t0 * stride;
    int j = 0;
    for (; j + 4 <= cn; j += 4) _mm_store_ps(s + j, _mm_mul_ps(dot4(q, kc + j * stride, stride, hd), vscale));
    for (; j < cn; ++j) s[j] = dot1(q, kc + j * stride, hd) * scale;
    for (; j < cn8; ++j) s[j] = -INFINITY;  // padding: exp_neg gives 0

    __m256 vm = _mm256_load_ps(s);
    for (j = 8; j < cn8; j += 8) vm = _mm256_max_ps(vm, _mm256_load_ps(s + j));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vm), _mm256_extractf128_ps(vm, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float cm = _mm_cvtss_f32(m4);
    if (cm > m) {  // new running maximum: rescale once per chunk (exp(-inf) = 0 at the start)
      const float r = std::exp(m - cm);
      const __m256 vr = _mm256_set1_ps(r);
      for (int d = 0; d < hd; d += 8) _mm256_storeu_ps(acc + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), vr));
      l *= r;
      m = cm;
    }
    const __m256 vmax = _mm256_set1_ps(m);
    __m256 vl = _mm256_setzero_ps();
    for (j = 0; j < cn8; j += 8) {
      const __m256 p = exp_neg(_mm256_sub_ps(_mm256_load_ps(s + j), vmax));
      _mm256_store_ps(s + j, p);
      vl = _mm256_add_ps(vl, p);
    }
    l += hsum(vl);
    accumulate(s, v + t0 * stride, stride, cn, hd, acc);
  }
  const __m256 inv = _mm256_set1_ps(1.0f / l);
  for (int d = 0; d < hd; d += 8) _mm256_storeu_ps(out + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), inv));
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

void fill_attention_avx2(KernelTable& t) {
  t.attn_head_f32 = attn_head_f32;
  t.attn_head_f16 = attn_head_f16;
}

}  // namespace pllm::kern
