// W4A16 with ARMv8.2 FP16 arithmetic: fp16 FMLA (8 lanes) on fp16 activations.
// Compiled with -march=armv8.2-a+fp16; installed only when getauxval(AT_HWCAP) reports
// HWCAP_ASIMDHP (dispatch.cpp). Anonymous namespace; the group loop is drivers/fused_dot.h.
//
// Per 32-element block the weights are decoded in registers to four float16x8 holding
// small exact values: Q4_0 q - 8, Q4_1 q (0..15), Q8_0 q / 16 (exact: |q / 16| <= 8 keeps
// the fp16 partial sums as far from overflow as for Q4_0). Per activation row
//   p = sum over the block of v * x    (one fp16 mul + 3 FMLA: 4 products per lane)
// then p is widened to f32 (exact) and added as scale * p into two float32x4
// accumulators: fp16 accumulation never spans more than one block. Q4_1 adds
// m * sum(x) the same way (the block's x summed in fp16 as a tree of depth 2).
// Error per block term <= 4 * 2^-11 of sum |w x| in that block (plus 2^-25 per rounding
// where a partial sum is subnormal), see tests/cpp/test_f16act.cpp.
// Overflow: a lane holds at most 4 * 15 * max|x| (Q4_1; 4 * 8 * max|x| for Q4_0, Q8_0), so
// it can overflow fp16 once |x| exceeds ~1000-2000. The result is then inf or NaN; such a
// row is recomputed with the baseline kernel (f16act_neon.cpp, f32 accumulation).
#include <arm_neon.h>

#include <cstdint>

#include "kernels/drivers/fused_dot.h"
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

// The baseline (f32-accumulating) kernels, recorded per type when the table is filled
// (once, inside dispatch.cpp's thread-safe static init; the same for every NEON table).
using DotFn = float (*)(int64_t, const void*, const uint16_t*);
DotFn g_fallback[3] = {};

struct Q40 {
  using W = block_q4_0;
  static constexpr int kSlot = 0;
  static constexpr bool kMin = false;
  PLLM_AI static void decode(const W& b, float16x8_t v[4], float& scale, float& min) {
    const uint8x16_t raw = vld1q_u8(b.qs);
    const int8x16_t eight = vdupq_n_s8(8);
    const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(raw, vdupq_n_u8(0x0F))), eight);
    const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(raw, 4)), eight);
    v[0] = vcvtq_f16_s16(vmovl_s8(vget_low_s8(lo)));
    v[1] = vcvtq_f16_s16(vmovl_high_s8(lo));
    v[2] = vcvtq_f16_s16(vmovl_s8(vget_low_s8(hi)));
    v[3] = vcvtq_f16_s16(vmovl_high_s8(hi));
    scale = h2f(b.d);
    min = 0.0f;
  }
};

struct Q41 {
  using W = block_q4_1;
  static constexpr int kSlot = 1;
  static constexpr bool kMin = true;
  PLLM_AI static void decode(const W& b, float16x8_t v[4], float& scale, float& min) {
    const uint8x16_t raw = vld1q_u8(b.qs);
    const uint8x16_t lo = vandq_u8(raw, vdupq_n_u8(0x0F)), hi = vshrq_n_u8(raw, 4);
    v[0] = vcvtq_f16_u16(vmovl_u8(vget_low_u8(lo)));
    v[1] = vcvtq_f16_u16(vmovl_high_u8(lo));
    v[2] = vcvtq_f16_u16(vmovl_u8(vget_low_u8(hi)));
    v[3] = vcvtq_f16_u16(vmovl_high_u8(hi));
    scale = h2f(b.d);
    min = h2f(b.m);
  }
};

struct Q80 {
  using W = block_q8_0;
  static constexpr int kSlot = 2;
  static constexpr bool kMin = false;
  PLLM_AI static void decode(const W& b, float16x8_t v[4], float& scale, float& min) {
    const int8x16_t a = vld1q_s8(b.qs), c = vld1q_s8(b.qs + 16);
    v[0] = vcvtq_n_f16_s16(vmovl_s8(vget_low_s8(a)), 4);  // q / 16, exact
    v[1] = vcvtq_n_f16_s16(vmovl_high_s8(a), 4);
    v[2] = vcvtq_n_f16_s16(vmovl_s8(vget_low_s8(c)), 4);
    v[3] = vcvtq_n_f16_s16(vmovl_high_s8(c), 4);
    scale = 16.0f * h2f(b.d);  // exact
    min = 0.0f;
  }
};

template <int NX, class T>
void fused(int64_t n, const void* w_row, const uint16_t* x, int64_t xs, float* out, int64_t os) {
  const typename T::W* w = static_cast<const typename T::W*>(w_row);
  const float16_t* xh = reinterpret_cast<const float16_t*>(x);
  float32x4_t acc[NX][2];
  for (int j = 0; j < NX; ++j) acc[j][0] = acc[j][1] = vdupq_n_f32(0.0f);
  for (int64_t b = 0; b < n / 32; ++b, xh += 32) {
    float16x8_t v[4];
    float d, m;
    T::decode(w[b], v, d, m);
    for (int j = 0; j < NX; ++j) {
      const float16_t* xr = xh + j * xs;
      const float16x8_t x0 = vld1q_f16(xr), x1 = vld1q_f16(xr + 8), x2 = vld1q_f16(xr + 16), x3 = vld1q_f16(xr + 24);
      float16x8_t p = vmulq_f16(v[0], x0);
      p = vfmaq_f16(p, v[1], x1);
      p = vfmaq_f16(p, v[2], x2);
      p = vfmaq_f16(p, v[3], x3);
      acc[j][0] = vfmaq_n_f32(acc[j][0], vcvt_f32_f16(vget_low_f16(p)), d);
      acc[j][1] = vfmaq_n_f32(acc[j][1], vcvt_high_f32_f16(p), d);
      if constexpr (T::kMin) {
        const float16x8_t s = vaddq_f16(vaddq_f16(x0, x1), vaddq_f16(x2, x3));
        acc[j][0] = vfmaq_n_f32(acc[j][0], vcvt_f32_f16(vget_low_f16(s)), m);
        acc[j][1] = vfmaq_n_f32(acc[j][1], vcvt_high_f32_f16(s), m);
      }
    }
  }
  for (int j = 0; j < NX; ++j) {
    float r = vaddvq_f32(vaddq_f32(acc[j][0], acc[j][1]));
    if (!__builtin_isfinite(r)) r = g_fallback[T::kSlot](n, w_row, x + j * xs);  // fp16 overflow (or inf input)
    out[j * os] = r;
  }
}

// fused<NX, T> as drivers::in_groups_of_8 / one_row want it.
template <class T>
struct Fused {
  template <int NX>
  struct K {
    static void run(int64_t n, const void* w_row, const uint16_t* x, int64_t xs, float* out, int64_t os) {
      fused<NX, T>(n, w_row, x, xs, out, os);
    }
  };
};

template <class T>
void set(KernelTable& t, TensorType type) {
  TypeKernels& k = t.types[static_cast<uint32_t>(type) & 31];
  g_fallback[T::kSlot] = k.vec_dot_f16act;  // the baseline kernel fill_f16act_neon installed
  k.vec_dot_f16act = drivers::one_row<Fused<T>::template K, uint16_t>;
  k.vec_dot_f16act_multi = drivers::in_groups_of_8<Fused<T>::template K, uint16_t>;
}

}  // namespace

void fill_f16act_neon_fp16(KernelTable& t) {
  set<Q40>(t, TensorType::Q4_0);
  set<Q41>(t, TensorType::Q4_1);
  set<Q80>(t, TensorType::Q8_0);
}

}  // namespace pllm::kern
