// Driver of the int16-activation prefill GEMM (TypeKernels::gemm_i16): the arguments of
// vec_dot_i16act_tile and bit for bit its results (i16_tile.h), faster for many activation rows.
// Written once here; an ISA instantiates it with GEMM traits T and the same per-type
// micro-kernels M as its tiles (x86/i16act_avx512.cpp).
//
// Why a second driver for the same sums: the tile multiplies a unit's 32 codes with 32
// activation codes (vpmaddwd) and must then add lanes of different units in a transposing
// tree, about as many shuffles as products, and it decodes every weight block again for each
// group of 8 activation rows. Here T::kLanes weight rows share a vector, lane i = row i: a
// group's codes are decoded once per pass (up to kI16GemmTokens activation rows), transposed to
// pairs (row i's codes 2k, 2k + 1 in lane i), and each activation pair is broadcast, so one
// vpdpwssd adds 2 products to each of the rows' int32 sums with no shuffle at all.
//
// Summation order (why the results are the tile's): per (weight row, activation row) and unit
// the tile forms two exact int32 halves, pairs {0-3, 8-11} and {4-7, 12-15} (AVX2's 128-bit
// lanes: elements 0-7 + 16-23 and 8-15 + 24-31), converts both, adds them, and FMAs the total
// into accumulator lane u % 8 with scale_u * d_a,u, then its min term; the 8 lanes are summed
// as ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) per slice of kI16Slice units, and the
// slices are added to out in order. The same operations here, lane-wise over rows, with the 8
// unit accumulators in a buffer: a unit missing from a row's last group leaves its accumulator
// as the tile's + 0 does (never -0: an accumulator starts at +0 and round-to-nearest gives +0
// for x + (-x)).
//
// Contract of T:
//   V, VF     int32 and f32 vectors of kLanes lanes
//   load(const int32_t*) -> V; madd(V w, const int16_t* a) -> V: lane i = w.lo_i * a[0] +
//             w.hi_i * a[1] (a's pair broadcast); dp(V acc, V w, const int16_t* a) = acc + madd
//   cvt(V) -> VF; add, mul, fma(acc, a, b) = acc + a * b (fused); loadf, storef, bcast(float)
//   transpose(const int32_t* src, int32_t* dst, int ds): kLanes rows of 16 code pairs (64 bytes
//             apart) to 16 vectors, pair k at dst + k * ds, lane i = row i
// M: i16_tile.h's micro-kernel contract (group, codes, scale, min).
//
// ODR: templates over the ISA's types only (see fused_dot.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/drivers/i16_tile.h"
#include "quant/blocks.h"

#define PLLM_I16G_AI inline __attribute__((always_inline))

namespace pllm::kern::drivers {

constexpr int kI16GemmTokens = 64;  // activation rows per pass (the unit-accumulator buffer's width)

// Pairs K0 .. K0 + 3 of unit u into one half h (kFirst: the half starts here).
template <class T, int RV, int NX, int K0, bool kFirst>
PLLM_I16G_AI void i16_pairs(const int32_t* wu, const block_q16* const* ax, int u, typename T::V (&h)[RV][NX]) {
  constexpr int L = T::kLanes;
#pragma GCC unroll 4
  for (int k = K0; k < K0 + 4; ++k) {
    typename T::V wv[RV];
    for (int rv = 0; rv < RV; ++rv) wv[rv] = T::load(wu + (k * RV + rv) * L);
    for (int x = 0; x < NX; ++x) {
      const int16_t* a = ax[x][u].qs + 2 * k;
      for (int rv = 0; rv < RV; ++rv) h[rv][x] = kFirst && k == K0 ? T::madd(wv[rv], a) : T::dp(h[rv][x], wv[rv], a);
    }
  }
}

// Whether M's codes are small enough (|code| <= 15: Q4_0, Q4_1, Q4_K) that a unit's whole sum,
// |sum| <= 32 * 15 * 32767 < 2^24, converts to f32 exactly: then cvt(A + B) equals the tile's
// cvt(A) + cvt(B) bit for bit (both halves and their sum are exact in f32), so one int32 chain
// per unit replaces the two halves and one conversion and one add go (M::kExactUnit).
template <class M>
constexpr bool exact_unit() {
  if constexpr (requires { M::kExactUnit; }) return M::kExactUnit;
  return false;
}

// One register tile: the RT = RV * kLanes rows of wt (one group's transposed codes: unit u, pair
// k, vector rv at wt + ((u * 16 + k) * RV + rv) * kLanes) x NX activation rows ax (each at the
// group's first unit), nu units. ua: the NX rows' unit accumulators, (x, unit, rv) at
// ua + ((x * 8 + u) * RV + rv) * kLanes.
template <class T, bool kMin, bool kOne, int RV, int NX>
PLLM_I16G_AI void i16_gemm_tile(const int32_t* wt, const float* sc, const float* mn, const block_q16* const* ax,
                               int nu, float* ua) {
  using V = typename T::V;
  using VF = typename T::VF;
  constexpr int L = T::kLanes;
  for (int u = 0; u < nu; ++u) {
    V ha[RV][NX], hb[RV][NX];  // the unit's two halves (kOne: ha the whole unit)
    const int32_t* wu = wt + u * 16 * RV * L;
    i16_pairs<T, RV, NX, 0, true>(wu, ax, u, ha);
    if constexpr (kOne) {
      i16_pairs<T, RV, NX, 4, false>(wu, ax, u, ha);
      i16_pairs<T, RV, NX, 8, false>(wu, ax, u, ha);
      i16_pairs<T, RV, NX, 12, false>(wu, ax, u, ha);
    } else {
      i16_pairs<T, RV, NX, 4, true>(wu, ax, u, hb);
      i16_pairs<T, RV, NX, 8, false>(wu, ax, u, ha);
      i16_pairs<T, RV, NX, 12, false>(wu, ax, u, hb);
    }
    for (int x = 0; x < NX; ++x) {
      const VF da = T::bcast(ax[x][u].d);
      const VF sa = T::bcast(kMin ? ax[x][u].d * static_cast<float>(ax[x][u].sum) : 0.0f);
      for (int rv = 0; rv < RV; ++rv) {
        float* p = ua + ((x * 8 + u) * RV + rv) * L;
        VF t;
        if constexpr (kOne) t = T::cvt(ha[rv][x]);
        else t = T::add(T::cvt(ha[rv][x]), T::cvt(hb[rv][x]));
        VF acc = T::fma(T::loadf(p), t, T::mul(T::loadf(sc + (u * RV + rv) * L), da));
        if constexpr (kMin) acc = T::fma(acc, T::loadf(mn + (u * RV + rv) * L), sa);
        T::storef(p, acc);
      }
    }
  }
}

template <class T, bool kMin, bool kOne, int RV, int NX>
PLLM_I16G_AI void i16_gemm_tile_any(int nx, const int32_t* wt, const float* sc, const float* mn,
                                   const block_q16* const* ax, int nu, float* ua) {
  if (nx == NX) return i16_gemm_tile<T, kMin, kOne, RV, NX>(wt, sc, mn, ax, nu, ua);
  if constexpr (NX > 1) i16_gemm_tile_any<T, kMin, kOne, RV, NX - 1>(nx, wt, sc, mn, ax, nu, ua);
}

// TypeKernels::gemm_i16.
template <class T, class M>
void i16_gemm(int64_t n, const void* w, size_t ws, int n_rows, const void* xq, size_t xs, int n_x, float* out,
              int64_t os) {
  using W = typename M::W;
  constexpr int L = T::kLanes, RV = T::kRowVecs, RT = RV * L, NX = T::kTileX;
  constexpr int kFL = int(sizeof(decltype(M::scale(typename M::G{}, 0))) / sizeof(float));  // lanes of M's F
  static_assert(8 % kFL == 0 && kI16Slice % 8 == 0);
  static_assert(!half_min<M>(), "a kHalfMin type (Q2_K) has no GEMM here: its prefill runs the tile or panels");
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  const int64_t units = n / 32;
  alignas(64) int32_t stage[8 * RT * 16];             // one group's codes as decoded (unit, row)
  alignas(64) int32_t wt[8 * 16 * RV * L];            // and transposed (unit, pair, row)
  alignas(64) float sc[8 * RV * L], mn[8 * RV * L];   // its per-unit factors, lane = row
  alignas(64) float ua[kI16GemmTokens * 8 * RV * L];  // unit accumulators (x, unit, rv)
  std::memset(stage, 0, sizeof stage);
  std::memset(wt, 0, sizeof wt);
  std::memset(sc, 0, sizeof sc);
  std::memset(mn, 0, sizeof mn);
  for (int x0 = 0; x0 < n_x; x0 += kI16GemmTokens) {
    const int nxp = n_x - x0 < kI16GemmTokens ? n_x - x0 : kI16GemmTokens;
    const block_q16* ax[kI16GemmTokens];
    for (int x = 0; x < nxp; ++x) ax[x] = reinterpret_cast<const block_q16*>(static_cast<const uint8_t*>(xq) + (x0 + x) * xs);
    for (int r0 = 0; r0 < n_rows; r0 += RT) {
      const int nr = n_rows - r0 < RT ? n_rows - r0 : RT;
      for (int64_t s0 = 0; s0 < units; s0 += kI16Slice) {
        const int64_t s1 = units - s0 < kI16Slice ? units : s0 + kI16Slice;
        for (int i = 0; i < nxp * 8 * RV * L; ++i) ua[i] = 0.0f;
        for (int64_t g0 = s0; g0 < s1; g0 += 8) {
          const int nu = s1 - g0 < 8 ? int(s1 - g0) : 8;
          // Decode: row i's unit u codes to lane i of pair vectors (lanes of rows beyond n_rows
          // keep what they hold: every lane is computed on its own and theirs are not stored).
          for (int i = 0; i < nr; ++i) {
            const W* wg = reinterpret_cast<const W*>(wb + size_t(r0 + i) * ws) + g0 / M::kUnits;
            const typename M::G g = M::group(wg, nu);
            const int rv = i / L, lane = i % L;
            for (int k = 0; k < 8 / kFL; ++k) {
              float f[kFL], m[kFL];
              const auto fs = M::scale(g, k);
              std::memcpy(f, &fs, sizeof f);
              if constexpr (M::kMin) {
                const auto ms = M::min(g, k);
                std::memcpy(m, &ms, sizeof m);
              }
              for (int j = 0; j < kFL; ++j) {
                sc[((k * kFL + j) * RV + rv) * L + lane] = f[j];
                if constexpr (M::kMin) mn[((k * kFL + j) * RV + rv) * L + lane] = m[j];
              }
            }
            for (int u = 0; u < nu; ++u) {
              typename T::Q q;
              M::codes(wg, g, u, q);
              std::memcpy(stage + (u * RT + i) * 16, &q, 64);
            }
          }
          for (int u = 0; u < nu; ++u)
            for (int rv = 0; rv * L < nr; ++rv) T::transpose(stage + (u * RT + rv * L) * 16, wt + (u * 16 * RV + rv) * L, RV * L);
          for (int x = 0; x < nxp; x += NX) {
            const int nx = nxp - x < NX ? nxp - x : NX;
            const block_q16* axg[NX];
            for (int j = 0; j < nx; ++j) axg[j] = ax[x + j] + g0;
            i16_gemm_tile_any<T, M::kMin, exact_unit<M>(), RV, NX>(nx, wt, sc, mn, axg, nu, ua + x * 8 * RV * L);
          }
        }
        // The slice's sum per (row, activation row), in the tile's order.
        for (int x = 0; x < nxp; ++x)
          for (int rv = 0; rv < RV && rv * L < nr; ++rv) {
            auto lanes = [&](int u) { return T::loadf(ua + ((x * 8 + u) * RV + rv) * L); };
            const typename T::VF s = T::add(T::add(T::add(lanes(0), lanes(4)), T::add(lanes(2), lanes(6))),
                                            T::add(T::add(lanes(1), lanes(5)), T::add(lanes(3), lanes(7))));
            alignas(64) float v[L];
            T::storef(v, s);
            float* o = out + int64_t(x0 + x) * os + r0 + rv * L;
            const int nl = nr - rv * L < L ? nr - rv * L : L;
            for (int l = 0; l < nl; ++l) o[l] = s0 == 0 ? v[l] : o[l] + v[l];
          }
      }
    }
  }
}

}  // namespace pllm::kern::drivers

#undef PLLM_I16G_AI
