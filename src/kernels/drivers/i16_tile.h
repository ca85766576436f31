// Driver of the int16-activation tile (TypeKernels::vec_dot_i16act_tile): n_rows weight rows
// against n_x block_q16 activation rows, out[x * os + r]. Written once here; each ISA supplies
// vector traits S and, per weight type, a micro-kernel M (x86/i16act_avx2.cpp,
// arm/i16act_neon.cpp), and installs drivers::i16_tile<S, M>.
//
// The scheme: every weight block is decoded once into int16 codes (per 32-element unit, one
// block_q16 of activations), and the same codes meet each of the NX activation rows of the
// register tile; the 32 int16 x int16 products of a unit are summed exactly in int32 lanes,
// then scaled in f32:
//   unit term = d_a * (scale * sum_l code_l a_l + min * sum_l a_l)
// where scale and min are the weight's per-unit factors (min only for types with an offset:
// Q4_1, Q5_1, Q4_K) and sum_l a_l is the activation block's exact `sum`.
//   * 32-element blocks (kUnits = 1): each unit's lane sums are converted and FMA'd into the
//     accumulator (lanes keep partial sums; a horizontal sum at the end).
//   * K-quant blocks (kUnits = 8): the f32 work per unit (conversion, scale, FMA) would cost
//     more than the integer dot, so the eight units' lane sums are first reduced across lanes
//     into one value per unit (join1, join2, totals: a transposing add tree), and the scale,
//     d_a and min terms are applied to all eight units at once, lane j holding unit j. d_a and
//     d_a * sum of the activation blocks are staged per call in contiguous arrays for that.
//
// Contract of S (the ISA's vector traits; one per ISA, shared by every type):
//   F        f32 vector of kLanes lanes (kLanes divides 8); I: int32 vector; Q: a unit's codes
//   zero(), bcast(float), load(const float*), mul(a, b), fma(acc, a, b) = acc + a * b,
//   cvt(I) -> F, hsum(F)
//   dot(const Q&, const int16_t* a) -> I: lane sums of code_l * a_l over the unit's 32
//            elements, exact (their total is the unit's integer dot)
//   join1(I u0, I u1) -> I1, join2(I1 p01, I1 p23) -> I2, totals(I2 q0123, I2 q4567, F t[8 /
//            kLanes]): the add tree of a K block; lane j of t[k] = total of unit k * kLanes + j,
//            in f32 (an int32 lane may hold at most 16 products: convert before that)
//   tile_rows(NX, kUnits): weight rows per register tile for NX activation rows (1 where a
//            multiply takes its activation operand from memory, as on x86, unless one row would
//            leave a single FMA chain per unit; 2 on ARM halves the activation loads)
//   prefetch(p): a software prefetch of the cache line at p (may be empty)
// Contract of M (one weight type on that ISA):
//   W        the weight block type; kUnits: 32-element units per block (1, or 8 for K-quants)
//   kMin     the type has a min term
//   B        per-block state (scales decoded once per block); B block(const W&)
//   codes(const W&, const B&, int u, Q&): unit u's codes as int16, with any integer sub-scale
//            folded in (Q6_K: (q - 32) * sc), |code| <= 4096 = 2^12. With |a| <= 32767 < 2^15,
//            an int32 lane may then sum up to 16 products without overflow
//            (16 * 2^12 * (2^15 - 1) < 2^31): AVX2's dot sums 4 per lane, NEON's 8.
//   scale(const B&, int k) -> F: the f32 factor of the unit's integer dot (d, d * sc_j). For
//            kUnits = 1 every lane (k = 0); for kUnits = 8 lane j = unit k * kLanes + j.
//   min(const B&, int k) -> F: (kMin) the factor of the activation block's d_a * sum (Q4_1: m;
//            Q4_K: -dmin * m_j), laid out as scale, except that for kUnits = 1 each lane holds
//            min / kLanes: spread over the lanes it joins the unit's f32 term before the one
//            FMA into the accumulator (a mul and an FMA per unit and row, no second chain).
//
// Summation order: one accumulator per (weight row, activation row), the blocks FMA'd in order,
// a horizontal sum at the end (per slice of kI16Slice units for K blocks, slices added in
// order). It depends on nothing but n: not on the tile shape, on where a row falls in a call,
// or on how many activation rows share the call, so a token's result is the same for every
// chunking and batch grouping. Independent chains for latency come from the tile (R x NX
// accumulators), which is why tile_rows(1, 1) should be >= 2 on an ISA with 4-cycle FMA latency
// (K blocks make one FMA per 8 units: one row is chains enough).
//
// ODR: templates over the ISA's types only (see fused_dot.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>

#include "quant/blocks.h"

#define PLLM_I16_AI inline __attribute__((always_inline))

namespace pllm::kern::drivers {

// K blocks: activation units staged per call slice (8192 elements; 16 KB of stack at NX = 8).
constexpr int kI16Slice = 256;

// f.operator()<U>() for U = 0 .. N-1, U a constant expression in each.
template <int N, class Fn>
PLLM_I16_AI void i16_unroll(Fn&& f) {
  [&]<int... U>(std::integer_sequence<int, U...>) { (f.template operator()<U>(), ...); }(
      std::make_integer_sequence<int, N>{});
}

// The rows are normally contiguous: prefetch the rows 4 ahead of this tile as one linear stream
// (R interleaved row streams are too short for the hardware to train on).
template <class S, int R, class W>
PLLM_I16_AI void i16_prefetch(const uint8_t*& pf) {
  for (int k = 0; k < R * int(sizeof(W)); k += 64) S::prefetch(pf + k);
  pf += R * sizeof(W);
}

// kUnits = 1: R weight rows at w (ws bytes apart) against NX activation rows at a (as bytes apart).
template <class S, class M, int R, int NX>
PLLM_I16_AI void i16_tile_units(int64_t n, const uint8_t* w, size_t ws, const uint8_t* a, size_t as, float* out,
                                int64_t os) {
  using F = typename S::F;
  using W = typename M::W;
  const W* wr[R];
  for (int r = 0; r < R; ++r) wr[r] = reinterpret_cast<const W*>(w + r * ws);
  const block_q16* ax[NX];
  for (int x = 0; x < NX; ++x) ax[x] = reinterpret_cast<const block_q16*>(a + x * as);
  F acc[R][NX];
  for (int r = 0; r < R; ++r)
    for (int x = 0; x < NX; ++x) acc[r][x] = S::zero();
  const uint8_t* pf = w + 4 * ws;
  for (int64_t b = 0; b < n / 32; ++b) {
    i16_prefetch<S, R, W>(pf);
    typename M::B bs[R];
    typename S::Q q[R];
    for (int r = 0; r < R; ++r) {
      bs[r] = M::block(wr[r][b]);
      M::codes(wr[r][b], bs[r], 0, q[r]);
    }
    for (int x = 0; x < NX; ++x) {
      const block_q16& ab = ax[x][b];
      const F da = S::bcast(ab.d);
      if constexpr (M::kMin) {
        const F sa = S::bcast(static_cast<float>(ab.sum));  // exact: |sum| <= 32 * 32767 < 2^24
        for (int r = 0; r < R; ++r) {
          const F t = S::fma(S::mul(M::min(bs[r], 0), sa), S::cvt(S::dot(q[r], ab.qs)), M::scale(bs[r], 0));
          acc[r][x] = S::fma(acc[r][x], t, da);
        }
      } else {
        for (int r = 0; r < R; ++r)
          acc[r][x] = S::fma(acc[r][x], S::cvt(S::dot(q[r], ab.qs)), S::mul(M::scale(bs[r], 0), da));
      }
    }
  }
  for (int x = 0; x < NX; ++x)
    for (int r = 0; r < R; ++r) out[x * os + r] = S::hsum(acc[r][x]);
}

// kUnits = 8: K blocks [b0, b0 + nb) of R rows against NX activation rows (ax), whose units'
// d_a and d_a * sum are staged at da / sa + x * kI16Slice (unit 8 * b0 first). The slice's sums
// are stored (first slice) or added to out.
template <class S, class M, int R, int NX>
PLLM_I16_AI void i16_tile_k(int64_t b0, int64_t nb, const uint8_t* w, size_t ws, const block_q16* const* ax,
                            const float* da, const float* sa, float* out, int64_t os) {
  using F = typename S::F;
  using I = typename S::I;
  using W = typename M::W;
  using I1 = decltype(S::join1(I{}, I{}));
  using I2 = decltype(S::join2(I1{}, I1{}));
  constexpr int kV = 8 / S::kLanes;
  const W* wr[R];
  for (int r = 0; r < R; ++r) wr[r] = reinterpret_cast<const W*>(w + r * ws) + b0;
  F acc[R][NX];
  for (int r = 0; r < R; ++r)
    for (int x = 0; x < NX; ++x) acc[r][x] = S::zero();
  const uint8_t* pf = w + 4 * ws + b0 * R * sizeof(W);
  for (int64_t b = 0; b < nb; ++b) {
    i16_prefetch<S, R, W>(pf);
    typename M::B bs[R];
    for (int r = 0; r < R; ++r) bs[r] = M::block(wr[r][b]);
    // The add tree as the units come (few live registers): units 2i, 2i+1 -> join1; pairs of
    // those -> join2 (units 0-3, 4-7).
    I ev[R][NX];
    I1 p01[R][NX];
    I2 q[2][R][NX];
    i16_unroll<8>([&]<int U>() {
      typename S::Q c[R];
      for (int r = 0; r < R; ++r) M::codes(wr[r][b], bs[r], U, c[r]);
      for (int x = 0; x < NX; ++x) {
        const int16_t* aq = ax[x][8 * (b0 + b) + U].qs;
        for (int r = 0; r < R; ++r) {
          const I d = S::dot(c[r], aq);
          if constexpr (U % 2 == 0) ev[r][x] = d;
          else if constexpr (U % 4 == 1) p01[r][x] = S::join1(ev[r][x], d);
          else q[U / 4][r][x] = S::join2(p01[r][x], S::join1(ev[r][x], d));
        }
      }
    });
    for (int x = 0; x < NX; ++x) {
      const float* dx = da + x * kI16Slice + 8 * b;
      for (int r = 0; r < R; ++r) {
        F t[kV];
        S::totals(q[0][r][x], q[1][r][x], t);
        for (int k = 0; k < kV; ++k) {
          acc[r][x] = S::fma(acc[r][x], t[k], S::mul(M::scale(bs[r], k), S::load(dx + k * S::kLanes)));
          if constexpr (M::kMin)
            acc[r][x] = S::fma(acc[r][x], M::min(bs[r], k), S::load(sa + x * kI16Slice + 8 * b + k * S::kLanes));
        }
      }
    }
  }
  for (int x = 0; x < NX; ++x)
    for (int r = 0; r < R; ++r) {
      const float s = S::hsum(acc[r][x]);
      out[x * os + r] = b0 == 0 ? s : out[x * os + r] + s;
    }
}

// All n_rows weight rows against NX activation rows: tiles of S::tile_rows(NX) rows, the
// remainder one row at a time (same sums: the order does not depend on the tile).
template <class S, class M, int NX>
void i16_rows_nx(int64_t n, const uint8_t* w, size_t ws, int n_rows, const uint8_t* a, size_t as, float* out,
                 int64_t os) {
  constexpr int kR = S::tile_rows(NX, M::kUnits);
  if constexpr (M::kUnits == 1) {
    int r = 0;
    for (; r + kR <= n_rows; r += kR) i16_tile_units<S, M, kR, NX>(n, w + r * ws, ws, a, as, out + r, os);
    if constexpr (kR > 1)
      for (; r < n_rows; ++r) i16_tile_units<S, M, 1, NX>(n, w + r * ws, ws, a, as, out + r, os);
  } else {
    static_assert(M::kUnits == 8 && 8 % S::kLanes == 0 && kI16Slice % 8 == 0, "K blocks: 8 units");
    const block_q16* ax[NX];
    for (int x = 0; x < NX; ++x) ax[x] = reinterpret_cast<const block_q16*>(a + x * as);
    alignas(64) float da[NX * kI16Slice];
    alignas(64) float sa[M::kMin ? NX * kI16Slice : 1];
    const int64_t nb = n / 256;
    for (int64_t b0 = 0; b0 < nb; b0 += kI16Slice / 8) {
      const int64_t bn = nb - b0 < kI16Slice / 8 ? nb - b0 : kI16Slice / 8;
      for (int x = 0; x < NX; ++x)
        for (int64_t i = 0; i < 8 * bn; ++i) {
          const block_q16& ab = ax[x][8 * b0 + i];
          da[x * kI16Slice + i] = ab.d;
          if constexpr (M::kMin) sa[x * kI16Slice + i] = ab.d * static_cast<float>(ab.sum);
        }
      int r = 0;
      for (; r + kR <= n_rows; r += kR) i16_tile_k<S, M, kR, NX>(b0, bn, w + r * ws, ws, ax, da, sa, out + r, os);
      if constexpr (kR > 1)
        for (; r < n_rows; ++r) i16_tile_k<S, M, 1, NX>(b0, bn, w + r * ws, ws, ax, da, sa, out + r, os);
    }
  }
}

// TypeKernels::vec_dot_i16act_tile: the activation rows in groups of up to 8, each group one
// pass over the weight rows.
template <class S, class M>
void i16_tile(int64_t n, const void* w, size_t ws, int n_rows, const void* xq, size_t xs, int n_x, float* out,
              int64_t os) {
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  for (int x0 = 0; x0 < n_x; x0 += 8) {
    const uint8_t* a = static_cast<const uint8_t*>(xq) + size_t(x0) * xs;
    float* o = out + x0 * os;
    switch (n_x - x0 < 8 ? n_x - x0 : 8) {
      case 1: i16_rows_nx<S, M, 1>(n, wb, ws, n_rows, a, xs, o, os); break;
      case 2: i16_rows_nx<S, M, 2>(n, wb, ws, n_rows, a, xs, o, os); break;
      case 3: i16_rows_nx<S, M, 3>(n, wb, ws, n_rows, a, xs, o, os); break;
      case 4: i16_rows_nx<S, M, 4>(n, wb, ws, n_rows, a, xs, o, os); break;
      case 5: i16_rows_nx<S, M, 5>(n, wb, ws, n_rows, a, xs, o, os); break;
      case 6: i16_rows_nx<S, M, 6>(n, wb, ws, n_rows, a, xs, o, os); break;
      case 7: i16_rows_nx<S, M, 7>(n, wb, ws, n_rows, a, xs, o, os); break;
      default: i16_rows_nx<S, M, 8>(n, wb, ws, n_rows, a, xs, o, os); break;
    }
  }
}

}  // namespace pllm::kern::drivers

#undef PLLM_I16_AI
