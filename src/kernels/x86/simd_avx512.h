// AVX-512 building blocks shared by the AVX-512 translation units (avx512.cpp,
// rows_avx512.cpp, attention_kv_avx512.cpp, i16act_avx512.cpp), in namespace
// pllm::kern::avx512. Include ONLY from files built with exactly the AVX-512 flags (see
// CMakeLists.txt and simd_avx2.h).
#pragma once
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || !defined(__AVX512VNNI__)
#error "x86/simd_avx512.h: include only from translation units built with the AVX-512 flags"
#endif
#include <immintrin.h>

#include <cstdint>

#include "kernels/k4_scales.h"

#define PLLM_AI inline __attribute__((always_inline))

namespace pllm::kern::avx512 {

PLLM_AI float h2f(uint16_t h) { return _cvtsh_ss(h); }

using kern::unpack_k4_scales;  // k4_scales.h

// Vector traits for the shared drivers (kernels/drivers/*.h): 16 f32 lanes.
struct F32x16 {
  using V = __m512;
  static constexpr int kLanes = 16;
  // Accumulators per activation row in fused_dot: 2 for NX <= 4, else 1 (>= 16 lanes each).
  static constexpr int accs(int nx) { return nx <= 4 ? 2 : 1; }
  // Weight rows per register tile in drivers/exact_tile.h: one, as AVX2 (memory operands).
  static constexpr int tile_rows(int) { return 1; }
  // Register tile of drivers/exact_gemm.h: 4 x 4 (16 accumulators + 5 of the 32 registers).
  static constexpr int kGemmR = 4, kGemmNX = 4;
  static PLLM_AI V zero() { return _mm512_setzero_ps(); }
  static PLLM_AI V set1(float x) { return _mm512_set1_ps(x); }
  static PLLM_AI V load(const float* p) { return _mm512_loadu_ps(p); }
  static PLLM_AI V load(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static PLLM_AI void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static PLLM_AI V add(V a, V b) { return _mm512_add_ps(a, b); }
  static PLLM_AI V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static PLLM_AI V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static PLLM_AI V max(V a, V b) { return _mm512_max_ps(a, b); }
  static PLLM_AI V fma(V acc, V a, V b) { return _mm512_fmadd_ps(a, b, acc); }
  static PLLM_AI float hsum(V v) { return _mm512_reduce_add_ps(v); }
  static PLLM_AI float hmax(V v) { return _mm512_reduce_max_ps(v); }
};

}  // namespace pllm::kern::avx512
