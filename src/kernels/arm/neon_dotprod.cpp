// AArch64 dot-product extension (ARMv8.2 DotProd, SDOT/vdotq_s32) kernels.
// Compiled with -march=armv8.2-a+dotprod; selected only when getauxval(AT_HWCAP)
// reports HWCAP_ASIMDDP. The table already holds the baseline NEON kernels; only the
// int8 dot products are replaced here. Anonymous namespace only (see avx2.cpp).
#include <arm_neon.h>

#include <cstdint>

#include "kernels/arm/int8_neon.h"
#include "kernels/arm/neon_common.h"  // h2f
#include "kernels/drivers/block_dot.h"
#include "kernels/internal.h"
#include "quant/blocks.h"

namespace pllm::kern {

namespace {

// The dotprod level of arm/int8_neon.h: 32 int8 products in two SDOT.
struct Level {
  static inline float h2f(uint16_t h) { return kern::h2f(h); }
  static inline int32x4_t dot32(int8x16_t lo, int8x16_t hi, const int8_t* a) {
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), lo, vld1q_s8(a)), hi, vld1q_s8(a + 16));
  }
};
using I8 = neon_int8::Blocks<Level>;
// Accumulator chains (drivers/block_dot.h) as each kernel had before the shared driver: two
// for Q4_0, one for Q4_1 and Q8_0; the Q5 kernels follow their Q4 twins.
template <class T, int Accs>
constexpr auto vec_dot_i8 = drivers::block_dot<I8::Dot<T, Accs>>;

float vec_dot_q6_K(int64_t n, const void* w_row, const void* xq) {
  const block_q6_K* w = static_cast<const block_q6_K*>(w_row);
  const block_q8_K* a = static_cast<const block_q8_K*>(xq);
  const uint8x16_t m4 = vdupq_n_u8(0x0F), m3 = vdupq_n_u8(0x03);
  const int8x16_t off = vdupq_n_s8(32);
  float32x4_t acc = vdupq_n_f32(0.0f);
  for (int64_t b = 0; b < n / QK_K; ++b) {
    int32x4_t sumi = vdupq_n_s32(0);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = w[b].ql + 64 * h;
      const uint8_t* qh = w[b].qh + 32 * h;
      const int8_t* y = a[b].qs + 128 * h;
      const int8_t* sc = w[b].scales + 8 * h;
      for (int i = 0; i < 2; ++i) {  // 16-byte halves of the 32 columns l
        const uint8x16_t la = vld1q_u8(ql + 16 * i), lb = vld1q_u8(ql + 32 + 16 * i);
        const uint8x16_t hb = vld1q_u8(qh + 16 * i);
        int8x16_t q[4];
        q[0] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(la, m4), vshlq_n_u8(vandq_u8(hb, m3), 4)));
        q[1] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(lb, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m3), 4)));
        q[2] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(la, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m3), 4)));
        q[3] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(lb, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4)));
        for (int k = 0; k < 4; ++k) {
          // group k, columns 16i..16i+15: elements 32k + 16i.., scale index 2k + i
          const int32x4_t d = vdotq_s32(vdupq_n_s32(0), vsubq_s8(q[k], off), vld1q_s8(y + 32 * k + 16 * i));
          sumi = vmlaq_n_s32(sumi, d, sc[2 * k + i]);
        }
      }
    }
    acc = vfmaq_n_f32(acc, vcvtq_f32_s32(sumi), h2f(w[b].d) * a[b].d);
  }
  return vaddvq_f32(acc);
}

}  // namespace

// The exact-mode kernels (vec_dot_f32 / vec_dot_f32_multi) are float math and stay
// the baseline NEON ones inherited from fill_neon.
void fill_neon_dotprod(KernelTable& t) {
  auto at = [&t](TensorType type) -> TypeKernels& { return t.types[static_cast<uint32_t>(type) & 31]; };
  at(TensorType::Q4_0).vec_dot = vec_dot_i8<I8::Q4_0, 2>;
  at(TensorType::Q4_1).vec_dot = vec_dot_i8<I8::Q4_1, 1>;
  at(TensorType::Q5_0).vec_dot = vec_dot_i8<I8::Q5_0, 2>;
  at(TensorType::Q5_1).vec_dot = vec_dot_i8<I8::Q5_1, 1>;
  at(TensorType::Q8_0).vec_dot = vec_dot_i8<I8::Q8_0, 1>;
  at(TensorType::Q4_K).vec_dot = I8::vec_dot_q4_K;
  at(TensorType::Q6_K).vec_dot = vec_dot_q6_K;
  I8::set_lowbit(at(TensorType::Q2_K), at(TensorType::Q3_K), at(TensorType::Q5_K), at(TensorType::IQ4_NL),
                 at(TensorType::IQ4_XS));
}

}  // namespace pllm::kern
