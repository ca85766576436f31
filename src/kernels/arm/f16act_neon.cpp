// W4A16 on baseline AArch64 NEON (no FP16 arithmetic needed): fp16 activations widened
// to f32 as they are loaded (FCVTL, exact), weights decoded in registers to exactly
// dequantize_row's floats (as in neon.cpp's exact-mode decoders), f32 FMA with A = 4
// (NX <= 4) or 2 (NX <= 8) 4-lane accumulators per activation row (>= 8 lanes: the
// vec_dot_f32 bound). Used on every NEON table; f16act_neon_fp16.cpp replaces the dots
// where the CPU has FP16 arithmetic (and falls back to these on fp16 overflow).
// Built with the baseline flags. Decoders: decode_neon.h (exact mode's); loop:
// drivers/fused_dot.h with fp16 activation loads (namespaces: see x86/avx2.cpp).
#include <arm_neon.h>

#include <cstdint>

#include "kernels/arm/decode_neon.h"
#include "kernels/drivers/fused_dot.h"
#include "kernels/internal.h"

namespace pllm::kern {

namespace {

void f32_to_f16_row(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {  // FCVTN rounds to nearest even (FPCR default); overflow -> inf
    const float16x8_t h = vcvt_high_f16_f32(vcvt_f16_f32(vld1q_f32(x + i)), vld1q_f32(x + i + 4));
    vst1q_u16(y + i, vreinterpretq_u16_f16(h));
  }
  for (; i < n; ++i) {
    const __fp16 h = static_cast<__fp16>(x[i]);
    __builtin_memcpy(y + i, &h, 2);
  }
}

}  // namespace

void fill_f16act_neon(KernelTable& t) {
  auto at = [&t](TensorType type) -> TypeKernels& { return t.types[static_cast<uint32_t>(type) & 31]; };
  t.f32_to_f16_row = f32_to_f16_row;
  drivers::set_f16act<neon::F32x4, neon::DecQ4_0>(at(TensorType::Q4_0));
  drivers::set_f16act<neon::F32x4, neon::DecQ4_1>(at(TensorType::Q4_1));
  drivers::set_f16act<neon::F32x4, neon::DecQ8_0>(at(TensorType::Q8_0));
}

}  // namespace pllm::kern
