// Driver of the exact-mode prefill GEMM (TypeKernels::gemm_f32): n_rows weight rows against
// n_x f32 activation rows, out[j * os + r], bit for bit what vec_dot_f32_rows_multi
// (exact_tile.h) gives for the same call. Written once here; each ISA instantiates it with its
// vector traits S and weight decoders D through set_exact (fused_dot.h).
//
// Why a second driver for the same sums: exact_tile decodes every weight block in registers
// once per group of <= 8 activation rows, so a 64-token prefill call decodes each block 8
// times, and the decode's instructions take issue slots from the FMAs. Here kRows weight rows
// are decoded once per chunk of kChunk units (256 weights) into an f32 buffer in L1, for up to
// kTokens activation rows at a time; a register tile of S::kGemmR weight rows x S::kGemmNX
// activation rows then loads R + NX vectors per R * NX FMAs from L1.
//
// Summation order (why the results are identical): exact_tile's for a group of 3-8 activation
// rows. Per (weight row, activation row) there are A = S::accs(S::tile_rows(8) * 8)
// accumulators; vector k of each 32-element unit goes to accumulator k % A, FMA'd in element
// order; at the end they are added pairwise and summed horizontally. Between chunks the
// accumulators wait in a buffer, so chunking changes no operation. Activation rows that
// exact_rows_multi would put in a last group of 1-2 rows (it uses more accumulators there)
// are handed to it.
//
// ODR: templates over the ISA's types only (see fused_dot.h).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/drivers/exact_tile.h"

namespace pllm::kern::drivers {

constexpr int kGemmChunk = 8;    // units (32 weights each) decoded per row and pass: 256 weights
constexpr int kGemmTokens = 64;  // activation rows per pass (the accumulator buffer's width)

// One register tile: R decoded rows (wb, kGemmChunk * 32 floats apart) x NX activation rows
// (xr: each at the chunk's first weight) over nu units. acc: the tile's accumulators in the
// pass buffer, (row i, activation row j, a) at acc[(i * kGemmTokens + j) * A + a]; loaded
// unless first, then either stored back or (last) reduced into out.
template <class S, int R, int NX, int A>
inline __attribute__((always_inline)) void gemm_tile(const float* wb, const float* const* xr, int nu,
                                                     typename S::V* acc, bool first, bool last, float* out,
                                                     int64_t os) {
  using V = typename S::V;
  constexpr int L = S::kLanes, kVecs = 32 / L, kW = kGemmChunk * 32;
  static_assert(kVecs % A == 0, "vector k of a unit goes to accumulator k % A");
  V c[R][NX][A];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < NX; ++j)
      for (int a = 0; a < A; ++a) c[r][j][a] = first ? S::zero() : acc[(r * kGemmTokens + j) * A + a];
  for (int u = 0; u < nu; ++u)
    for (int k = 0; k < kVecs; ++k) {
      V wv[R];
      for (int r = 0; r < R; ++r) wv[r] = S::load(wb + r * kW + u * 32 + k * L);
      for (int j = 0; j < NX; ++j) {
        const V xv = S::load(xr[j] + u * 32 + k * L);
        for (int r = 0; r < R; ++r) c[r][j][k % A] = S::fma(c[r][j][k % A], wv[r], xv);
      }
    }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < NX; ++j) {
      if (!last) {
        for (int a = 0; a < A; ++a) acc[(r * kGemmTokens + j) * A + a] = c[r][j][a];
        continue;
      }
      V s = c[r][j][0];  // pairwise, as exact_tile: (a0 + a1) + (a2 + a3)
      if constexpr (A == 2) s = S::add(c[r][j][0], c[r][j][1]);
      if constexpr (A == 4) s = S::add(S::add(c[r][j][0], c[r][j][1]), S::add(c[r][j][2], c[r][j][3]));
      out[j * os + r] = S::hsum(s);
    }
}

// gemm_tile for a run-time remainder shape (1 <= nr <= R, 1 <= nx <= NX).
template <class S, int R, int NX, int A>
inline void gemm_tile_any(int nr, int nx, const float* wb, const float* const* xr, int nu, typename S::V* acc,
                          bool first, bool last, float* out, int64_t os) {
  if (nr == R && nx == NX) return gemm_tile<S, R, NX, A>(wb, xr, nu, acc, first, last, out, os);
  if constexpr (NX > 1)
    if (nx < NX) return gemm_tile_any<S, R, NX - 1, A>(nr, nx, wb, xr, nu, acc, first, last, out, os);
  if constexpr (R > 1)
    if (nr < R) return gemm_tile_any<S, R - 1, NX, A>(nr, nx, wb, xr, nu, acc, first, last, out, os);
}

// TypeKernels::gemm_f32.
template <class S, class D>
void exact_gemm(int64_t n, const void* w, size_t ws, int n_rows, const float* x, int64_t xs, int n_x, float* out,
                int64_t os) {
  using V = typename S::V;
  constexpr int A = S::accs(S::tile_rows(8) * 8), L = S::kLanes, kVecs = 32 / L;
  constexpr int kR = S::kGemmR, kNX = S::kGemmNX, kRows = 4 * kR, kW = kGemmChunk * 32;
  const int short_group = n_x % 8 == 1 || n_x % 8 == 2 ? n_x % 8 : 0;
  const int nm = n_x - short_group;
  if (n % (32 * D::kUnits) != 0 || nm < 3) {  // float rows with a tail; or too few rows to pay
    exact_rows_multi<S, D>(n, w, ws, n_rows, x, xs, n_x, out, os);
    return;
  }
  const uint8_t* wbase = static_cast<const uint8_t*>(w);
  const int64_t n_units = n / 32;
  alignas(64) float wbuf[kRows * kW];
  V accbuf[kRows * kGemmTokens * A];
  for (int t0 = 0; t0 < nm; t0 += kGemmTokens) {
    const int nt = nm - t0 < kGemmTokens ? nm - t0 : kGemmTokens;
    for (int r0 = 0; r0 < n_rows; r0 += kRows) {
      const int nr = n_rows - r0 < kRows ? n_rows - r0 : kRows;
      for (int64_t u0 = 0; u0 < n_units; u0 += kGemmChunk) {
        const int nu = n_units - u0 < kGemmChunk ? int(n_units - u0) : kGemmChunk;
        for (int i = 0; i < nr; ++i) {  // decode: exactly dequantize_row's floats
          D dec(wbase + size_t(r0 + i) * ws);
          for (int u = 0; u < nu; ++u) {
            const int64_t g = u0 + u;
            if (u == 0 || g % D::kUnits == 0) dec.block(g / D::kUnits);
            V v[kVecs];
            dec.unit(int(g % D::kUnits), v);
            for (int k = 0; k < kVecs; ++k) S::store(wbuf + i * kW + u * 32 + k * L, v[k]);
          }
        }
        const bool first = u0 == 0, last = u0 + nu >= n_units;
        for (int j = 0; j < nt; j += kNX) {
          const int nx = nt - j < kNX ? nt - j : kNX;
          const float* xr[kNX];
          for (int q = 0; q < kNX; ++q) xr[q] = x + (t0 + j + (q < nx ? q : 0)) * xs + u0 * 32;
          for (int i = 0; i < nr; i += kR) {
            const int rr = nr - i < kR ? nr - i : kR;
            gemm_tile_any<S, kR, kNX, A>(rr, nx, wbuf + i * kW, xr, nu, accbuf + (i * kGemmTokens + j) * A, first,
                                         last, out + (t0 + j) * os + r0 + i, os);
          }
        }
      }
    }
  }
  if (short_group > 0) exact_rows_multi<S, D>(n, w, ws, n_rows, x + nm * xs, xs, short_group, out + nm * os, os);
}

}  // namespace pllm::kern::drivers
