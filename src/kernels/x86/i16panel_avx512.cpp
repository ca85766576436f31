// int16 activations over load-time repacked 16-row panels on AVX-512 VNNI: the vector traits of
// drivers/i16_panels.h (one zmm per panel vector, lane i = row i; vpdpwssd with the activation
// pair as an embedded broadcast) and TypeKernels::gemm_i16_panels for Q4_0, Q4_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS.
// Compiled with the avx512.cpp flags; used only after dispatch.cpp has checked the CPU.
//
// Measured on Zen 5 (bench_kernels, one thread, Q4_0 576x1536): 8.2 us for one activation row
// against 19 us for the tile, 24 against 52 at 4 rows, 44 against 74-102 at 8, 316-340 against
// 362 for the int16 GEMM at 64.
#include <immintrin.h>

#include <cstdint>

#include "kernels/drivers/i16_panels.h"
#include "kernels/internal.h"
#include "kernels/x86/simd_avx512.h"

namespace pllm::kern {

namespace {

// An activation pair broadcast to every lane, read through a may_alias type.
typedef int32_t alias_i32 __attribute__((may_alias, aligned(4)));

struct P512 {
  static constexpr int kVecs = 1, kLanes = 16;
  static constexpr int tile_x(bool) { return 4; }
  // Two chains per half up to 2 rows: a decode step's dependent vpdpwssd chain would bound it.
  static constexpr int chains(int nx) { return nx <= 2 ? 2 : 1; }
  static constexpr int dot1_chains(bool) { return chains(1); }
  using V = __m512i;
  using VF = __m512;
  static PLLM_AI V loadb(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static PLLM_AI V ctl(const int8_t* c) { return _mm512_load_si512(c); }
  static PLLM_AI V shuffle(V b, V c) { return _mm512_shuffle_epi8(b, c); }
  static PLLM_AI V low4(V w) { return _mm512_and_si512(w, _mm512_set1_epi16(0x0F)); }
  static PLLM_AI V shr4(V w) { return _mm512_srli_epi16(w, 4); }
  static PLLM_AI V sar8(V w) { return _mm512_srai_epi16(w, 8); }
  static PLLM_AI V flip(V b) { return _mm512_xor_si512(b, _mm512_set1_epi8(-128)); }
  static PLLM_AI V nib_lo(V b) { return _mm512_and_si512(b, _mm512_set1_epi8(0x0F)); }
  static PLLM_AI V nib_hi(V b) { return _mm512_and_si512(_mm512_srli_epi16(b, 4), _mm512_set1_epi8(0x0F)); }
  static PLLM_AI V izero() { return _mm512_setzero_si512(); }
  static PLLM_AI V iadd(V a, V b) { return _mm512_add_epi32(a, b); }
  static PLLM_AI V dp(V acc, V w, const int16_t* a) {
    return _mm512_dpwssd_epi32(acc, w, _mm512_set1_epi32(*reinterpret_cast<const alias_i32*>(a)));
  }
  static PLLM_AI VF zero() { return _mm512_setzero_ps(); }
  static PLLM_AI VF cvt(V v) { return _mm512_cvtepi32_ps(v); }
  static PLLM_AI VF add(VF a, VF b) { return _mm512_add_ps(a, b); }
  static PLLM_AI VF mul(VF a, VF b) { return _mm512_mul_ps(a, b); }
  static PLLM_AI VF sub(VF a, VF b) { return _mm512_sub_ps(a, b); }
  static PLLM_AI VF fma(VF acc, VF a, VF b) { return _mm512_fmadd_ps(a, b, acc); }
  static PLLM_AI VF loadf(const float* p) { return _mm512_load_ps(p); }
  static PLLM_AI void storef(float* p, VF v) { _mm512_store_ps(p, v); }
  static PLLM_AI VF loadu(const float* p) { return _mm512_loadu_ps(p); }
  static PLLM_AI void storeu(float* p, VF v) { _mm512_storeu_ps(p, v); }
  static PLLM_AI VF bcast(float f) { return _mm512_set1_ps(f); }
  static PLLM_AI VF scales(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static PLLM_AI V i8i(const uint8_t* p) { return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static PLLM_AI V mul32(V a, V b) { return _mm512_mullo_epi32(a, b); }
  static PLLM_AI VF u8f(const uint8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  // Q6_K: word operations; orhi is one vpternlogd (AVX2: vpand + vpor).
  static PLLM_AI V bcast16(const uint8_t* p) {
    return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  template <int N>
  static PLLM_AI V sllw(V w) { return _mm512_slli_epi16(w, N); }
  template <int N>
  static PLLM_AI V srlw(V w) { return _mm512_srli_epi16(w, N); }
  static PLLM_AI V orhi(V a, V b) { return _mm512_ternarylogic_epi32(a, b, _mm512_set1_epi16(0x30), 0xF8); }
  static PLLM_AI V or16(V a, V b) { return _mm512_ternarylogic_epi32(a, b, _mm512_set1_epi16(0x10), 0xF8); }
  static PLLM_AI V subw(V a, V b) { return _mm512_sub_epi16(a, b); }
  static PLLM_AI V band(V a, V b) { return _mm512_and_si512(a, b); }
  static PLLM_AI V bor(V a, V b) { return _mm512_or_si512(a, b); }
  static PLLM_AI V mulw(V a, V b) { return _mm512_mullo_epi16(a, b); }
  static PLLM_AI V bcastw(int16_t x) { return _mm512_set1_epi16(x); }
};

}  // namespace

void fill_i16panel_avx512(KernelTable& t) {
  t.types[int(TensorType::Q4_0)].gemm_i16_panels = drivers::i16_panels<P512, drivers::PanelQ4_0>;
  t.types[int(TensorType::Q4_1)].gemm_i16_panels = drivers::i16_panels<P512, drivers::PanelQ4_1>;
  t.types[int(TensorType::Q8_0)].gemm_i16_panels = drivers::i16_panels<P512, drivers::PanelQ8_0>;
  t.types[int(TensorType::Q4_K)].gemm_i16_panels = drivers::i16_panels<P512, drivers::PanelQ4_K>;
  t.types[int(TensorType::Q6_K)].gemm_i16_panels = drivers::i16_panels<P512, drivers::PanelQ6_K>;
  t.types[int(TensorType::Q5_K)].gemm_i16_panels = drivers::i16_panels<P512, drivers::PanelQ5_K>;
  t.types[int(TensorType::IQ4_NL)].gemm_i16_panels = drivers::i16_panels<P512, drivers::PanelIQ4_NL>;
  t.types[int(TensorType::Q3_K)].gemm_i16_panels = drivers::i16_panels<P512, drivers::PanelQ3_K>;
  t.types[int(TensorType::IQ4_XS)].gemm_i16_panels = drivers::i16_panels<P512, drivers::PanelIQ4_XS>;
  t.types[int(TensorType::Q2_K)].gemm_i16_panels = drivers::i16_panels<P512, drivers::PanelQ2_K>;
}

}  // namespace pllm::kern
