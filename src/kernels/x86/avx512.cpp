// AVX-512 (F/BW/VL) + VNNI kernels. Compiled with -mavx512f -mavx512bw -mavx512vl
// -mavx512vnni -mavx2 -mfma -mf16c; used only after dispatch.cpp has checked the CPU.
// The table given to fill_avx512 already holds the AVX2 kernels; entries not
// overridden here (the dequantisers) stay AVX2.
//
// Namespaces as in avx2.cpp (shared blocks: simd_avx512.h, AVX-512-flagged files only).
#include <immintrin.h>

#include <cstdint>

#include "kernels/drivers/fused_dot.h"
#include "kernels/internal.h"
#include "kernels/x86/simd_avx512.h"
#include "quant/blocks.h"

namespace pllm::kern {

namespace {

using avx512::h2f;
using avx512::unpack_k4_scales;
inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }
inline __m512i combine(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
inline __m512 scales2(float lo, float hi) { return _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(lo), _mm512_set1_ps(hi)); }

// 16 packed bytes -> 32 bytes: low nibbles (elements 0..15) then high nibbles.
inline __m256i nibbles32(const uint8_t* p) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0F));
}

// ------------------------------------------------------------ activation quantisers
// 16 floats * id -> 16 int8 (round half to even; |values| <= 127 by construction).
inline __m512i quant16(const float* x, __m512 id, int8_t* q) {
  const __m512i i = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x), id));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtsepi32_epi8(i));
  return i;
}

inline float amax32(const float* x) {
  return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x)), _mm512_abs_ps(_mm512_loadu_ps(x + 16))));
}

void quantize_act_q8_0(const float* x, void* xq, int64_t n) {
  block_q8_0* y = static_cast<block_q8_0*>(xq);
  for (int64_t b = 0; b < n / QK8_0; ++b, x += QK8_0) {
    const float d = amax32(x) / 127.0f;
    const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    quant16(x, id, y[b].qs);
    quant16(x + 16, id, y[b].qs + 16);
  }
}

void quantize_act_q8_1(const float* x, void* xq, int64_t n) {
  block_q8_1* y = static_cast<block_q8_1*>(xq);
  for (int64_t b = 0; b < n / QK8_1; ++b, x += QK8_1) {
    const float d = amax32(x) / 127.0f;
    const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    const __m512i s = _mm512_add_epi32(quant16(x, id, y[b].qs), quant16(x + 16, id, y[b].qs + 16));
    y[b].d = d;
    y[b].s = d * static_cast<float>(_mm512_reduce_add_epi32(s));
  }
}

void quantize_act_q8_K(const float* x, void* xq, int64_t n) {
  block_q8_K* y = static_cast<block_q8_K*>(xq);
  for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    __m512 m = _mm512_setzero_ps();
    for (int j = 0; j < QK_K; j += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + j)));
    const float d = _mm512_reduce_max_ps(m) / 127.0f;
    const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    for (int g = 0; g < QK_K / 16; ++g) {
      y[b].bsums[g] = static_cast<int16_t>(_mm512_reduce_add_epi32(quant16(x + 16 * g, id, y[b].qs + 16 * g)));
    }
    y[b].d = d;
  }
}

// ------------------------------------------------------------ quantised dots
// Q4_0: sum (q - 8) a = dpbusd(q, a) - dpbusd(8, a)   (q unsigned nibble, a signed).
float vec_dot_q4_0(int64_t n, const void* w_row, const void* xq) {
  const block_q4_0* w = static_cast<const block_q4_0*>(w_row);
  const block_q8_0* a = static_cast<const block_q8_0*>(xq);
  const int64_t nb = n / QK4_0;
  const __m512i eight = _mm512_set1_epi8(8), zero = _mm512_setzero_si512();
  __m512 acc = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    const __m512i q = combine(nibbles32(w[b].qs), nibbles32(w[b + 1].qs));
    const __m512i y = combine(load256(a[b].qs), load256(a[b + 1].qs));
    const __m512i p = _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, q, y), _mm512_dpbusd_epi32(zero, eight, y));
    const __m512 d = scales2(h2f(w[b].d) * h2f(a[b].d), h2f(w[b + 1].d) * h2f(a[b + 1].d));
    acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(p), acc);
  }
  if (b < nb) {  // odd block out: upper halves zero, contributing nothing
    const __m512i q = _mm512_zextsi256_si512(nibbles32(w[b].qs));
    const __m512i y = _mm512_zextsi256_si512(load256(a[b].qs));
    const __m512i p = _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, q, y), _mm512_dpbusd_epi32(zero, eight, y));
    acc = _mm512_fmadd_ps(scales2(h2f(w[b].d) * h2f(a[b].d), 0.0f), _mm512_cvtepi32_ps(p), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

float vec_dot_q4_1(int64_t n, const void* w_row, const void* xq) {
  const block_q4_1* w = static_cast<const block_q4_1*>(w_row);
  const block_q8_1* a = static_cast<const block_q8_1*>(xq);
  const int64_t nb = n / QK4_1;
  const __m512i zero = _mm512_setzero_si512();
  __m512 acc = _mm512_setzero_ps();
  float summ = 0.0f;
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    const __m512i q = combine(nibbles32(w[b].qs), nibbles32(w[b + 1].qs));
    const __m512i y = combine(load256(a[b].qs), load256(a[b + 1].qs));
    const __m512 d = scales2(h2f(w[b].d) * a[b].d, h2f(w[b + 1].d) * a[b + 1].d);
    acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, q, y)), acc);
    summ += h2f(w[b].m) * a[b].s + h2f(w[b + 1].m) * a[b + 1].s;
  }
  if (b < nb) {
    const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), nibbles32(w[b].qs), load256(a[b].qs));
    const __m512 d = scales2(h2f(w[b].d) * a[b].d, 0.0f);
    acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_zextsi256_si512(p)), acc);
    summ += h2f(w[b].m) * a[b].s;
  }
  return _mm512_reduce_add_ps(acc) + summ;
}

// The fifth-bit words of two Q5 blocks as one 64-bit mask (bit j: element j of the pair).
inline __mmask64 q5_mask2(const uint8_t* qh0, const uint8_t* qh1) {
  uint32_t h0, h1 = 0;
  __builtin_memcpy(&h0, qh0, 4);
  if (qh1) __builtin_memcpy(&h1, qh1, 4);
  return static_cast<__mmask64>(h0) | (static_cast<__mmask64>(h1) << 32);
}

// Q5_0: with q the unsigned 5-bit value, sum (q - 16) a = dpbusd(q, a) - dpbusd(16, a).
float vec_dot_q5_0(int64_t n, const void* w_row, const void* xq) {
  const block_q5_0* w = static_cast<const block_q5_0*>(w_row);
  const block_q8_0* a = static_cast<const block_q8_0*>(xq);
  const int64_t nb = n / QK5_0;
  const __m512i sixteen = _mm512_set1_epi8(16), zero = _mm512_setzero_si512();
  __m512 acc = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    const __m512i lo = combine(nibbles32(w[b].qs), nibbles32(w[b + 1].qs));
    const __m512i q = _mm512_or_si512(lo, _mm512_maskz_mov_epi8(q5_mask2(w[b].qh, w[b + 1].qh), sixteen));
    const __m512i y = combine(load256(a[b].qs), load256(a[b + 1].qs));
    const __m512i p = _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, q, y), _mm512_dpbusd_epi32(zero, sixteen, y));
    const __m512 d = scales2(h2f(w[b].d) * h2f(a[b].d), h2f(w[b + 1].d) * h2f(a[b + 1].d));
    acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(p), acc);
  }
  if (b < nb) {  // odd block out: upper halves zero, contributing nothing
    const __m512i lo = _mm512_zextsi256_si512(nibbles32(w[b].qs));
    const __m512i q = _mm512_or_si512(lo, _mm512_maskz_mov_epi8(q5_mask2(w[b].qh, nullptr), sixteen));
    const __m512i y = _mm512_zextsi256_si512(load256(a[b].qs));
    const __m512i p = _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, q, y), _mm512_dpbusd_epi32(zero, sixteen, y));
    acc = _mm512_fmadd_ps(scales2(h2f(w[b].d) * h2f(a[b].d), 0.0f), _mm512_cvtepi32_ps(p), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

float vec_dot_q5_1(int64_t n, const void* w_row, const void* xq) {
  const block_q5_1* w = static_cast<const block_q5_1*>(w_row);
  const block_q8_1* a = static_cast<const block_q8_1*>(xq);
  const int64_t nb = n / QK5_1;
  const __m512i sixteen = _mm512_set1_epi8(16), zero = _mm512_setzero_si512();
  __m512 acc = _mm512_setzero_ps();
  float summ = 0.0f;
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    const __m512i lo = combine(nibbles32(w[b].qs), nibbles32(w[b + 1].qs));
    const __m512i q = _mm512_or_si512(lo, _mm512_maskz_mov_epi8(q5_mask2(w[b].qh, w[b + 1].qh), sixteen));
    const __m512i y = combine(load256(a[b].qs), load256(a[b + 1].qs));
    const __m512 d = scales2(h2f(w[b].d) * a[b].d, h2f(w[b + 1].d) * a[b + 1].d);
    acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, q, y)), acc);
    summ += h2f(w[b].m) * a[b].s + h2f(w[b + 1].m) * a[b + 1].s;
  }
  if (b < nb) {
    const __m512i lo = _mm512_zextsi256_si512(nibbles32(w[b].qs));
    const __m512i q = _mm512_or_si512(lo, _mm512_maskz_mov_epi8(q5_mask2(w[b].qh, nullptr), sixteen));
    const __m512i y = _mm512_zextsi256_si512(load256(a[b].qs));
    const __m512 d = scales2(h2f(w[b].d) * a[b].d, 0.0f);
    acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, q, y)), acc);
    summ += h2f(w[b].m) * a[b].s;
  }
  return _mm512_reduce_add_ps(acc) + summ;
}

// Q8_0: sum w a = dpbusd(w + 128, a) - dpbusd(128, a)   (w + 128 as unsigned byte).
float vec_dot_q8_0(int64_t n, const void* w_row, const void* xq) {
  const block_q8_0* w = static_cast<const block_q8_0*>(w_row);
  const block_q8_0* a = static_cast<const block_q8_0*>(xq);
  const int64_t nb = n / QK8_0;
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80)), zero = _mm512_setzero_si512();
  __m512 acc = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    const __m512i q = _mm512_xor_si512(combine(load256(w[b].qs), load256(w[b + 1].qs)), bias);
    const __m512i y = combine(load256(a[b].qs), load256(a[b + 1].qs));
    const __m512i p = _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, q, y), _mm512_dpbusd_epi32(zero, bias, y));
    const __m512 d = scales2(h2f(w[b].d) * h2f(a[b].d), h2f(w[b + 1].d) * h2f(a[b + 1].d));
    acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(p), acc);
  }
  if (b < nb) {
    const __m512i q = _mm512_xor_si512(_mm512_zextsi256_si512(load256(w[b].qs)), bias);
    const __m512i y = _mm512_zextsi256_si512(load256(a[b].qs));  // upper zeros contribute 0
    const __m512i p = _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, q, y), _mm512_dpbusd_epi32(zero, bias, y));
    acc = _mm512_fmadd_ps(scales2(h2f(w[b].d) * h2f(a[b].d), 0.0f), _mm512_cvtepi32_ps(p), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

// i16 lane k of the result = src16[idx_base[k] + add]
inline __m512i spread16(__m512i src16, __m512i idx_base, int add) {
  return _mm512_permutexvar_epi16(_mm512_add_epi16(idx_base, _mm512_set1_epi16(static_cast<short>(add))), src16);
}

float vec_dot_q4_K(int64_t n, const void* w_row, const void* xq) {
  const block_q4_K* w = static_cast<const block_q4_K*>(w_row);
  const block_q8_K* a = static_cast<const block_q8_K*>(xq);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  // i16 lanes 0..15 -> sub-block 2p, lanes 16..31 -> sub-block 2p+1
  const __m512i idx = _mm512_set_epi16(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  __m512 acc = _mm512_setzero_ps();
  __m256 accm = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / QK_K; ++b) {
    alignas(16) uint8_t sm[16];
    unpack_k4_scales(w[b].scales, sm);
    const __m128i sm8 = _mm_load_si128(reinterpret_cast<const __m128i*>(sm));
    const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(sm8));  // lanes 0..7 scales, 8..15 mins
    const float d = h2f(w[b].d) * a[b].d;
    const float dmin = h2f(w[b].dmin) * a[b].d;
    const __m128i m16 = _mm_cvtepu8_epi16(_mm_srli_si128(sm8, 8));
    const __m256i mins = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
    accm = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(_mm256_madd_epi16(load256(a[b].bsums), mins)), accm);
    __m512i sumi = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
      const __m256i q4 = load256(w[b].qs + 32 * p);
      const __m512i q = _mm512_and_si512(combine(q4, _mm256_srli_epi16(q4, 4)), m4);
      const __m512i prod = _mm512_maddubs_epi16(q, load512(a[b].qs + 64 * p));
      sumi = _mm512_dpwssd_epi32(sumi, prod, spread16(sc16, idx, 2 * p));
    }
    acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
  }
  return _mm512_reduce_add_ps(acc) - _mm512_reduce_add_ps(_mm512_zextps256_ps512(accm));
}

float vec_dot_q6_K(int64_t n, const void* w_row, const void* xq) {
  const block_q6_K* w = static_cast<const block_q6_K*>(w_row);
  const block_q8_K* a = static_cast<const block_q8_K*>(xq);
  const __m512i m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(0x03), m30 = _mm512_set1_epi8(0x30);
  // i16 lane k covers elements 2k, 2k+1 of a 64-element span: scale index k / 8
  const __m512i idx = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < n / QK_K; ++b) {
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales));
    const __m256i sc16_256 = _mm256_cvtepi8_epi16(sc8);
    const __m512i sc16 = _mm512_castsi256_si512(sc16_256);
    // quants are stored +32: subtract 32 * sum_g sc_g * bsums_g
    const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(load256(a[b].bsums), sc16_256), 5);
    __m512i sumi = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_zextsi256_si512(corr));
    for (int h = 0; h < 2; ++h) {
      const __m256i qh = load256(w[b].qh + 32 * h);
      const __m512i L = combine(load256(w[b].ql + 64 * h), load256(w[b].ql + 64 * h + 32));
      const __m512i H = combine(qh, _mm256_srli_epi16(qh, 2));
      const __m512i q01 = _mm512_or_si512(_mm512_and_si512(L, m4), _mm512_slli_epi16(_mm512_and_si512(H, m3), 4));
      const __m512i q23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), m4), _mm512_and_si512(H, m30));
      const __m512i p01 = _mm512_maddubs_epi16(q01, load512(a[b].qs + 128 * h));
      const __m512i p23 = _mm512_maddubs_epi16(q23, load512(a[b].qs + 128 * h + 64));
      sumi = _mm512_dpwssd_epi32(sumi, p01, spread16(sc16, idx, 8 * h));
      sumi = _mm512_dpwssd_epi32(sumi, p23, spread16(sc16, idx, 8 * h + 4));
    }
    acc = _mm512_fmadd_ps(_mm512_set1_ps(h2f(w[b].d) * a[b].d), _mm512_cvtepi32_ps(sumi), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

// ------------------------------------------------------------ float dots
// Four 16-lane accumulators; the tail uses masked loads (so >= 16 lanes throughout).
template <class Load>
inline float dot_f32_generic(const float* x, int64_t n, Load load) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_fmadd_ps(load(i, 0xFFFF), _mm512_loadu_ps(x + i), a0);
    a1 = _mm512_fmadd_ps(load(i + 16, 0xFFFF), _mm512_loadu_ps(x + i + 16), a1);
    a2 = _mm512_fmadd_ps(load(i + 32, 0xFFFF), _mm512_loadu_ps(x + i + 32), a2);
    a3 = _mm512_fmadd_ps(load(i + 48, 0xFFFF), _mm512_loadu_ps(x + i + 48), a3);
  }
  for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(load(i, 0xFFFF), _mm512_loadu_ps(x + i), a0);
  if (i < n) {
    const __mmask16 k = static_cast<__mmask16>((1u << (n - i)) - 1);
    a1 = _mm512_fmadd_ps(load(i, k), _mm512_maskz_loadu_ps(k, x + i), a1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

float dot_f32(const float* a, const float* b, int64_t n) {
  return dot_f32_generic(b, n, [a](int64_t i, __mmask16 k) { return _mm512_maskz_loadu_ps(k, a + i); });
}

float vec_dot_f32(int64_t n, const void* w, const void* xq) {
  return dot_f32(static_cast<const float*>(w), static_cast<const float*>(xq), n);
}

float vec_dot_f16(int64_t n, const void* w_row, const void* xq) {
  const uint16_t* w = static_cast<const uint16_t*>(w_row);
  return dot_f32_generic(static_cast<const float*>(xq), n, [w](int64_t i, __mmask16 k) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, w + i));
  });
}

float vec_dot_bf16(int64_t n, const void* w_row, const void* xq) {
  const uint16_t* w = static_cast<const uint16_t*>(w_row);
  return dot_f32_generic(static_cast<const float*>(xq), n, [w](int64_t i, __mmask16 k) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, w + i)), 16));
  });
}


// ------------------------------------------------------------ exact mode, 512-bit variant
// Same scheme as avx2.cpp (decoded weights bit-identical to dequantize_row, >= 8
// lanes per row) with 16-lane registers: a 32-element unit is two __m512, each row
// gets A = 2 (NX <= 4) or 1 accumulator of 16 lanes. Measured on Zen 4 (512-bit ops
// split in two) against the AVX2 kernels with bench/kernels; only installed where it
// is faster (fill_avx512).

PLLM_AI __m512i zx16(const uint8_t* p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// Decoder interface of drivers/fused_dot.h: one unit per block, decoded in unit(); no tail.
struct Dec512 {
  static constexpr int kUnits = 1;
  int64_t b = 0;
  PLLM_AI void block(int64_t blk) { b = blk; }
  void tail(int64_t, float*) const {}
};

struct Dec512Q4_0 : Dec512 {
  const block_q4_0* w;
  explicit Dec512Q4_0(const void* row) : w(static_cast<const block_q4_0*>(row)) {}
  PLLM_AI void unit(int, __m512 v[2]) {
    const float df = h2f(w[b].d);
    const __m512 d = _mm512_set1_ps(df), m8d = _mm512_set1_ps(-8.0f * df);
    const __m512i a = zx16(w[b].qs);
    v[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(a, _mm512_set1_epi32(0x0F))), d, m8d);
    v[1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(a, 4)), d, m8d);
  }
};

struct Dec512Q4_1 : Dec512 {
  const block_q4_1* w;
  explicit Dec512Q4_1(const void* row) : w(static_cast<const block_q4_1*>(row)) {}
  PLLM_AI void unit(int, __m512 v[2]) {
    const __m512 d = _mm512_set1_ps(h2f(w[b].d)), m = _mm512_set1_ps(h2f(w[b].m));
    const __m512i a = zx16(w[b].qs);
    v[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(a, _mm512_set1_epi32(0x0F))), d, m);
    v[1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(a, 4)), d, m);
  }
};

// Q5: elements 0..15 are the low nibbles of qs with bits 0..15 of the word qh as their
// fifth bit, elements 16..31 the high nibbles with bits 16..31.
PLLM_AI void q5_units(const uint8_t* qs, const uint8_t* qh, __m512i u[2]) {
  uint32_t h;
  __builtin_memcpy(&h, qh, 4);
  const __m512i a = zx16(qs), sixteen = _mm512_set1_epi32(16);
  u[0] = _mm512_or_si512(_mm512_and_si512(a, _mm512_set1_epi32(0x0F)),
                         _mm512_maskz_mov_epi32(static_cast<__mmask16>(h & 0xFFFF), sixteen));
  u[1] = _mm512_or_si512(_mm512_srli_epi32(a, 4), _mm512_maskz_mov_epi32(static_cast<__mmask16>(h >> 16), sixteen));
}

struct Dec512Q5_0 : Dec512 {  // fma(q, d, -16d) is the exact (q - 16) * d, as the reference's product
  const block_q5_0* w;
  explicit Dec512Q5_0(const void* row) : w(static_cast<const block_q5_0*>(row)) {}
  PLLM_AI void unit(int, __m512 v[2]) {
    const float df = h2f(w[b].d);
    const __m512 d = _mm512_set1_ps(df), m16d = _mm512_set1_ps(-16.0f * df);
    __m512i u[2];
    q5_units(w[b].qs, w[b].qh, u);
    v[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(u[0]), d, m16d);
    v[1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(u[1]), d, m16d);
  }
};

struct Dec512Q5_1 : Dec512 {
  const block_q5_1* w;
  explicit Dec512Q5_1(const void* row) : w(static_cast<const block_q5_1*>(row)) {}
  PLLM_AI void unit(int, __m512 v[2]) {
    const __m512 d = _mm512_set1_ps(h2f(w[b].d)), m = _mm512_set1_ps(h2f(w[b].m));
    __m512i u[2];
    q5_units(w[b].qs, w[b].qh, u);
    v[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(u[0]), d, m);
    v[1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(u[1]), d, m);
  }
};

struct Dec512Q8_0 : Dec512 {
  const block_q8_0* w;
  explicit Dec512Q8_0(const void* row) : w(static_cast<const block_q8_0*>(row)) {}
  PLLM_AI void unit(int, __m512 v[2]) {
    const __m512 d = _mm512_set1_ps(h2f(w[b].d));
    for (int k = 0; k < 2; ++k) {
      const __m512i i = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].qs + 16 * k)));
      v[k] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(i));
    }
  }
};

}  // namespace

void fill_avx512(KernelTable& t) {
  auto at = [&t](TensorType type) -> TypeKernels& { return t.types[static_cast<uint32_t>(type) & 31]; };
  // Exact mode: 512-bit for the 32-block types (measured equal to ~15% faster than
  // the AVX2 kernels on Zen 4, bench/kernels); the K-quants and float types keep AVX2.
  drivers::set_exact<avx512::F32x16, Dec512Q4_0>(at(TensorType::Q4_0));
  drivers::set_exact<avx512::F32x16, Dec512Q4_1>(at(TensorType::Q4_1));
  drivers::set_exact<avx512::F32x16, Dec512Q5_0>(at(TensorType::Q5_0));
  drivers::set_exact<avx512::F32x16, Dec512Q5_1>(at(TensorType::Q5_1));
  drivers::set_exact<avx512::F32x16, Dec512Q8_0>(at(TensorType::Q8_0));
  at(TensorType::F32).vec_dot = vec_dot_f32;
  at(TensorType::F16).vec_dot = vec_dot_f16;
  at(TensorType::BF16).vec_dot = vec_dot_bf16;
  at(TensorType::Q4_0).quantize_act = quantize_act_q8_0;
  at(TensorType::Q4_0).vec_dot = vec_dot_q4_0;
  at(TensorType::Q4_1).quantize_act = quantize_act_q8_1;
  at(TensorType::Q4_1).vec_dot = vec_dot_q4_1;
  at(TensorType::Q5_0).quantize_act = quantize_act_q8_0;
  at(TensorType::Q5_0).vec_dot = vec_dot_q5_0;
  at(TensorType::Q5_1).quantize_act = quantize_act_q8_1;
  at(TensorType::Q5_1).vec_dot = vec_dot_q5_1;
  at(TensorType::Q8_0).quantize_act = quantize_act_q8_0;
  at(TensorType::Q8_0).vec_dot = vec_dot_q8_0;
  at(TensorType::Q4_K).quantize_act = quantize_act_q8_K;
  at(TensorType::Q4_K).vec_dot = vec_dot_q4_K;
  at(TensorType::Q6_K).quantize_act = quantize_act_q8_K;
  at(TensorType::Q6_K).vec_dot = vec_dot_q6_K;
}

}  // namespace pllm::kern
