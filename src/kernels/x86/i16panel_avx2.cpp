// int16 activations over load-time repacked 16-row panels on AVX2: the vector traits of
// drivers/i16_panels.h (two ymm per panel vector, rows 0-7 and 8-15; vpmaddwd + vpaddd against
// a broadcast activation pair) and TypeKernels::gemm_i16_panels for Q4_0, Q4_1, Q8_0 in the
// avx2 table (the avx512 table replaces them with its own). Compiled with -mavx2 -mfma -mf16c.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/drivers/i16_panels.h"
#include "kernels/internal.h"
#include "kernels/x86/simd_avx2.h"

namespace pllm::kern {

namespace {

struct P256 {
  static constexpr int kVecs = 2, kLanes = 8;
  // 8 int32 accumulators in the 16 registers (the code vectors are memory operands): 4 rows of
  // one chain per unit, or 2 rows of two halves. One or two rows split their chains so the
  // dependent vpmaddwd + vpaddd latency does not bound a decode step.
  static constexpr int tile_x(bool one) { return one ? 4 : 2; }
  static constexpr int chains(int nx) { return nx == 1 ? 4 : nx == 2 ? 2 : 1; }
  using V = __m256i;
  using VF = __m256;
  static PLLM_AI V loadb(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static PLLM_AI V ctl(const int8_t* c) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(c)); }
  static PLLM_AI V shuffle(V b, V c) { return _mm256_shuffle_epi8(b, c); }
  static PLLM_AI V low4(V w) { return _mm256_and_si256(w, _mm256_set1_epi16(0x0F)); }
  static PLLM_AI V shr4(V w) { return _mm256_srli_epi16(w, 4); }
  static PLLM_AI V sar8(V w) { return _mm256_srai_epi16(w, 8); }
  static PLLM_AI V flip(V b) { return _mm256_xor_si256(b, _mm256_set1_epi8(-128)); }
  static PLLM_AI V izero() { return _mm256_setzero_si256(); }
  static PLLM_AI V iadd(V a, V b) { return _mm256_add_epi32(a, b); }
  // The empty asm keeps each sum in order (see i16act_avx2.cpp's T256::dp).
  static PLLM_AI V dp(V acc, V w, const int16_t* a) {
    int32_t v;
    std::memcpy(&v, a, 4);
    V r = _mm256_add_epi32(acc, _mm256_madd_epi16(w, _mm256_set1_epi32(v)));
    __asm__("" : "+x"(r));
    return r;
  }
  static PLLM_AI VF zero() { return _mm256_setzero_ps(); }
  static PLLM_AI VF cvt(V v) { return _mm256_cvtepi32_ps(v); }
  static PLLM_AI VF add(VF a, VF b) { return _mm256_add_ps(a, b); }
  static PLLM_AI VF mul(VF a, VF b) { return _mm256_mul_ps(a, b); }
  static PLLM_AI VF fma(VF acc, VF a, VF b) { return _mm256_fmadd_ps(a, b, acc); }
  static PLLM_AI VF loadf(const float* p) { return _mm256_load_ps(p); }
  static PLLM_AI void storef(float* p, VF v) { _mm256_store_ps(p, v); }
  static PLLM_AI VF loadu(const float* p) { return _mm256_loadu_ps(p); }
  static PLLM_AI void storeu(float* p, VF v) { _mm256_storeu_ps(p, v); }
  static PLLM_AI VF bcast(float f) { return _mm256_set1_ps(f); }
  static PLLM_AI VF scales(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
};

}  // namespace

void fill_i16panel_avx2(KernelTable& t) {
  t.types[int(TensorType::Q4_0)].gemm_i16_panels = drivers::i16_panels<P256, drivers::PanelQ4_0>;
  t.types[int(TensorType::Q4_1)].gemm_i16_panels = drivers::i16_panels<P256, drivers::PanelQ4_1>;
  t.types[int(TensorType::Q8_0)].gemm_i16_panels = drivers::i16_panels<P256, drivers::PanelQ8_0>;
}

}  // namespace pllm::kern
