// AArch64 NEON helpers written once for the translation units of every ARM level: the baseline
// ones (through simd_neon.h and decode_neon.h: neon.cpp, f16act_neon.cpp, lowbit_neon.cpp,
// attention_kv_neon.cpp, i16act_neon.cpp) and the +dotprod ones (neon_dotprod.cpp,
// i16act_dotprod.cpp). Plain NEON only: nothing here needs more than ARMv8.0.
//
// ODR: those files are compiled with different -march flags, and the compiler may use the
// extensions of each (SDOT, fp16 arithmetic) when it compiles these bodies there. With external
// linkage the linker would keep one copy of each inline function for all of them, perhaps the
// +dotprod file's, called from the baseline table (SIGILL on ARMv8.0). The unnamed namespace
// gives every translation unit its own copy (as k4_scales.h; always_inline anyway).
#pragma once
#if !defined(__aarch64__)
#error "arm/neon_common.h: AArch64 only"
#endif
#include <arm_neon.h>

#include <cstdint>

#define PLLM_AI inline __attribute__((always_inline))

namespace pllm::kern {
namespace {

// IEEE half to float (exact).
PLLM_AI float h2f(uint16_t h) {
  __fp16 v;
  __builtin_memcpy(&v, &h, 2);
  return static_cast<float>(v);
}

// Q5_0 / Q5_1: the fifth bit (bit j of the word qh) at 16. Elements 0..15 take bits 0..15 (low
// nibbles), elements 16..31 bits 16..31 (high nibbles).
PLLM_AI uint8x16_t q5_high16(uint32_t bits) {  // byte j: 0x10 where bit j of the low 16 bits is set
  const uint8x16_t b = vcombine_u8(vdup_n_u8(static_cast<uint8_t>(bits)), vdup_n_u8(static_cast<uint8_t>(bits >> 8)));
  const uint8x16_t sel = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  return vandq_u8(vtstq_u8(b, sel), vdupq_n_u8(0x10));
}

// Unit u (0..7) of a Q4_K block's quants qs: its 32 4-bit codes in two byte vectors (units
// 2i and 2i + 1 are the low and high nibbles of the same 32 bytes). Also the int16 kernels'.
PLLM_AI void q4k_unit_codes(const uint8_t* qs, int u, uint8x16_t& a, uint8x16_t& b) {
  const uint8_t* p = qs + 32 * (u / 2);
  a = vld1q_u8(p);
  b = vld1q_u8(p + 16);
  if (u & 1) {
    a = vshrq_n_u8(a, 4);
    b = vshrq_n_u8(b, 4);
  } else {
    a = vandq_u8(a, vdupq_n_u8(0x0F));
    b = vandq_u8(b, vdupq_n_u8(0x0F));
  }
}

}  // namespace
}  // namespace pllm::kern
