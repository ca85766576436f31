// The loops over a table's one-row kernels: the scalar twins of gemm_q8, vec_dot_rows,
// vec_dot_rows_multi, vec_dot_f32_rows and vec_dot_f32_rows_multi, and the fallback every SIMD
// table keeps for the types its ISA has no tiled or multi-row kernel for.
//
// Each is literally a loop over vec_dot / vec_dot_f32 / vec_dot_f32_multi. A function pointer
// carries no table, so the one-row kernels each loop calls are recorded here, per (ISA, type),
// when that ISA's table is filled (once, inside the thread-safe static init of dispatch.cpp's
// tables) and only read afterwards: one registry for every loop.
#include <cstdint>
#include <utility>

#include "kernels/internal.h"

namespace pllm::kern {

namespace {

using DotFn = float (*)(int64_t, const void*, const void*);
using DotF32Fn = float (*)(int64_t, const void*, const float*);
using MultiF32Fn = void (*)(int64_t, const void*, const float*, int64_t, int, float*, int64_t);

// The one-row kernels of one type in one ISA's table.
struct OneRow {
  DotFn dot = nullptr;
  DotF32Fn dot_f32 = nullptr;
  MultiF32Fn dot_f32_multi = nullptr;
};
OneRow g_one_row[kIsaCount][32] = {};

template <Isa I, int Type>
void gemm_loop(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t xq_stride, int n_x,
               float* out, int64_t out_stride) {
  const DotFn dot = g_one_row[static_cast<int>(I)][Type].dot;
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  const uint8_t* xb = static_cast<const uint8_t*>(xq);
  for (int x = 0; x < n_x; ++x)
    for (int r = 0; r < n_rows; ++r) out[x * out_stride + r] = dot(n, wb + r * w_stride, xb + x * xq_stride);
}

template <Isa I, int Type>
void rows_loop(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, float* out) {
  const DotFn dot = g_one_row[static_cast<int>(I)][Type].dot;
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  for (int r = 0; r < n_rows; ++r) out[r] = dot(n, wb + r * w_stride, xq);
}

template <Isa I, int Type>
void rows_multi_loop(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t xq_stride, int n_x,
                     float* out, int64_t out_stride) {
  const DotFn dot = g_one_row[static_cast<int>(I)][Type].dot;
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  const uint8_t* ab = static_cast<const uint8_t*>(xq);
  constexpr int kRows = 4;  // weight rows kept hot while every activation row passes
  for (int r0 = 0; r0 < n_rows; r0 += kRows)
    for (int x = 0; x < n_x; ++x)
      for (int r = r0; r < n_rows && r < r0 + kRows; ++r)
        out[x * out_stride + r] = dot(n, wb + r * w_stride, ab + x * xq_stride);
}

template <Isa I, int Type>
void rows_f32_loop(int64_t n, const void* w, size_t w_stride, int n_rows, const float* x, float* out) {
  const DotF32Fn dot = g_one_row[static_cast<int>(I)][Type].dot_f32;
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  for (int r = 0; r < n_rows; ++r) out[r] = dot(n, wb + r * w_stride, x);
}

// vec_dot_f32_multi once per weight row (SIMD tables have their own vec_dot_f32_rows_multi from
// their exact-mode kernels, drivers::set_exact).
template <Isa I, int Type>
void rows_f32_multi_loop(int64_t n, const void* w, size_t w_stride, int n_rows, const float* x, int64_t x_stride,
                         int n_x, float* out, int64_t out_stride) {
  const MultiF32Fn multi = g_one_row[static_cast<int>(I)][Type].dot_f32_multi;
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  for (int r = 0; r < n_rows; ++r) multi(n, wb + r * w_stride, x, x_stride, n_x, out + r, out_stride);
}

// f(k, integral_constant<int, Type>) for every available type of t.
template <class F>
void for_each_type(KernelTable& t, F&& f) {
  [&]<int... T>(std::integer_sequence<int, T...>) {
    ((t.types[T].available ? f(t.types[T], std::integral_constant<int, T>{}) : void()), ...);
  }(std::make_integer_sequence<int, 32>{});
}

}  // namespace

template <Isa I>
void fill_gemm_loops(KernelTable& t) {
  for_each_type(t, [](TypeKernels& k, auto type) {
    if (k.act_type == TensorType::F32) return;  // int8 activation formats only
    g_one_row[static_cast<int>(I)][type].dot = k.vec_dot;
    k.gemm_q8 = gemm_loop<I, decltype(type)::value>;
  });
}

template <Isa I>
void fill_rows_loops(KernelTable& t) {
  for_each_type(t, [](TypeKernels& k, auto type) {
    OneRow& one = g_one_row[static_cast<int>(I)][type];
    one.dot = k.vec_dot;
    one.dot_f32 = k.vec_dot_f32;
    k.vec_dot_rows = rows_loop<I, decltype(type)::value>;
    k.vec_dot_rows_multi = rows_multi_loop<I, decltype(type)::value>;
    k.vec_dot_f32_rows = rows_f32_loop<I, decltype(type)::value>;
  });
}

void fill_rows_f32_multi_scalar(KernelTable& t) {
  for_each_type(t, [](TypeKernels& k, auto type) {
    g_one_row[static_cast<int>(Isa::scalar)][type].dot_f32_multi = k.vec_dot_f32_multi;
    k.vec_dot_f32_rows_multi = rows_f32_multi_loop<Isa::scalar, decltype(type)::value>;
  });
}

// The levels whose filler lists (dispatch.cpp) hold loops; the avxvnni and i8mm tables take
// the avx2 and dotprod ones (the same one-row kernels). Built on every architecture: they call
// only a table's own kernels.
template void fill_gemm_loops<Isa::scalar>(KernelTable&);
template void fill_rows_loops<Isa::scalar>(KernelTable&);
template void fill_gemm_loops<Isa::avx2>(KernelTable&);
template void fill_rows_loops<Isa::avx2>(KernelTable&);
template void fill_gemm_loops<Isa::avx512>(KernelTable&);
template void fill_rows_loops<Isa::avx512>(KernelTable&);
template void fill_gemm_loops<Isa::neon>(KernelTable&);
template void fill_rows_loops<Isa::neon>(KernelTable&);
template void fill_gemm_loops<Isa::neon_dotprod>(KernelTable&);
template void fill_rows_loops<Isa::neon_dotprod>(KernelTable&);

}  // namespace pllm::kern
