// Driver of int16 activations over load-time repacked 16-row panels (quant/panel.h):
// TypeKernels::gemm_i16_panels for Q4_0, Q4_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS, every activation-row count (decode,
// batched decode, prefill). Written once here; an ISA instantiates i16_panels<T, P> with its
// vector traits T (x86/i16panel_avx512.cpp, x86/i16panel_avx2.cpp).
//
// Why: vec_dot_i16act_tile and drivers/i16_gemm.h read the file's row layout, so each call
// decodes the weight blocks and moves codes of different rows into place (the tile's
// transposing add tree, the GEMM's shuffle transposition and its scalar scale gathers). In a
// panel, each 64-byte vector already holds 4 consecutive codes of each of the 16 rows in dword
// lane i = row i. One byte shuffle (vpshufb) per code pair spreads two of those bytes into the two
// words of the lane: lane i = (code 2k, code 2k + 1) of row i, which is what a pair product
// (vpdpwssd, or vpmaddwd + vpaddd) multiplies with a broadcast activation pair. So a panel
// block (16 rows x 32 elements) is 16 code vectors (per kVecs-vector slice of 16 / kVecs rows)
// after about 24 shuffles and masks, and each activation row then costs 16 pair products per
// slice plus the block's scaling; nothing is transposed or summed across lanes.
//
// Results: bit for bit vec_dot_i16act_tile's (tests/cpp/test_i16act.cpp). The arithmetic is
// i16_gemm.h's, which documents the tile's order: per (row, activation row, unit) two exact
// int32 halves, elements {0-7, 16-23} (code groups 0, 1, 4, 5) and {8-15, 24-31} (groups 2,
// 3, 6, 7), converted and added in f32 (one chain and one conversion where codes are <= 15,
// i16_gemm.h's exact_unit), FMA'd into unit accumulator u % 8 with scale * d_a, then the min
// term; the 8 accumulators summed per slice of kI16Slice units as ((l0 + l4) + (l2 + l6)) +
// ((l1 + l5) + (l3 + l7)), the slices added to out in order.
//
// Contract of T:
//   kVecs     vectors per 16-row panel vector (kLanes = 16 / kVecs int32 lanes each)
//   tile_x(one) activation rows per register tile (one: codes <= 15, a chain per unit);
//   chains(nx): int32 chains per half (1, 2 or 4); dot1_chains(one): the same for one activation
//             row as it is decoded (PanelDot1: the accumulators share the registers with decoding)
//   V, VF     int32 and f32 vectors of kLanes lanes
//   loadb(p)  kLanes * 4 bytes at p; ctl(const int8_t* c): a shuffle control (c: 64 bytes, the
//             same in every 16-byte lane); shuffle(bytes, ctl) (per 16-byte lane, -128: zero)
//   low4(V), shr4(V), sar8(V) on 16-bit words (& 0x0F, >> 4 logical, >> 8 arithmetic);
//   flip(V) bytes ^ 0x80; nib_lo(V), nib_hi(V): each byte's low / high nibble (IQ4's indices)
//   izero(), iadd(a, b), dp(acc, w, const int16_t* a): lane i += w.lo_i * a[0] + w.hi_i * a[1]
//   zero(), cvt, add, mul, fma(acc, a, b) = acc + a * b (fused), loadf, storef, bcast,
//   scales(const uint8_t* p): kLanes fp16 at p as f32; u8f(const uint8_t* p): kLanes bytes at p
//   as f32; sub(a, b); i8i(p): kLanes int8 at p as int32 lanes; mul32(a, b): int32 lanes, the low
//   half of the product (kSubScales types)
//   (Q6_K, Q3_K) bcast16(p): the 16 bytes at p in every 16-byte lane; band, bor (and, or); sllw<N>, srlw<N> (16-bit word
//   shifts), orhi(a, b) = a | (b & 0x30), subw, mulw (16-bit words, the low half of the
//   product), bcastw(int16); (Q5_K) sllw, srlw, or16(a, b) = a | (b & 0x10)
// Contract of P (a panel type): kUnits (1, or 8 for a K-quant super-block), kBlock (bytes of
// kUnits units of 16 rows), kMin, kOne (codes <= 15), optional kHalfMin (two mins a unit, as the
// tile's M: the sink's mn2) and kSubScales (integer sub-block scales, see sub_scales below); for
// kUnits = 1 decode(block, codes); for 8 head(block, Head<T>&) once per super-block, then
// unit(block, head, j, codes) per unit j.
//
// ODR: templates over the ISA's types only (see fused_dot.h).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/drivers/i16_tile.h"  // kI16Slice, half_min, half_sums
#include "kernels/internal.h"           // gemm_scratch
#include "quant/blocks.h"
#include "quant/panel.h"

#define PLLM_I16P_AI inline __attribute__((always_inline))
#define PLLM_I16P_AI_LAMBDA __attribute__((always_inline))

namespace pllm::kern::drivers {

// vpshufb controls (within each 16-byte lane, dword j = row 4L + j): bytes 4j + 2k and
// 4j + 2k + 1 of a code vector to the low bytes (zero-extended words) of dword j, or to the
// high bytes (words = code << 8, for a sign-extending shift). Index [2 * high + k].
struct PanelPairControls {
  alignas(64) int8_t c[4][64];
  constexpr PanelPairControls() : c{} {
    for (int v = 0; v < 4; ++v)
      for (int i = 0; i < 64; ++i) {
        const int k = v % 2, j = (i % 16) / 4, b = i % 4;  // dword j of the 16-byte lane, byte b of it
        const bool code_byte = (b % 2 == 1) == (v >= 2);
        c[v][i] = code_byte ? int8_t(4 * j + 2 * k + b / 2) : int8_t(-128);
      }
  }
};
inline constexpr PanelPairControls kPanelPairs;

// Where a panel block's decoder puts what it decodes (a "sink"): put(2g + k, s, v) hands over pair
// k (codes 4g + 2k, 4g + 2k + 1) of group g for the rows of slice s, lane i = row s * kLanes + i;
// sc, mn: the rows' per-block factors (the tile's scale and min of the unit; mn2: the second min
// of a kHalfMin type, drivers/i16_tile.h).
//
// PanelCodes keeps the code vectors for several activation rows (batched decode, prefill).
// Sub-block scales (Q2_K, Q3_K, Q6_K: per row an integer scale for a unit's elements 0-15, groups
// 0-3, and one for 16-31, groups 4-7). A sink that keeps the code vectors for several activation
// rows (PanelCodes) gets the codes times their scale, as the tile's; PanelDot1 (kChainScales) gets
// raw codes and the two scales as int32 lanes (sub[0], sub[1]), which multiply its int32 chains
// (four a half, groups 0-3 and 4-7 apart) in panel_scale. The chains' sums are exact, so each half
// is the tile's bit for bit. Measured on one Zen 4 core (bench_kernels 576x1536, i16_panels/1 / 64):
// Q2_K avx512 28 -> 26 us at one row (two chains a half: 40: the multiply lengthens each unit's
// dependent path and a decode step ran latency-bound), Q3_K and Q6_K 10 % faster at one row on
// both levels; at 64 rows the multiplies per activation row made prefill 10-18 % slower, so the
// codes there keep their scales (sub_scales_for, put_scaled below).
template <class P>
constexpr bool sub_scales() {
  if constexpr (requires { P::kSubScales; }) return P::kSubScales;
  else return false;
}

template <class T>
struct PanelCodes {
  static constexpr bool kChainScales = false;
  typename T::V w[16][T::kVecs];
  typename T::VF sc[T::kVecs], mn[T::kVecs], mn2[T::kVecs];
  PLLM_I16P_AI void put(int i, int s, typename T::V v) { w[i][s] = v; }
};

// PanelDot1 multiplies each code vector with one activation row as it is decoded. A decode step
// has one activation row, and a block's 16 x kVecs code vectors do not fit the registers of a
// 16-register ISA: kept (PanelCodes), AVX2 stored all 32 to the stack and read them back, and the
// stores bounded the loop (bench_kernels avx2 Q4_0 i16_panels/1: 14 GB/s on one Zen 4 core).
// Sums of int32 are exact, so the order in which the pair products reach a chain is free: the
// chains hold what panel_tile's do, bit for bit.
template <class T, class P>
struct PanelDot1 {
  static constexpr bool kOne = P::kOne, kChainScales = sub_scales<P>();
  static constexpr int C = kChainScales && T::dot1_chains(kOne) < 4 ? 4 : T::dot1_chains(kOne), S = T::kVecs;
  typename T::V h[2][1][C][S];
  typename T::VF sc[S], mn[S], mn2[S];
  typename T::V sub[2][S];
  const int16_t* a;  // the activation row's codes of this unit
  explicit PLLM_I16P_AI PanelDot1(const int16_t* qs) : a(qs) {
    for (int hv = 0; hv < 2; ++hv)
      for (int j = 0; j < C; ++j)
        for (int s = 0; s < S; ++s) h[hv][0][j][s] = T::izero();
  }
  PLLM_I16P_AI void put(int i, int s, typename T::V v) {
    const int g = i / 2, hv = kOne ? 0 : (g >> 1) & 1, j = g * C / 8;  // as panel_tile
    h[hv][0][j][s] = T::dp(h[hv][0][j][s], v, a + 2 * i);
  }
};

// Q4 nibble vectors at qs (4 x 64 bytes): vector v holds group v in its low and v + 4 in its
// high nibbles. Zero-extended words, so a shift right by 4 leaves the high nibble alone.
// fix(i, s, codes) may complete a code vector before it goes to the sink (Q5_K's fifth bits).
struct KeepCodes {
  template <class V>
  PLLM_I16P_AI V operator()(int, int, V v) const { return v; }
};
template <class T, class Sink, class Fix = KeepCodes>
PLLM_I16P_AI void panel_q4_codes(const uint8_t* qs, Sink& c, Fix fix = {}) {
  const typename T::V p0 = T::ctl(kPanelPairs.c[0]), p1 = T::ctl(kPanelPairs.c[1]);
#pragma GCC unroll 4
  for (int v = 0; v < 4; ++v)
#pragma GCC unroll 2
    for (int s = 0; s < T::kVecs; ++s) {
      const typename T::V n = T::loadb(qs + 64 * v + 4 * T::kLanes * s);
      const typename T::V b0 = T::shuffle(n, p0), b1 = T::shuffle(n, p1);
      c.put(2 * v, s, fix(2 * v, s, T::low4(b0)));
      c.put(2 * v + 1, s, fix(2 * v + 1, s, T::low4(b1)));
      c.put(2 * (v + 4), s, fix(2 * (v + 4), s, T::shr4(b0)));
      c.put(2 * (v + 4) + 1, s, fix(2 * (v + 4) + 1, s, T::shr4(b1)));
    }
}

// IQ4 nibble vectors at qs (as Q4's): each nibble indexes kIq4nlValues by one byte shuffle, and
// the levels (int8) take Q8_0's way into words: pair shuffles into the high bytes, then an
// arithmetic shift by 8.
struct PanelIq4Levels {
  alignas(64) int8_t c[64];
  constexpr PanelIq4Levels() : c{} {
    for (int i = 0; i < 64; ++i) c[i] = kIq4nlValues[i % 16];
  }
};
inline constexpr PanelIq4Levels kPanelIq4Levels;

template <class T, class Sink>
PLLM_I16P_AI void panel_iq4_codes(const uint8_t* qs, Sink& c) {
  const typename T::V lut = T::ctl(kPanelIq4Levels.c), p0 = T::ctl(kPanelPairs.c[2]), p1 = T::ctl(kPanelPairs.c[3]);
#pragma GCC unroll 4
  for (int v = 0; v < 4; ++v)
#pragma GCC unroll 2
    for (int s = 0; s < T::kVecs; ++s) {
      const typename T::V n = T::loadb(qs + 64 * v + 4 * T::kLanes * s);
      const typename T::V lo = T::shuffle(lut, T::nib_lo(n)), hi = T::shuffle(lut, T::nib_hi(n));
      c.put(2 * v, s, T::sar8(T::shuffle(lo, p0)));
      c.put(2 * v + 1, s, T::sar8(T::shuffle(lo, p1)));
      c.put(2 * (v + 4), s, T::sar8(T::shuffle(hi, p0)));
      c.put(2 * (v + 4) + 1, s, T::sar8(T::shuffle(hi, p1)));
    }
}

// The 32-element types: a panel block is one unit.
struct PanelUnit32 {
  static constexpr int kUnits = 1;
  template <class T>
  struct Head {};
};

// The weight types. x = d * (q - 8) = d * q + (-8 d)
struct PanelQ4_0 : PanelUnit32 {
  static constexpr size_t kBlock = kPanelRows * sizeof(block_q4_0);
  static constexpr bool kMin = true, kOne = true;
  template <class T, class Sink>
  static PLLM_I16P_AI void decode(const uint8_t* p, Sink& c) {
    for (int s = 0; s < T::kVecs; ++s) {
      c.sc[s] = T::scales(p + 2 * T::kLanes * s);
      c.mn[s] = T::mul(c.sc[s], T::bcast(-8.0f));
    }
    panel_q4_codes<T>(p + 32, c);
  }
};

// x = d * q + m
struct PanelQ4_1 : PanelUnit32 {
  static constexpr size_t kBlock = kPanelRows * sizeof(block_q4_1);
  static constexpr bool kMin = true, kOne = true;
  template <class T, class Sink>
  static PLLM_I16P_AI void decode(const uint8_t* p, Sink& c) {
    for (int s = 0; s < T::kVecs; ++s) {
      c.sc[s] = T::scales(p + 2 * T::kLanes * s);
      c.mn[s] = T::scales(p + 32 + 2 * T::kLanes * s);
    }
    panel_q4_codes<T>(p + 64, c);
  }
};

// x = d * level(q), the levels up to 127 in magnitude: the tile's two int32 halves (kOne false)
struct PanelIQ4_NL : PanelUnit32 {
  static constexpr size_t kBlock = kPanelRows * sizeof(block_iq4_nl);
  static constexpr bool kMin = false, kOne = false;
  template <class T, class Sink>
  static PLLM_I16P_AI void decode(const uint8_t* p, Sink& c) {
    for (int s = 0; s < T::kVecs; ++s) {
      c.sc[s] = T::scales(p + 2 * T::kLanes * s);
      c.mn[s] = T::zero();
    }
    panel_iq4_codes<T>(p + 32, c);
  }
};

// x = d * q; the panel stores q + 128: flipped back to q, placed in the words' high bytes and
// shifted down arithmetically (sign-extended).
struct PanelQ8_0 : PanelUnit32 {
  static constexpr size_t kBlock = kPanelRows * sizeof(block_q8_0);
  static constexpr bool kMin = false, kOne = false;
  template <class T, class Sink>
  static PLLM_I16P_AI void decode(const uint8_t* p, Sink& c) {
    const typename T::V p0 = T::ctl(kPanelPairs.c[2]), p1 = T::ctl(kPanelPairs.c[3]);
#pragma GCC unroll 2
    for (int s = 0; s < T::kVecs; ++s) {
      c.sc[s] = T::scales(p + 2 * T::kLanes * s);
      c.mn[s] = T::zero();
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
        const typename T::V q = T::flip(T::loadb(p + 32 + 64 * g + 4 * T::kLanes * s));
        c.put(2 * g, s, T::sar8(T::shuffle(q, p0)));
        c.put(2 * g + 1, s, T::sar8(T::shuffle(q, p1)));
      }
    }
  }
};

// Unit j of a super-block: x = (d * sc_j) * q + (-dmin * m_j), q a nibble. The factors as the
// tile computes them (drivers/i16_groups.h, I16Groups::Q4_K: sc * d and m * (0 - dmin), exact:
// 11-bit by 6-bit), here for 16 rows at once. The header (quant/panel.h) is decoded once per
// super-block: d, -dmin as f32 and the 16 6-bit values of every row (unpack_k4_scales' word
// operations, whose shifts and masks never mix bytes, run over the transposed scale bytes: lane
// i of vector k = byte k of row i).
struct PanelQ4_K {
  static constexpr int kUnits = 8;
  static constexpr size_t kBlock = kPanelRows * sizeof(block_q4_K);  // a super-block of 16 rows
  static constexpr size_t kHead = 16 * kPanelRows;                   // d, dmin, 12 scale bytes
  static constexpr bool kMin = true, kOne = true;
  template <class T>
  struct Head {
    typename T::VF d[T::kVecs], mdmin[T::kVecs];
    alignas(16) uint8_t sm[16][kPanelRows];  // [scale j (0-7) or min j - 8 (8-15)][row]
  };
  template <class T>
  static PLLM_I16P_AI void head(const uint8_t* p, Head<T>& h) {
    for (int s = 0; s < T::kVecs; ++s) {
      h.d[s] = T::scales(p + 2 * T::kLanes * s);
      h.mdmin[s] = T::sub(T::zero(), T::scales(p + 2 * kPanelRows + 2 * T::kLanes * s));
    }
    typedef uint32_t u32x4 __attribute__((vector_size(16)));
    u32x4 b[12], o[16];
    __builtin_memcpy(b, p + 4 * kPanelRows, sizeof(b));
    const u32x4 m6 = {0x3f3f3f3fu, 0x3f3f3f3fu, 0x3f3f3f3fu, 0x3f3f3f3fu};
    const u32x4 m4 = {0x0f0f0f0fu, 0x0f0f0f0fu, 0x0f0f0f0fu, 0x0f0f0f0fu};
    const u32x4 hi = {0x30303030u, 0x30303030u, 0x30303030u, 0x30303030u};
    for (int k = 0; k < 4; ++k) {
      o[k] = b[k] & m6;
      o[4 + k] = (b[8 + k] & m4) | ((b[k] >> 2) & hi);
      o[8 + k] = b[4 + k] & m6;
      o[12 + k] = ((b[8 + k] >> 4) & m4) | ((b[4 + k] >> 2) & hi);
    }
    __builtin_memcpy(h.sm, o, sizeof(o));
  }
  template <class T, class Sink>
  static PLLM_I16P_AI void unit(const uint8_t* p, const Head<T>& h, int j, Sink& c) {
    for (int s = 0; s < T::kVecs; ++s) {
      c.sc[s] = T::mul(T::u8f(h.sm[j] + T::kLanes * s), h.d[s]);
      c.mn[s] = T::mul(T::u8f(h.sm[8 + j] + T::kLanes * s), h.mdmin[s]);
    }
    panel_q4_codes<T>(p + kHead + 4 * 64 * j, c);
  }
};

// IQ4_XS unit j of a super-block: x = (d * (ls_j - 32)) * level(q), the factor as the tile
// computes it (drivers/i16_groups.h, I16Groups::IQ4_XS: exact, 11-bit by 6-bit). The header
// (quant/panel.h) gives each row's 6-bit ls_j once per super-block, lane-wise over 16 rows.
struct PanelIQ4_XS {
  static constexpr int kUnits = 8;
  static constexpr size_t kBlock = kPanelRows * sizeof(block_iq4_xs);
  static constexpr size_t kHead = 8 * kPanelRows;  // d, scales_h, 4 scales_l bytes
  static constexpr bool kMin = false, kOne = false;
  template <class T>
  struct Head {
    typename T::VF d[T::kVecs];
    alignas(16) uint8_t ls[8][kPanelRows];  // [unit][row]
  };
  template <class T>
  static PLLM_I16P_AI void head(const uint8_t* p, Head<T>& h) {
    for (int s = 0; s < T::kVecs; ++s) h.d[s] = T::scales(p + 2 * T::kLanes * s);
    typedef uint8_t u8x16 __attribute__((vector_size(16)));
    typedef uint16_t u16x16 __attribute__((vector_size(32)));
    u16x16 sh;
    u8x16 sl[4];
    __builtin_memcpy(&sh, p + 2 * kPanelRows, sizeof(sh));
    __builtin_memcpy(sl, p + 4 * kPanelRows, sizeof(sl));
    for (int j = 0; j < 8; ++j) {
      const u8x16 hi = __builtin_convertvector((sh >> (2 * j)) & 3, u8x16);
      const u8x16 ls = ((sl[j / 2] >> (4 * (j % 2))) & 0x0F) | (hi << 4);
      __builtin_memcpy(h.ls[j], &ls, sizeof(ls));
    }
  }
  template <class T, class Sink>
  static PLLM_I16P_AI void unit(const uint8_t* p, const Head<T>& h, int j, Sink& c) {
    for (int s = 0; s < T::kVecs; ++s) {
      c.sc[s] = T::mul(T::sub(T::u8f(h.ls[j] + T::kLanes * s), T::bcast(32.0f)), h.d[s]);
      c.mn[s] = T::zero();
    }
    panel_iq4_codes<T>(p + kHead + 4 * 64 * j, c);
  }
};

// Each 16-bit word shifted left by n (right by -n when n < 0), -7 <= n <= 7: moves a bit or a
// field of the low byte to where a code wants it (the caller masks the rest). n is a constant
// after the decoders' loops unroll, so the switch folds to one shift.
template <class T>
PLLM_I16P_AI typename T::V shift_w(typename T::V v, int n) {
  switch (n) {
    case 7: return T::template sllw<7>(v);
    case 6: return T::template sllw<6>(v);
    case 5: return T::template sllw<5>(v);
    case 4: return T::template sllw<4>(v);
    case 3: return T::template sllw<3>(v);
    case 2: return T::template sllw<2>(v);
    case 1: return T::template sllw<1>(v);
    case 0: return v;
    case -1: return T::template srlw<1>(v);
    case -2: return T::template srlw<2>(v);
    case -3: return T::template srlw<3>(v);
    case -4: return T::template srlw<4>(v);
    case -5: return T::template srlw<5>(v);
    case -6: return T::template srlw<6>(v);
    default: return T::template srlw<7>(v);
  }
}

// The pair shuffles (kPanelPairs, low bytes) of the panel vector at v, slice s: in b[k], dword lane
// i (row i) holds the vector's bytes 4i + 2k and 4i + 2k + 1, zero-extended, in its two words.
// Two-bit field vectors (Q2_K's codes, Q3_K's low bits, Q6_K's high bits; quant/panel.cpp's
// pack_fields2): vector hv's byte has the fields f = 0..3 of group fields2_group(hv, f) at bits 2f,
// 2f + 1, and field2 moves one to bits 0-1.
constexpr int fields2_group(int hv, int f) { return 2 * hv + (f & 1) + 4 * (f >> 1); }
template <class T>
PLLM_I16P_AI void pair_shuffles(const uint8_t* v, int s, typename T::V (&b)[2]) {
  const typename T::V w = T::loadb(v + 4 * T::kLanes * s);
  b[0] = T::shuffle(w, T::ctl(kPanelPairs.c[0]));
  b[1] = T::shuffle(w, T::ctl(kPanelPairs.c[1]));
}
template <class T>
PLLM_I16P_AI typename T::V field2(typename T::V b, int f) {
  return T::band(shift_w<T>(b, -2 * f), T::bcastw(3));
}

// Q5_K: Q4_K's header and factors, its codes plus a fifth bit: unit j is Q4_K's 4 nibble
// vectors, then a fifth-bit vector (quant/panel.h: byte 4i + m, bit g = element 4g + m of row i).
// That vector goes through the same pair shuffles, so word lane (row i, element 4g + m) holds
// the byte of all 8 groups; bit g is moved to bit 4 by one word shift and or'ed under the mask
// 0x10 (T::or16). Codes 0..31: the tile's two int32 halves (kOne false), as Q6_K.
struct PanelQ5_K : PanelQ4_K {
  static constexpr size_t kBlock = kPanelRows * sizeof(block_q5_K);
  static constexpr size_t kUnit = 5 * 64;
  static constexpr bool kMin = true, kOne = false;
  template <class T, class Sink>
  static PLLM_I16P_AI void unit(const uint8_t* p, const Head<T>& h, int j, Sink& c) {
    for (int s = 0; s < T::kVecs; ++s) {
      c.sc[s] = T::mul(T::u8f(h.sm[j] + T::kLanes * s), h.d[s]);
      c.mn[s] = T::mul(T::u8f(h.sm[8 + j] + T::kLanes * s), h.mdmin[s]);
    }
    const uint8_t* q = p + kHead + kUnit * j;
    typename T::V hb[T::kVecs][2];
    for (int s = 0; s < T::kVecs; ++s) pair_shuffles<T>(q + 256, s, hb[s]);
    panel_q4_codes<T>(q, c, [&hb](int i, int s, typename T::V v) PLLM_I16P_AI_LAMBDA { return T::or16(v, shift_w<T>(hb[s][i % 2], 4 - i / 2)); });
  }
};

// vpshufb controls for Q6_K's scales (16 bytes, lane i = row i, in every 16-byte lane): byte
// kLanes * s + i into both high bytes of dword i of slice s, so an arithmetic word shift by 8
// gives the words (sc_i, sc_i) a code pair is multiplied by. Index [s] (AVX2's two slices;
// AVX-512 has one, 16 rows over its four 16-byte lanes).
struct PanelScaleControls {
  alignas(64) int8_t c[2][64];
  constexpr PanelScaleControls() : c{} {
    for (int s = 0; s < 2; ++s)
      for (int i = 0; i < 64; ++i) {
        const int lane = i / 16, j = (i % 16) / 4;
        c[s][i] = i % 2 ? int8_t((8 * s + 4 * lane + j) % 16) : int8_t(-128);
      }
  }
};
inline constexpr PanelScaleControls kPanelScales;

// 16 rows' int8 scales at p (byte i = row i) as the words (sc_i, sc_i) of each dword lane of
// slice s (sctl = kPanelScales.c[s]): what a code pair is multiplied by (Q6_K, Q3_K).
template <class T>
PLLM_I16P_AI typename T::V scale_words(const uint8_t* p, typename T::V sctl) {
  return T::sar8(T::shuffle(T::bcast16(p), sctl));
}

// The sinks' sub-block scales (see sub_scales above PanelCodes).
template <class T, class Sink>
PLLM_I16P_AI void sub_scales_for(Sink& c, int s, const uint8_t* p0, const uint8_t* p1, typename T::V (&w)[2]) {
  if constexpr (Sink::kChainScales) {
    c.sub[0][s] = T::i8i(p0 + T::kLanes * s);
    c.sub[1][s] = T::i8i(p1 + T::kLanes * s);
  } else {
    const typename T::V sctl = T::ctl(kPanelScales.c[s]);
    w[0] = scale_words<T>(p0, sctl);
    w[1] = scale_words<T>(p1, sctl);
  }
}
// Code vector i of slice s under sub-block scale word vector w (see sub_scales_for).
template <class T, class Sink>
PLLM_I16P_AI void put_scaled(Sink& c, int i, int s, typename T::V code, typename T::V w) {
  if constexpr (Sink::kChainScales) c.put(i, s, code);
  else c.put(i, s, T::mulw(code, w));
}

// Q2_K unit j of a super-block: x = d * q * sc, q the two-bit field, sc the low nibble of scale
// byte 2j (the unit's elements 0-15, groups 0-3) or 2j + 1 (16-31), a sub-block scale
// (kSubScales): the tile's halves (x86 MQ2_K: codes q * sc <= 45, two int32 halves) bit for bit;
// its factor d and its two mins -dmin * m (kHalfMin), m the scale bytes' high nibbles. The
// header's 16 scale bytes per row are split into nibbles once per super-block, lane-wise over
// 16 rows; a unit's two two-bit vectors are Q3_K's.
struct PanelQ2_K {
  static constexpr int kUnits = 8;
  static constexpr size_t kBlock = kPanelRows * sizeof(block_q2_K);
  static constexpr size_t kHead = 20 * kPanelRows;  // d, dmin, 16 scale bytes
  static constexpr size_t kUnit = 2 * 64;
  static constexpr bool kMin = true, kHalfMin = true, kSubScales = true, kOne = false;
  template <class T>
  struct Head {
    typename T::VF d[T::kVecs], mdmin[T::kVecs];
    alignas(16) uint8_t sc[16][kPanelRows], m[16][kPanelRows];  // [scale byte k][row]
  };
  template <class T>
  static PLLM_I16P_AI void head(const uint8_t* p, Head<T>& h) {
    for (int s = 0; s < T::kVecs; ++s) {
      h.d[s] = T::scales(p + 2 * T::kLanes * s);
      h.mdmin[s] = T::sub(T::zero(), T::scales(p + 2 * kPanelRows + 2 * T::kLanes * s));
    }
    typedef uint8_t u8x16 __attribute__((vector_size(16)));
    u8x16 b[16], lo[16], hi[16];
    __builtin_memcpy(b, p + 4 * kPanelRows, sizeof(b));
    for (int k = 0; k < 16; ++k) {
      lo[k] = b[k] & 0x0F;
      hi[k] = b[k] >> 4;
    }
    __builtin_memcpy(h.sc, lo, sizeof(lo));
    __builtin_memcpy(h.m, hi, sizeof(hi));
  }
  template <class T, class Sink>
  static PLLM_I16P_AI void unit(const uint8_t* p, const Head<T>& h, int j, Sink& c) {
    using V = typename T::V;
    const uint8_t* q = p + kHead + kUnit * j;
#pragma GCC unroll 2
    for (int s = 0; s < T::kVecs; ++s) {
      c.sc[s] = h.d[s];
      c.mn[s] = T::mul(T::u8f(h.m[2 * j] + T::kLanes * s), h.mdmin[s]);
      c.mn2[s] = T::mul(T::u8f(h.m[2 * j + 1] + T::kLanes * s), h.mdmin[s]);
      V sw[2];
      sub_scales_for<T>(c, s, h.sc[2 * j], h.sc[2 * j + 1], sw);  // 0..15: the same as int8
#pragma GCC unroll 2
      for (int hv = 0; hv < 2; ++hv) {
        V b2[2];
        pair_shuffles<T>(q + 64 * hv, s, b2);
#pragma GCC unroll 4
        for (int f = 0; f < 4; ++f) {
          const int g = fields2_group(hv, f);
#pragma GCC unroll 2
          for (int k = 0; k < 2; ++k) put_scaled<T>(c, 2 * g + k, s, field2<T>(b2[k], f), sw[g < 4 ? 0 : 1]);
        }
      }
    }
  }
};

// Q3_K unit j of a super-block: x = d * code, code = (q - 4) * sc, q = 2 low bits | third bit << 2,
// sc = signed scale 2j for the unit's elements 0-15 (groups 0-3), 2j + 1 for 16-31: the tile's
// codes (x86 MQ3_K: |code| <= 4 * 32), its factor d and no min (kOne false: two int32 halves).
// The header's 12 packed scale bytes per row are unpacked once per super-block, lane-wise over 16
// rows (unpack_k3_scales' byte operations). The low bits are two-bit field vectors (pair_shuffles);
// the third-bit vector is Q5_K's fifth-bit one.
struct PanelQ3_K {
  static constexpr int kUnits = 8;
  static constexpr size_t kBlock = kPanelRows * sizeof(block_q3_K);
  static constexpr size_t kHead = 14 * kPanelRows;  // d, 12 scale bytes
  static constexpr size_t kUnit = 3 * 64;
  static constexpr bool kMin = false, kSubScales = true, kOne = false;
  template <class T>
  struct Head {
    typename T::VF d[T::kVecs];
    alignas(16) int8_t sc[16][kPanelRows];  // [scale k][row]
  };
  template <class T>
  static PLLM_I16P_AI void head(const uint8_t* p, Head<T>& h) {
    for (int s = 0; s < T::kVecs; ++s) h.d[s] = T::scales(p + 2 * T::kLanes * s);
    typedef uint8_t u8x16 __attribute__((vector_size(16)));
    u8x16 b[12], o[16];
    __builtin_memcpy(b, p + 2 * kPanelRows, sizeof(b));
    for (int t = 0; t < 4; ++t) {
      o[t] = ((b[t] & 0x0F) | ((b[8 + t] & 3) << 4)) - 32;
      o[4 + t] = ((b[4 + t] & 0x0F) | (((b[8 + t] >> 2) & 3) << 4)) - 32;
      o[8 + t] = ((b[t] >> 4) | (((b[8 + t] >> 4) & 3) << 4)) - 32;
      o[12 + t] = ((b[4 + t] >> 4) | ((b[8 + t] >> 6) << 4)) - 32;
    }
    __builtin_memcpy(h.sc, o, sizeof(o));
  }
  template <class T, class Sink>
  static PLLM_I16P_AI void unit(const uint8_t* p, const Head<T>& h, int j, Sink& c) {
    using V = typename T::V;
    const V k4 = T::bcastw(4);
    const uint8_t* q = p + kHead + kUnit * j;
#pragma GCC unroll 2
    for (int s = 0; s < T::kVecs; ++s) {
      c.sc[s] = h.d[s];
      c.mn[s] = T::zero();
      V sw[2];
      sub_scales_for<T>(c, s, reinterpret_cast<const uint8_t*>(h.sc[2 * j]), reinterpret_cast<const uint8_t*>(h.sc[2 * j + 1]), sw);
      V tb[2];
      pair_shuffles<T>(q + 128, s, tb);
#pragma GCC unroll 2
      for (int hv = 0; hv < 2; ++hv) {
        V b2[2];
        pair_shuffles<T>(q + 64 * hv, s, b2);
#pragma GCC unroll 4
        for (int f = 0; f < 4; ++f) {
          const int g = fields2_group(hv, f);
#pragma GCC unroll 2
          for (int k = 0; k < 2; ++k) {
            // the two low bits, the third bit g to bit 2
            const V code = T::bor(field2<T>(b2[k], f), T::band(shift_w<T>(tb[k], 2 - g), k4));
            put_scaled<T>(c, 2 * g + k, s, T::subw(code, k4), sw[g < 4 ? 0 : 1]);
          }
        }
      }
    }
  }
};

// Unit j of a super-block: x = d * code, code = (q - 32) * sc, q = 4 low bits | 2 high bits << 4,
// sc = scale 2j for the unit's elements 0-15 (groups 0-3), 2j + 1 for 16-31 (groups 4-7): the
// tile's codes (x86 MQ6_K: |code| <= 32 * 128, exact in int16), its factor d and no min. Codes
// are not <= 15, so the driver keeps the tile's two int32 halves (kOne false). The low bits
// decode as Q4 vectors; a high-bit vector's bytes go through the same pair shuffles, so word
// lane (row i, element e) holds the 4 fields of e's byte, and field f is moved to bits 4-5 by
// one word shift (f = 2: none) and or'ed under the mask 0x30 (T::orhi).
struct PanelQ6_K {
  static constexpr int kUnits = 8;
  static constexpr size_t kBlock = kPanelRows * sizeof(block_q6_K);  // a super-block of 16 rows
  static constexpr size_t kHead = 18 * kPanelRows;                   // d, 16 scale bytes
  static constexpr size_t kUnit = 6 * 64;
  static constexpr bool kMin = false, kSubScales = true, kOne = false;
  template <class T>
  struct Head {
    typename T::VF d[T::kVecs];
  };
  template <class T>
  static PLLM_I16P_AI void head(const uint8_t* p, Head<T>& h) {
    for (int s = 0; s < T::kVecs; ++s) h.d[s] = T::scales(p + 2 * T::kLanes * s);
  }
  template <class T, class Sink>
  static PLLM_I16P_AI void unit(const uint8_t* p, const Head<T>& h, int j, Sink& c) {
    using V = typename T::V;
    const V p0 = T::ctl(kPanelPairs.c[0]), p1 = T::ctl(kPanelPairs.c[1]), k32 = T::bcastw(32);
    const uint8_t* q = p + kHead + kUnit * j;
#pragma GCC unroll 2
    for (int s = 0; s < T::kVecs; ++s) {
      c.sc[s] = h.d[s];
      c.mn[s] = T::zero();
      V sw[2];
      sub_scales_for<T>(c, s, p + 2 * kPanelRows + kPanelRows * (2 * j), p + 2 * kPanelRows + kPanelRows * (2 * j + 1), sw);
#pragma GCC unroll 2
      for (int hv = 0; hv < 2; ++hv) {
        V hb[2];
        pair_shuffles<T>(q + 256 + 64 * hv, s, hb);
#pragma GCC unroll 2
        for (int f = 0; f < 2; ++f) {  // Q4 vector v = 2 hv + f: groups v (field f) and v + 4 (f + 2)
          const int v = 2 * hv + f;
          const V n = T::loadb(q + 64 * v + 4 * T::kLanes * s);
#pragma GCC unroll 2
          for (int k = 0; k < 2; ++k) {
            const V b = T::shuffle(n, k ? p1 : p0);
            // field f (f + 2) of each word of hb at bits 4-5, the other bits masked by orhi
            const V lo = T::orhi(T::low4(b), shift_w<T>(hb[k], 4 - 2 * f));
            const V hi = T::orhi(T::shr4(b), shift_w<T>(hb[k], -2 * f));
            put_scaled<T>(c, 2 * v + k, s, T::subw(lo, k32), sw[0]);
            put_scaled<T>(c, 2 * (v + 4) + k, s, T::subw(hi, k32), sw[1]);
          }
        }
      }
    }
  }
};

// NX activation rows (block b of each at a[x]) against one decoded panel block; ua[x]: the
// row's accumulator for this unit (u % 8), 16 lanes, which starts at +0 when first (the
// slice's first 8 units: what the tile's zeroed accumulator gives, without storing zeros
// first). Each half may run as several int32 chains (T::chains), added exactly.
template <class T, class P, int NX, int C, class Sink>
PLLM_I16P_AI void panel_scale(const typename T::V (&h)[2][NX][C][T::kVecs], const Sink& c, const block_q16* const* a,
                              const HalfSums* const* hs, float* const* ua, bool first);

template <class T, class P, int NX>
PLLM_I16P_AI void panel_tile(const PanelCodes<T>& c, const block_q16* const* a, const HalfSums* const* hs,
                             float* const* ua, bool first) {
  constexpr bool kOne = P::kOne;
  constexpr int C = T::chains(NX), S = T::kVecs;
  typename T::V h[2][NX][C][S];  // kOne (codes <= 15): h[0] holds the whole unit
  for (int hv = 0; hv < 2; ++hv)
    for (int x = 0; x < NX; ++x)
      for (int j = 0; j < C; ++j)
        for (int s = 0; s < S; ++s) h[hv][x][j][s] = T::izero();
#pragma GCC unroll 8
  for (int g = 0; g < 8; ++g) {
    const int hv = kOne ? 0 : (g >> 1) & 1;  // half A: groups 0, 1, 4, 5; half B: 2, 3, 6, 7
    const int j = g * C / 8;  // chain: groups in C runs
    for (int x = 0; x < NX; ++x)
      for (int k = 0; k < 2; ++k)
        for (int s = 0; s < S; ++s) h[hv][x][j][s] = T::dp(h[hv][x][j][s], c.w[2 * g + k][s], a[x]->qs + 4 * g + 2 * k);
  }
  panel_scale<T, P, NX, C>(h, c, a, hs, ua, first);
}

// The unit's int32 chains h of NX activation rows, scaled into their accumulators with the
// sink's factors c.sc, c.mn (and c.mn2 with the staged half sums hs[x] where kHalfMin; the chains
// times c.sub first where the sink scales chains: chain j holds groups [8j / C, 8(j + 1) / C)).
template <class T, class P, int NX, int C, class Sink>
PLLM_I16P_AI void panel_scale(const typename T::V (&h)[2][NX][C][T::kVecs], const Sink& c, const block_q16* const* a,
                              const HalfSums* const* hs, float* const* ua, bool first) {
  constexpr int S = T::kVecs, L = T::kLanes;
  constexpr bool kMin = P::kMin, kHalf = half_min<P>(), kOne = P::kOne, kSub = Sink::kChainScales;
  static_assert(!kSub || C % 2 == 0, "sub-block scales need the groups 0-3 and 4-7 in separate chains");
  for (int x = 0; x < NX; ++x) {
    const typename T::VF da = T::bcast(a[x]->d);
    const typename T::VF sa = T::bcast(kHalf ? hs[x]->lo : kMin ? a[x]->d * static_cast<float>(a[x]->sum) : 0.0f);
    for (int s = 0; s < S; ++s) {
      typename T::V ha, hb;
      if constexpr (kSub) {
        ha = T::mul32(h[0][x][0][s], c.sub[0][s]);
        hb = T::mul32(h[1][x][0][s], c.sub[0][s]);
        for (int j = 1; j < C; ++j) {
          ha = T::iadd(ha, T::mul32(h[0][x][j][s], c.sub[2 * j / C][s]));
          hb = T::iadd(hb, T::mul32(h[1][x][j][s], c.sub[2 * j / C][s]));
        }
      } else {
        ha = h[0][x][0][s];
        hb = h[1][x][0][s];
        for (int j = 1; j < C; ++j) {
          ha = T::iadd(ha, h[0][x][j][s]);
          hb = T::iadd(hb, h[1][x][j][s]);
        }
      }
      const typename T::VF t = kOne ? T::cvt(ha) : T::add(T::cvt(ha), T::cvt(hb));
      float* p = ua[x] + s * L;
      typename T::VF acc = T::fma(first ? T::zero() : T::loadf(p), t, T::mul(c.sc[s], da));
      if constexpr (kMin) acc = T::fma(acc, c.mn[s], sa);
      if constexpr (kHalf) acc = T::fma(acc, c.mn2[s], T::bcast(hs[x]->hi));
      T::storef(p, acc);
    }
  }
}

template <class T, class P, int NX = T::tile_x(P::kOne)>
PLLM_I16P_AI void panel_tile_any(int nx, const PanelCodes<T>& c, const block_q16* const* a, const HalfSums* const* hs,
                                 float* const* ua, bool first) {
  if (nx == NX) return panel_tile<T, P, NX>(c, a, hs, ua, first);
  if constexpr (NX > 1) panel_tile_any<T, P, NX - 1>(nx, c, a, hs, ua, first);
}

inline constexpr int kPanelPass = 32;  // activation rows per pass (unit accumulators: 32 x 8 x 16 f32, 16 KiB)
inline constexpr int kPanelAhead = 8;  // software prefetch distance, units

// TypeKernels::gemm_i16_panels.
template <class T, class P>
void i16_panels(int64_t n, const void* w, int n_panels, const void* xq, size_t xs, int n_x, float* out,
                int64_t os) {
  constexpr int R = kPanelRows, L = T::kLanes, NX = T::tile_x(P::kOne), K = P::kUnits;
  constexpr bool kHalf = half_min<P>();
  constexpr size_t kUnitBytes = P::kBlock / K;  // a unit's share of the panel (prefetch stride)
  static_assert((K == 1 || K == 8) && kI16Slice % 8 == 0, "slices start on super-blocks");
  const int64_t nb = n / 32;  // units
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  const uint8_t* xb = static_cast<const uint8_t*>(xq);
  alignas(64) float ua[kPanelPass * 8 * R];  // (activation row, unit % 8, row)
  // Passes of activation rows outside, panels inside: a pass's rows (32 x n / 32 blocks of 72
  // bytes) stay in L1 / L2 while the panels stream past them once per pass.
  // A kHalfMin type's activation half sums, staged once per pass in the thread's scratch (per
  // panel they would cost a sixteen-code sum per unit and activation row).
  HalfSums* halves = kHalf ? static_cast<HalfSums*>(gemm_scratch(sizeof(HalfSums) * kPanelPass * size_t(nb))) : nullptr;
  for (int x0 = 0; x0 < n_x; x0 += kPanelPass) {
    const int nxp = n_x - x0 < kPanelPass ? n_x - x0 : kPanelPass;
    if constexpr (kHalf) {
      for (int x = 0; x < nxp; ++x) {
        const block_q16* a = reinterpret_cast<const block_q16*>(xb + size_t(x0 + x) * xs);
        for (int64_t b = 0; b < nb; ++b) halves[size_t(x) * size_t(nb) + size_t(b)] = half_sums(a[b]);
      }
    }
    auto half_at = [&](int x, int64_t b) -> const HalfSums* {
      return kHalf ? &halves[size_t(x) * size_t(nb) + size_t(b)] : nullptr;
    };
    for (int pn = 0; pn < n_panels; ++pn) {
      const uint8_t* panel = wb + size_t(pn) * size_t(nb) * kUnitBytes;
      typename P::template Head<T> hd{};
      for (int64_t s0 = 0; s0 < nb; s0 += kI16Slice) {
        const int64_t s1 = nb - s0 < kI16Slice ? nb : s0 + kI16Slice;
        for (int x = 0; x < nxp; ++x)  // the unit slots a short slice leaves untouched
          for (int64_t u = s1 - s0; u < 8; ++u)
            for (int s = 0; s < R; s += L) T::storef(ua + (x * 8 + u) * R + s, T::zero());
        for (int64_t b = s0; b < s1; ++b) {
          // A decode step streams the weights from DRAM once; the hardware prefetcher alone
          // left half of this loop waiting on the block loads (perf, --parallel 8, AVX-512).
          // A super-block is prefetched a unit's share at a time, kPanelAhead units' bytes ahead.
          const uint8_t* ahead = panel + size_t(b + kPanelAhead) * kUnitBytes;
          for (size_t o = 0; o < kUnitBytes; o += 64) __builtin_prefetch(ahead + o);
          // Unit b is unit b % K of super-block b / K; slices start on super-blocks (kI16Slice
          // is a multiple of 8), and b % 8 stays the unit's accumulator, as in the tile.
          const uint8_t* blk = panel + size_t(b / K) * P::kBlock;
          if constexpr (K > 1)
            if (b % K == 0) P::template head<T>(blk, hd);
          auto decode = [&](auto& sink) PLLM_I16P_AI_LAMBDA {
            if constexpr (K == 1) {
              P::template decode<T>(blk, sink);
            } else {
              P::template unit<T>(blk, hd, int(b % K), sink);
            }
          };
          if (nxp == 1) {  // decode: each code vector used as it is made
            const block_q16* a = reinterpret_cast<const block_q16*>(xb + size_t(x0) * xs) + b;
            float* u = ua + ((b - s0) % 8) * R;
            const HalfSums* hs = half_at(0, b);
            using Dot1 = PanelDot1<T, P>;
            Dot1 d(a->qs);
            decode(d);
            panel_scale<T, P, 1, Dot1::C>(d.h, d, &a, &hs, &u, b - s0 < 8);
            continue;
          }
          PanelCodes<T> c;
          decode(c);
          for (int x = 0; x < nxp; x += NX) {
            const int nx = nxp - x < NX ? nxp - x : NX;
            const block_q16* a[NX];
            const HalfSums* hs[NX];
            float* u[NX];
            for (int j = 0; j < nx; ++j) {
              a[j] = reinterpret_cast<const block_q16*>(xb + size_t(x0 + x + j) * xs) + b;
              hs[j] = half_at(x + j, b);
              u[j] = ua + ((x + j) * 8 + (b - s0) % 8) * R;
            }
            panel_tile_any<T, P>(nx, c, a, hs, u, b - s0 < 8);
          }
        }
        for (int x = 0; x < nxp; ++x)  // the slice's sum, in the tile's order
          for (int s = 0; s < R; s += L) {
            auto l = [&](int k) { return T::loadf(ua + (x * 8 + k) * R + s); };
            const typename T::VF v = T::add(T::add(T::add(l(0), l(4)), T::add(l(2), l(6))),
                                            T::add(T::add(l(1), l(5)), T::add(l(3), l(7))));
            float* o = out + int64_t(x0 + x) * os + pn * R + s;
            T::storeu(o, s0 == 0 ? v : T::add(T::loadu(o), v));
          }
      }
    }
  }
}

}  // namespace pllm::kern::drivers

#undef PLLM_I16P_AI
#undef PLLM_I16P_AI_LAMBDA
