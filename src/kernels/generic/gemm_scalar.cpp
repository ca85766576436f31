// gemm_q8 (integer GEMM tile for prefill): the scalar twin and the vec_dot-loop
// fallback that SIMD tables use for types without a tiled kernel.
//
// Both are literally the double loop over (token, weight row) of a vec_dot kernel. The
// function pointer carries no table, so the vec_dot to loop over is recorded here, per
// (ISA, type), when the table is filled (once, inside the thread-safe static init of
// dispatch.cpp's tables) and read afterwards.
#include <cstdint>
#include <memory>
#include <utility>

#include "kernels/internal.h"

namespace pllm::kern {

namespace {

constexpr int kIsas = 6;
using DotFn = float (*)(int64_t, const void*, const void*);
DotFn g_dot[kIsas][32] = {};

template <int IsaIdx, int Type>
void gemm_vec_dot_loop(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t xq_stride,
                       int n_x, float* out, int64_t out_stride) {
  const DotFn dot = g_dot[IsaIdx][Type];
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  const uint8_t* xb = static_cast<const uint8_t*>(xq);
  for (int x = 0; x < n_x; ++x)
    for (int r = 0; r < n_rows; ++r) out[x * out_stride + r] = dot(n, wb + r * w_stride, xb + x * xq_stride);
}

template <int IsaIdx>
void set_loops(KernelTable& t) {
  auto one = [&]<int Type>() {
    TypeKernels& k = t.types[Type];
    if (!k.available || k.act_type == TensorType::F32) return;  // int8 activation formats only
    g_dot[IsaIdx][Type] = k.vec_dot;
    k.gemm_q8 = gemm_vec_dot_loop<IsaIdx, Type>;
  };
  [&]<int... T>(std::integer_sequence<int, T...>) { (one.template operator()<T>(), ...); }(
      std::make_integer_sequence<int, 32>{});
}

}  // namespace

void fill_gemm_vec_dot_loop(KernelTable& t, Isa isa) {
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

void* gemm_scratch(size_t bytes) {
  thread_local std::unique_ptr<uint8_t[]> buf;
  thread_local size_t cap = 0;
  if (bytes + 64 > cap) {
    cap = (bytes + 64) * 3 / 2;
    buf = std::make_unique_for_overwrite<uint8_t[]>(cap);
  }
  const uintptr_t p = reinterpret_cast<uintptr_t>(buf.get());
  return reinterpret_cast<void*>((p + 63) & ~uintptr_t{63});
}

void fill_gemm_scalar(KernelTable& t) { fill_gemm_vec_dot_loop(t, Isa::scalar); }

}  // namespace pllm::kern
