// int16-activation kernels (KernelTable::quantize_row_q16, TypeKernels::vec_dot_i16act_tile)
// on baseline AArch64 NEON (ARMv8.0), used by every ARM table. The scalar twins in
// generic/i16act_scalar.cpp define the results. The tile loop is drivers/i16_tile.h (shared with
// x86/i16act_avx2.cpp); this file holds the NEON vector traits and one micro-kernel per weight
// type (the contract is documented there).
//
// Integer dots: a unit's 32 codes, widened to four int16x8, meet the activation codes by SMULL /
// SMLAL (8 products per int32 lane; |code| <= 4096: exact). ADDP of two units gives 16 products
// per lane, the most a lane may hold, so the next level of the add tree converts to f32.
// Offsets: Q4_0's -8 and Q5_0's -16 stay in the codes (USUBL widens and subtracts in one op, so
// unlike AVX2 an offset costs nothing per code; a min term would cost an FMA per group and pair
// and two live vectors per row). Q6_K's -32 and int8 sub-scales are folded into the codes by
// SMULL (the widening op anyway). Q4_K's 6-bit scales and mins are per-unit f32 lanes, as on AVX2.
//
// llvm-mca 19 on GCC 12's group loops (the ARM build; flags: CMakeLists.txt), cycles per 32
// weights and activation row, Neoverse N1 / Cortex-A55: Q4_0 10.1 / 24.6 at one activation row,
// 9.7 / 18.7 at four; Q8_0 9.8 / 25.1, 9.7 / 18.2 (this file's own tile loop before the driver:
// Q4_0 10.1 / 23.0, 10.0 / 19.9; Q8_0 10.0 / 22.3, 10.0 / 21.1).
//
// Built with the baseline flags. What i16act_dotprod.cpp shares (the f32 side of the traits, the
// groups, h2f, q5_high16, q4k_unit_codes) is in i16_neon_common.h and neon_common.h.
#include <arm_neon.h>

#include <cstdint>
#include <type_traits>

#include "kernels/arm/i16_neon_common.h"
#include "kernels/drivers/i16_tile.h"
#include "kernels/internal.h"
#include "quant/blocks.h"

namespace pllm::kern {

namespace {

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

// ------------------------------------------------------------ driver traits
struct S16 : I16F32 {
  struct Q {
    int16x8_t v[4];  // elements 0..7, 8..15, 16..23, 24..31 of the unit
  };
  // Two SMLAL chains (low and high halves of the codes, 4 products per lane each) added at the
  // end: an in-order core (A55) issues one while the other waits on its accumulator (llvm-mca
  // Cortex-A55, GCC 12, four activation rows: one chain 26, two 21 cycles per unit and row;
  // N1 the same. Clang re-associates them into one chain and interleaves the pairs itself).
  static PLLM_AI I dot(const Q& q, const int16_t* a) {
    int16x8_t av[4];
    for (int k = 0; k < 4; ++k) av[k] = vld1q_s16(a + 8 * k);
    int32x4_t lo = vmull_s16(vget_low_s16(q.v[0]), vget_low_s16(av[0])), hi = vmull_high_s16(q.v[0], av[0]);
    for (int k = 1; k < 4; ++k) {
      lo = vmlal_s16(lo, vget_low_s16(q.v[k]), vget_low_s16(av[k]));
      hi = vmlal_high_s16(hi, q.v[k], av[k]);
    }
    return vaddq_s32(lo, hi);
  }
};
using Q = S16::Q;

// ------------------------------------------------------------ micro-kernels
// 16 bytes (each < 256) minus kOff -> two int16x8 (USUBL, or UXTL for no offset).
template <int kOff>
PLLM_AI void widen(uint8x16_t v, int16x8_t* q) {
  if constexpr (kOff == 0) {
    q[0] = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(v)));
    q[1] = vreinterpretq_s16_u16(vmovl_high_u8(v));
  } else {
    const uint8x16_t off = vdupq_n_u8(kOff);
    q[0] = vreinterpretq_s16_u16(vsubl_u8(vget_low_u8(v), vget_low_u8(off)));
    q[1] = vreinterpretq_s16_u16(vsubl_high_u8(v, off));
  }
}

// Rows, G1 / G2, BlockGroups, K4Groups: i16_neon_common.h.

// Q4_0 / Q4_1 (kOff 8 / 0; Q4_1: kMin, m at byte 2): low nibbles are elements 0..15, high
// nibbles 16..31. x = d * (q - kOff) [+ m].
template <class B, int kOff>
struct MQ4 : Rows<kOff ? 4 : 2>, BlockGroups<B, kOff == 0> {
  static PLLM_AI void codes(const B* w, const G1&, int u, Q& q) {
    const uint8x16_t raw = vld1q_u8(w[u].qs);
    widen<kOff>(vandq_u8(raw, vdupq_n_u8(0x0F)), q.v);
    widen<kOff>(vshrq_n_u8(raw, 4), q.v + 2);
  }
};

// Q5_0 / Q5_1 (kOff 16 / 0): the Q4 nibbles plus bit j of qh at 16 for element j.
template <class B, int kOff>
struct MQ5 : MQ4<B, kOff> {
  static PLLM_AI void codes(const B* w, const G1&, int u, Q& q) {
    uint32_t h;
    __builtin_memcpy(&h, w[u].qh, 4);
    const uint8x16_t raw = vld1q_u8(w[u].qs);
    widen<kOff>(vorrq_u8(vandq_u8(raw, vdupq_n_u8(0x0F)), q5_high16(h)), q.v);
    widen<kOff>(vorrq_u8(vshrq_n_u8(raw, 4), q5_high16(h >> 16)), q.v + 2);
  }
};

// x = d * q, q int8
struct MQ8_0 : Rows<4>, BlockGroups<block_q8_0, false> {
  static PLLM_AI void codes(const W* w, const G&, int u, Q& q) {
    const int8x16_t a = vld1q_s8(w[u].qs), b = vld1q_s8(w[u].qs + 16);
    q.v[0] = vmovl_s8(vget_low_s8(a));
    q.v[1] = vmovl_high_s8(a);
    q.v[2] = vmovl_s8(vget_low_s8(b));
    q.v[3] = vmovl_high_s8(b);
  }
};

// Unit j: x = (d * sc_j) * q - dmin * m_j, q a nibble (low nibbles of the 32 bytes j / 2 for
// even j, high for odd; Q5_K: plus bit j of qh[l] at 16). d * sc_j and dmin * m_j are exact (11
// by 6 bits); lane j % 4 of [j / 4].
template <class B>
struct MKScaleMin : Rows<2>, K4Groups<B> {
  static PLLM_AI void codes(const B* w, const G2&, int u, Q& q) {
    uint8x16_t a, b;
    k45_codes(w, u, a, b);
    widen<0>(a, q.v);
    widen<0>(b, q.v + 2);
  }
};
using MQ4_K = MKScaleMin<block_q4_K>;
using MQ5_K = MKScaleMin<block_q5_K>;

// The IQ4 levels of 16 packed bytes (element order) as int16 codes: one TBL per half.
PLLM_AI void iq4_codes(const uint8_t* qs, Q& q) {
  const int8x16_t t = vld1q_s8(kIq4nlValues);
  const uint8x16_t raw = vld1q_u8(qs);
  const int8x16_t a = vqtbl1q_s8(t, vandq_u8(raw, vdupq_n_u8(0x0F))), b = vqtbl1q_s8(t, vshrq_n_u8(raw, 4));
  q.v[0] = vmovl_s8(vget_low_s8(a));
  q.v[1] = vmovl_high_s8(a);
  q.v[2] = vmovl_s8(vget_low_s8(b));
  q.v[3] = vmovl_high_s8(b);
}

// x = d * level, one block per unit.
struct MIQ4_NL : Rows<4>, BlockGroups<block_iq4_nl, false> {
  static PLLM_AI void codes(const W* w, const G&, int u, Q& q) { iq4_codes(w[u].qs, q); }
};

// Unit j: x = (d * (ls_j - 32)) * level (the factor exact); lane j % 4 of [j / 4].
struct MIQ4_XS : Rows<2>, GroupLanes {
  using W = block_iq4_xs;
  static constexpr int kUnits = 8;
  static constexpr bool kMin = false;
  using G = G1;
  static PLLM_AI G group(const W* w, int) {
    int8_t ls[8];
    unpack_iq4xs_scales(*w, ls);
    const int16x8_t s = vmovl_s8(vld1_s8(ls));
    const float32x4_t d = vdupq_n_f32(h2f(w->d));
    G g;
    g.d[0] = vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(s))), d);
    g.d[1] = vmulq_f32(vcvtq_f32_s32(vmovl_high_s16(s)), d);
    return g;
  }
  static PLLM_AI void codes(const W* w, const G&, int u, Q& q) { iq4_codes(w->qs + 16 * u, q); }
};

// Q3_K unit u = 4 h + j: q = (bits 2j of qs[32 h + l] | bit u of hmask[l] << 2) - 4 times its
// sub-block's signed scale by SMULL (|code| <= 128); x = d * code.
struct MQ3_K : Rows<2> {
  using W = block_q3_K;
  static constexpr int kUnits = 8;
  static constexpr bool kMin = false;
  struct G {
    float32x4_t d;
    int8_t sc[16];
  };
  static PLLM_AI G group(const W* w, int) {
    G g;
    g.d = vdupq_n_f32(h2f(w->d));
    unpack_k3_scales(w->scales, g.sc);
    return g;
  }
  static PLLM_AI void codes(const W* w, const G& g, int u, Q& q) {
    const int8x16_t sh2 = vdupq_n_s8(static_cast<int8_t>(-2 * (u % 4))), shu = vdupq_n_s8(static_cast<int8_t>(-u));
    for (int c = 0; c < 2; ++c) {
      const uint8x16_t lo = vandq_u8(vshlq_u8(vld1q_u8(w->qs + 32 * (u / 4) + 16 * c), sh2), vdupq_n_u8(3));
      const uint8x16_t hb = vandq_u8(vshlq_u8(vld1q_u8(w->hmask + 16 * c), shu), vdupq_n_u8(1));
      const int8x16_t v = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, vshlq_n_u8(hb, 2))), vdupq_n_s8(4));
      const int8x16_t sc = vdupq_n_s8(g.sc[2 * u + c]);
      q.v[2 * c] = vmull_s8(vget_low_s8(v), vget_low_s8(sc));
      q.v[2 * c + 1] = vmull_high_s8(v, sc);
    }
  }
  static PLLM_AI float32x4_t scale(const G& g, int) { return g.d; }
};

// Q2_K unit u = 4 h + j: q = bits 2j of qs[32 h + l] times the low nibble of scales[2u] (elements
// 0-15) or scales[2u + 1] (16-31) by UMULL (code <= 45); x = d * code plus the unit's two mins
// (kHalfMin, drivers/i16_tile.h): -dmin times the high nibbles, lane j % 4 of [j / 4].
struct MQ2_K : Rows<2>, GroupLanes {
  using W = block_q2_K;
  static constexpr int kUnits = 8;
  static constexpr bool kMin = true, kHalfMin = true;
  struct G : G2 {
    float32x4_t m2[2];
    uint8_t sc[16];
  };
  static PLLM_AI G group(const W* w, int) {
    const uint8x8x2_t s = vld2_u8(w->scales);  // bytes 2j (a unit's elements 0-15), 2j + 1 (16-31)
    const float32x4_t mdmin = vdupq_n_f32(-h2f(w->dmin));
    G g;
    g.d[0] = g.d[1] = vdupq_n_f32(h2f(w->d));
    auto mins = [&mdmin](uint8x8_t b, float32x4_t* m) {
      const uint16x8_t v = vmovl_u8(vshr_n_u8(b, 4));
      m[0] = vmulq_f32(vcvtq_f32_u32(vmovl_u16(vget_low_u16(v))), mdmin);
      m[1] = vmulq_f32(vcvtq_f32_u32(vmovl_high_u16(v)), mdmin);
    };
    mins(s.val[0], g.m);
    mins(s.val[1], g.m2);
    vst1q_u8(g.sc, vandq_u8(vld1q_u8(w->scales), vdupq_n_u8(0x0F)));
    return g;
  }
  static PLLM_AI float32x4_t min2(const G& g, int k) { return g.m2[k]; }
  static PLLM_AI void codes(const W* w, const G& g, int u, Q& q) {
    const int8x16_t sh2 = vdupq_n_s8(static_cast<int8_t>(-2 * (u % 4)));
    for (int c = 0; c < 2; ++c) {
      const uint8x16_t v = vandq_u8(vshlq_u8(vld1q_u8(w->qs + 32 * (u / 4) + 16 * c), sh2), vdupq_n_u8(3));
      const uint8x16_t sc = vdupq_n_u8(g.sc[2 * u + c]);
      q.v[2 * c] = vreinterpretq_s16_u16(vmull_u8(vget_low_u8(v), vget_low_u8(sc)));
      q.v[2 * c + 1] = vreinterpretq_s16_u16(vmull_high_u8(v, sc));
    }
  }
};

// Unit u = 4 h + k (128-element half h, quarter k): q = (4 bits of ql | 2 bits of qh << 4) - 32,
// times the int8 scale of its 16 elements by SMULL: (q - 32) * sc in [-4064, 4096], exact;
// x = d * code (q: q6k_codes16).
struct MQ6_K : Rows<2> {
  using W = block_q6_K;
  static constexpr int kUnits = 8;
  static constexpr bool kMin = false;
  struct G {
    float32x4_t d;
  };
  static PLLM_AI G group(const W* w, int) { return {vdupq_n_f32(h2f(w->d))}; }
  static PLLM_AI void codes(const W* w, const G&, int u, Q& q) {
    for (int c = 0; c < 2; ++c) {
      const int8x16_t v = vsubq_s8(vreinterpretq_s8_u8(q6k_codes16(w, u, c)), vdupq_n_s8(32));
      const int8x16_t sc = vld1q_dup_s8(w->scales + 2 * u + c);
      q.v[2 * c] = vmull_s8(vget_low_s8(v), vget_low_s8(sc));
      q.v[2 * c + 1] = vmull_high_s8(v, sc);
    }
  }
  static PLLM_AI float32x4_t scale(const G& g, int) { return g.d; }
};

}  // namespace

void fill_i16act_neon(KernelTable& t) {
  auto at = [&t](TensorType type) -> TypeKernels& { return t.types[static_cast<uint32_t>(type) & 31]; };
  t.quantize_row_q16 = quantize_row_q16;
  at(TensorType::Q4_0).vec_dot_i16act_tile = drivers::i16_tile<S16, MQ4<block_q4_0, 8>>;
  at(TensorType::Q4_1).vec_dot_i16act_tile = drivers::i16_tile<S16, MQ4<block_q4_1, 0>>;
  at(TensorType::Q5_0).vec_dot_i16act_tile = drivers::i16_tile<S16, MQ5<block_q5_0, 16>>;
  at(TensorType::Q5_1).vec_dot_i16act_tile = drivers::i16_tile<S16, MQ5<block_q5_1, 0>>;
  at(TensorType::Q8_0).vec_dot_i16act_tile = drivers::i16_tile<S16, MQ8_0>;
  at(TensorType::Q4_K).vec_dot_i16act_tile = drivers::i16_tile<S16, MQ4_K>;
  at(TensorType::Q6_K).vec_dot_i16act_tile = drivers::i16_tile<S16, MQ6_K>;
  at(TensorType::Q3_K).vec_dot_i16act_tile = drivers::i16_tile<S16, MQ3_K>;
  at(TensorType::Q5_K).vec_dot_i16act_tile = drivers::i16_tile<S16, MQ5_K>;
  at(TensorType::IQ4_NL).vec_dot_i16act_tile = drivers::i16_tile<S16, MIQ4_NL>;
  at(TensorType::IQ4_XS).vec_dot_i16act_tile = drivers::i16_tile<S16, MIQ4_XS>;
  at(TensorType::Q2_K).vec_dot_i16act_tile = drivers::i16_tile<S16, MQ2_K>;
}

}  // namespace pllm::kern
