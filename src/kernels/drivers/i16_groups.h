// The per-group scale halves of the int16 micro-kernels M (drivers/i16_tile.h's contract) for
// ISAs whose group factors are one 8-lane f32 vector, lane j = block or unit j of the group
// (x86/i16_avx2.h for the avx2 and avxvnni levels, x86/i16act_avx512.cpp): W, kUnits, kMin,
// kExactUnit, G, group(), scale(), min(). Each ISA derives its micro-kernels from these and adds
// codes() (the integer half, where the ISAs differ), so every level scales with the same
// operations and their results agree bit for bit.
//
// X, the ISA's group operations: F (8 f32 lanes); gather_h(const W* w, int nu, int off): the fp16
// field at byte off of each of the group's first nu blocks (0 beyond nu); bcast_h(h): one fp16
// value in every lane; u8_to_f(const uint8_t* p): 8 bytes as 8 lanes; set1, zero, mul, sub.
// Rows: tile_rows(NX), the register tile's weight rows (drivers/i16_tile.h).
//
// ODR: templates over the ISA's types only (see fused_dot.h).
#pragma once
#include <cstdint>

#include "kernels/k4_scales.h"
#include "quant/blocks.h"

namespace pllm::kern::drivers {

template <class X, class Rows>
struct I16Groups {
  using F = typename X::F;

  // Scale d (and min m) per 32-element block.
  struct G1 { F d; };
  struct G2 { F d, m; };

  // The 32-element types with a min (or an offset kept as one): one block per unit, the group's
  // d and m as gathered.
  struct Block32Min : Rows {
    static constexpr int kUnits = 1;
    static constexpr bool kMin = true;
    using G = G2;
    static inline __attribute__((always_inline)) F scale(const G& g, int) { return g.d; }
    static inline __attribute__((always_inline)) F min(const G& g, int) { return g.m; }
  };

  // x = d * (q - 8) = d * q + (-8 d): the offset as a min term (one FMA per group and activation
  // row instead of two subtractions per unit and weight row); -8 d is exact.
  struct Q4_0 : Block32Min {
    static constexpr bool kExactUnit = true;  // codes 0..15 (drivers/i16_gemm.h)
    using W = block_q4_0;
    static inline __attribute__((always_inline)) G2 group(const W* w, int nu) {
      const F d = X::gather_h(w, nu, 0);
      return {d, X::mul(d, X::set1(-8.0f))};
    }
  };

  // x = d * q + m
  struct Q4_1 : Block32Min {
    static constexpr bool kExactUnit = true;  // codes 0..15 (drivers/i16_gemm.h)
    using W = block_q4_1;
    static inline __attribute__((always_inline)) G2 group(const W* w, int nu) {
      return {X::gather_h(w, nu, 0), X::gather_h(w, nu, 2)};
    }
  };

  // x = d * (q - 16) = d * q + (-16 d), the offset as a min term (see Q4_0)
  struct Q5_0 : Block32Min {
    using W = block_q5_0;
    static inline __attribute__((always_inline)) G2 group(const W* w, int nu) {
      const F d = X::gather_h(w, nu, 0);
      return {d, X::mul(d, X::set1(-16.0f))};
    }
  };

  // x = d * q + m
  struct Q5_1 : Block32Min {
    using W = block_q5_1;
    static inline __attribute__((always_inline)) G2 group(const W* w, int nu) {
      return {X::gather_h(w, nu, 0), X::gather_h(w, nu, 2)};
    }
  };

  // x = d * code, one block per unit: Q8_0 (q int8), IQ4_NL (code = the level of q).
  template <class B>
  struct Scale32 : Rows {
    using W = B;
    static constexpr int kUnits = 1;
    static constexpr bool kMin = false;
    using G = G1;
    static inline __attribute__((always_inline)) G group(const W* w, int nu) { return {X::gather_h(w, nu, 0)}; }
    static inline __attribute__((always_inline)) F scale(const G& g, int) { return g.d; }
    static inline __attribute__((always_inline)) F min(const G&, int) { return X::zero(); }
  };
  struct Q8_0 : Scale32<block_q8_0> {};
  struct IQ4_NL : Scale32<block_iq4_nl> {};

  // Unit j: x = (d * sc_j) * q - dmin * m_j (Q4_K: q a nibble, the low nibbles of the 32-byte
  // group j / 2 for even j, high for odd; Q5_K: the same plus a fifth bit). d * sc_j and
  // dmin * m_j are exact (11-bit by 6-bit); lane j.
  template <class B>
  struct KScaleMin : Rows {
    using W = B;
    static constexpr int kUnits = 8;
    static constexpr bool kMin = true;
    struct G { F dsc, mn; };
    static inline __attribute__((always_inline)) G group(const W* w, int) {
      uint8_t sm[16];
      unpack_k4_scales(w->scales, sm);
      const F sc = X::u8_to_f(sm), m = X::u8_to_f(sm + 8);
      const F mdmin = X::sub(X::zero(), X::bcast_h(w->dmin));
      return {X::mul(sc, X::bcast_h(w->d)), X::mul(m, mdmin)};
    }
    static inline __attribute__((always_inline)) F scale(const G& g, int) { return g.dsc; }
    static inline __attribute__((always_inline)) F min(const G& g, int) { return g.mn; }
  };
  struct Q4_K : KScaleMin<block_q4_K> {
    static constexpr bool kExactUnit = true;  // codes 0..15 (drivers/i16_gemm.h)
  };
  struct Q5_K : KScaleMin<block_q5_K> {};

  // Q2_K's f32 factors (its integer scales are folded into the codes by each ISA): d, and unit
  // j's two mins, -dmin * m_2j for its elements 0-15 and -dmin * m_2j+1 for 16-31 (lane j; exact:
  // 11-bit by 4-bit), m the high nibble of a scale byte.
  struct Q2KFactors { F d, mn, mn2; };
  static inline __attribute__((always_inline)) Q2KFactors q2k_factors(const block_q2_K* w) {
    uint8_t lo[8], hi[8];
    for (int j = 0; j < 8; ++j) {
      lo[j] = uint8_t(w->scales[2 * j] >> 4);
      hi[j] = uint8_t(w->scales[2 * j + 1] >> 4);
    }
    const F mdmin = X::sub(X::zero(), X::bcast_h(w->dmin));
    return {X::bcast_h(w->d), X::mul(X::u8_to_f(lo), mdmin), X::mul(X::u8_to_f(hi), mdmin)};
  }

  // IQ4_XS unit j: x = (d * (ls_j - 32)) * level, the factor exact (11-bit by 6-bit); lane j.
  struct IQ4_XS : Rows {
    using W = block_iq4_xs;
    static constexpr int kUnits = 8;
    static constexpr bool kMin = false;
    using G = G1;
    static inline __attribute__((always_inline)) G group(const W* w, int) {
      int8_t ls[8];
      unpack_iq4xs_scales(*w, ls);
      uint8_t u[8];
      for (int j = 0; j < 8; ++j) u[j] = static_cast<uint8_t>(ls[j] + 32);
      return {X::mul(X::sub(X::u8_to_f(u), X::set1(32.0f)), X::bcast_h(w->d))};
    }
    static inline __attribute__((always_inline)) F scale(const G& g, int) { return g.d; }
    static inline __attribute__((always_inline)) F min(const G&, int) { return X::zero(); }
  };
};

}  // namespace pllm::kern::drivers
