// AVX2 + FMA + F16C building blocks shared by the AVX2 translation units (avx2.cpp,
// f16act_avx2.cpp, rows_avx2.cpp, attention_kv_avx2.cpp, the int16 files), in namespace
// pllm::kern::avx2. Include ONLY from files built with exactly the AVX2 flags (-mavx2 -mfma
// -mf16c, see CMakeLists.txt), or those plus -mavxvnni (x86/i16*_avxvnni.cpp): every copy of
// these inline functions must be the same machine code, and none may be compiled with other
// -m flags (the linker keeps one copy for all users). The two flag sets therefore get distinct
// inline namespaces: a file built with -mavxvnni defines other entities (other symbols), which
// the linker cannot substitute for the AVX2 files' on a CPU without AVX-VNNI.
#pragma once
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__) || defined(__AVX512F__)
#error "x86/simd_avx2.h: include only from translation units built with the AVX2 flags"
#endif
#include <immintrin.h>

#include <cstdint>

#include "kernels/k4_scales.h"

#define PLLM_AI inline __attribute__((always_inline))

#if defined(__AVXVNNI__)
#define PLLM_AVX2_FLAGS flags_avx2_vnni
#else
#define PLLM_AVX2_FLAGS flags_avx2
#endif

namespace pllm::kern::avx2 {
inline namespace PLLM_AVX2_FLAGS {

PLLM_AI float h2f(uint16_t h) { return _cvtsh_ss(h); }

PLLM_AI float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
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

// An fp16 scale broadcast to 8 f32 lanes: a 16-bit broadcast load and one conversion (the
// same value as _mm256_set1_ps(h2f(h)), in 2 instructions instead of 4 per block).
PLLM_AI __m256 bcast_h(const uint16_t& h) {
  return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(h)));
}

// 8 bytes -> 8 int32 lanes (zero-extended).
PLLM_AI __m256i zx8(const uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }

PLLM_AI __m256 load_bf16(const uint16_t* p) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

using kern::unpack_k4_scales;  // k4_scales.h

// Vector traits for the shared drivers (kernels/drivers/*.h): 8 f32 lanes.
struct F32x8 {
  using V = __m256;
  static constexpr int kLanes = 8;
  // Accumulators per activation row in fused_dot: 4, 2, 1 for NX <= 2, <= 4, <= 8 (16 registers).
  static constexpr int accs(int nx) { return nx <= 2 ? 4 : nx <= 4 ? 2 : 1; }
  // Weight rows per register tile in drivers/exact_tile.h: one (FMAs read activations from
  // memory; see there).
  static constexpr int tile_rows(int) { return 1; }
  // Register tile of drivers/exact_gemm.h: 3 weight rows x 3 activation rows (9 accumulators
  // + 3 weight vectors + 1 activation vector of the 16 registers).
  static constexpr int kGemmR = 3, kGemmNX = 3;
  static PLLM_AI float h2f(uint16_t h) { return avx2::h2f(h); }
  static PLLM_AI V zero() { return _mm256_setzero_ps(); }
  static PLLM_AI V set1(float x) { return _mm256_set1_ps(x); }
  static PLLM_AI V load(const float* p) { return _mm256_loadu_ps(p); }
  static PLLM_AI V load(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static PLLM_AI void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static PLLM_AI V add(V a, V b) { return _mm256_add_ps(a, b); }
  static PLLM_AI V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static PLLM_AI V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static PLLM_AI V max(V a, V b) { return _mm256_max_ps(a, b); }
  static PLLM_AI V fma(V acc, V a, V b) { return _mm256_fmadd_ps(a, b, acc); }
  static PLLM_AI float hsum(V v) { return avx2::hsum(v); }
  static PLLM_AI float hmax(V v) { return avx2::hmax(v); }
};

}  // namespace PLLM_AVX2_FLAGS
}  // namespace pllm::kern::avx2
