// AVX2 weight decoders for the fused-dot driver (kernels/drivers/fused_dot.h): exact mode
// (avx2.cpp) and W4A16 (f16act_avx2.cpp). Exactly the AVX2 flags only (see simd_avx2.h): the
// decoders are not in its per-flag-set namespace.
//
// A decoder turns a weight row into 32-element units of four __m256, holding exactly
// the floats dequantize_row produces (each formula below is the reference's, or an
// FMA whose product is exact so it rounds identically). Its row walk, tail and the K-quants'
// scalar block setup are drivers/weight_rows.h's; here are unit(u, v) (decode unit u) and the
// 32-element quantised types' block(b) (their scales as vectors).
#pragma once
#if defined(__AVXVNNI__)
#error "x86/decode_avx2.h: include only from translation units built with exactly the AVX2 flags"
#endif
#include "kernels/drivers/weight_rows.h"
#include "kernels/x86/simd_avx2.h"
#include "quant/blocks.h"

namespace pllm::kern::avx2 {

struct DecF32 : drivers::F32Row<F32x8> {
  using F32Row::F32Row;
  PLLM_AI void unit(int, __m256 v[4]) {
    for (int k = 0; k < 4; ++k) v[k] = _mm256_loadu_ps(p + 8 * k);
  }
};

struct DecF16 : drivers::F16Row<F32x8> {
  using F16Row::F16Row;
  PLLM_AI void unit(int, __m256 v[4]) {
    for (int k = 0; k < 4; ++k) v[k] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8 * k)));
  }
};

struct DecBF16 : drivers::BF16Row<F32x8> {
  using BF16Row::BF16Row;
  PLLM_AI void unit(int, __m256 v[4]) {
    for (int k = 0; k < 4; ++k) v[k] = load_bf16(p + 8 * k);
  }
};

// d * (q - 8) == fma(q, d, -8d): exact either way (11-bit d times a 4-bit integer).
struct DecQ4_0 : drivers::BlockRow<F32x8, block_q4_0> {
  static constexpr int kUnits = 1;
  const uint8_t* q = nullptr;
  __m256 d, m8d;
  using BlockRow::BlockRow;
  PLLM_AI void block(int64_t b) {
    q = w[b].qs;
    d = bcast_h(w[b].d);
    m8d = _mm256_mul_ps(d, _mm256_set1_ps(-8.0f));  // exact
  }
  PLLM_AI void unit(int, __m256 v[4]) {
    const __m256i a = zx8(q), b = zx8(q + 8), m4 = _mm256_set1_epi32(0x0F);
    v[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(a, m4)), d, m8d);
    v[1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(b, m4)), d, m8d);
    v[2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(a, 4)), d, m8d);
    v[3] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4)), d, m8d);
  }
};

// reference d * q + m; d * q is exact, so fma(q, d, m) rounds identically.
struct DecQ4_1 : drivers::BlockRow<F32x8, block_q4_1> {
  static constexpr int kUnits = 1;
  const uint8_t* q = nullptr;
  __m256 d, m;
  using BlockRow::BlockRow;
  PLLM_AI void block(int64_t b) {
    q = w[b].qs;
    d = bcast_h(w[b].d);
    m = bcast_h(w[b].m);
  }
  PLLM_AI void unit(int, __m256 v[4]) {
    const __m256i a = zx8(q), b = zx8(q + 8), m4 = _mm256_set1_epi32(0x0F);
    v[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(a, m4)), d, m);
    v[1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(b, m4)), d, m);
    v[2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(a, 4)), d, m);
    v[3] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4)), d, m);
  }
};

// Q5_0 / Q5_1: the Q4 nibbles plus the fifth bit (bit j of the word qh) at 16.
// Eight elements starting at element 8k: bits 8k..8k+7 of the word, each moved to 0x10.
PLLM_AI __m256i q5_high8(__m256i hword, int k) {
  const __m256i shifts = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(8 * k));
  return _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(hword, shifts), _mm256_set1_epi32(1)), 4);
}

// reference d * (q - 16): (q - 16) * d is exact (5 by 11 bits), so fma(q, d, -16d) rounds to it.
struct DecQ5_0 : drivers::BlockRow<F32x8, block_q5_0> {
  static constexpr int kUnits = 1;
  const uint8_t* q = nullptr;
  __m256i h;
  __m256 d, m16d;
  using BlockRow::BlockRow;
  PLLM_AI void block(int64_t b) {
    q = w[b].qs;
    uint32_t hw;
    __builtin_memcpy(&hw, w[b].qh, 4);
    h = _mm256_set1_epi32(static_cast<int>(hw));
    const float df = h2f(w[b].d);
    d = _mm256_set1_ps(df);
    m16d = _mm256_set1_ps(-16.0f * df);
  }
  PLLM_AI void unit(int, __m256 v[4]) {
    const __m256i a = zx8(q), b = zx8(q + 8), m4 = _mm256_set1_epi32(0x0F);
    v[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_or_si256(_mm256_and_si256(a, m4), q5_high8(h, 0))), d, m16d);
    v[1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_or_si256(_mm256_and_si256(b, m4), q5_high8(h, 1))), d, m16d);
    v[2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_or_si256(_mm256_srli_epi32(a, 4), q5_high8(h, 2))), d, m16d);
    v[3] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_or_si256(_mm256_srli_epi32(b, 4), q5_high8(h, 3))), d, m16d);
  }
};

// reference d * q + m; d * q is exact, so fma(q, d, m) rounds identically.
struct DecQ5_1 : drivers::BlockRow<F32x8, block_q5_1> {
  static constexpr int kUnits = 1;
  const uint8_t* q = nullptr;
  __m256i h;
  __m256 d, m;
  using BlockRow::BlockRow;
  PLLM_AI void block(int64_t b) {
    q = w[b].qs;
    uint32_t hw;
    __builtin_memcpy(&hw, w[b].qh, 4);
    h = _mm256_set1_epi32(static_cast<int>(hw));
    d = _mm256_set1_ps(h2f(w[b].d));
    m = _mm256_set1_ps(h2f(w[b].m));
  }
  PLLM_AI void unit(int, __m256 v[4]) {
    const __m256i a = zx8(q), b = zx8(q + 8), m4 = _mm256_set1_epi32(0x0F);
    v[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_or_si256(_mm256_and_si256(a, m4), q5_high8(h, 0))), d, m);
    v[1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_or_si256(_mm256_and_si256(b, m4), q5_high8(h, 1))), d, m);
    v[2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_or_si256(_mm256_srli_epi32(a, 4), q5_high8(h, 2))), d, m);
    v[3] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_or_si256(_mm256_srli_epi32(b, 4), q5_high8(h, 3))), d, m);
  }
};

struct DecQ8_0 : drivers::BlockRow<F32x8, block_q8_0> {
  static constexpr int kUnits = 1;
  const int8_t* q = nullptr;
  __m256 d;
  using BlockRow::BlockRow;
  PLLM_AI void block(int64_t b) {
    q = w[b].qs;
    d = bcast_h(w[b].d);
  }
  PLLM_AI void unit(int, __m256 v[4]) {
    for (int k = 0; k < 4; ++k) {
      const __m256i i = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + 8 * k)));
      v[k] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(i));
    }
  }
};

// reference (d * sc) * q - dmin * m: d * sc and (d * sc) * q are exact (<= 21 bits),
// so fma(q, d * sc, -(dmin * m)) rounds identically.
struct DecQ4_K : drivers::Q4KRow<F32x8> {
  using Q4KRow::Q4KRow;
  PLLM_AI void unit(int u, __m256 v[4]) {
    const uint8_t* p = q + 32 * (u / 2);
    const __m256 ds = _mm256_set1_ps(dsc[u]), m = _mm256_set1_ps(mn[u]);
    for (int k = 0; k < 4; ++k) {
      const __m256i a = zx8(p + 8 * k);
      const __m256i qi = (u & 1) ? _mm256_srli_epi32(a, 4) : _mm256_and_si256(a, _mm256_set1_epi32(0x0F));
      v[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(qi), ds, m);
    }
  }
};

// reference (d * sc) * q with q = (low 4 | high 2 << 4) - 32.
struct DecQ6_K : drivers::Q6KRow<F32x8> {
  using Q6KRow::Q6KRow;
  PLLM_AI void unit(int u, __m256 v[4]) {
    const int h = u / 4, k = u % 4;
    const uint8_t* ql = blk->ql + 64 * h + 32 * (k & 1);
    const uint8_t* qh = blk->qh + 32 * h;
    const __m256i m4 = _mm256_set1_epi32(0x0F), m3 = _mm256_set1_epi32(0x03), c32 = _mm256_set1_epi32(32);
    for (int c = 0; c < 4; ++c) {
      const __m256i lo = _mm256_and_si256(_mm256_srli_epi32(zx8(ql + 8 * c), 4 * (k >> 1)), m4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi32(zx8(qh + 8 * c), 2 * k), m3);
      const __m256i qi = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), c32);
      v[c] = _mm256_mul_ps(_mm256_set1_ps(ds[8 * h + 2 * k + c / 2]), _mm256_cvtepi32_ps(qi));
    }
  }
};

}  // namespace pllm::kern::avx2
