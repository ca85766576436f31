// int16-activation kernels (KernelTable::quantize_row_q16, TypeKernels::vec_dot_i16act_tile)
// on baseline AArch64 NEON (ARMv8.0), used by every ARM table. The scalar twins in
// generic/i16act_scalar.cpp define the results.
//
// Scheme: per 32-element unit, the weights are decoded to four int16x8 (offsets like Q4_0's
// -8 and K-quant sub-block scales applied in integers, exactly) and dotted with the activation
// block's int16 codes by SMULL/SMLAL into int32 (exact: see the bound at the tile); the unit's
// int32 lanes are then converted once and FMA'd into one f32x4 accumulator per (weight row,
// activation row) with the scale d_w * d_a. Mins (Q4_1, Q5_1, Q4_K) add min * d_a * sum(qs).
//
// Cost: 8 SMULL/SMLAL per unit and pair (int8 SDOT needs 2). llvm-mca 19 on GCC 12's loops,
// cycles per 32 weights and token, Q4_0: decode (NX = 1) 9.5 Cortex-A76 model / 10.1 Neoverse N1 /
// 23 Cortex-A55; NX = 8: 9.0 / 10.1 / 22.5. The int8 SDOT one-row loop: 7.0 / 6.5 / 22.5.
//
// Built with the baseline flags (h2f, unpack_k4_scales, q5_high16: simd_neon.h, decode_neon.h).
#include <arm_neon.h>

#include <cstdint>

#include "kernels/arm/decode_neon.h"
#include "kernels/internal.h"
#include "quant/blocks.h"

namespace pllm::kern {

namespace {

using neon::h2f;

// Loops over registers (rows, activation rows, vectors) unrolled before scalar replacement, so
// that arrays of vectors become registers (GCC otherwise kept accumulators on the stack).
#define PLLM_UNROLL _Pragma("GCC unroll 16")

// ------------------------------------------------------------ activation quantiser
// Bit-identical to the twin: the same float ops in the same order (amax is exact whatever the
// order; FMAXNM ignores quiet NaNs as fmax does, starting from 0 as the twin does), then
// FCVTNS (nearest, ties to even) where the twin takes nearbyint. FCVTNS differs from the
// twin's code() on NaN (0; the twin: INT32_MIN) and on v >= 2^31 (INT32_MAX; the twin:
// INT32_MIN), which both clamp to -32767 there: those lanes are selected explicitly (a NaN
// fails the compare too). v < -2^31 saturates to INT32_MIN as in the twin. Signalling NaNs
// (never produced by arithmetic) are out of contract: FMAXNM quiets them per lane, so amax
// could differ from the sequential twin's.
void quantize_row_q16(const float* x, void* y, int64_t n) {
  auto* out = static_cast<block_q16*>(y);
  const float32x4_t lim = vdupq_n_f32(2147483648.0f);
  const int32x4_t lo = vdupq_n_s32(-32767), hi = vdupq_n_s32(32767);
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    float32x4_t v[8];
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int k = 0; k < 8; ++k) {
      v[k] = vld1q_f32(x + 4 * k);
      m = vmaxnmq_f32(m, vabsq_f32(v[k]));
    }
    const float d = vmaxnmvq_f32(m) / 32767.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int32x4_t sum = vdupq_n_s32(0);
    for (int k = 0; k < 8; k += 2) {
      int32x4_t q[2];
      for (int j = 0; j < 2; ++j) {
        const float32x4_t s = vmulq_n_f32(v[k + j], id);
        const int32x4_t c = vminq_s32(vmaxq_s32(vcvtnq_s32_f32(s), lo), hi);
        q[j] = vbslq_s32(vcltq_f32(s, lim), c, lo);
        sum = vaddq_s32(sum, q[j]);
      }
      vst1q_s16(out[b].qs + 4 * k, vcombine_s16(vmovn_s32(q[0]), vmovn_s32(q[1])));
    }
    out[b].d = d;
    out[b].sum = vaddvq_s32(sum);
  }
}

// ------------------------------------------------------------ weight micro-kernels
// One weight row each: init(row), block(b) per weight block, then for each of its kUnits
// 32-element units: unit(u, q) (the 32 integer weights in element order, q[0] = elements
// 0..7), scale(u) (multiplies the unit's integer dot) and, where kMin, minc(u) (multiplies
// d_a * sum of the activation codes). Dequantised weight i of unit u = scale * q_i + minc,
// up to dequantize_row's own rounding.

// 16 bytes (each < 256) minus off -> two int16x8 (USUBL: the offset costs nothing over a widen).
PLLM_AI void widen_sub(uint8x16_t v, uint8x16_t off, int16x8_t* q) {
  q[0] = vreinterpretq_s16_u16(vsubl_u8(vget_low_u8(v), vget_low_u8(off)));
  q[1] = vreinterpretq_s16_u16(vsubl_high_u8(v, off));
}

// Q4_0 / Q4_1 (kOff 8 / 0): low nibbles are elements 0..15, high nibbles 16..31.
template <class W, int kOff, bool kHasMin>
struct MQ4 {
  static constexpr int kUnits = 1;
  static constexpr bool kMin = kHasMin;
  const W* w = nullptr;
  const W* p = nullptr;
  PLLM_AI void init(const void* row) { w = static_cast<const W*>(row); }
  PLLM_AI void block(int64_t b) { p = w + b; }
  PLLM_AI float scale(int) const { return h2f(p->d); }
  PLLM_AI float minc(int) const {
    if constexpr (kHasMin) return h2f(p->m);
    else return 0.0f;
  }
  PLLM_AI void unit(int, int16x8_t q[4]) const {
    const uint8x16_t raw = vld1q_u8(p->qs), off = vdupq_n_u8(kOff);
    widen_sub(vandq_u8(raw, vdupq_n_u8(0x0F)), off, q);
    widen_sub(vshrq_n_u8(raw, 4), off, q + 2);
  }
};

// Q5_0 / Q5_1 (kOff 16 / 0): the Q4 nibbles plus bit j of qh at 16 for element j.
template <class W, int kOff, bool kHasMin>
struct MQ5 : MQ4<W, kOff, kHasMin> {
  PLLM_AI void unit(int, int16x8_t q[4]) const {
    uint32_t h;
    __builtin_memcpy(&h, this->p->qh, 4);
    const uint8x16_t raw = vld1q_u8(this->p->qs), off = vdupq_n_u8(kOff);
    widen_sub(vorrq_u8(vandq_u8(raw, vdupq_n_u8(0x0F)), neon::q5_high16(h)), off, q);
    widen_sub(vorrq_u8(vshrq_n_u8(raw, 4), neon::q5_high16(h >> 16)), off, q + 2);
  }
};

struct MQ8_0 : MQ4<block_q8_0, 0, false> {
  PLLM_AI void unit(int, int16x8_t q[4]) const {
    const int8x16_t a = vld1q_s8(p->qs), b = vld1q_s8(p->qs + 16);
    q[0] = vmovl_s8(vget_low_s8(a));
    q[1] = vmovl_high_s8(a);
    q[2] = vmovl_s8(vget_low_s8(b));
    q[3] = vmovl_high_s8(b);
  }
};

// Q4_K: unit u = sub-block u (32 elements; nibbles of qs[32 (u/2) ..], low for even u). The
// 6-bit scale is multiplied in by UMULL (the widening op anyway): q * sc <= 15 * 63, exact.
// Dequantised: d * (sc * q) - dmin * m, so scale = d, minc = -(dmin * m) (exact, 11 x 6 bits).
struct MQ4_K {
  static constexpr int kUnits = 8;
  static constexpr bool kMin = true;
  const block_q4_K* w = nullptr;
  const block_q4_K* p = nullptr;
  float d = 0.0f, dmin = 0.0f;
  uint8_t sm[16];  // scales 0..7, mins 8..15
  PLLM_AI void init(const void* row) { w = static_cast<const block_q4_K*>(row); }
  PLLM_AI void block(int64_t b) {
    p = w + b;
    neon::unpack_k4_scales(p->scales, sm);
    d = h2f(p->d);
    dmin = h2f(p->dmin);
  }
  PLLM_AI float scale(int) const { return d; }
  PLLM_AI float minc(int u) const { return -(dmin * static_cast<float>(sm[8 + u])); }
  PLLM_AI void unit(int u, int16x8_t q[4]) const {
    // Branch-free nibble select (shift right by 0 or 4, then mask): with a branch GCC versions
    // the unit loop and spills in the copies.
    const uint8_t* s = p->qs + 32 * (u / 2);
    const int8x16_t sh = vdupq_n_s8(static_cast<int8_t>(-4 * (u & 1)));
    const uint8x16_t a = vandq_u8(vshlq_u8(vld1q_u8(s), sh), vdupq_n_u8(0x0F));
    const uint8x16_t b = vandq_u8(vshlq_u8(vld1q_u8(s + 16), sh), vdupq_n_u8(0x0F));
    const uint8x16_t sc = vdupq_n_u8(sm[u]);
    q[0] = vreinterpretq_s16_u16(vmull_u8(vget_low_u8(a), vget_low_u8(sc)));
    q[1] = vreinterpretq_s16_u16(vmull_high_u8(a, sc));
    q[2] = vreinterpretq_s16_u16(vmull_u8(vget_low_u8(b), vget_low_u8(sc)));
    q[3] = vreinterpretq_s16_u16(vmull_high_u8(b, sc));
  }
};

// Q6_K: unit u = elements 32u.. (half h = u / 4, quarter k = u % 4, as dequantize_row_q6_K);
// each 16 elements have their own int8 scale, multiplied in by SMULL: (q - 32) * sc lies in
// [-4064, 4096], an exact int16. Dequantised: d * (sc * q), so scale = d.
struct MQ6_K {
  static constexpr int kUnits = 8;
  static constexpr bool kMin = false;
  const block_q6_K* w = nullptr;
  const block_q6_K* p = nullptr;
  PLLM_AI void init(const void* row) { w = static_cast<const block_q6_K*>(row); }
  PLLM_AI void block(int64_t b) { p = w + b; }
  PLLM_AI float scale(int) const { return h2f(p->d); }
  PLLM_AI float minc(int) const { return 0.0f; }
  PLLM_AI void unit(int u, int16x8_t q[4]) const {
    const int h = u / 4, k = u % 4;
    const uint8_t* ql = p->ql + 64 * h + 32 * (k & 1);
    const uint8_t* qh = p->qh + 32 * h;
    // Shifts by register amounts (negative: right), branch-free as in MQ4_K.
    const int8x16_t sh = vdupq_n_s8(static_cast<int8_t>(-2 * k)), shl = vdupq_n_s8(static_cast<int8_t>(-4 * (k >> 1)));
    PLLM_UNROLL for (int c = 0; c < 2; ++c) {
      const uint8x16_t lo = vandq_u8(vshlq_u8(vld1q_u8(ql + 16 * c), shl), vdupq_n_u8(0x0F));
      const uint8x16_t hb = vandq_u8(vshlq_u8(vld1q_u8(qh + 16 * c), sh), vdupq_n_u8(0x03));
      const int8x16_t v = vsubq_s8(vreinterpretq_s8_u8(vsliq_n_u8(lo, hb, 4)), vdupq_n_s8(32));
      const int8x16_t sc = vdupq_n_s8(p->scales[8 * h + 2 * k + c]);
      q[2 * c] = vmull_s8(vget_low_s8(v), vget_low_s8(sc));
      q[2 * c + 1] = vmull_high_s8(v, sc);
    }
  }
};

// ======================================================================================
// Tile loop, written once over the micro-kernel M. TO BE MERGED with drivers/i16_tile.h (the
// x86 side's template driver); kept here until the lead unifies the two.
//
// R weight rows x NX activation rows in registers: each unit of each weight row is decoded
// once per call and used for all NX activation rows; each activation vector, loaded once,
// feeds R rows. Per (row, activation row) pair and unit: one int32x4 of exact sums (a lane
// adds 8 products, |w| <= 4096 (Q6_K's sc * q; Q8_0 128, Q4_K 945, others <= 31) times
// |a| <= 32767: <= 8 * 4096 * 32767 < 2^30), then one f32x4 accumulator per pair, updated per
// unit in block order: acc += f32(isum) * (scale * d_a) [+ lane 0: minc * (d_a * sum)],
// reduced by FADDP at the end. That order depends on neither R nor NX, so an output is
// bit-identical however matmul chunks the rows (thread count) or groups the tokens.
// Registers (32): 4R weight + R*NX int32 sums + R*NX accumulators + NX activation vectors:
// NX = 1: R = 4 (16 + 4 + 4 + 1); NX 2..4: R = 2 (<= 8 + 8 + 8 + 4); NX 5..8: R = 1 (<= 4 + 8 +
// 8 + 8). With GCC 12, -fno-schedule-insns (CMakeLists.txt) and the unroll pragmas the hot
// loops stay in registers except for 2-9 spill slots in the tiles with mins at NX = 1 or 4
// (llvm-mca: R = 3 there is no faster); GCC's default pre-RA scheduling hoists every
// activation load and spills in most tiles.
// ======================================================================================
template <class M, int R, int NX>
PLLM_AI void tile(int64_t n, const uint8_t* w, size_t ws, const uint8_t* xq, size_t xs, float* out,
                  int64_t os) {
  M dec[R];
  for (int r = 0; r < R; ++r) dec[r].init(w + r * ws);
  const block_q16* a[NX];
  for (int x = 0; x < NX; ++x) a[x] = reinterpret_cast<const block_q16*>(xq + x * xs);
  float32x4_t acc[R][NX];
  for (int r = 0; r < R; ++r)
    for (int x = 0; x < NX; ++x) acc[r][x] = vdupq_n_f32(0.0f);
  const int64_t nb = n / (32 * M::kUnits);
  for (int64_t b = 0; b < nb; ++b) {
    PLLM_UNROLL for (int r = 0; r < R; ++r) dec[r].block(b);
    for (int u = 0; u < M::kUnits; ++u) {
      int16x8_t wq[R][4];
      float sc[R], mc[R];
      PLLM_UNROLL for (int r = 0; r < R; ++r) {
        dec[r].unit(u, wq[r]);
        sc[r] = dec[r].scale(u);
        if constexpr (M::kMin) mc[r] = dec[r].minc(u);
      }
      const int64_t ab = b * M::kUnits + u;
      // The unit's integer dot of every pair: one SMULL/SMLAL chain of 8 per pair, the chains
      // interleaved (all low halves, then all high halves of each 8 codes), so that an
      // in-order core (A53 / A55) has R * NX independent multiplies between dependent ones.
      int32x4_t c[R][NX];
      PLLM_UNROLL for (int k = 0; k < 4; ++k) {
        int16x8_t av[NX];
        PLLM_UNROLL for (int x = 0; x < NX; ++x) av[x] = vld1q_s16(a[x][ab].qs + 8 * k);
        PLLM_UNROLL for (int x = 0; x < NX; ++x)
          PLLM_UNROLL for (int r = 0; r < R; ++r)
            c[r][x] = k == 0 ? vmull_s16(vget_low_s16(wq[r][0]), vget_low_s16(av[x]))
                             : vmlal_s16(c[r][x], vget_low_s16(wq[r][k]), vget_low_s16(av[x]));
        PLLM_UNROLL for (int x = 0; x < NX; ++x)
          PLLM_UNROLL for (int r = 0; r < R; ++r) c[r][x] = vmlal_high_s16(c[r][x], wq[r][k], av[x]);
      }
      PLLM_UNROLL for (int x = 0; x < NX; ++x) {
        const float da = a[x][ab].d;
        float32x4_t ms = vdupq_n_f32(0.0f);
        if constexpr (M::kMin) ms = vsetq_lane_f32(da * static_cast<float>(a[x][ab].sum), ms, 0);
        PLLM_UNROLL for (int r = 0; r < R; ++r) {
          acc[r][x] = vfmaq_n_f32(acc[r][x], vcvtq_f32_s32(c[r][x]), sc[r] * da);
          if constexpr (M::kMin) acc[r][x] = vfmaq_n_f32(acc[r][x], ms, mc[r]);
        }
      }
    }
  }
  for (int x = 0; x < NX; ++x)
    for (int r = 0; r < R; ++r) out[x * os + r] = vaddvq_f32(acc[r][x]);
}

template <class M, int NX>
void rows(int64_t n, const uint8_t* w, size_t ws, int n_rows, const uint8_t* xq, size_t xs, float* out,
          int64_t os) {
  constexpr int R = NX == 1 ? 4 : (NX <= 4 ? 2 : 1);
  int r = 0;
  for (; r + R <= n_rows; r += R) tile<M, R, NX>(n, w + size_t(r) * ws, ws, xq, xs, out + r, os);
  if constexpr (R > 1)
    for (; r < n_rows; ++r) tile<M, 1, NX>(n, w + size_t(r) * ws, ws, xq, xs, out + r, os);
}

// TypeKernels::vec_dot_i16act_tile: activation rows in groups of up to 8.
template <class M>
void tile_i16(int64_t n, const void* w, size_t ws, int n_rows, const void* xq, size_t xs, int n_x, float* out,
              int64_t os) {
  const auto* wp = static_cast<const uint8_t*>(w);
  for (int x0 = 0; x0 < n_x; x0 += 8) {
    const uint8_t* xp = static_cast<const uint8_t*>(xq) + size_t(x0) * xs;
    float* o = out + int64_t(x0) * os;
    switch (n_x - x0 < 8 ? n_x - x0 : 8) {
      case 1: rows<M, 1>(n, wp, ws, n_rows, xp, xs, o, os); break;
      case 2: rows<M, 2>(n, wp, ws, n_rows, xp, xs, o, os); break;
      case 3: rows<M, 3>(n, wp, ws, n_rows, xp, xs, o, os); break;
      case 4: rows<M, 4>(n, wp, ws, n_rows, xp, xs, o, os); break;
      case 5: rows<M, 5>(n, wp, ws, n_rows, xp, xs, o, os); break;
      case 6: rows<M, 6>(n, wp, ws, n_rows, xp, xs, o, os); break;
      case 7: rows<M, 7>(n, wp, ws, n_rows, xp, xs, o, os); break;
      default: rows<M, 8>(n, wp, ws, n_rows, xp, xs, o, os); break;
    }
  }
}
// ====================================================================== end tile loop

template <class M>
void set(KernelTable& t, TensorType type) {
  t.types[static_cast<uint32_t>(type) & 31].vec_dot_i16act_tile = tile_i16<M>;
}

}  // namespace

void fill_i16act_neon(KernelTable& t) {
  t.quantize_row_q16 = quantize_row_q16;
  set<MQ4<block_q4_0, 8, false>>(t, TensorType::Q4_0);
  set<MQ4<block_q4_1, 0, true>>(t, TensorType::Q4_1);
  set<MQ5<block_q5_0, 16, false>>(t, TensorType::Q5_0);
  set<MQ5<block_q5_1, 0, true>>(t, TensorType::Q5_1);
  set<MQ8_0>(t, TensorType::Q8_0);
  set<MQ4_K>(t, TensorType::Q4_K);
  set<MQ6_K>(t, TensorType::Q6_K);
}

}  // namespace pllm::kern
