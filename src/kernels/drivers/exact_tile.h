// Driver of the exact-mode batched decode step (TypeKernels::vec_dot_f32_rows_multi): several
// weight rows against several f32 activation rows, as a register tile of R weight rows x NX
// activation rows. Written once here; each ISA instantiates it with its vector traits S and
// its weight decoders D (the fused_dot.h interface), through drivers::set_exact.
//
// Against vec_dot_f32_multi once per weight row (what matmul ran before): one call covers a
// chunk of weight rows (no per-row call and setup), all <= 8 activation rows share one decode
// of each weight block (matmul grouped them by 4), and with R > 1 each activation vector,
// loaded once, feeds R FMAs. S::tile_rows(NX) picks R per ISA: on x86 an FMA takes its
// activation operand from memory at no extra instruction, so R = 1 (decode + FMAs are the
// instruction stream; a second weight row only adds registers: measured no faster on Zen 3);
// on ARM, where FMLA has no memory operand, R = 2 (up to 2 rows) halves the activation loads.
//
// Summation order (the bound the tests assume): every (weight row, activation row) pair has
// A accumulators (S::accs of the tile for 1-2 activation rows, of the full 8-row tile for 3-8), vector k of each 32-element unit
// going to accumulator k % A, FMA'd in element order; at the end the A accumulators are added
// pairwise, then summed horizontally. R and A depend on NX only (S::tile_rows), never on
// where a weight row falls in a chunk: a row's result is the same whatever the chunking (and
// so the thread count) of the matmul.
//
// ODR: templates over the ISA's types only (see fused_dot.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>

namespace pllm::kern::drivers {

// R weight rows starting at w (ws bytes apart) against NX activation rows at x (xs floats
// apart): out[j * os + r]. A is fixed by the full tile's shape so that a remainder tile (fewer
// rows) sums in the same order. Inlined into the row loop: a call per weight row (18 blocks
// of work at n = 576) measured 7-13 % slower.
template <class S, class D, int R, int NX, int A>
inline __attribute__((always_inline)) void exact_tile(int64_t n, const uint8_t* w, size_t ws, const float* x,
                                                      int64_t xs, float* out, int64_t os) {
  using V = typename S::V;
  constexpr int kVecs = 32 / S::kLanes;
  // D has no default constructor: an array of R built from an index pack.
  struct Decs { D d[R]; };
  Decs ds = [&]<size_t... I>(std::index_sequence<I...>) {
    return Decs{{D(w + I * ws)...}};
  }(std::make_index_sequence<R>{});
  D* dec = ds.d;
  V acc[R][NX][A];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < NX; ++j)
      for (int a = 0; a < A; ++a) acc[r][j][a] = S::zero();
  // One pointer per activation row, so that every load is base + constant offset (a row
  // index times the runtime stride would take a register per (row, vector) pair).
  const float* xr[NX];
  for (int j = 0; j < NX; ++j) xr[j] = x + j * xs;
  const int64_t nb = n / (32 * D::kUnits);
  for (int64_t b = 0; b < nb; ++b) {
    for (int r = 0; r < R; ++r) dec[r].block(b);
    for (int u = 0; u < D::kUnits; ++u) {
      V wv[R][kVecs];
      for (int r = 0; r < R; ++r) dec[r].unit(u, wv[r]);
      for (int k = 0; k < kVecs; ++k)
        for (int j = 0; j < NX; ++j) {
          const V xv = S::load(xr[j] + S::kLanes * k);
          for (int r = 0; r < R; ++r) acc[r][j][k % A] = S::fma(acc[r][j][k % A], wv[r][k], xv);
        }
      for (int j = 0; j < NX; ++j) xr[j] += 32;
    }
  }
  const int tail = static_cast<int>(n - nb * 32 * D::kUnits);
  if (tail > 0) {  // float types only: zero-padded weights and activations, as fused_dot
    alignas(64) float wt[R][32] = {};
    alignas(64) float xt[NX][32] = {};
    for (int r = 0; r < R; ++r) dec[r].tail(n, wt[r]);
    for (int j = 0; j < NX; ++j) __builtin_memcpy(xt[j], xr[j], sizeof(float) * tail);
    for (int k = 0; k < kVecs; ++k)
      for (int j = 0; j < NX; ++j) {
        const V xv = S::load(xt[j] + S::kLanes * k);
        for (int r = 0; r < R; ++r)
          acc[r][j][k % A] = S::fma(acc[r][j][k % A], S::load(wt[r] + S::kLanes * k), xv);
      }
  }
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < NX; ++j) {  // pairwise: (a0 + a1) + (a2 + a3)
      V s = acc[r][j][0];
      if constexpr (A == 2) s = S::add(acc[r][j][0], acc[r][j][1]);
      if constexpr (A == 4) s = S::add(S::add(acc[r][j][0], acc[r][j][1]), S::add(acc[r][j][2], acc[r][j][3]));
      out[j * os + r] = S::hsum(s);
    }
  }
}

// All n_rows weight rows against NX activation rows: full tiles of S::tile_rows(NX) rows (<= 4),
// then one remainder tile.
template <class S, class D, int NX>
void exact_rows_nx(int64_t n, const uint8_t* w, size_t ws, int n_rows, const float* x, int64_t xs, float* out,
                   int64_t os) {
  // A is that of the full 8-row tile for every group of 3-8 activation rows: a row's sum order
  // is then the same whatever the size of the call it came in (>= 3 rows), so a token's K/V from
  // a long prefill call equals the same token's from a short one, which the prefix cache's exact
  // resume relies on (test_prefix_reuse ResumeIsExact).
  constexpr int kR = S::tile_rows(NX), A = S::accs(kR * NX <= 2 ? kR * NX : S::tile_rows(8) * 8);
  int r = 0;
  for (; r + kR <= n_rows; r += kR) exact_tile<S, D, kR, NX, A>(n, w + r * ws, ws, x, xs, out + r, os);
  const int left = n_rows - r;
  if constexpr (kR > 1)
    if (left == 1) exact_tile<S, D, 1, NX, A>(n, w + r * ws, ws, x, xs, out + r, os);
  if constexpr (kR > 2) {
    if (left == 2) exact_tile<S, D, 2, NX, A>(n, w + r * ws, ws, x, xs, out + r, os);
    if (left == 3) exact_tile<S, D, 3, NX, A>(n, w + r * ws, ws, x, xs, out + r, os);
  }
}

// TypeKernels::vec_dot_f32_rows_multi: out[j * os + r] = dot(row r, x + j * xs), the
// activation rows in groups of up to 8 (each group one pass over the weight rows).
template <class S, class D>
void exact_rows_multi(int64_t n, const void* w, size_t ws, int n_rows, const float* x, int64_t xs, int n_x,
                      float* out, int64_t os) {
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  for (int j0 = 0; j0 < n_x; j0 += 8) {
    const float* xj = x + j0 * xs;
    float* o = out + j0 * os;
    switch (n_x - j0 < 8 ? n_x - j0 : 8) {
      case 1: exact_rows_nx<S, D, 1>(n, wb, ws, n_rows, xj, xs, o, os); break;
      case 2: exact_rows_nx<S, D, 2>(n, wb, ws, n_rows, xj, xs, o, os); break;
      case 3: exact_rows_nx<S, D, 3>(n, wb, ws, n_rows, xj, xs, o, os); break;
      case 4: exact_rows_nx<S, D, 4>(n, wb, ws, n_rows, xj, xs, o, os); break;
      case 5: exact_rows_nx<S, D, 5>(n, wb, ws, n_rows, xj, xs, o, os); break;
      case 6: exact_rows_nx<S, D, 6>(n, wb, ws, n_rows, xj, xs, o, os); break;
      case 7: exact_rows_nx<S, D, 7>(n, wb, ws, n_rows, xj, xs, o, os); break;
      default: exact_rows_nx<S, D, 8>(n, wb, ws, n_rows, xj, xs, o, os); break;
    }
  }
}

}  // namespace pllm::kern::drivers
