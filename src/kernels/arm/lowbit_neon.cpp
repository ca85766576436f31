// Baseline-NEON exact-mode kernels of the types read from llama.cpp's files: Q2_K, Q3_K, Q5_K,
// IQ4_NL, IQ4_XS (drivers::set_exact over the decoders below: one-row, multi-row, batched decode
// and the prefill GEMM), in every ARM table. Same decoders as x86/lowbit_avx2.cpp's, in 4-lane
// vectors, and the NEON activation quantisers of their formats. Their int8 dots are
// arm/int8_neon.h's (installed by neon.cpp and neon_dotprod.cpp), their int16 tiles in
// i16act_neon.cpp.
#include <arm_neon.h>

#include <cstdint>

#include "kernels/arm/decode_neon.h"
#include "kernels/drivers/fused_dot.h"
#include "kernels/internal.h"
#include "quant/blocks.h"

namespace pllm::kern {

namespace {

using namespace neon;  // h2f, u8_to_f32, s8_to_f32, q4k_unit_codes, F32x4

// Q5_K: Q4_K's nibbles | bit u of qh[l] << 4; fma(q, d sc, -dmin m) as the reference rounds.
struct DecQ5_K : drivers::Q5KRow<F32x4> {
  using Q5KRow::Q5KRow;
  PLLM_AI void unit(int u, float32x4_t v[8]) {
    uint8x16_t a, b;
    q4k_unit_codes(q, u, a, b);
    const int8x16_t sh = vdupq_n_s8(static_cast<int8_t>(-u));
    const uint8x16_t one = vdupq_n_u8(1);
    a = vorrq_u8(a, vshlq_n_u8(vandq_u8(vshlq_u8(vld1q_u8(blk->qh), sh), one), 4));
    b = vorrq_u8(b, vshlq_n_u8(vandq_u8(vshlq_u8(vld1q_u8(blk->qh + 16), sh), one), 4));
    u8_to_f32(a, v);
    u8_to_f32(b, v + 4);
    const float32x4_t ds = vdupq_n_f32(dsc[u]), m = vdupq_n_f32(mn[u]);
    for (int k = 0; k < 8; ++k) v[k] = vfmaq_f32(m, v[k], ds);
  }
};

// The 2-bit codes of unit u = 4 h + j of a Q2_K / Q3_K block: bits 2j of qs[32 h + l].
PLLM_AI void q2_codes(const uint8_t* qs, int u, uint8x16_t c[2]) {
  const int8x16_t sh = vdupq_n_s8(static_cast<int8_t>(-2 * (u % 4)));
  for (int i = 0; i < 2; ++i) c[i] = vandq_u8(vshlq_u8(vld1q_u8(qs + 32 * (u / 4) + 16 * i), sh), vdupq_n_u8(3));
}

struct DecQ2_K : drivers::Q2KRow<F32x4> {
  using Q2KRow::Q2KRow;
  PLLM_AI void unit(int u, float32x4_t v[8]) {
    uint8x16_t c[2];
    q2_codes(blk->qs, u, c);
    for (int i = 0; i < 2; ++i) {  // sub-block 2u + i
      u8_to_f32(c[i], v + 4 * i);
      const float32x4_t ds = vdupq_n_f32(dsc[2 * u + i]), m = vdupq_n_f32(mn[2 * u + i]);
      for (int k = 0; k < 4; ++k) v[4 * i + k] = vfmaq_f32(m, v[4 * i + k], ds);
    }
  }
};

// Q3_K: the two bits minus 4 where bit u of hmask[l] is clear; x = (d (sc - 32)) * q.
struct DecQ3_K : drivers::Q3KRow<F32x4> {
  using Q3KRow::Q3KRow;
  PLLM_AI void unit(int u, float32x4_t v[8]) {
    uint8x16_t c[2];
    q2_codes(blk->qs, u, c);
    const int8x16_t sh = vdupq_n_s8(static_cast<int8_t>(-u));
    for (int i = 0; i < 2; ++i) {
      const uint8x16_t hb = vandq_u8(vshlq_u8(vld1q_u8(blk->hmask + 16 * i), sh), vdupq_n_u8(1));
      const int8x16_t q = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(c[i], vshlq_n_u8(hb, 2))), vdupq_n_s8(4));
      s8_to_f32(q, v + 4 * i);
      const float32x4_t sc = vdupq_n_f32(ds[2 * u + i]);
      for (int k = 0; k < 4; ++k) v[4 * i + k] = vmulq_f32(sc, v[4 * i + k]);
    }
  }
};

// The IQ4 levels of 16 packed bytes (element order) times ds: exact (11 + 6 + 7 bits).
PLLM_AI void iq4_unit(const uint8_t* qs, float32x4_t ds, float32x4_t v[8]) {
  const int8x16_t t = vld1q_s8(kIq4nlValues);
  const uint8x16_t b = vld1q_u8(qs);
  s8_to_f32(vqtbl1q_s8(t, vandq_u8(b, vdupq_n_u8(0x0F))), v);
  s8_to_f32(vqtbl1q_s8(t, vshrq_n_u8(b, 4)), v + 4);
  for (int k = 0; k < 8; ++k) v[k] = vmulq_f32(ds, v[k]);
}

struct DecIQ4_NL : drivers::BlockRow<F32x4, block_iq4_nl> {
  static constexpr int kUnits = 1;
  const uint8_t* q = nullptr;
  float32x4_t d;
  using BlockRow::BlockRow;
  PLLM_AI void block(int64_t b) {
    q = w[b].qs;
    d = vdupq_n_f32(h2f(w[b].d));
  }
  PLLM_AI void unit(int, float32x4_t v[8]) { iq4_unit(q, d, v); }
};

struct DecIQ4_XS : drivers::IQ4XSRow<F32x4> {
  using IQ4XSRow::IQ4XSRow;
  PLLM_AI void unit(int u, float32x4_t v[8]) { iq4_unit(blk->qs + 16 * u, vdupq_n_f32(ds[u]), v); }
};

}  // namespace

void fill_lowbit_neon(KernelTable& t) {
  auto at = [&t](TensorType type) -> TypeKernels& { return t.types[static_cast<uint32_t>(type) & 31]; };
  drivers::set_exact<F32x4, DecQ2_K>(at(TensorType::Q2_K));
  drivers::set_exact<F32x4, DecQ3_K>(at(TensorType::Q3_K));
  drivers::set_exact<F32x4, DecQ5_K>(at(TensorType::Q5_K));
  drivers::set_exact<F32x4, DecIQ4_NL>(at(TensorType::IQ4_NL));
  drivers::set_exact<F32x4, DecIQ4_XS>(at(TensorType::IQ4_XS));
  // The activation quantisers are the formats', not the types': neon.cpp's (filled before this)
  // of Q4_K for the Q8_K types, of Q4_0 for IQ4_NL's Q8_0.
  for (TensorType k : {TensorType::Q2_K, TensorType::Q3_K, TensorType::Q5_K, TensorType::IQ4_XS})
    at(k).quantize_act = at(TensorType::Q4_K).quantize_act;
  at(TensorType::IQ4_NL).quantize_act = at(TensorType::Q4_0).quantize_act;
}

}  // namespace pllm::kern
