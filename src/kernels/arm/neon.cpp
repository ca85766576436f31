// AArch64 Advanced SIMD (baseline, no dotprod) kernels. NEON is mandatory on
// AArch64, so this file needs no extra flags; int8 dots use vmull_s8 + pairwise adds.
//
// All values fed to the int8 products are within [-128, 127] x [-127, 127], so two
// products summed in an int16 lane (<= 2 * 128 * 127 = 32512) cannot overflow.
#include <arm_neon.h>

#include <cstdint>

#include "kernels/arm/decode_neon.h"
#include "kernels/arm/int8_neon.h"
#include "kernels/drivers/block_dot.h"
#include "kernels/drivers/fused_dot.h"
#include "kernels/internal.h"
#include "quant/blocks.h"

namespace pllm::kern {

namespace {

using namespace neon;  // h2f, unpack_k4_scales, load_bf16, the decoders (simd_neon.h, decode_neon.h)

inline uint16_t f2h(float f) {
  const __fp16 v = static_cast<__fp16>(f);  // round to nearest even
  uint16_t h;
  __builtin_memcpy(&h, &v, 2);
  return h;
}

// sum over 16 lanes of x * y, as 4 int32 partial sums
inline int32x4_t dot16(int8x16_t x, int8x16_t y) {
  int16x8_t p = vmull_s8(vget_low_s8(x), vget_low_s8(y));
  p = vmlal_s8(p, vget_high_s8(x), vget_high_s8(y));
  return vpaddlq_s16(p);
}

// ------------------------------------------------------------ activation quantisers
// n floats (multiple of 16) * id -> int8 (round half to even); returns the sum.
inline int quant(const float* x, float id, int8_t* q, int n) {
  int32x4_t sum = vdupq_n_s32(0);
  for (int j = 0; j < n; j += 8) {
    const int32x4_t a = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + j), id));
    const int32x4_t b = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + j + 4), id));
    sum = vaddq_s32(sum, vaddq_s32(a, b));
    vst1_s8(q + j, vqmovn_s16(vcombine_s16(vqmovn_s32(a), vqmovn_s32(b))));
  }
  return vaddvq_s32(sum);
}

inline float amax(const float* x, int n) {
  float32x4_t m = vdupq_n_f32(0.0f);
  for (int j = 0; j < n; j += 4) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + j)));
  return vmaxvq_f32(m);
}

void quantize_act_q8_0(const float* x, void* xq, int64_t n) {
  block_q8_0* y = static_cast<block_q8_0*>(xq);
  for (int64_t b = 0; b < n / QK8_0; ++b, x += QK8_0) {
    const float d = amax(x, QK8_0) / 127.0f;
    y[b].d = f2h(d);
    quant(x, d != 0.0f ? 1.0f / d : 0.0f, y[b].qs, QK8_0);
  }
}

void quantize_act_q8_1(const float* x, void* xq, int64_t n) {
  block_q8_1* y = static_cast<block_q8_1*>(xq);
  for (int64_t b = 0; b < n / QK8_1; ++b, x += QK8_1) {
    const float d = amax(x, QK8_1) / 127.0f;
    const int sum = quant(x, d != 0.0f ? 1.0f / d : 0.0f, y[b].qs, QK8_1);
    y[b].d = d;
    y[b].s = d * static_cast<float>(sum);
  }
}

void quantize_act_q8_K(const float* x, void* xq, int64_t n) {
  block_q8_K* y = static_cast<block_q8_K*>(xq);
  for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    const float d = amax(x, QK_K) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int g = 0; g < QK_K / 16; ++g) {
      y[b].bsums[g] = static_cast<int16_t>(quant(x + 16 * g, id, y[b].qs + 16 * g, 16));
    }
    y[b].d = d;
  }
}

// ------------------------------------------------------------ quantised dots
// The baseline level of arm/int8_neon.h: 32 int8 products through vmull_s8 + pairwise adds.
struct Level {
  static PLLM_AI float h2f(uint16_t h) { return neon::h2f(h); }
  static PLLM_AI int32x4_t dot32(int8x16_t lo, int8x16_t hi, const int8_t* a) {
    return vaddq_s32(dot16(lo, vld1q_s8(a)), dot16(hi, vld1q_s8(a + 16)));
  }
};
using I8 = neon_int8::Blocks<Level>;
// One accumulator chain: the vmull dot is long enough to hide the FMA latency.
template <class T>
constexpr auto vec_dot_i8 = drivers::block_dot<I8::Dot<T, 1>>;

// The 6-bit quants of group k (0..3) of half h as signed int8 (-32..31), 32 values.
inline void q6_group(const uint8_t* ql, const uint8_t* qh, int k, int8x16_t out[2]) {
  const uint8x16_t m4 = vdupq_n_u8(0x0F), m3 = vdupq_n_u8(0x03);
  for (int i = 0; i < 2; ++i) {
    const uint8x16_t l = vld1q_u8(ql + 32 * (k & 1) + 16 * i);
    const uint8x16_t h = vld1q_u8(qh + 16 * i);
    const uint8x16_t lo = (k < 2) ? vandq_u8(l, m4) : vshrq_n_u8(l, 4);
    uint8x16_t hb;
    switch (k) {
      case 0: hb = vandq_u8(h, m3); break;
      case 1: hb = vandq_u8(vshrq_n_u8(h, 2), m3); break;
      case 2: hb = vandq_u8(vshrq_n_u8(h, 4), m3); break;
      default: hb = vshrq_n_u8(h, 6); break;
    }
    out[i] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, vshlq_n_u8(hb, 4))), vdupq_n_s8(32));
  }
}

float vec_dot_q6_K(int64_t n, const void* w_row, const void* xq) {
  const block_q6_K* w = static_cast<const block_q6_K*>(w_row);
  const block_q8_K* a = static_cast<const block_q8_K*>(xq);
  float32x4_t acc = vdupq_n_f32(0.0f);
  for (int64_t b = 0; b < n / QK_K; ++b) {
    int32x4_t sumi = vdupq_n_s32(0);
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 4; ++k) {
        int8x16_t q[2];
        q6_group(w[b].ql + 64 * h, w[b].qh + 32 * h, k, q);
        const int8_t* y = a[b].qs + 128 * h + 32 * k;
        const int g = 8 * h + 2 * k;  // scale of the first 16 elements; g+1 for the next 16
        sumi = vmlaq_n_s32(sumi, dot16(q[0], vld1q_s8(y)), w[b].scales[g]);
        sumi = vmlaq_n_s32(sumi, dot16(q[1], vld1q_s8(y + 16)), w[b].scales[g + 1]);
      }
    }
    acc = vfmaq_n_f32(acc, vcvtq_f32_s32(sumi), h2f(w[b].d) * a[b].d);
  }
  return vaddvq_f32(acc);
}

// ------------------------------------------------------------ float dots
// Four 4-lane accumulators (16 lanes), then 4-wide, then a scalar tail of <= 3.
template <class Load>
inline float dot_generic(const float* x, int64_t n, Load load, float (*one)(const void*, int64_t), const void* w) {
  float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0), a2 = vdupq_n_f32(0), a3 = vdupq_n_f32(0);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = vfmaq_f32(a0, load(i), vld1q_f32(x + i));
    a1 = vfmaq_f32(a1, load(i + 4), vld1q_f32(x + i + 4));
    a2 = vfmaq_f32(a2, load(i + 8), vld1q_f32(x + i + 8));
    a3 = vfmaq_f32(a3, load(i + 12), vld1q_f32(x + i + 12));
  }
  for (; i + 4 <= n; i += 4) a0 = vfmaq_f32(a0, load(i), vld1q_f32(x + i));
  float s = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
  for (; i < n; ++i) s += one(w, i) * x[i];
  return s;
}

float one_f32(const void* w, int64_t i) { return static_cast<const float*>(w)[i]; }
float one_f16(const void* w, int64_t i) { return h2f(static_cast<const uint16_t*>(w)[i]); }
float one_bf16(const void* w, int64_t i) {
  const uint32_t bits = uint32_t(static_cast<const uint16_t*>(w)[i]) << 16;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

float dot_f32(const float* a, const float* b, int64_t n) {
  return dot_generic(b, n, [a](int64_t i) { return vld1q_f32(a + i); }, one_f32, a);
}
float vec_dot_f32(int64_t n, const void* w, const void* xq) {
  return dot_f32(static_cast<const float*>(w), static_cast<const float*>(xq), n);
}
float vec_dot_f16(int64_t n, const void* w_row, const void* xq) {
  const __fp16* w = static_cast<const __fp16*>(w_row);
  return dot_generic(static_cast<const float*>(xq), n, [w](int64_t i) { return vcvt_f32_f16(vld1_f16(w + i)); },
                     one_f16, w_row);
}
float vec_dot_bf16(int64_t n, const void* w_row, const void* xq) {
  const uint16_t* w = static_cast<const uint16_t*>(w_row);
  return dot_generic(static_cast<const float*>(xq), n, [w](int64_t i) { return load_bf16(w + i); }, one_bf16, w_row);
}

// ------------------------------------------------------------ dequantisers (mul, then add: bit-identical)
void dequant_f16(const void* w_row, float* y, int64_t n) {
  const __fp16* w = static_cast<const __fp16*>(w_row);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vcvt_f32_f16(vld1_f16(w + i)));
  for (; i < n; ++i) y[i] = one_f16(w_row, i);
}

// 16 int8 values -> 16 floats d * v (+ m when add)
inline void store16(int8x16_t v, float d, float m, bool add, float* y) {
  const int16x8_t h[2] = {vmovl_s8(vget_low_s8(v)), vmovl_s8(vget_high_s8(v))};
  for (int i = 0; i < 2; ++i) {
    const int32x4_t q[2] = {vmovl_s16(vget_low_s16(h[i])), vmovl_s16(vget_high_s16(h[i]))};
    for (int j = 0; j < 2; ++j) {
      float32x4_t f = vmulq_n_f32(vcvtq_f32_s32(q[j]), d);
      if (add) f = vaddq_f32(f, vdupq_n_f32(m));
      vst1q_f32(y + 8 * i + 4 * j, f);
    }
  }
}

void dequant_q4_0(const void* w_row, float* y, int64_t n) {
  const block_q4_0* w = static_cast<const block_q4_0*>(w_row);
  for (int64_t b = 0; b < n / QK4_0; ++b, y += 32) {
    const uint8x16_t v = vld1q_u8(w[b].qs);
    const float d = h2f(w[b].d);
    store16(vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(15))), vdupq_n_s8(8)), d, 0, false, y);
    store16(vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), vdupq_n_s8(8)), d, 0, false, y + 16);
  }
}

void dequant_q4_1(const void* w_row, float* y, int64_t n) {
  const block_q4_1* w = static_cast<const block_q4_1*>(w_row);
  for (int64_t b = 0; b < n / QK4_1; ++b, y += 32) {
    const uint8x16_t v = vld1q_u8(w[b].qs);
    const float d = h2f(w[b].d), m = h2f(w[b].m);
    store16(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(15))), d, m, true, y);
    store16(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), d, m, true, y + 16);
  }
}

void dequant_q8_0(const void* w_row, float* y, int64_t n) {
  const block_q8_0* w = static_cast<const block_q8_0*>(w_row);
  for (int64_t b = 0; b < n / QK8_0; ++b, y += 32) {
    store16(vld1q_s8(w[b].qs), h2f(w[b].d), 0, false, y);
    store16(vld1q_s8(w[b].qs + 16), h2f(w[b].d), 0, false, y + 16);
  }
}


}  // namespace

void fill_neon(KernelTable& t) {
  auto at = [&t](TensorType type) -> TypeKernels& { return t.types[static_cast<uint32_t>(type) & 31]; };
  drivers::set_exact<F32x4, DecF32>(at(TensorType::F32));
  drivers::set_exact<F32x4, DecF16>(at(TensorType::F16));
  drivers::set_exact<F32x4, DecBF16>(at(TensorType::BF16));
  drivers::set_exact<F32x4, DecQ4_0>(at(TensorType::Q4_0));
  drivers::set_exact<F32x4, DecQ4_1>(at(TensorType::Q4_1));
  drivers::set_exact<F32x4, DecQ5_0>(at(TensorType::Q5_0));
  drivers::set_exact<F32x4, DecQ5_1>(at(TensorType::Q5_1));
  drivers::set_exact<F32x4, DecQ8_0>(at(TensorType::Q8_0));
  drivers::set_exact<F32x4, DecQ4_K>(at(TensorType::Q4_K));
  drivers::set_exact<F32x4, DecQ6_K>(at(TensorType::Q6_K));
  at(TensorType::F32).vec_dot = vec_dot_f32;
  at(TensorType::F16).vec_dot = vec_dot_f16;
  at(TensorType::F16).dequantize_row = dequant_f16;
  at(TensorType::BF16).vec_dot = vec_dot_bf16;
  at(TensorType::Q4_0).quantize_act = quantize_act_q8_0;
  at(TensorType::Q4_0).vec_dot = vec_dot_i8<I8::Q4_0>;
  at(TensorType::Q4_0).dequantize_row = dequant_q4_0;
  at(TensorType::Q4_1).quantize_act = quantize_act_q8_1;
  at(TensorType::Q4_1).vec_dot = vec_dot_i8<I8::Q4_1>;
  at(TensorType::Q4_1).dequantize_row = dequant_q4_1;
  at(TensorType::Q5_0).quantize_act = quantize_act_q8_0;
  at(TensorType::Q5_0).vec_dot = vec_dot_i8<I8::Q5_0>;
  at(TensorType::Q5_1).quantize_act = quantize_act_q8_1;
  at(TensorType::Q5_1).vec_dot = vec_dot_i8<I8::Q5_1>;
  at(TensorType::Q8_0).quantize_act = quantize_act_q8_0;
  at(TensorType::Q8_0).vec_dot = vec_dot_i8<I8::Q8_0>;
  at(TensorType::Q8_0).dequantize_row = dequant_q8_0;
  at(TensorType::Q4_K).quantize_act = quantize_act_q8_K;
  at(TensorType::Q4_K).vec_dot = I8::vec_dot_q4_K;
  at(TensorType::Q6_K).quantize_act = quantize_act_q8_K;
  at(TensorType::Q6_K).vec_dot = vec_dot_q6_K;
  I8::set_lowbit(at(TensorType::Q2_K), at(TensorType::Q3_K), at(TensorType::Q5_K), at(TensorType::IQ4_NL),
                 at(TensorType::IQ4_XS));
}

}  // namespace pllm::kern
