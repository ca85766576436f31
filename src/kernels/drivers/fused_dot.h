// Driver of the "decode the weights in registers, dot with several activation rows" kernels:
// exact mode (TypeKernels::vec_dot_f32 / vec_dot_f32_multi, f32 activations) and W4A16
// (vec_dot_f16act / vec_dot_f16act_multi, fp16 activations widened on load). Written once
// here; each ISA supplies the vector operations and the weight decoders.
//
// ODR: every template below takes the ISA's types as parameters (the vector traits S and the
// decoders D, declared in the ISA translation unit: its anonymous namespace or its ISA
// namespace, see x86/simd_avx2.h). Instantiations from translation units built with
// different -m flags are therefore distinct entities; nothing here is a plain inline
// function that the linker could pick from the wrong ISA's object file.
#pragma once
#include <cstdint>

#include "kernels/drivers/exact_gemm.h"
#include "kernels/drivers/exact_tile.h"

namespace pllm::kern::drivers {

// S (vector traits): V (register type), kLanes (f32 lanes), zero(), load(const float*),
// load(const uint16_t*) (IEEE halves, widened exactly), fma(acc, a, b) = acc + a * b with
// one rounding, add(a, b), hsum(v), and accs(NX): independent accumulators per activation
// row when NX rows share a decoded weight unit (enough chains to hide FMA latency, few
// enough to stay in registers; >= 8 lanes in all, the bound the tests assume).
//
// D (decoder of one weight row): D(const void* row); kUnits (32-element units per block);
// block(b) (per-block setup); unit(u, V v[32 / kLanes]) (unit u of the current block,
// exactly the floats dequantize_row gives); tail(n, float buf[32]) (float types: the last
// n % 32 weights; quantised types never have a tail and may leave it empty).

// acc[j][k % A] += w[k] * x_j[k-th vector of the unit] for the NX activation rows.
template <class S, int NX, int A, class X>
inline __attribute__((always_inline)) void fma_unit(const typename S::V* w, const X* x, int64_t xs,
                                                    typename S::V (*acc)[A]) {
  constexpr int kVecs = 32 / S::kLanes;
  for (int k = 0; k < kVecs; ++k)
    for (int j = 0; j < NX; ++j) acc[j][k % A] = S::fma(acc[j][k % A], w[k], S::load(x + j * xs + S::kLanes * k));
}

// out[j * os] = dot(weight row, x + j * xs) for j < NX (X = float or uint16_t halves).
template <class S, int NX, class D, class X>
void fused_dot(int64_t n, const void* w_row, const X* x, int64_t xs, float* out, int64_t os) {
  using V = typename S::V;
  constexpr int A = S::accs(NX);
  constexpr int kVecs = 32 / S::kLanes;
  D dec(w_row);
  V acc[NX][A];
  for (int j = 0; j < NX; ++j)
    for (int a = 0; a < A; ++a) acc[j][a] = S::zero();
  const int64_t nb = n / (32 * D::kUnits);
  const X* xp = x;
  for (int64_t b = 0; b < nb; ++b) {
    dec.block(b);
    for (int u = 0; u < D::kUnits; ++u, xp += 32) {
      V wv[kVecs];
      dec.unit(u, wv);
      fma_unit<S, NX, A>(wv, xp, xs, acc);
    }
  }
  const int tail = static_cast<int>(n - nb * 32 * D::kUnits);
  if (tail > 0) {  // float types only: zero-padded weights and activations
    alignas(64) float wt[32] = {};
    alignas(64) X xt[NX][32] = {};
    dec.tail(n, wt);
    for (int j = 0; j < NX; ++j) __builtin_memcpy(xt[j], xp + j * xs, sizeof(X) * tail);
    V wv[kVecs];
    for (int k = 0; k < kVecs; ++k) wv[k] = S::load(wt + S::kLanes * k);
    fma_unit<S, NX, A>(wv, xt[0], 32, acc);
  }
  for (int j = 0; j < NX; ++j) {  // pairwise: (a0 + a1) + (a2 + a3)
    V s = acc[j][0];
    if constexpr (A == 2) s = S::add(acc[j][0], acc[j][1]);
    if constexpr (A == 4) s = S::add(S::add(acc[j][0], acc[j][1]), S::add(acc[j][2], acc[j][3]));
    out[j * os] = S::hsum(s);
  }
}

// n_x activation rows in groups of up to 8, each group one call of K<NX>::run(n, w_row, x,
// xs, out, os) (K declared by the ISA: one weight decode shared by the group's rows).
template <template <int> class K, class X>
void in_groups_of_8(int64_t n, const void* w_row, const X* x, int64_t xs, int n_x, float* out, int64_t os) {
  for (int j0 = 0; j0 < n_x; j0 += 8) {
    const X* xr = x + j0 * xs;
    float* o = out + j0 * os;
    switch (n_x - j0 < 8 ? n_x - j0 : 8) {
      case 1: K<1>::run(n, w_row, xr, xs, o, os); break;
      case 2: K<2>::run(n, w_row, xr, xs, o, os); break;
      case 3: K<3>::run(n, w_row, xr, xs, o, os); break;
      case 4: K<4>::run(n, w_row, xr, xs, o, os); break;
      case 5: K<5>::run(n, w_row, xr, xs, o, os); break;
      case 6: K<6>::run(n, w_row, xr, xs, o, os); break;
      case 7: K<7>::run(n, w_row, xr, xs, o, os); break;
      default: K<8>::run(n, w_row, xr, xs, o, os); break;
    }
  }
}

template <template <int> class K, class X>
float one_row(int64_t n, const void* w_row, const X* x) {
  float r;
  K<1>::run(n, w_row, x, 0, &r, 0);
  return r;
}

// The fused_dot kernels of decoder D as K<NX>.
template <class S, class D>
struct FusedDot {
  template <int NX>
  struct K {
    template <class X>
    static void run(int64_t n, const void* w_row, const X* x, int64_t xs, float* out, int64_t os) {
      fused_dot<S, NX, D>(n, w_row, x, xs, out, os);
    }
  };
};

// Exact mode (f32 activations) of decoder D.
template <class S, class D, class TK>
void set_exact(TK& k) {
  k.vec_dot_f32 = one_row<FusedDot<S, D>::template K, float>;
  k.vec_dot_f32_multi = in_groups_of_8<FusedDot<S, D>::template K, float>;
  k.vec_dot_f32_rows_multi = exact_rows_multi<S, D>;  // a batched decode step (exact_tile.h)
  k.gemm_f32 = exact_gemm<S, D>;                      // prefill (exact_gemm.h)
}

// W4A16 (fp16 activations) of decoder D.
template <class S, class D, class TK>
void set_f16act(TK& k) {
  k.vec_dot_f16act = one_row<FusedDot<S, D>::template K, uint16_t>;
  k.vec_dot_f16act_multi = in_groups_of_8<FusedDot<S, D>::template K, uint16_t>;
}

}  // namespace pllm::kern::drivers
