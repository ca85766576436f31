// W4A16 on baseline AArch64 NEON (no FP16 arithmetic needed): fp16 activations widened
// to f32 as they are loaded (FCVTL, exact), weights decoded in registers to exactly
// dequantize_row's floats (as in neon.cpp's exact-mode decoders), f32 FMA with A = 4
// (NX <= 4) or 2 (NX <= 8) 4-lane accumulators per activation row (>= 8 lanes: the
// vec_dot_f32 bound). Used on every NEON table; f16act_neon_fp16.cpp replaces the dots
// where the CPU has FP16 arithmetic (and falls back to these on fp16 overflow).
// Built with the baseline flags; anonymous namespace only (see avx2.cpp).
#include <arm_neon.h>

#include <cstdint>

#include "kernels/internal.h"
#include "quant/blocks.h"

namespace pllm::kern {

namespace {

#define PLLM_AI inline __attribute__((always_inline))

PLLM_AI float h2f(uint16_t h) {
  __fp16 v;
  __builtin_memcpy(&v, &h, 2);
  return static_cast<float>(v);
}

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

// Decoders: one 32-element block -> eight float32x4 holding dequantize_row's floats.
struct DecQ4_0 {  // d * (q - 8) == fma(-8d, q, d) exactly
  const block_q4_0* w;
  explicit DecQ4_0(const void* row) : w(static_cast<const block_q4_0*>(row)) {}
  PLLM_AI void block(int64_t b, float32x4_t v[8]) const {
    const float df = h2f(w[b].d);
    const float32x4_t d = vdupq_n_f32(df), m8d = vdupq_n_f32(-8.0f * df);
    const uint8x16_t raw = vld1q_u8(w[b].qs);
    u8_to_f32(vandq_u8(raw, vdupq_n_u8(0x0F)), v);
    u8_to_f32(vshrq_n_u8(raw, 4), v + 4);
    for (int k = 0; k < 8; ++k) v[k] = vfmaq_f32(m8d, v[k], d);
  }
};

struct DecQ4_1 {  // reference d * q + m with d * q exact: the FMA rounds identically
  const block_q4_1* w;
  explicit DecQ4_1(const void* row) : w(static_cast<const block_q4_1*>(row)) {}
  PLLM_AI void block(int64_t b, float32x4_t v[8]) const {
    const float32x4_t d = vdupq_n_f32(h2f(w[b].d)), m = vdupq_n_f32(h2f(w[b].m));
    const uint8x16_t raw = vld1q_u8(w[b].qs);
    u8_to_f32(vandq_u8(raw, vdupq_n_u8(0x0F)), v);
    u8_to_f32(vshrq_n_u8(raw, 4), v + 4);
    for (int k = 0; k < 8; ++k) v[k] = vfmaq_f32(m, v[k], d);
  }
};

struct DecQ8_0 {
  const block_q8_0* w;
  explicit DecQ8_0(const void* row) : w(static_cast<const block_q8_0*>(row)) {}
  PLLM_AI void block(int64_t b, float32x4_t v[8]) const {
    const float32x4_t d = vdupq_n_f32(h2f(w[b].d));
    s8_to_f32(vld1q_s8(w[b].qs), v);
    s8_to_f32(vld1q_s8(w[b].qs + 16), v + 4);
    for (int k = 0; k < 8; ++k) v[k] = vmulq_f32(d, v[k]);
  }
};

template <int NX, class D>
void fused(int64_t n, const void* w_row, const uint16_t* x, int64_t xs, float* out, int64_t os) {
  constexpr int A = NX <= 4 ? 4 : 2;
  const D dec(w_row);
  const __fp16* xh = reinterpret_cast<const __fp16*>(x);
  float32x4_t acc[NX][A];
  for (int j = 0; j < NX; ++j)
    for (int a = 0; a < A; ++a) acc[j][a] = vdupq_n_f32(0.0f);
  for (int64_t b = 0; b < n / 32; ++b, xh += 32) {
    float32x4_t wv[8];
    dec.block(b, wv);
    for (int j = 0; j < NX; ++j) {
      for (int k = 0; k < 4; ++k) {
        const float16x8_t h = vld1q_f16(xh + j * xs + 8 * k);
        acc[j][(2 * k) % A] = vfmaq_f32(acc[j][(2 * k) % A], wv[2 * k], vcvt_f32_f16(vget_low_f16(h)));
        acc[j][(2 * k + 1) % A] = vfmaq_f32(acc[j][(2 * k + 1) % A], wv[2 * k + 1], vcvt_high_f32_f16(h));
      }
    }
  }
  for (int j = 0; j < NX; ++j) {
    float32x4_t s = vaddq_f32(acc[j][0], acc[j][1]);
    if constexpr (A == 4) s = vaddq_f32(s, vaddq_f32(acc[j][2], acc[j][3]));
    out[j * os] = vaddvq_f32(s);
  }
}

template <class D>
float fused_one(int64_t n, const void* w_row, const uint16_t* x) {
  float r;
  fused<1, D>(n, w_row, x, 0, &r, 0);
  return r;
}

template <class D>
void fused_multi(int64_t n, const void* w_row, const uint16_t* x, int64_t xs, int n_x, float* out, int64_t os) {
  for (int j0 = 0; j0 < n_x; j0 += 8) {
    const uint16_t* xr = x + j0 * xs;
    float* o = out + j0 * os;
    switch (n_x - j0 < 8 ? n_x - j0 : 8) {
      case 1: fused<1, D>(n, w_row, xr, xs, o, os); break;
      case 2: fused<2, D>(n, w_row, xr, xs, o, os); break;
      case 3: fused<3, D>(n, w_row, xr, xs, o, os); break;
      case 4: fused<4, D>(n, w_row, xr, xs, o, os); break;
      case 5: fused<5, D>(n, w_row, xr, xs, o, os); break;
      case 6: fused<6, D>(n, w_row, xr, xs, o, os); break;
      case 7: fused<7, D>(n, w_row, xr, xs, o, os); break;
      default: fused<8, D>(n, w_row, xr, xs, o, os); break;
    }
  }
}

template <class D>
void set(KernelTable& t, TensorType type) {
  TypeKernels& k = t.types[static_cast<uint32_t>(type) & 31];
  k.vec_dot_f16act = fused_one<D>;
  k.vec_dot_f16act_multi = fused_multi<D>;
}

}  // namespace

void fill_f16act_neon(KernelTable& t) {
  t.f32_to_f16_row = f32_to_f16_row;
  set<DecQ4_0>(t, TensorType::Q4_0);
  set<DecQ4_1>(t, TensorType::Q4_1);
  set<DecQ8_0>(t, TensorType::Q8_0);
}

}  // namespace pllm::kern
