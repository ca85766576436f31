// int16-activation tiles (TypeKernels::vec_dot_i16act_tile) on the int8 dot product (ARMv8.2
// DotProd: SDOT / UDOT), installed in the dotprod and i8mm tables over arm/i16act_neon.cpp's
// SMULL / SMLAL ones for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K. Bit for bit the
// NEON tiles' results (tests/cpp/test_i16act.cpp, I16ActArm): the same integer per unit and
// half unit, the same f32 part (drivers/i16_tile.h; the traits' f32 ops are S16's).
//
// Why: SMLAL does 4 products per instruction on one pipe of a Cortex-A76 / Neoverse N1; SDOT
// 16, on both. An int16 code a splits exactly into a = 256 h + l, h = a >> 8 (arithmetic, int8)
// and l = a & 255 (uint8). Against weight codes q (unsigned, < 128: Q4_0, Q5_0 and Q6_K without
// their offset k = 8, 16, 32; Q4_1, Q5_1, Q4_K, Q5_K as they are),
//   (q - k) . a = 256 (q . h - k sum(h)) + (q . l - k sum(l))
// SDOT for q . h, UDOT for q . l, the sums per SDOT lane made once per call with the split and
// loaded as the two dot chains' initial values (no MOVI, no per-weight subtraction). Q8_0's
// signed codes w take SDOT against h directly and UDOT as w ^ 0x80 = w + 128 against l, minus
// 128 sum(l). Every int32 the NEON kernel forms (unit halves; Q6_K's lanes after the sub-scale)
// fits, and int32 arithmetic wraps, so each is formed exactly here too. UDOT needs no i8mm;
// USDOT would spare only Q8_0's EOR per 16 weights (the correction costs no instruction).
//
// The activation rows are split once per call and slice (drivers/i16_tile.h: Act, split; into
// gemm_scratch): 32 h bytes, 32 l bytes, the two correction vectors per unit (Q6_K: per 16
// elements). Splitting per weight row instead costs 4 UZP per unit and row, as much as the dots.
//
// Halves: S16 converts each unit's two 16-product halves (elements with e % 4 in {0, 1}, and
// {2, 3}) to f32 and adds them. Where a half stays below 2^24 (|code| <= 32: every type here but
// Q8_0 and Q6_K) that is the rounding of the unit's exact total, so SDOT's lanes (4 consecutive
// elements) serve and the total is converted once. Q8_0's and Q6_K's halves can pass 2^24 and
// round: their codes and activations are permuted within each 16 elements (kPerm: byte pairs 0,
// 2, 4, 6 then 1, 3, 5, 7, one TBL) so that SDOT lanes 0-1 hold the first half and 2-3 the
// second, as S16's lanes do, and their join2 is S16's. Q6_K keeps its 6-bit codes int8 and
// multiplies each 16-element lane sum by its int8 sub-scale before the halves are added.
//
// llvm-mca 19 on clang 14's group loops (bench/mca/run_mca.sh --rows int16), one activation row,
// cycles per 32 weights, Cortex-A55 / Neoverse N1, this file against i16act_neon.cpp: Q4_0
// 16.8 / 5.3 (22.3 / 9.9), Q8_0 23.9 / 6.7 (21.7 / 9.6), Q4_K 19.8 / 6.2 (27.7 / 10.8), Q6_K
// 40.5 / 11.8 (42.6 / 13.5). What is left is mostly decode, add tree and f32 scaling, not dots
// (docs/PERFORMANCE.md, "int16 decode on SDOT / UDOT").
#include <arm_neon.h>

#include <cstdint>
#include <type_traits>

#include "kernels/arm/i16_neon_common.h"
#include "kernels/drivers/i16_tile.h"
#include "kernels/internal.h"
#include "quant/blocks.h"

namespace pllm::kern {

namespace {

// Shared with i16act_neon.cpp, each translation unit its own copy (ODR: see the headers):
// h2f, q5_high16, q4k_unit_codes (neon_common.h); I16F32, Rows, G1 / G2, GroupLanes, BlockGroups,
// K4Groups, k45_codes, q6k_codes16 (i16_neon_common.h).

// ------------------------------------------------------------ split activations
// One unit: h and l bytes (element order, or kPerm's), and the initial values of the h and l
// dot accumulators, kC lanes each (4 per unit; Q6_K: 4 per 16 elements, 8): the corrections
// for the weight offset k (ch = -k sum(h), cl = -k sum(l) per SDOT lane; Q8_0, whose SDOT takes
// the signed codes: ch = 0), or zeros. Loaded as accumulators, they spare a MOVI per dot chain
// (the vector pipes are the bound; the load pipes have room).
template <int kC>
struct ActU {
  int8_t h[32];
  uint8_t l[32];
  int32_t ch[kC], cl[kC];
};

// Byte pairs 0, 2, 4, 6, 1, 3, 5, 7 of 16 bytes: SDOT lanes 0-1 get elements e % 4 in {0, 1}.
PLLM_AI uint8x16_t perm_idx() {
  const uint8x16_t i = {0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15};
  return i;
}

// kOff: the weight codes' k (0: none); kSignedH: SDOT gets the signed codes (no ch).
template <bool kPerm, int kOff, bool kSignedH, int kC>
void split_act(const block_q16* src, int64_t nu, ActU<kC>* dst) {
  const uint8x16_t idx = perm_idx(), ones = vdupq_n_u8(1);
  const int32x4_t mk = vdupq_n_s32(-kOff);
  for (int64_t i = 0; i < nu; ++i) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(src[i].qs);
    const uint8x16_t a0 = vld1q_u8(p), a1 = vld1q_u8(p + 16), a2 = vld1q_u8(p + 32), a3 = vld1q_u8(p + 48);
    // little endian: byte 2e of the codes is l_e, byte 2e + 1 is h_e
    uint8x16_t l0 = vuzp1q_u8(a0, a1), l1 = vuzp1q_u8(a2, a3), h0 = vuzp2q_u8(a0, a1), h1 = vuzp2q_u8(a2, a3);
    if constexpr (kPerm) {
      l0 = vqtbl1q_u8(l0, idx), l1 = vqtbl1q_u8(l1, idx), h0 = vqtbl1q_u8(h0, idx), h1 = vqtbl1q_u8(h1, idx);
    }
    vst1q_u8(reinterpret_cast<uint8_t*>(dst[i].h), h0);
    vst1q_u8(reinterpret_cast<uint8_t*>(dst[i].h) + 16, h1);
    vst1q_u8(dst[i].l, l0);
    vst1q_u8(dst[i].l + 16, l1);
    int32x4_t ch[2] = {vdupq_n_s32(0), vdupq_n_s32(0)}, cl[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
    if constexpr (kOff != 0) {
      const uint8x16_t l[2] = {l0, l1}, h[2] = {h0, h1};
      for (int j = 0; j < 2; ++j) {
        cl[j] = vmulq_s32(vreinterpretq_s32_u32(vdotq_u32(vdupq_n_u32(0), l[j], ones)), mk);
        if constexpr (!kSignedH)
          ch[j] = vmulq_s32(vdotq_s32(vdupq_n_s32(0), vreinterpretq_s8_u8(h[j]), vreinterpretq_s8_u8(ones)), mk);
      }
    }
    if constexpr (kC == 8) {
      vst1q_s32(dst[i].ch, ch[0]), vst1q_s32(dst[i].ch + 4, ch[1]);
      vst1q_s32(dst[i].cl, cl[0]), vst1q_s32(dst[i].cl + 4, cl[1]);
    } else {
      vst1q_s32(dst[i].ch, vaddq_s32(ch[0], ch[1]));
      vst1q_s32(dst[i].cl, vaddq_s32(cl[0], cl[1]));
    }
  }
}

// ------------------------------------------------------------ driver traits
// A unit's weight codes, 16 elements each: s for SDOT, u for UDOT (the same codes where they
// are unsigned: q < 128; Q8_0: s the signed codes, u = s + 128).
struct QD {
  int8x16_t s[2];
  uint8x16_t u[2];
};
// Q6_K: the same, and the two 16-element sub-scales (each in every lane).
struct QD6 : QD {
  int32x4_t sc[2];
};

// A unit's h and l dots, kept apart through the add tree (SDot with a correction).
struct HL {
  int32x4_t h, l;
};

template <bool kPerm, int kOff, bool kSignedH, bool kSub>
struct SDot : I16F32 {  // the f32 side and, with kPerm, join2: S16's (the results match)
  static constexpr int kC = kSub ? 8 : 4;
  using Act = ActU<kC>;
  using Q = std::conditional_t<kSub, QD6, QD>;
  static Act* scratch(size_t units) { return static_cast<Act*>(gemm_scratch(units * sizeof(Act))); }
  static void split(const block_q16* src, int64_t nu, Act* dst) {
    split_act<kPerm, kOff, kSignedH, kC>(src, nu, dst);
  }
  // With a correction (and no sub-scales) both accumulators are loaded and the dot is the pair
  // (h, l): the tree adds the h's and l's apart (ADDP is linear) and 256 h + l is formed once per
  // 4 units (once per half with kPerm) instead of per unit. Without one, 256 h + l per unit costs
  // just the SHL (the UDOTs go on top of it), and the tree is S16's.
  static constexpr bool kPair = kOff != 0 && !kSub;
  using I = std::conditional_t<kPair, HL, int32x4_t>;
  static PLLM_AI I izero() {
    if constexpr (kPair) return {vdupq_n_s32(0), vdupq_n_s32(0)};
    else return vdupq_n_s32(0);
  }
  static PLLM_AI I join1(I a, I b) {
    if constexpr (kPair) return {vpaddq_s32(a.h, b.h), vpaddq_s32(a.l, b.l)};
    else return vpaddq_s32(a, b);
  }
  static PLLM_AI int32x4_t hl(HL v) { return vaddq_s32(vshlq_n_s32(v.h, 8), v.l); }
  // Without kPerm every half is below 2^24 (see the top): the unit's total, converted once, is
  // S16's f32(half) + f32(half). With it, S16's: each half converted, then added in f32.
  static PLLM_AI F join2(I a, I b) {
    if constexpr (kPair && kPerm) return vpaddq_f32(vcvtq_f32_s32(hl(a)), vcvtq_f32_s32(hl(b)));
    else if constexpr (kPair) return vcvtq_f32_s32(hl({vpaddq_s32(a.h, b.h), vpaddq_s32(a.l, b.l)}));
    else if constexpr (kPerm) return I16F32::join2(a, b);
    else return vcvtq_f32_s32(vpaddq_s32(a, b));
  }
  static PLLM_AI I dot(const Q& q, const Act* a) {
    if constexpr (kSub) {
      // sc (256 h0 + l0) + sc' (256 h1 + l1). (Four multiplies, 256 sc h0 + sc l0 + ..., spare
      // the SHL and ADD but measured no faster on N1 and slower on A55 / A76.)
      int32x4_t p[2];
      for (int j = 0; j < 2; ++j) {
        const int32x4_t hd = vdotq_s32(vld1q_s32(a->ch + 4 * j), q.s[j], vld1q_s8(a->h + 16 * j));
        const uint32x4_t ld =
            vdotq_u32(vreinterpretq_u32_s32(vld1q_s32(a->cl + 4 * j)), q.u[j], vld1q_u8(a->l + 16 * j));
        p[j] = vaddq_s32(vreinterpretq_s32_u32(ld), vshlq_n_s32(hd, 8));
      }
      return vmlaq_s32(vmulq_s32(p[0], q.sc[0]), p[1], q.sc[1]);
    } else {
      const int32x4_t hd = vdotq_s32(vdotq_s32(vld1q_s32(a->ch), q.s[0], vld1q_s8(a->h)), q.s[1], vld1q_s8(a->h + 16));
      if constexpr (kOff == 0) {
        uint32x4_t r = vreinterpretq_u32_s32(vshlq_n_s32(hd, 8));
        r = vdotq_u32(vdotq_u32(r, q.u[0], vld1q_u8(a->l)), q.u[1], vld1q_u8(a->l + 16));
        return vreinterpretq_s32_u32(r);
      } else {
        uint32x4_t ld = vdotq_u32(vreinterpretq_u32_s32(vld1q_s32(a->cl)), q.u[0], vld1q_u8(a->l));
        ld = vdotq_u32(ld, q.u[1], vld1q_u8(a->l + 16));
        return {hd, vreinterpretq_s32_u32(ld)};
      }
    }
  }
};

// ------------------------------------------------------------ micro-kernels
// Groups, scales and mins exactly as arm/i16act_neon.cpp forms them (the f32 part must match:
// gather_h, BlockGroups, K4Groups of i16_neon_common.h).

// 16 unsigned codes (< 128: both dots take them) to QD half i.
PLLM_AI void set_codes(QD& q, int i, uint8x16_t u) {
  q.u[i] = u;
  q.s[i] = vreinterpretq_s8_u8(u);
}
// Both halves.
PLLM_AI void set_codes(QD& q, uint8x16_t a, uint8x16_t b) {
  set_codes(q, 0, a);
  set_codes(q, 1, b);
}

// Q4_0 / Q4_1 (kOff 8 / 0), Q5_0 / Q5_1 (kFive; kOff 16 / 0): as MQ4 / MQ5 of i16act_neon.cpp.
template <class B, int kOff, bool kFive>
struct MQ45 : Rows<kOff ? 4 : 2>, BlockGroups<B, kOff == 0> {
  static PLLM_AI void codes(const B* w, const G1&, int u, QD& q) {
    const uint8x16_t raw = vld1q_u8(w[u].qs);
    uint8x16_t lo = vandq_u8(raw, vdupq_n_u8(0x0F)), hi = vshrq_n_u8(raw, 4);
    if constexpr (kFive) {
      uint32_t h;
      __builtin_memcpy(&h, w[u].qh, 4);
      lo = vorrq_u8(lo, q5_high16(h));
      hi = vorrq_u8(hi, q5_high16(h >> 16));
    }
    set_codes(q, lo, hi);
  }
};

// x = d * q, q int8: s = the permuted codes, u = s ^ 0x80 (= s + 128 as uint8).
struct MQ8_0 : Rows<4>, BlockGroups<block_q8_0, false> {
  static PLLM_AI void codes(const W* w, const G&, int u, QD& q) {
    const uint8x16_t idx = perm_idx(), sign = vdupq_n_u8(0x80);
    for (int i = 0; i < 2; ++i) {
      const uint8x16_t v = vqtbl1q_u8(vld1q_u8(reinterpret_cast<const uint8_t*>(w[u].qs) + 16 * i), idx);
      q.s[i] = vreinterpretq_s8_u8(v);
      q.u[i] = veorq_u8(v, sign);
    }
  }
};

// Q4_K / Q5_K: as MKScaleMin of i16act_neon.cpp; codes q (< 32) for both dots.
template <class B>
struct MKScaleMin : Rows<2>, K4Groups<B> {
  static PLLM_AI void codes(const B* w, const G2&, int u, QD& q) {
    uint8x16_t a, b;
    k45_codes(w, u, a, b);
    set_codes(q, a, b);
  }
};

// Q6_K unit u = 4 h + k: q = 4 bits of ql | 2 bits of qh << 4 (< 64, permuted) for both dots
// (the -32 in the corrections), the int8 sub-scales of elements 0-15 and 16-31; x = d * (q - 32)
// * sc. One weight row per tile: two cost more (llvm-mca N1, one activation row: 14.2 against
// 11.9 cycles per 32 weights, measured before the sub-scales became LD1R loads).
struct MQ6_K : Rows<0> {
  using W = block_q6_K;
  static constexpr int kUnits = 8;
  static constexpr bool kMin = false;
  struct G {
    float32x4_t d;
    int32_t sc[16];  // the sub-scales widened once per block: each unit's are LD1R loads
  };
  static PLLM_AI G group(const W* w, int) {
    G g;
    g.d = vdupq_n_f32(h2f(w->d));
    const int8x16_t sc = vld1q_s8(w->scales);
    const int16x8_t lo = vmovl_s8(vget_low_s8(sc)), hi = vmovl_high_s8(sc);
    const int32x4_t v[4] = {vmovl_s16(vget_low_s16(lo)), vmovl_high_s16(lo), vmovl_s16(vget_low_s16(hi)),
                            vmovl_high_s16(hi)};
    for (int i = 0; i < 4; ++i) vst1q_s32(g.sc + 4 * i, v[i]);
    return g;
  }
  static PLLM_AI void codes(const W* w, const G& g, int u, QD6& q) {
    const uint8x16_t idx = perm_idx();
    for (int c = 0; c < 2; ++c) set_codes(q, c, vqtbl1q_u8(q6k_codes16(w, u, c), idx));
    for (int j = 0; j < 2; ++j) q.sc[j] = vld1q_dup_s32(g.sc + 2 * u + j);
  }
  static PLLM_AI float32x4_t scale(const G& g, int) { return g.d; }
};

using SNat = SDot<false, 0, false, false>;  // Q4_1, Q5_1, Q4_K, Q5_K
template <int kOff>
using SOff = SDot<false, kOff, false, false>;  // Q4_0 (8), Q5_0 (16)
using SQ8 = SDot<true, 128, true, false>;
using SQ6 = SDot<true, 32, false, true>;

template <class S, class M>
constexpr auto tile = drivers::i16_tile<S, M, true>;

}  // namespace

void fill_i16act_dotprod(KernelTable& t) {
  auto at = [&t](TensorType type) -> TypeKernels& { return t.types[static_cast<uint32_t>(type) & 31]; };
  at(TensorType::Q4_0).vec_dot_i16act_tile = tile<SOff<8>, MQ45<block_q4_0, 8, false>>;
  at(TensorType::Q4_1).vec_dot_i16act_tile = tile<SNat, MQ45<block_q4_1, 0, false>>;
  at(TensorType::Q5_0).vec_dot_i16act_tile = tile<SOff<16>, MQ45<block_q5_0, 16, true>>;
  at(TensorType::Q5_1).vec_dot_i16act_tile = tile<SNat, MQ45<block_q5_1, 0, true>>;
  at(TensorType::Q8_0).vec_dot_i16act_tile = tile<SQ8, MQ8_0>;
  at(TensorType::Q4_K).vec_dot_i16act_tile = tile<SNat, MKScaleMin<block_q4_K>>;
  at(TensorType::Q5_K).vec_dot_i16act_tile = tile<SNat, MKScaleMin<block_q5_K>>;
  at(TensorType::Q6_K).vec_dot_i16act_tile = tile<SQ6, MQ6_K>;
  // Q3_K, IQ4_NL, IQ4_XS keep the SMLAL tiles (their halves exceed 2^24 too: permuted codes
  // would do; not measured yet).
}

}  // namespace pllm::kern

#undef PLLM_AI
