// Driver of the decode matvec over several weight rows (TypeKernels::vec_dot_rows /
// vec_dot_rows_multi / vec_dot_f32_rows), written once for x86/rows_avx2.cpp and x86/rows_avx512.cpp: rows in
// groups of 4 sharing every activation load (remainders of 1..3 rows run the same kernel
// with fewer rows), and the exact-mode (f32 activation) row kernel over the ISA's decoders.
// ODR: templates over the ISA's types only (see fused_dot.h).
#pragma once
#include <cstddef>
#include <cstdint>

namespace pllm::kern::drivers {

// K<R>::run(nb, w, w_stride, act, out): R rows (R <= 4) of nb blocks against one activation
// row act (Act blocks, or floats), out[0 .. R-1].
template <template <int> class K, class Act, class X>
void rows_by_4(int64_t n, const void* w, size_t ws, int n_rows, const X* xq, float* out) {
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  const Act* a = reinterpret_cast<const Act*>(xq);
  const int64_t nb = n / 32;
  int r = 0;
  for (; r + 4 <= n_rows; r += 4) K<4>::run(nb, wb + r * ws, ws, a, out + r);
  switch (n_rows - r) {
    case 1: K<1>::run(nb, wb + r * ws, ws, a, out + r); break;
    case 2: K<2>::run(nb, wb + r * ws, ws, a, out + r); break;
    case 3: K<3>::run(nb, wb + r * ws, ws, a, out + r); break;
    default: break;
  }
}

// Several weight rows against several int8 activation rows (TypeKernels::vec_dot_rows_multi):
// out[x * os + r] = dot(row r, activation row x). The activation rows in groups of up to 8,
// each group one call of K<T>::run(nb, w, ws, n_rows, a, as, out, os) over all the weight
// rows (T activation rows at a, as bytes apart; out[t * os + r]): the kernel streams each
// weight row once for the group, so a batched decode step of <= 8 rows reads the weights once.
template <template <int> class K>
void acts_in_groups_of_8(int64_t n, const void* w, size_t ws, int n_rows, const void* xq, size_t xs, int n_x,
                         float* out, int64_t os) {
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  const uint8_t* ab = static_cast<const uint8_t*>(xq);
  const int64_t nb = n / 32;
  for (int x = 0; x < n_x; x += 8) {
    const uint8_t* a = ab + x * xs;
    float* o = out + x * os;
    switch (n_x - x < 8 ? n_x - x : 8) {
      case 1: K<1>::run(nb, wb, ws, n_rows, a, xs, o, os); break;
      case 2: K<2>::run(nb, wb, ws, n_rows, a, xs, o, os); break;
      case 3: K<3>::run(nb, wb, ws, n_rows, a, xs, o, os); break;
      case 4: K<4>::run(nb, wb, ws, n_rows, a, xs, o, os); break;
      case 5: K<5>::run(nb, wb, ws, n_rows, a, xs, o, os); break;
      case 6: K<6>::run(nb, wb, ws, n_rows, a, xs, o, os); break;
      case 7: K<7>::run(nb, wb, ws, n_rows, a, xs, o, os); break;
      default: K<8>::run(nb, wb, ws, n_rows, a, xs, o, os); break;
    }
  }
}

// Exact mode, R rows: S as in fused_dot.h plus prefetch(p, bytes) and store_sums<R>(acc, out)
// (out[r] = horizontal sum of acc[r]); D::Block and static D::unit(block, V v[32 / kLanes])
// (exactly dequantize_row's floats). Two accumulators per row (vectors k % 2), summed at the
// end. The group's blocks are prefetched as one linear stream 4 rows ahead: the R rows are R
// interleaved streams too short for the hardware prefetchers to train on.
template <class S, class D>
struct ExactRows {
  template <int R>
  struct K {
    static void run(int64_t nb, const uint8_t* w, size_t ws, const float* x, float* out) {
      using V = typename S::V;
      using Block = typename D::Block;
      constexpr int kBB = sizeof(Block), kVecs = 32 / S::kLanes;
      V acc[2][R];
      for (int r = 0; r < R; ++r) acc[0][r] = acc[1][r] = S::zero();
      const uint8_t* pf = w + 4 * ws;
      for (int64_t b = 0; b < nb; ++b, x += 32, pf += R * kBB) {
        S::prefetch(pf, R * kBB);
        V xv[kVecs];
        for (int k = 0; k < kVecs; ++k) xv[k] = S::load(x + S::kLanes * k);
        for (int r = 0; r < R; ++r) {
          const Block* wr = reinterpret_cast<const Block*>(w + r * ws);
          V v[kVecs];
          D::unit(wr[b], v);
          for (int k = 0; k < kVecs; ++k) acc[k % 2][r] = S::fma(acc[k % 2][r], v[k], xv[k]);
        }
      }
      for (int r = 0; r < R; ++r) acc[0][r] = S::add(acc[0][r], acc[1][r]);
      S::template store_sums<R>(acc[0], out);
    }
  };
};

template <class S, class D>
void exact_rows(int64_t n, const void* w, size_t ws, int n_rows, const float* x, float* out) {
  rows_by_4<ExactRows<S, D>::template K, float>(n, w, ws, n_rows, x, out);
}

}  // namespace pllm::kern::drivers
