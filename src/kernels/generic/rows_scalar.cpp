// Decode matvec (TypeKernels::vec_dot_rows / vec_dot_rows_multi / vec_dot_f32_rows): the scalar twins and
// the per-row loop fallback that SIMD tables keep for types without a multi-row kernel.
//
// Both are literally a loop over the weight rows of a one-row kernel. The function
// pointer carries no table, so the one-row kernels to loop over are recorded here, per
// (ISA, type), when the table is filled (once, inside the thread-safe static init of
// dispatch.cpp's tables) and only read afterwards. Same scheme as gemm_scalar.cpp.
#include <cstdint>
#include <utility>

#include "kernels/internal.h"

namespace pllm::kern {

namespace {

constexpr int kIsas = 6;
using DotFn = float (*)(int64_t, const void*, const void*);
using DotF32Fn = float (*)(int64_t, const void*, const float*);
DotFn g_dot[kIsas][32] = {};
DotF32Fn g_dot_f32[kIsas][32] = {};

template <int IsaIdx, int Type>
void rows_loop(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, float* out) {
  const DotFn dot = g_dot[IsaIdx][Type];
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  for (int r = 0; r < n_rows; ++r) out[r] = dot(n, wb + r * w_stride, xq);
}

template <int IsaIdx, int Type>
void rows_multi_loop(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t xq_stride, int n_x,
                     float* out, int64_t out_stride) {
  const DotFn dot = g_dot[IsaIdx][Type];
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  const uint8_t* ab = static_cast<const uint8_t*>(xq);
  constexpr int kRows = 4;  // weight rows kept hot while every activation row passes
  for (int r0 = 0; r0 < n_rows; r0 += kRows)
    for (int x = 0; x < n_x; ++x)
      for (int r = r0; r < n_rows && r < r0 + kRows; ++r)
        out[x * out_stride + r] = dot(n, wb + r * w_stride, ab + x * xq_stride);
}

template <int IsaIdx, int Type>
void rows_f32_loop(int64_t n, const void* w, size_t w_stride, int n_rows, const float* x, float* out) {
  const DotF32Fn dot = g_dot_f32[IsaIdx][Type];
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  for (int r = 0; r < n_rows; ++r) out[r] = dot(n, wb + r * w_stride, x);
}

// The scalar twin of vec_dot_f32_rows_multi (SIMD tables set theirs with their exact-mode
// kernels, drivers::set_exact): vec_dot_f32_multi once per weight row.
using MultiF32Fn = void (*)(int64_t, const void*, const float*, int64_t, int, float*, int64_t);
MultiF32Fn g_multi_f32[32] = {};

template <int Type>
void rows_multi_f32_scalar(int64_t n, const void* w, size_t w_stride, int n_rows, const float* x, int64_t x_stride,
                           int n_x, float* out, int64_t out_stride) {
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  for (int r = 0; r < n_rows; ++r) g_multi_f32[Type](n, wb + r * w_stride, x, x_stride, n_x, out + r, out_stride);
}

template <int IsaIdx>
void set_loops(KernelTable& t) {
  auto one = [&]<int Type>() {
    TypeKernels& k = t.types[Type];
    if (!k.available) return;
    g_dot[IsaIdx][Type] = k.vec_dot;
    g_dot_f32[IsaIdx][Type] = k.vec_dot_f32;
    k.vec_dot_rows = rows_loop<IsaIdx, Type>;
    k.vec_dot_rows_multi = rows_multi_loop<IsaIdx, Type>;
    k.vec_dot_f32_rows = rows_f32_loop<IsaIdx, Type>;
  };
  [&]<int... T>(std::integer_sequence<int, T...>) { (one.template operator()<T>(), ...); }(
      std::make_integer_sequence<int, 32>{});
}

}  // namespace

void fill_rows_loop(KernelTable& t, Isa isa) {
  switch (isa) {
    case Isa::scalar: set_loops<0>(t); break;
    case Isa::avx2:
    case Isa::avxvnni: set_loops<1>(t); break;  // the avx2 table's one-row kernels (dispatch.cpp)
    case Isa::avx512: set_loops<2>(t); break;
    case Isa::neon: set_loops<3>(t); break;
    case Isa::neon_dotprod: set_loops<4>(t); break;
    case Isa::neon_i8mm: set_loops<5>(t); break;
  }
}

void fill_rows_scalar(KernelTable& t) {
  fill_rows_loop(t, Isa::scalar);
  auto one = [&]<int Type>() {
    TypeKernels& k = t.types[Type];
    if (!k.available) return;
    g_multi_f32[Type] = k.vec_dot_f32_multi;
    k.vec_dot_f32_rows_multi = rows_multi_f32_scalar<Type>;
  };
  [&]<int... T>(std::integer_sequence<int, T...>) { (one.template operator()<T>(), ...); }(
      std::make_integer_sequence<int, 32>{});
}

}  // namespace pllm::kern
