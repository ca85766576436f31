// The 32-element block types as int8 vectors for the NEON int8 kernels, written once for
// every level: the one-row dots (TypeKernels::vec_dot through drivers/block_dot.h, and Q4_K's) of the
// baseline level (neon.cpp) and the dotprod level (neon_dotprod.cpp), which differ only in
// how 32 int8 products are summed (vmull_s8 + pairwise adds, or SDOT: the level type L
// supplies it), and the weight types of the prefill GEMMs (gemm_dotprod.cpp, gemm_i8mm.cpp) and of
// the decode kernels over load-time panels (panel_dotprod.cpp).
//
// ODR: everything here is a member of a template over L, a type declared in the including
// file's anonymous namespace, so each instantiation belongs to that file and is compiled with
// its flags; nothing is a plain inline function that the linker could take from the object of
// the other level (the baseline table must never run an SDOT).
#pragma once
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

#include "kernels/drivers/block_dot.h"
#include "kernels/k4_scales.h"
#include "quant/blocks.h"
#include "quant/panel.h"

#define PLLM_I8_AI inline __attribute__((always_inline))

namespace pllm::kern::neon_int8 {

// L: h2f(uint16_t) (IEEE half to float) and, for Dot, dot32(lo, hi, a): the exact integer products of
// lo with a[0..15] and of hi with a[16..31], summed into 4 int32 lanes. Every value fed to it
// is within [-128, 127] x [-127, 127] (two products fit an int16 lane for the vmull path).
template <class L>
struct Blocks {
  // bytes(w, q): the block's 32 quants in element order as two int8x16 (elements 0..15 and
  // 16..31); minus the offset for the types without a min, unsigned for the ones with a min
  // (whose activations are Q8_1 and whose dot adds m * s per block).
  // Q4_0, Q4_1, Q8_0 also read load-time panels (quant/panel.h): panel_group(qs, g, k) gives the
  // signed quants of element group g (0..7) of rows 4k..4k+3 (k = 0..3: a 16-byte quarter of a
  // panel vector) as bytes() does, in a panel block whose quants start at qs (kPanelQs bytes in,
  // after the 16 fp16 scales and, Q4_1, the 16 mins).
  struct Q4_0 {
    using W = block_q4_0;
    using A = block_q8_0;
    static constexpr bool kMin = false;
    static PLLM_I8_AI void bytes(const W& b, int8x16_t q[2]) {
      const uint8x16_t v = vld1q_u8(b.qs);
      q[0] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F))), vdupq_n_s8(8));
      q[1] = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), vdupq_n_s8(8));
    }
    static constexpr size_t kPanelQs = 32;
    static PLLM_I8_AI int8x16_t panel_group(const uint8_t* qs, int g, int k) {
      return vsubq_s8(vreinterpretq_s8_u8(panel_nibbles(qs, g, k)), vdupq_n_s8(8));
    }
  };
  struct Q4_1 {
    using W = block_q4_1;
    using A = block_q8_1;
    static constexpr bool kMin = true;
    static PLLM_I8_AI void bytes(const W& b, int8x16_t q[2]) {
      const uint8x16_t v = vld1q_u8(b.qs);
      q[0] = vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F)));
      q[1] = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
    }
    static constexpr size_t kPanelQs = 64;
    static PLLM_I8_AI int8x16_t panel_group(const uint8_t* qs, int g, int k) {
      return vreinterpretq_s8_u8(panel_nibbles(qs, g, k));
    }
  };
  // Q4 panel vector g & 3 holds group g in its low (g < 4) or high nibbles.
  static PLLM_I8_AI uint8x16_t panel_nibbles(const uint8_t* qs, int g, int k) {
    const uint8x16_t v = vld1q_u8(qs + 64 * (g & 3) + 16 * k);
    return g < 4 ? vandq_u8(v, vdupq_n_u8(0x0F)) : vshrq_n_u8(v, 4);
  }
  // Q5_0 / Q5_1: the Q4 nibbles plus the fifth bit (bit j of the word qh for element j) at 16.
  static PLLM_I8_AI void q5_bytes(const uint8_t* qs, const uint8_t* qh, int8x16_t q[2]) {
    uint32_t h;
    __builtin_memcpy(&h, qh, 4);
    const uint8x16_t v = vld1q_u8(qs);
    q[0] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(v, vdupq_n_u8(0x0F)), high16(h)));
    q[1] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(v, 4), high16(h >> 16)));
  }
  // byte j: 0x10 where bit j of the low 16 bits is set
  static PLLM_I8_AI uint8x16_t high16(uint32_t bits) {
    const uint8x16_t b =
        vcombine_u8(vdup_n_u8(static_cast<uint8_t>(bits)), vdup_n_u8(static_cast<uint8_t>(bits >> 8)));
    const uint8x16_t sel = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    return vandq_u8(vtstq_u8(b, sel), vdupq_n_u8(0x10));
  }
  struct Q5_0 {
    using W = block_q5_0;
    using A = block_q8_0;
    static constexpr bool kMin = false;
    static PLLM_I8_AI void bytes(const W& b, int8x16_t q[2]) {
      q5_bytes(b.qs, b.qh, q);
      q[0] = vsubq_s8(q[0], vdupq_n_s8(16));
      q[1] = vsubq_s8(q[1], vdupq_n_s8(16));
    }
  };
  struct Q5_1 {
    using W = block_q5_1;
    using A = block_q8_1;
    static constexpr bool kMin = true;
    static PLLM_I8_AI void bytes(const W& b, int8x16_t q[2]) { q5_bytes(b.qs, b.qh, q); }
  };
  struct Q8_0 {
    using W = block_q8_0;
    using A = block_q8_0;
    static constexpr bool kMin = false;
    static PLLM_I8_AI void bytes(const W& b, int8x16_t q[2]) {
      q[0] = vld1q_s8(b.qs);
      q[1] = vld1q_s8(b.qs + 16);
    }
    // Panels store q + 128 (for x86's unsigned x signed dot); EOR 0x80 gives q back.
    static constexpr size_t kPanelQs = 32;
    static PLLM_I8_AI int8x16_t panel_group(const uint8_t* qs, int g, int k) {
      return vreinterpretq_s8_u8(veorq_u8(vld1q_u8(qs + 64 * g + 16 * k), vdupq_n_u8(0x80)));
    }
  };
  // The prefill GEMMs' 8-row panels from a load-time one: f(kb, h, b, k) for the kbn blocks from
  // kb0 of the panel at w (b: block kb0 + kb) and its 4-row quarters k = row0 / 4 + h, h = 0, 1
  // (rows row0 .. row0 + 7; row0 0 or 8, drivers/gemm_panels.h).
  template <class W, class F>
  static PLLM_I8_AI void panel_half(const uint8_t* w, int row0, int kb0, int kbn, F&& f) {
    constexpr size_t kPbb = kPanelRows * sizeof(W);
    for (int kb = 0; kb < kbn; ++kb)
      for (int h = 0; h < 2; ++h) f(kb, h, w + size_t(kb0 + kb) * kPbb, row0 / 4 + h);
  }
  // The fp16 scales (or, at p + 32, mins) of rows 4k..4k+3 of a panel block at p as floats
  // (the values h2f gives: fp16 -> f32 is exact).
  static PLLM_I8_AI float32x4_t panel_f16x4(const uint8_t* p, int k) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p) + 4 * k)));
  }

  // IQ4_NL: the levels of the nibbles (one TBL per half), signed as Q8_0's quants.
  struct IQ4_NL {
    using W = block_iq4_nl;
    using A = block_q8_0;
    static constexpr bool kMin = false;
    static PLLM_I8_AI void bytes(const W& b, int8x16_t q[2]) { iq4_levels(b.qs, q); }
  };
  static PLLM_I8_AI void iq4_levels(const uint8_t* qs, int8x16_t q[2]) {
    const int8x16_t t = vld1q_s8(kIq4nlValues);
    const uint8x16_t v = vld1q_u8(qs);
    q[0] = vqtbl1q_s8(t, vandq_u8(v, vdupq_n_u8(0x0F)));
    q[1] = vqtbl1q_s8(t, vshrq_n_u8(v, 4));
  }

  static PLLM_I8_AI float act_d(const block_q8_0& a) { return L::h2f(a.d); }
  static PLLM_I8_AI float act_d(const block_q8_1& a) { return a.d; }

  // The micro-kernel of drivers::block_dot for type T with Accs accumulator chains.
  template <class T, int Accs>
  struct Dot : T {
    using V = float32x4_t;
    static constexpr int kAccs = Accs;
    static PLLM_I8_AI V zero() { return vdupq_n_f32(0.0f); }
    static PLLM_I8_AI V add(V x, V y) { return vaddq_f32(x, y); }
    static PLLM_I8_AI float hsum(V v) { return vaddvq_f32(v); }
    static PLLM_I8_AI V fold(V acc, const typename T::W& w, const typename T::A& a) {
      int8x16_t q[2];
      T::bytes(w, q);
      return vfmaq_n_f32(acc, vcvtq_f32_s32(L::dot32(q[0], q[1], a.qs)), L::h2f(w.d) * act_d(a));
    }
    static PLLM_I8_AI float min(const typename T::W& w, const typename T::A& a) { return L::h2f(w.m) * a.s; }
  };

  // Type T as the prefill GEMMs want it (drivers/gemm_panels.h's T; gemm_i8mm.cpp): the block
  // unpacked to 32 signed quants and its scale (and min); the activation block's scale and,
  // for Q8_1, its s. kOffset 0: SDOT / SMMLA multiply signed by signed, no correction.
  template <class T>
  struct Gemm : T {
    static constexpr int kOffset = 0;
    static void unpack(const typename T::W& b, int8_t q[32], float& d, float& m) {
      int8x16_t v[2];
      T::bytes(b, v);
      vst1q_s8(q, v[0]);
      vst1q_s8(q + 16, v[1]);
      d = L::h2f(b.d);
      if constexpr (T::kMin) m = L::h2f(b.m);
      else m = 0.0f;
    }
    static float act_d(const typename T::A& a) { return Blocks::act_d(a); }
    static float act_s(const typename T::A& a) {
      if constexpr (T::kMin) return a.s;
      else return 0.0f;
    }
  };

  // Q4_K against Q8_K activations (TypeKernels::vec_dot): per 32-element unit the nibbles'
  // exact int8 dot (L::dot32) times the unit's 6-bit scale, summed in int32; the mins through
  // the activation's 16-element sums (bsums, paired to the 8 units).
  static float vec_dot_q4_K(int64_t n, const void* w_row, const void* xq) {
    const block_q4_K* w = static_cast<const block_q4_K*>(w_row);
    const block_q8_K* a = static_cast<const block_q8_K*>(xq);
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float acc = 0.0f;
    for (int64_t b = 0; b < n / QK_K; ++b) {
      uint8_t sm[16];
      unpack_k4_scales(w[b].scales, sm);
      const int16x8_t bs = vpaddq_s16(vld1q_s16(a[b].bsums), vld1q_s16(a[b].bsums + 8));
      const int16x8_t mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(sm + 8)));
      const int32x4_t pm =
          vmlal_s16(vmull_s16(vget_low_s16(bs), vget_low_s16(mins)), vget_high_s16(bs), vget_high_s16(mins));
      int32x4_t sumi = vdupq_n_s32(0);
      const uint8_t* q = w[b].qs;
      const int8_t* y = a[b].qs;
      for (int p = 0; p < 4; ++p, q += 32, y += 64) {
        const uint8x16_t v0 = vld1q_u8(q), v1 = vld1q_u8(q + 16);
        const int32x4_t lo = L::dot32(vreinterpretq_s8_u8(vandq_u8(v0, m4)), vreinterpretq_s8_u8(vandq_u8(v1, m4)), y);
        const int32x4_t hi = L::dot32(vreinterpretq_s8_u8(vshrq_n_u8(v0, 4)), vreinterpretq_s8_u8(vshrq_n_u8(v1, 4)),
                                      y + 32);
        sumi = vmlaq_n_s32(sumi, lo, sm[2 * p]);
        sumi = vmlaq_n_s32(sumi, hi, sm[2 * p + 1]);
      }
      const float da = a[b].d;
      acc += L::h2f(w[b].d) * da * static_cast<float>(vaddvq_s32(sumi));
      acc -= L::h2f(w[b].dmin) * da * static_cast<float>(vaddvq_s32(pm));
    }
    return acc;
  }

  // The low-bit types read from llama.cpp's files against Q8_K activations, as Q4_K above: per
  // unit (or 16-element sub-block) the exact int8 dot (L::dot32) times its integer scale in
  // int32; mins through bsums. Q5_K: Q4_K's nibbles | bit u of qh[l] << 4 (0..31).
  static float vec_dot_q5_K(int64_t n, const void* w_row, const void* xq) {
    const block_q5_K* w = static_cast<const block_q5_K*>(w_row);
    const block_q8_K* a = static_cast<const block_q8_K*>(xq);
    const uint8x16_t m4 = vdupq_n_u8(0x0F), one = vdupq_n_u8(1);
    float acc = 0.0f;
    for (int64_t b = 0; b < n / QK_K; ++b) {
      uint8_t sm[16];
      unpack_k4_scales(w[b].scales, sm);
      const int16x8_t bs = vpaddq_s16(vld1q_s16(a[b].bsums), vld1q_s16(a[b].bsums + 8));
      const int16x8_t mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(sm + 8)));
      const int32x4_t pm =
          vmlal_s16(vmull_s16(vget_low_s16(bs), vget_low_s16(mins)), vget_high_s16(bs), vget_high_s16(mins));
      const uint8x16_t h0 = vld1q_u8(w[b].qh), h1 = vld1q_u8(w[b].qh + 16);
      int32x4_t sumi = vdupq_n_s32(0);
      for (int u = 0; u < 8; ++u) {
        const uint8_t* q = w[b].qs + 32 * (u / 2);
        uint8x16_t v0 = vld1q_u8(q), v1 = vld1q_u8(q + 16);
        v0 = (u & 1) ? vshrq_n_u8(v0, 4) : vandq_u8(v0, m4);
        v1 = (u & 1) ? vshrq_n_u8(v1, 4) : vandq_u8(v1, m4);
        const int8x16_t sh = vdupq_n_s8(static_cast<int8_t>(-u));
        v0 = vorrq_u8(v0, vshlq_n_u8(vandq_u8(vshlq_u8(h0, sh), one), 4));
        v1 = vorrq_u8(v1, vshlq_n_u8(vandq_u8(vshlq_u8(h1, sh), one), 4));
        const int32x4_t d = L::dot32(vreinterpretq_s8_u8(v0), vreinterpretq_s8_u8(v1), a[b].qs + 32 * u);
        sumi = vmlaq_n_s32(sumi, d, sm[u]);
      }
      const float da = a[b].d;
      acc += L::h2f(w[b].d) * da * static_cast<float>(vaddvq_s32(sumi));
      acc -= L::h2f(w[b].dmin) * da * static_cast<float>(vaddvq_s32(pm));
    }
    return acc;
  }

  // The 2-bit codes of unit u = 4 h + j of a Q2_K / Q3_K block: bits 2j of qs[32 h + l].
  static PLLM_I8_AI void q2_codes(const uint8_t* qs, int u, uint8x16_t c[2]) {
    const int8x16_t sh = vdupq_n_s8(static_cast<int8_t>(-2 * (u % 4)));
    for (int i = 0; i < 2; ++i) c[i] = vandq_u8(vshlq_u8(vld1q_u8(qs + 32 * (u / 4) + 16 * i), sh), vdupq_n_u8(3));
  }
  // sumi + s0 * (first 16 products) + s1 * (last 16): dot32 mixes the halves in its lanes, so
  // each half goes through it alone (the other operand zero).
  static PLLM_I8_AI int32x4_t sub16(int32x4_t sumi, int8x16_t q0, int8x16_t q1, const int8_t* a, int s0, int s1) {
    const int8x16_t z = vdupq_n_s8(0);
    return vmlaq_n_s32(vmlaq_n_s32(sumi, L::dot32(q0, z, a), s0), L::dot32(z, q1, a), s1);
  }

  static float vec_dot_q2_K(int64_t n, const void* w_row, const void* xq) {
    const block_q2_K* w = static_cast<const block_q2_K*>(w_row);
    const block_q8_K* a = static_cast<const block_q8_K*>(xq);
    float acc = 0.0f;
    for (int64_t b = 0; b < n / QK_K; ++b) {
      int32_t summ = 0;
      for (int i = 0; i < 16; ++i) summ += (w[b].scales[i] >> 4) * a[b].bsums[i];
      int32x4_t sumi = vdupq_n_s32(0);
      for (int u = 0; u < 8; ++u) {
        uint8x16_t c[2];
        q2_codes(w[b].qs, u, c);
        sumi = sub16(sumi, vreinterpretq_s8_u8(c[0]), vreinterpretq_s8_u8(c[1]), a[b].qs + 32 * u,
                     w[b].scales[2 * u] & 0xF, w[b].scales[2 * u + 1] & 0xF);
      }
      const float da = a[b].d;
      acc += L::h2f(w[b].d) * da * static_cast<float>(vaddvq_s32(sumi));
      acc -= L::h2f(w[b].dmin) * da * static_cast<float>(summ);
    }
    return acc;
  }

  static float vec_dot_q3_K(int64_t n, const void* w_row, const void* xq) {
    const block_q3_K* w = static_cast<const block_q3_K*>(w_row);
    const block_q8_K* a = static_cast<const block_q8_K*>(xq);
    float acc = 0.0f;
    for (int64_t b = 0; b < n / QK_K; ++b) {
      int8_t sc[16];
      unpack_k3_scales(w[b].scales, sc);
      int32x4_t sumi = vdupq_n_s32(0);
      for (int u = 0; u < 8; ++u) {
        uint8x16_t c[2];
        q2_codes(w[b].qs, u, c);
        const int8x16_t sh = vdupq_n_s8(static_cast<int8_t>(-u));
        int8x16_t q[2];
        for (int i = 0; i < 2; ++i) {
          const uint8x16_t hb = vandq_u8(vshlq_u8(vld1q_u8(w[b].hmask + 16 * i), sh), vdupq_n_u8(1));
          q[i] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(c[i], vshlq_n_u8(hb, 2))), vdupq_n_s8(4));
        }
        sumi = sub16(sumi, q[0], q[1], a[b].qs + 32 * u, sc[2 * u], sc[2 * u + 1]);
      }
      acc += L::h2f(w[b].d) * a[b].d * static_cast<float>(vaddvq_s32(sumi));
    }
    return acc;
  }

  static float vec_dot_iq4_xs(int64_t n, const void* w_row, const void* xq) {
    const block_iq4_xs* w = static_cast<const block_iq4_xs*>(w_row);
    const block_q8_K* a = static_cast<const block_q8_K*>(xq);
    float acc = 0.0f;
    for (int64_t b = 0; b < n / QK_K; ++b) {
      int8_t ls[8];
      unpack_iq4xs_scales(w[b], ls);
      int32x4_t sumi = vdupq_n_s32(0);
      for (int j = 0; j < 8; ++j) {
        int8x16_t q[2];
        iq4_levels(w[b].qs + 16 * j, q);
        sumi = vmlaq_n_s32(sumi, L::dot32(q[0], q[1], a[b].qs + 32 * j), ls[j]);
      }
      acc += L::h2f(w[b].d) * a[b].d * static_cast<float>(vaddvq_s32(sumi));
    }
    return acc;
  }

  // Every low-bit type's one-row int8 dot (neon.cpp, neon_dotprod.cpp install them).
  template <class TK>
  static void set_lowbit(TK& q2, TK& q3, TK& q5, TK& nl, TK& xs) {
    q2.vec_dot = vec_dot_q2_K;
    q3.vec_dot = vec_dot_q3_K;
    q5.vec_dot = vec_dot_q5_K;
    nl.vec_dot = drivers::block_dot<Dot<IQ4_NL, 2>>;
    xs.vec_dot = vec_dot_iq4_xs;
  }
};

}  // namespace pllm::kern::neon_int8

#undef PLLM_I8_AI
