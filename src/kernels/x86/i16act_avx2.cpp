// int16 activations on AVX2 + FMA + F16C (KernelTable::quantize_row_q16, TypeKernels::
// vec_dot_i16act_tile and gemm_i16 for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q6_K). Used by every
// x86 table: quantize_row_q16 by all three, the tiles and GEMMs by the avx2 table (the avxvnni
// and avx512 tables replace them with their own, the same results bit for bit). Compiled with
// -mavx2 -mfma -mf16c (see simd_avx2.h). The drivers are drivers/i16_tile.h and
// drivers/i16_gemm.h; their traits and the per-type micro-kernels are in x86/i16_avx2.h.
#include <immintrin.h>

#include <cstdint>

#include "kernels/internal.h"
#include "kernels/x86/i16_avx2.h"
#include "kernels/x86/simd_avx2.h"
#include "quant/blocks.h"

namespace pllm::kern {

namespace {

// ------------------------------------------------------------------ quantize_row_q16
// Bit-identical to the scalar twin: the same f32 operations in the same order (amax by max of
// |x| where a NaN loses, as fmax; d = amax / 32767; id = 1 / d; x * id), and vcvtps2dq is the
// twin's rounding by definition (nearest even under the default MXCSR; NaN and out-of-range
// values give INT32_MIN, clamped to -32767 like every value below it).
void quantize_row_q16(const float* x, void* y, int64_t n) {
  auto* out = static_cast<block_q16*>(y);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i lo = _mm256_set1_epi32(-32767), hi = _mm256_set1_epi32(32767);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + 32 * b;
    __m256 v[4];
    // max_ps returns its second operand when either is NaN: keep the running max second.
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(xb + 8 * k);
      m = _mm256_max_ps(_mm256_and_ps(v[k], abs_mask), m);
    }
    const float amax = avx2::hmax(m);  // no NaN left: the lanes' order does not matter
    const float d = amax / 32767.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; ++k)
      q[k] = _mm256_max_epi32(_mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v[k], vid)), hi), lo);
    const __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
    // packs works within 128-bit lanes: (a0-3 b0-3 a4-7 b4-7) -> reorder the 64-bit quarters.
    const __m256i p01 = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[0], q[1]), _MM_SHUFFLE(3, 1, 2, 0));
    const __m256i p23 = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[2], q[3]), _MM_SHUFFLE(3, 1, 2, 0));
    out[b].d = d;
    out[b].sum = _mm_cvtsi128_si32(s4);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs), p01);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs + 16), p23);
  }
}

}  // namespace

void fill_i16act_avx2(KernelTable& t) {
  t.quantize_row_q16 = quantize_row_q16;
  fill_i16_tiles<S16, T256>(t);
}

}  // namespace pllm::kern
