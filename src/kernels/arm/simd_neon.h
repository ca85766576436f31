// AArch64 baseline-NEON building blocks shared by the translation units built with the
// baseline flags (neon.cpp, f16act_neon.cpp, attention_kv_neon.cpp, lowbit_neon.cpp), in
// namespace pllm::kern::neon. Include ONLY from those files: every copy of these inline
// functions must be the same machine code, none compiled with +dotprod / +i8mm / +fp16 (the
// linker keeps one copy for all users). What the +dotprod files need too (h2f) is
// neon_common.h's, with internal linkage.
#pragma once
#if !defined(__aarch64__) || defined(__ARM_FEATURE_DOTPROD) || defined(__ARM_FEATURE_MATMUL_INT8) || \
    defined(__ARM_FEATURE_FP16_VECTOR_ARITHMETIC)
#error "arm/simd_neon.h: include only from translation units built with the baseline AArch64 flags"
#endif
#include <arm_neon.h>

#include <cstdint>

#include "kernels/arm/neon_common.h"
#include "kernels/k4_scales.h"

#define PLLM_AI inline __attribute__((always_inline))

namespace pllm::kern::neon {

using kern::h2f;  // neon_common.h

PLLM_AI float32x4_t load_bf16(const uint16_t* p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)); }

using kern::unpack_k4_scales;  // k4_scales.h

// 16 bytes -> 16 floats in four float32x4 (element order).
PLLM_AI void u8_to_f32(uint8x16_t v, float32x4_t* out) {
  const uint16x8_t a = vmovl_u8(vget_low_u8(v)), b = vmovl_high_u8(v);
  out[0] = vcvtq_f32_u32(vmovl_u16(vget_low_u16(a)));
  out[1] = vcvtq_f32_u32(vmovl_high_u16(a));
  out[2] = vcvtq_f32_u32(vmovl_u16(vget_low_u16(b)));
  out[3] = vcvtq_f32_u32(vmovl_high_u16(b));
}
PLLM_AI void s8_to_f32(int8x16_t v, float32x4_t* out) {
  const int16x8_t a = vmovl_s8(vget_low_s8(v)), b = vmovl_high_s8(v);
  out[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(a)));
  out[1] = vcvtq_f32_s32(vmovl_high_s16(a));
  out[2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(b)));
  out[3] = vcvtq_f32_s32(vmovl_high_s16(b));
}

// Vector traits for the shared drivers (kernels/drivers/*.h): 4 f32 lanes.
struct F32x4 {
  using V = float32x4_t;
  static constexpr int kLanes = 4;
  // Accumulators per activation row in fused_dot: 4 (NX <= 4) or 2 (NX <= 8), so every row
  // has >= 8 lanes and 8 weights + up to 16 accumulators fit the 32 registers.
  static constexpr int accs(int nx) { return nx <= 4 ? 4 : 2; }
  // Weight rows per register tile in drivers/exact_tile.h: two for up to 2 activation rows
  // (FMLA has no memory operand, so a second row halves the activation loads; 2 x 2 x 4
  // accumulators + 2 x 8 weight vectors fill the 32 registers), else one.
  static constexpr int tile_rows(int nx) { return nx <= 2 ? 2 : 1; }
  // Register tile of drivers/exact_gemm.h: 3 x 3 (2 accumulators per pair, as exact_tile's
  // 8-row tile: 18 + 3 weight vectors + 1 activation vector of the 32 registers).
  static constexpr int kGemmR = 3, kGemmNX = 3;
  static PLLM_AI float h2f(uint16_t h) { return neon::h2f(h); }
  static PLLM_AI V zero() { return vdupq_n_f32(0.0f); }
  static PLLM_AI V set1(float x) { return vdupq_n_f32(x); }
  static PLLM_AI V load(const float* p) { return vld1q_f32(p); }
  static PLLM_AI V load(const uint16_t* p) { return vcvt_f32_f16(vld1_f16(reinterpret_cast<const __fp16*>(p))); }
  static PLLM_AI void store(float* p, V v) { vst1q_f32(p, v); }
  static PLLM_AI V add(V a, V b) { return vaddq_f32(a, b); }
  static PLLM_AI V sub(V a, V b) { return vsubq_f32(a, b); }
  static PLLM_AI V mul(V a, V b) { return vmulq_f32(a, b); }
  static PLLM_AI V max(V a, V b) { return vmaxq_f32(a, b); }
  static PLLM_AI V fma(V acc, V a, V b) { return vfmaq_f32(acc, a, b); }
  static PLLM_AI float hsum(V v) { return vaddvq_f32(v); }
  static PLLM_AI float hmax(V v) { return vmaxvq_f32(v); }
};

}  // namespace pllm::kern::neon
