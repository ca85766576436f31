// The parts of the int16-activation tiles (drivers/i16_tile.h) that the SMULL / SMLAL file
// (i16act_neon.cpp, baseline flags) and the SDOT / UDOT file (i16act_dotprod.cpp, +dotprod)
// share: the f32 side of the vector traits and S16's add tree (the dotprod tiles must give the
// NEON ones' results bit for bit), the register-tile rows, the groups' scales and mins, and the
// weight codes of Q4_K / Q5_K and Q6_K before each file shapes them for its dots.
//
// ODR: the two files are compiled with different -march flags. Everything here sits in an
// unnamed namespace (templates included), so each translation unit has its own copy compiled
// with its own flags; none is an inline function with external linkage that the linker could
// take from the +dotprod object for the baseline table (SIGILL on ARMv8.0). See neon_common.h.
#pragma once
#include <arm_neon.h>

#include <cstdint>
#include <type_traits>

#include "kernels/arm/neon_common.h"
#include "kernels/k4_scales.h"
#include "quant/blocks.h"

namespace pllm::kern {
namespace {

// The f32 side of the traits (i16act_neon.cpp's S16; i16act_dotprod.cpp's SDot, whose add tree
// must give S16's f32 results) and S16's add tree. join1(u0, u1) = (u0 01, u0 23, u1 01, u1 23)
// (lanes added pairwise: 16 products each); join2 converts those and adds pairwise again in f32
// (exact below 2^24, as for every type but Q6_K): lane j = unit j's total. totals has nothing
// left to do.
struct I16F32 {
  using F = float32x4_t;
  using I = int32x4_t;
  static constexpr int kLanes = 4;
  static PLLM_AI F zero() { return vdupq_n_f32(0.0f); }
  static PLLM_AI I izero() { return vdupq_n_s32(0); }
  static PLLM_AI F load(const float* p) { return vld1q_f32(p); }
  static PLLM_AI F mul(F a, F b) { return vmulq_f32(a, b); }
  static PLLM_AI F fma(F acc, F a, F b) { return vfmaq_f32(acc, a, b); }
  static PLLM_AI float hsum(F v) { return vaddvq_f32(v); }
  static PLLM_AI void prefetch(const uint8_t* p) { __builtin_prefetch(p, 0, 3); }
  static PLLM_AI I join1(I a, I b) { return vpaddq_s32(a, b); }
  static PLLM_AI F join2(I a, I b) { return vpaddq_f32(vcvtq_f32_s32(a), vcvtq_f32_s32(b)); }
  static PLLM_AI void totals(F lo4, F hi4, F t[2]) {
    t[0] = lo4;
    t[1] = hi4;
  }
};

// 32-element blocks: a group is 8 consecutive blocks; the fp16 field at byte `off` of each of
// the first nu of them as f32 lanes (units 0-3 in v[0], 4-7 in v[1]; 0 beyond nu, whose blocks
// are not read). Assembled in general registers (LDRH, ORR), which leaves the vector pipes to
// the dots, then FCVTL / FCVTL2.
template <class W>
PLLM_AI void gather_h(const W* w, int nu, int off, float32x4_t v[2]) {
  uint64_t q[2] = {0, 0};
  for (int i = 0; i < 8 && i < nu; ++i) {
    uint16_t h;
    __builtin_memcpy(&h, reinterpret_cast<const uint8_t*>(w + i) + off, 2);
    q[i / 4] |= uint64_t(h) << (16 * (i % 4));
  }
  const float16x8_t h = vreinterpretq_f16_u64(vcombine_u64(vcreate_u64(q[0]), vcreate_u64(q[1])));
  v[0] = vcvt_f32_f16(vget_low_f16(h));
  v[1] = vcvt_high_f32_f16(h);
}

// Register tiles: per (weight row, activation row) pair an accumulator and up to three add-tree
// states, per weight row 4 code vectors and its scales, 4 activation vectors. Two weight rows
// share each activation load up to kNx2 activation rows, then one. llvm-mca (GCC 12, the SMLAL
// tiles), two rows against one: at 1-2 activation rows Cortex-A55 6-23 % fewer cycles, Neoverse
// N1 -3..+8 % (AVX2 keeps Q6_K at one row for lack of registers; 32 hold two); at 3-4, where two
// rows spill 30-90 stack accesses per group, A55 10-22 % fewer and N1 2-7 % more for the types
// without a min; those with a min spill more there and lose on both.
template <int kNx2>
struct Rows {
  static constexpr int tile_rows(int nx) { return nx <= kNx2 ? 2 : 1; }
};

// A group's scale d (and min m) per unit: lane u % 4 of [u / 4] (8 blocks, or a K-quant block's
// 8 units).
struct G1 {
  float32x4_t d[2];
};
struct G2 : G1 {
  float32x4_t m[2];
};
// The micro-kernels' scale / min of such groups.
struct GroupLanes {
  static PLLM_AI float32x4_t scale(const G1& g, int k) { return g.d[k]; }
  static PLLM_AI float32x4_t min(const G2& g, int k) { return g.m[k]; }
};

// The micro-kernels' weight type W, kUnits, kMin, G and group() where a group is 8 consecutive
// 32-element blocks of type B, one unit each: d at byte 0 and with kMin m at byte 2 of each.
template <class B, bool kMin_>
struct BlockGroups : GroupLanes {
  using W = B;
  static constexpr int kUnits = 1;
  static constexpr bool kMin = kMin_;
  using G = std::conditional_t<kMin, G2, G1>;
  static PLLM_AI G group(const W* w, int nu) {
    G g;
    gather_h(w, nu, 0, g.d);
    if constexpr (kMin) gather_h(w, nu, 2, g.m);
    return g;
  }
};

// The same for Q4_K / Q5_K (B), one block a group: unit j's d * sc_j and -dmin * m_j (exact: 11
// by 6 bits).
template <class B>
struct K4Groups : GroupLanes {
  using W = B;
  static constexpr int kUnits = 8;
  static constexpr bool kMin = true;
  using G = G2;
  static PLLM_AI G group(const W* w, int) {
    uint8_t sm[16];  // scales 0..7, mins 8..15
    unpack_k4_scales(w->scales, sm);
    const uint8x16_t v = vld1q_u8(sm);
    const uint16x8_t s = vmovl_u8(vget_low_u8(v)), m = vmovl_high_u8(v);
    const float32x4_t d = vdupq_n_f32(h2f(w->d)), mdmin = vdupq_n_f32(-h2f(w->dmin));
    G g;
    g.d[0] = vmulq_f32(vcvtq_f32_u32(vmovl_u16(vget_low_u16(s))), d);
    g.d[1] = vmulq_f32(vcvtq_f32_u32(vmovl_high_u16(s)), d);
    g.m[0] = vmulq_f32(vcvtq_f32_u32(vmovl_u16(vget_low_u16(m))), mdmin);
    g.m[1] = vmulq_f32(vcvtq_f32_u32(vmovl_high_u16(m)), mdmin);
    return g;
  }
};

// Unit u's 32 codes (< 32) of Q4_K / Q5_K block w in two byte vectors: q4k_unit_codes, and for
// Q5_K bit u of qh[l] at 16.
template <class B>
PLLM_AI void k45_codes(const B* w, int u, uint8x16_t& a, uint8x16_t& b) {
  q4k_unit_codes(w->qs, u, a, b);
  if constexpr (std::is_same_v<B, block_q5_K>) {
    const int8x16_t sh = vdupq_n_s8(static_cast<int8_t>(-u));
    const uint8x16_t one = vdupq_n_u8(1);
    a = vorrq_u8(a, vshlq_n_u8(vandq_u8(vshlq_u8(vld1q_u8(w->qh), sh), one), 4));
    b = vorrq_u8(b, vshlq_n_u8(vandq_u8(vshlq_u8(vld1q_u8(w->qh + 16), sh), one), 4));
  }
}

// Q6_K unit u = 4 h + k (128-element half h, quarter k), its elements 16 c .. 16 c + 15: the
// unsigned codes q = 4 bits of ql | 2 bits of qh << 4 (< 64; the weight is d * sc * (q - 32)).
// u is a constant once the driver's unit loop is unrolled, so are the shifts.
PLLM_AI uint8x16_t q6k_codes16(const block_q6_K* w, int u, int c) {
  const int h = u / 4, k = u % 4;
  const uint8x16_t l = vld1q_u8(w->ql + 64 * h + 32 * (k & 1) + 16 * c);
  const uint8x16_t lo = k >> 1 ? vshrq_n_u8(l, 4) : vandq_u8(l, vdupq_n_u8(0x0F));
  // qh bits 2k, 2k + 1 to bits 4, 5: one shift, then the mask
  const uint8x16_t qh = vld1q_u8(w->qh + 32 * h + 16 * c);
  const uint8x16_t hs = k == 0 ? vshlq_n_u8(qh, 4) : k == 1 ? vshlq_n_u8(qh, 2) : k == 2 ? qh : vshrq_n_u8(qh, 2);
  return vorrq_u8(lo, vandq_u8(hs, vdupq_n_u8(0x30)));
}

}  // namespace
}  // namespace pllm::kern
