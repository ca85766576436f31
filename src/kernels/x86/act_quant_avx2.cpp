// Activation quantisers with AVX2 + F16C (TypeKernels::quantize_act, quantize_act_static)
// for the int8 formats q8_0, q8_1 and q8_K; used by both x86 tables (the AVX-512 table
// replaces the dynamic ones). Compiled with the avx2.cpp flags and, as there, only
// anonymous-namespace helpers: no inline function shared with generic code.
#include <immintrin.h>

#include <cstdint>

#include "kernels/internal.h"
#include "quant/blocks.h"

namespace pllm::kern {

namespace {

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// Quantise 32 floats with multiplier id (round half to even) into 32 int8; returns
// the four i32 vectors' sum in *sum when non-null.
inline void quant32(const float* x, __m256 id, int8_t* q, int* sum) {
  __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), id));
  __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), id));
  __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), id));
  __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), id));
  if (sum) *sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)));
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
  const __m256i r = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), r);
}

inline float amax32(const float* x) {
  __m256 m = _mm256_max_ps(abs_ps(_mm256_loadu_ps(x)), abs_ps(_mm256_loadu_ps(x + 8)));
  m = _mm256_max_ps(m, _mm256_max_ps(abs_ps(_mm256_loadu_ps(x + 16)), abs_ps(_mm256_loadu_ps(x + 24))));
  return hmax(m);
}

void quantize_act_q8_0(const float* x, void* xq, int64_t n) {
  block_q8_0* y = static_cast<block_q8_0*>(xq);
  for (int64_t b = 0; b < n / QK8_0; ++b, x += QK8_0) {
    const float d = amax32(x) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    quant32(x, _mm256_set1_ps(id), y[b].qs, nullptr);
  }
}

void quantize_act_q8_1(const float* x, void* xq, int64_t n) {
  block_q8_1* y = static_cast<block_q8_1*>(xq);
  for (int64_t b = 0; b < n / QK8_1; ++b, x += QK8_1) {
    const float d = amax32(x) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int sum;
    quant32(x, _mm256_set1_ps(id), y[b].qs, &sum);
    y[b].d = d;
    y[b].s = d * static_cast<float>(sum);
  }
}

void quantize_act_q8_K(const float* x, void* xq, int64_t n) {
  block_q8_K* y = static_cast<block_q8_K*>(xq);
  for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < QK_K; j += 8) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + j)));
    const float d = hmax(m) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    for (int j = 0; j < QK_K / 32; ++j) quant32(x + 32 * j, vid, y[b].qs + 32 * j, nullptr);
    // bsums: widen each 16-byte group to i16 and add horizontally.
    for (int g = 0; g < QK_K / 16; g += 2) {
      const __m256i q = load256(y[b].qs + 16 * g);
      const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1));
      // s: 8 i32, lanes 0..3 = group g, lanes 4..7 = group g+1
      __m128i lo = _mm256_castsi256_si128(s), hi = _mm256_extracti128_si256(s, 1);
      __m128i h = _mm_hadd_epi32(lo, hi);  // g: h0,h1   g+1: h2,h3
      h = _mm_hadd_epi32(h, h);
      y[b].bsums[g] = static_cast<int16_t>(_mm_extract_epi32(h, 0));
      y[b].bsums[g + 1] = static_cast<int16_t>(_mm_extract_epi32(h, 1));
    }
    y[b].d = d;
  }
}

// Static scale (ref::quantize_row_q8_*_static): x * id clamped to +-127 in float before
// the conversion, so the packs never saturate and the result equals the scalar twin.
inline void quant32_static(const float* x, __m256 id, int8_t* q, int* sum) {
  const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  auto c = [&](const float* p) { return _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(p), id), lo), hi); };
  const __m256i i0 = _mm256_cvtps_epi32(c(x)), i1 = _mm256_cvtps_epi32(c(x + 8));
  const __m256i i2 = _mm256_cvtps_epi32(c(x + 16)), i3 = _mm256_cvtps_epi32(c(x + 24));
  if (sum) *sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)));
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
  const __m256i r = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), r);
}

void quantize_act_static_q8_0(const float* x, void* xq, int64_t n, float d) {
  block_q8_0* y = static_cast<block_q8_0*>(xq);
  const uint16_t dh = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
  const __m256 id = _mm256_set1_ps(1.0f / h2f(dh));  // the step the dot multiplies by
  for (int64_t b = 0; b < n / QK8_0; ++b, x += QK8_0) {
    y[b].d = dh;
    quant32_static(x, id, y[b].qs, nullptr);
  }
}

void quantize_act_static_q8_1(const float* x, void* xq, int64_t n, float d) {
  block_q8_1* y = static_cast<block_q8_1*>(xq);
  const __m256 id = _mm256_set1_ps(1.0f / d);
  for (int64_t b = 0; b < n / QK8_1; ++b, x += QK8_1) {
    int sum;
    quant32_static(x, id, y[b].qs, &sum);
    y[b].d = d;
    y[b].s = d * static_cast<float>(sum);
  }
}

void quantize_act_static_q8_K(const float* x, void* xq, int64_t n, float d) {
  block_q8_K* y = static_cast<block_q8_K*>(xq);
  const __m256 id = _mm256_set1_ps(1.0f / d);
  for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    for (int j = 0; j < QK_K / 32; ++j) {
      int s0;
      quant32_static(x + 32 * j, id, y[b].qs + 32 * j, &s0);
      int lo = 0;  // the first 16 of the 32: their sum apart (bsums are per 16)
      for (int l = 0; l < 16; ++l) lo += y[b].qs[32 * j + l];
      y[b].bsums[2 * j] = static_cast<int16_t>(lo);
      y[b].bsums[2 * j + 1] = static_cast<int16_t>(s0 - lo);
    }
    y[b].d = d;
  }
}

}  // namespace

void fill_act_quant_avx2(KernelTable& t) {
  for (TypeKernels& k : t.types) {
    if (!k.available) continue;
    switch (k.act_type) {
      case TensorType::Q8_0:
        k.quantize_act = quantize_act_q8_0;
        k.quantize_act_static = quantize_act_static_q8_0;
        break;
      case TensorType::Q8_1:
        k.quantize_act = quantize_act_q8_1;
        k.quantize_act_static = quantize_act_static_q8_1;
        break;
      case TensorType::Q8_K:
        k.quantize_act = quantize_act_q8_K;
        k.quantize_act_static = quantize_act_static_q8_K;
        break;
      default: break;
    }
  }
}

}  // namespace pllm::kern
