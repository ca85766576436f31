// Baseline-NEON weight decoders for the fused-dot driver (kernels/drivers/fused_dot.h):
// exact mode (neon.cpp) and W4A16 (f16act_neon.cpp). Baseline flags only (see simd_neon.h);
// h2f, q5_high16 and q4k_unit_codes, which the +dotprod files use too, are neon_common.h's.
//
// Same scheme as x86/decode_avx2.h: a decoder yields 32-element units (eight float32x4)
// holding exactly dequantize_row's floats; its row walk, tail and the K-quants' scalar block
// setup are drivers/weight_rows.h's.
#pragma once
#include "kernels/arm/simd_neon.h"
#include "kernels/drivers/weight_rows.h"
#include "quant/blocks.h"

namespace pllm::kern::neon {

struct DecF32 : drivers::F32Row<F32x4> {
  using F32Row::F32Row;
  PLLM_AI void unit(int, float32x4_t v[8]) {
    for (int k = 0; k < 8; ++k) v[k] = vld1q_f32(p + 4 * k);
  }
};

struct DecF16 : drivers::F16Row<F32x4> {
  using F16Row::F16Row;
  PLLM_AI void unit(int, float32x4_t v[8]) {
    for (int k = 0; k < 8; ++k) v[k] = vcvt_f32_f16(vld1_f16(reinterpret_cast<const __fp16*>(p + 4 * k)));
  }
};

struct DecBF16 : drivers::BF16Row<F32x4> {
  using BF16Row::BF16Row;
  PLLM_AI void unit(int, float32x4_t v[8]) {
    for (int k = 0; k < 8; ++k) v[k] = load_bf16(p + 4 * k);
  }
};

// d * (q - 8) == q * d + (-8 d) exactly (11-bit d times a 4-bit integer).
struct DecQ4_0 : drivers::BlockRow<F32x4, block_q4_0> {
  static constexpr int kUnits = 1;
  const uint8_t* q = nullptr;
  float32x4_t d, m8d;
  using BlockRow::BlockRow;
  PLLM_AI void block(int64_t b) {
    q = w[b].qs;
    const float df = h2f(w[b].d);
    d = vdupq_n_f32(df);
    m8d = vdupq_n_f32(-8.0f * df);
  }
  PLLM_AI void unit(int, float32x4_t v[8]) {
    const uint8x16_t raw = vld1q_u8(q);
    u8_to_f32(vandq_u8(raw, vdupq_n_u8(0x0F)), v);
    u8_to_f32(vshrq_n_u8(raw, 4), v + 4);
    for (int k = 0; k < 8; ++k) v[k] = vfmaq_f32(m8d, v[k], d);
  }
};

// reference d * q + m with d * q exact: the FMA rounds identically.
struct DecQ4_1 : drivers::BlockRow<F32x4, block_q4_1> {
  static constexpr int kUnits = 1;
  const uint8_t* q = nullptr;
  float32x4_t d, m;
  using BlockRow::BlockRow;
  PLLM_AI void block(int64_t b) {
    q = w[b].qs;
    d = vdupq_n_f32(h2f(w[b].d));
    m = vdupq_n_f32(h2f(w[b].m));
  }
  PLLM_AI void unit(int, float32x4_t v[8]) {
    const uint8x16_t raw = vld1q_u8(q);
    u8_to_f32(vandq_u8(raw, vdupq_n_u8(0x0F)), v);
    u8_to_f32(vshrq_n_u8(raw, 4), v + 4);
    for (int k = 0; k < 8; ++k) v[k] = vfmaq_f32(m, v[k], d);
  }
};

// Q5_0 / Q5_1: the Q4 nibbles plus the fifth bit (q5_high16: neon_common.h).
PLLM_AI void q5_unit(const uint8_t* qs, const uint8_t* qh, float32x4_t v[8]) {
  uint32_t h;
  __builtin_memcpy(&h, qh, 4);
  const uint8x16_t raw = vld1q_u8(qs);
  u8_to_f32(vorrq_u8(vandq_u8(raw, vdupq_n_u8(0x0F)), q5_high16(h)), v);
  u8_to_f32(vorrq_u8(vshrq_n_u8(raw, 4), q5_high16(h >> 16)), v + 4);
}

// reference d * (q - 16): (q - 16) * d is exact (5 by 11 bits), so fma(-16d, q, d) rounds to it.
struct DecQ5_0 : drivers::BlockRow<F32x4, block_q5_0> {
  static constexpr int kUnits = 1;
  const block_q5_0* blk = nullptr;
  float32x4_t d, m16d;
  using BlockRow::BlockRow;
  PLLM_AI void block(int64_t b) {
    blk = w + b;
    const float df = h2f(blk->d);
    d = vdupq_n_f32(df);
    m16d = vdupq_n_f32(-16.0f * df);
  }
  PLLM_AI void unit(int, float32x4_t v[8]) {
    q5_unit(blk->qs, blk->qh, v);
    for (int k = 0; k < 8; ++k) v[k] = vfmaq_f32(m16d, v[k], d);
  }
};

// reference d * q + m with d * q exact: the FMA rounds identically.
struct DecQ5_1 : drivers::BlockRow<F32x4, block_q5_1> {
  static constexpr int kUnits = 1;
  const block_q5_1* blk = nullptr;
  float32x4_t d, m;
  using BlockRow::BlockRow;
  PLLM_AI void block(int64_t b) {
    blk = w + b;
    d = vdupq_n_f32(h2f(blk->d));
    m = vdupq_n_f32(h2f(blk->m));
  }
  PLLM_AI void unit(int, float32x4_t v[8]) {
    q5_unit(blk->qs, blk->qh, v);
    for (int k = 0; k < 8; ++k) v[k] = vfmaq_f32(m, v[k], d);
  }
};

struct DecQ8_0 : drivers::BlockRow<F32x4, block_q8_0> {
  static constexpr int kUnits = 1;
  const int8_t* q = nullptr;
  float32x4_t d;
  using BlockRow::BlockRow;
  PLLM_AI void block(int64_t b) {
    q = w[b].qs;
    d = vdupq_n_f32(h2f(w[b].d));
  }
  PLLM_AI void unit(int, float32x4_t v[8]) {
    s8_to_f32(vld1q_s8(q), v);
    s8_to_f32(vld1q_s8(q + 16), v + 4);
    for (int k = 0; k < 8; ++k) v[k] = vmulq_f32(d, v[k]);
  }
};

// reference (d * sc) * q - dmin * m, both products exact: FMA rounds identically.
struct DecQ4_K : drivers::Q4KRow<F32x4> {
  using Q4KRow::Q4KRow;
  PLLM_AI void unit(int u, float32x4_t v[8]) {
    uint8x16_t a, b;
    q4k_unit_codes(q, u, a, b);
    u8_to_f32(a, v);
    u8_to_f32(b, v + 4);
    const float32x4_t ds = vdupq_n_f32(dsc[u]), m = vdupq_n_f32(mn[u]);
    for (int k = 0; k < 8; ++k) v[k] = vfmaq_f32(m, v[k], ds);
  }
};

// reference (d * sc) * q, q = (low 4 | high 2 << 4) - 32.
struct DecQ6_K : drivers::Q6KRow<F32x4> {
  using Q6KRow::Q6KRow;
  PLLM_AI void unit(int u, float32x4_t v[8]) {
    const int h = u / 4, k = u % 4;
    const uint8_t* ql = blk->ql + 64 * h + 32 * (k & 1);
    const uint8_t* qh = blk->qh + 32 * h;
    const int8x16_t sh = vdupq_n_s8(static_cast<int8_t>(-2 * k));
    for (int c = 0; c < 2; ++c) {
      uint8x16_t lo = vld1q_u8(ql + 16 * c);
      lo = (k >> 1) ? vshrq_n_u8(lo, 4) : vandq_u8(lo, vdupq_n_u8(0x0F));
      const uint8x16_t hi = vandq_u8(vshlq_u8(vld1q_u8(qh + 16 * c), sh), vdupq_n_u8(0x03));
      const int8x16_t qv = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, vshlq_n_u8(hi, 4))), vdupq_n_s8(32));
      s8_to_f32(qv, v + 4 * c);
      const float32x4_t sc = vdupq_n_f32(ds[8 * h + 2 * k + c]);
      for (int i = 0; i < 4; ++i) v[4 * c + i] = vmulq_f32(sc, v[4 * c + i]);
    }
  }
};

}  // namespace pllm::kern::neon
