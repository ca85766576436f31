// Driver of the int16-activation tile (TypeKernels::vec_dot_i16act_tile): n_rows weight rows
// against n_x block_q16 activation rows, out[x * os + r]. Written once here; each ISA supplies
// vector traits S and, per weight type, a micro-kernel M (x86/i16act_avx2.cpp,
// x86/i16act_avx512.cpp, arm/i16act_neon.cpp), and installs drivers::i16_tile<S, M>.
//
// Work unit: a "unit" is 32 elements (one block_q16 of activations); a "group" is 8 units (256
// elements: one K-quant block, or 8 blocks of the 32-element types). Per group, each weight
// row's 8 units are decoded once into int16 codes, and the codes meet each of the NX activation
// rows of the register tile: int16 x int16 products summed exactly in int32 lanes (S::dot),
// then reduced ACROSS the 8 units by a transposing add tree (join1, join2, totals) into one f32
// vector whose lane j is unit j's integer dot (split over kLanes-wide vectors where kLanes < 8).
// All scaling is then one vector operation per group for all 8 units at once:
//   acc += dot_u * (scale_u * d_a,u) + min_u * (d_a,u * sum_u)       (lane u, u = 0..7)
// where scale and min are the weight's per-unit factors (min: Q4_1's m, Q4_K's -dmin * m_j, or a
// constant offset such as Q4_0's -8 d taken out of the codes), d_a,u the activation block's step
// and sum_u its exact code sum. d_a and d_a * sum are staged per
// call in contiguous arrays (per slice of kI16Slice units), so they load as vectors. Converting,
// scaling and accumulating per unit instead costs more f32 work than the integer dot itself.
// A row whose length is not a multiple of 256 ends in a group of fewer units (runtime count;
// the missing lanes are zeros; compiled for at most 2, 4 or 8 units so a short one is cheap).
//
// Contract of S (the ISA's vector traits; one per ISA, shared by every type):
//   F        f32 vector of kLanes lanes (kLanes divides 8); I: int32 vector; Q: a unit's codes
//   zero(), izero(), load(const float*), mul(a, b), fma(acc, a, b) = acc + a * b, hsum(F)
//   dot(const Q&, const int16_t* a) -> I: lane sums of code_l * a_l over the unit's 32
//            elements, exact (their total is the unit's integer dot)
//   join1(I u0, I u1) -> I1, join2(I1 p01, I1 p23) -> I2, totals(I2 q0123, I2 q4567, F t[8 /
//            kLanes]): the add tree of a group; lane j of t[k] = total of unit k * kLanes + j,
//            in f32. An int32 lane may hold at most 16 products: convert before that.
//   prefetch(p): a software prefetch of the cache line at p (may be empty)
//   Optional activation layout: traits that define Act get their activation rows in that
//   layout instead of the int16 codes, made once per call and slice by split(const block_q16*
//   src, int64_t nu, Act* dst) (units [0, nu) of src to dst[0, nu)) into scratch(units), and
//   dot(const Q&, const Act*) then reads one unit of it (arm/i16act_dotprod.cpp: the codes'
//   high and low bytes for SDOT / UDOT; a re-layout per weight row would cost more than the
//   dot). Without Act, dot gets the unit's block_q16::qs.
// Contract of M (one weight type on that ISA):
//   W        the weight block type; kUnits: units per block (1, or 8 for K-quants)
//   kMin     the type has a min term (or an offset kept out of the codes)
//   tile_rows(NX): weight rows per register tile for NX activation rows (more rows share each
//            activation load and d_a; fewer leave registers to a type with a heavy decode)
//   G        per-group state (scales); G group(const W* w, int nu): the group starting at
//            block w, whose first nu units exist (nu = 8 but in a row's last group of a
//            32-element type); factors of missing units must be 0
//   codes(const W* w, const G&, int u, Q&): unit u (< nu) of the group as int16 codes, any
//            integer sub-scale folded in (Q6_K: (q - 32) * sc), |code| <= 4096 = 2^12. With
//            |a| <= 32767 < 2^15 an int32 lane may then sum 16 products without overflow
//            (16 * 2^12 * (2^15 - 1) < 2^31): AVX2's dot sums 4 per lane, AVX-512's 2, NEON's 8.
//   scale(const G&, int k) -> F: lane j = the f32 factor of unit k * kLanes + j's integer dot
//   min(const G&, int k) -> F: (kMin) lane j = the factor of that unit's d_a * sum
//   Optional kHalfMin (with kMin): the min changes at element 16 of a unit (Q2_K: a min per 16
//            elements). min(g, k) then multiplies d_a * (sum of the unit's codes 0-15) and
//            min2(g, k) d_a * (sum of 16-31), in that order.
//
// Summation order: one accumulator per (weight row, activation row), the groups FMA'd in order,
// a horizontal sum per slice, the slices added in order. It depends on nothing but n: not on
// the tile shape, on where a row falls in a call, or on how many activation rows share the
// call, so a token's result is the same for every chunking and batch grouping.
//
// ODR: templates over the ISA's types only (see fused_dot.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/drivers/unroll.h"
#include "quant/blocks.h"

#define PLLM_I16_AI inline __attribute__((always_inline))

namespace pllm::kern::drivers {

// The activation unit type S::dot reads (see the contract above) and its address.
template <class S, class = void>
struct ActOf {
  using type = block_q16;
  static constexpr bool kSplit = false;
};
template <class S>
struct ActOf<S, std::void_t<typename S::Act>> {
  using type = typename S::Act;
  static constexpr bool kSplit = true;
};
PLLM_I16_AI const int16_t* act_unit(const block_q16* a, int u) { return a[u].qs; }
template <class A>
PLLM_I16_AI const A* act_unit(const A* a, int u) {
  return a + u;
}

// Whether M (or a panel type) has kHalfMin (see the contract above).
template <class M>
constexpr bool half_min() {
  if constexpr (requires { M::kHalfMin; }) return M::kHalfMin;
  else return false;
}

// The activation sums a kHalfMin type's two mins multiply: the unit's codes 0-15 and 16-31
// (exact in int32), each times d_a.
struct HalfSums {
  float lo, hi;
};
PLLM_I16_AI HalfSums half_sums(const block_q16& a) {
  int32_t hi = 0;
  for (int l = 16; l < 32; ++l) hi += a.qs[l];
  return {a.d * static_cast<float>(a.sum - hi), a.d * static_cast<float>(hi)};  // |sums| < 2^24: exact
}

// Activation scales are staged per slice of this many units (8192 elements; 16 KB of stack
// at NX = 8). A multiple of 8.
constexpr int kI16Slice = 256;

// One group of R rows (wr) x NX activation rows (ax: the group's first unit of each, in the
// traits' activation layout), its
// staged d_a / d_a * sum at da / sa (x stride kI16Slice). kTail: the row's last group, whose
// first nu < 8 units exist (nu <= kMax: units from kMax on are left out at compile time, so a
// short tail costs a fraction of a group).
template <class S, class M, int R, int NX, int kMax, bool kTail>
PLLM_I16_AI void i16_group(const typename M::W* const* wr, int nu, const typename ActOf<S>::type* const* ax, const float* da,
                           const float* sa, const float* sb, typename S::F (*acc)[NX]) {
  using F = typename S::F;
  using I = typename S::I;
  using I1 = decltype(S::join1(I{}, I{}));
  using I2 = decltype(S::join2(I1{}, I1{}));
  constexpr int kV = 8 / S::kLanes;
  typename M::G g[R];
  for (int r = 0; r < R; ++r) g[r] = M::group(wr[r], kTail ? nu : 8);
  // One (row, activation row): the group's f32 terms from its two join2 results.
  auto finish = [&](int r, int x, I2 q0123, I2 q4567) {
    F t[kV];
    S::totals(q0123, q4567, t);
    for (int k = 0; k < kV; ++k) {
      const int o = x * kI16Slice + k * S::kLanes;
      acc[r][x] = S::fma(acc[r][x], t[k], S::mul(M::scale(g[r], k), S::load(da + o)));
      if constexpr (M::kMin) acc[r][x] = S::fma(acc[r][x], M::min(g[r], k), S::load(sa + o));
      if constexpr (half_min<M>()) acc[r][x] = S::fma(acc[r][x], M::min2(g[r], k), S::load(sb + o));
    }
  };
  // The add tree as the units come: units 2i, 2i+1 -> join1, two of those -> join2 (units
  // 0-3, 4-7); dot d of unit U goes in as step(U, d, ...).
  auto step = [](auto u_const, I d, I& ev, I1& p01, I2* q) {
    constexpr int U = decltype(u_const)::value;
    if constexpr (U % 2 == 0) ev = d;
    else if constexpr (U % 4 == 1) p01 = S::join1(ev, d);
    else q[U / 4] = S::join2(p01, S::join1(ev, d));
  };
  // Each unit is decoded and consumed at once. (Decoding the group's codes to the stack first
  // and running one activation row's tree at a time, so that fewer tree states are live,
  // measured 5-20 % slower at 4-8 activation rows on AVX2.)
  I ev[R][NX];
  I1 p01[R][NX];
  I2 q[R][NX][2];
  unroll<8>([&]<int U>() {
    const bool live = U < kMax && (!kTail || U < nu);
    typename S::Q c[R] = {};
    if constexpr (U < kMax)
      if (live)
        for (int r = 0; r < R; ++r) M::codes(wr[r], g[r], U, c[r]);
    for (int x = 0; x < NX; ++x)
      for (int r = 0; r < R; ++r) {
        I d = S::izero();
        if constexpr (U < kMax)
          if (live) d = S::dot(c[r], act_unit(ax[x], U));
        step(std::integral_constant<int, U>{}, d, ev[r][x], p01[r][x], q[r][x]);
      }
  });
  for (int x = 0; x < NX; ++x)
    for (int r = 0; r < R; ++r) finish(r, x, q[r][x][0], q[r][x][1]);
}

// Units [u0, u0 + nu) of R rows at w (ws bytes apart; u0 a multiple of 8) against NX activation
// rows (ax: unit u0 of each), staged scales at da / sa / sb (unit u0 first). The slice's sums are stored (u0 = 0) or
// added to out[x * os + r].
template <class S, class M, int R, int NX>
PLLM_I16_AI void i16_slice(int64_t u0, int64_t nu, const uint8_t* w, size_t ws,
                          const typename ActOf<S>::type* const* ax, const float* da, const float* sa, const float* sb,
                          float* out, int64_t os) {
  using W = typename M::W;
  using A = typename ActOf<S>::type;
  constexpr int kGroupBytes = int(sizeof(W)) * 8 / M::kUnits;
  typename S::F acc[R][NX];
  for (int r = 0; r < R; ++r)
    for (int x = 0; x < NX; ++x) acc[r][x] = S::zero();
  const W* wr[R];
  const A* axu[NX];
  // Rows normally follow each other in memory: prefetch the rows 4 ahead of this tile as one
  // linear stream (R interleaved row streams are too short for the hardware to train on).
  const uint8_t* pf = w + 4 * ws + (u0 / 8) * R * kGroupBytes;
  int64_t u = 0;
  for (; u + 8 <= nu; u += 8, pf += R * kGroupBytes) {
    for (int k = 0; k < R * kGroupBytes; k += 64) S::prefetch(pf + k);
    for (int r = 0; r < R; ++r) wr[r] = reinterpret_cast<const W*>(w + r * ws) + (u0 + u) / M::kUnits;
    for (int x = 0; x < NX; ++x) axu[x] = ax[x] + u;
    i16_group<S, M, R, NX, 8, false>(wr, 8, axu, da + u, sa + u, sb + u, acc);
  }
  if (u < nu) {
    for (int r = 0; r < R; ++r) wr[r] = reinterpret_cast<const W*>(w + r * ws) + (u0 + u) / M::kUnits;
    for (int x = 0; x < NX; ++x) axu[x] = ax[x] + u;
    const int left = int(nu - u);
    if (left <= 2) i16_group<S, M, R, NX, 2, true>(wr, left, axu, da + u, sa + u, sb + u, acc);
    else if (left <= 4) i16_group<S, M, R, NX, 4, true>(wr, left, axu, da + u, sa + u, sb + u, acc);
    else i16_group<S, M, R, NX, 8, true>(wr, left, axu, da + u, sa + u, sb + u, acc);
  }
  for (int x = 0; x < NX; ++x)
    for (int r = 0; r < R; ++r) {
      const float s = S::hsum(acc[r][x]);
      out[x * os + r] = u0 == 0 ? s : out[x * os + r] + s;
    }
}

// All n_rows weight rows against NX activation rows, slice by slice: tiles of M::tile_rows(NX)
// rows, the remainder one row at a time (same sums: the order does not depend on the tile).
template <class S, class M, int NX>
void i16_rows_nx(int64_t n, const uint8_t* w, size_t ws, int n_rows, const uint8_t* a, size_t as, float* out,
                 int64_t os) {
  static_assert((M::kUnits == 1 || M::kUnits == 8) && 8 % S::kLanes == 0 && kI16Slice % 8 == 0);
  constexpr int kR = M::tile_rows(NX);
  const block_q16* ax[NX];
  for (int x = 0; x < NX; ++x) ax[x] = reinterpret_cast<const block_q16*>(a + x * as);
  alignas(64) float da[NX * kI16Slice];
  alignas(64) float sa[M::kMin ? NX * kI16Slice : 1];
  alignas(64) float sb[half_min<M>() ? NX * kI16Slice : 1];
  using Act = ActOf<S>;
  typename Act::type* split = nullptr;
  if constexpr (Act::kSplit) split = S::scratch(size_t(NX) * kI16Slice);
  const typename Act::type* axs[NX];
  const int64_t units = n / 32;
  for (int64_t u0 = 0; u0 < units; u0 += kI16Slice) {
    const int64_t nu = units - u0 < kI16Slice ? units - u0 : kI16Slice;
    for (int x = 0; x < NX; ++x) {
      if constexpr (Act::kSplit) {
        S::split(ax[x] + u0, nu, split + x * kI16Slice);
        axs[x] = split + x * kI16Slice;
      } else {
        axs[x] = ax[x] + u0;
      }
      for (int64_t i = 0; i < nu; ++i) {
        const block_q16& ab = ax[x][u0 + i];
        da[x * kI16Slice + i] = ab.d;
        if constexpr (half_min<M>()) {
          const HalfSums h = half_sums(ab);
          sa[x * kI16Slice + i] = h.lo;
          sb[x * kI16Slice + i] = h.hi;
        } else if constexpr (M::kMin) {
          sa[x * kI16Slice + i] = ab.d * static_cast<float>(ab.sum);  // sum exact in f32
        }
      }
      for (int64_t i = nu; i < (nu + 7) / 8 * 8; ++i) {  // the last group's missing units
        da[x * kI16Slice + i] = 0.0f;
        if constexpr (M::kMin) sa[x * kI16Slice + i] = 0.0f;
        if constexpr (half_min<M>()) sb[x * kI16Slice + i] = 0.0f;
      }
    }
    int r = 0;
    for (; r + kR <= n_rows; r += kR) i16_slice<S, M, kR, NX>(u0, nu, w + r * ws, ws, axs, da, sa, sb, out + r, os);
    if constexpr (kR > 1)
      for (; r < n_rows; ++r) i16_slice<S, M, 1, NX>(u0, nu, w + r * ws, ws, axs, da, sa, sb, out + r, os);
  }
}

// i16_rows_nx as a function of its own (i16_tile<S, M, true>).
template <class S, class M, int NX>
[[gnu::noinline]] void i16_rows_nx_outlined(int64_t n, const uint8_t* w, size_t ws, int n_rows, const uint8_t* a,
                                            size_t as, float* out, int64_t os) {
  i16_rows_nx<S, M, NX>(n, w, ws, n_rows, a, as, out, os);
}

// TypeKernels::vec_dot_i16act_tile: the activation rows in groups of up to 8, each group one
// pass over the weight rows. kOutline: each activation-row count stays a function of its own
// (arm/i16act_dotprod.cpp: clang inlines some of them into this one, where bench/mca cannot
// tell their loops apart; the call costs nothing against a pass over the rows).
template <class S, class M, bool kOutline = false>
void i16_tile(int64_t n, const void* w, size_t ws, int n_rows, const void* xq, size_t xs, int n_x, float* out,
              int64_t os) {
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  auto rows = [&]<int NX>(const uint8_t* a, float* o) {
    if constexpr (kOutline) i16_rows_nx_outlined<S, M, NX>(n, wb, ws, n_rows, a, xs, o, os);
    else i16_rows_nx<S, M, NX>(n, wb, ws, n_rows, a, xs, o, os);
  };
  for (int x0 = 0; x0 < n_x; x0 += 8) {
    const uint8_t* a = static_cast<const uint8_t*>(xq) + size_t(x0) * xs;
    float* o = out + x0 * os;
    switch (n_x - x0 < 8 ? n_x - x0 : 8) {
      case 1: rows.template operator()<1>(a, o); break;
      case 2: rows.template operator()<2>(a, o); break;
      case 3: rows.template operator()<3>(a, o); break;
      case 4: rows.template operator()<4>(a, o); break;
      case 5: rows.template operator()<5>(a, o); break;
      case 6: rows.template operator()<6>(a, o); break;
      case 7: rows.template operator()<7>(a, o); break;
      default: rows.template operator()<8>(a, o); break;
    }
  }
}

// i16_tile with every call inlined, the entry the x86 tables install. Left to itself GCC 12
// outlines the unrolled group of a row's short last group (its max-inline-insns-single and
// large-function-growth limits), and the call then costs more than the rest of the row:
// 640-element rows (Gemma 3's Q8_0 head, Q5_0 projections) ran 1.5-2x slower. It doubles the
// compile time of the file that instantiates it. (NEON keeps i16_tile: unmeasured there.)
template <class S, class M>
[[gnu::flatten]] void i16_tile_inlined(int64_t n, const void* w, size_t ws, int n_rows, const void* xq, size_t xs,
                                       int n_x, float* out, int64_t os) {
  i16_tile<S, M>(n, w, ws, n_rows, xq, xs, n_x, out, os);
}

}  // namespace pllm::kern::drivers

#undef PLLM_I16_AI
