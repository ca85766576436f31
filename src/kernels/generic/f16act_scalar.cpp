// W4A16 scalar twins (TypeKernels::vec_dot_f16act / vec_dot_f16act_multi and
// KernelTable::f32_to_f16_row): what every SIMD W4A16 kernel must compute.
//
// The activation row is rounded once to IEEE half (round to nearest even); the dot is
// then the one of dequantize_row's weights (the reference dequantiser, per 32-element
// block) with those halves widened to f32 (exact), accumulated in double. So the only
// error is the final rounding to float: this is the exact dot of the dequantised
// weights and the fp16-rounded activations.
#include <cstdint>

#include "base/fp16.h"
#include "kernels/internal.h"
#include "quant/blocks.h"
#include "quant/reference.h"

namespace pllm::kern {

namespace {

void f32_to_f16_row(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

template <class Block, void (*Deq)(const Block*, float*, int64_t)>
void multi(int64_t n, const void* w_row, const uint16_t* xh, int64_t x_stride, int n_x, float* out,
           int64_t out_stride) {
  const Block* w = static_cast<const Block*>(w_row);
  float buf[32];
  for (int j = 0; j < n_x; ++j) {
    const uint16_t* x = xh + j * x_stride;
    double acc = 0.0;
    for (int64_t b = 0; b < n / 32; ++b) {
      Deq(w + b, buf, 32);
      double s = 0.0;
      for (int l = 0; l < 32; ++l) s += static_cast<double>(buf[l]) * fp16_to_fp32(x[32 * b + l]);
      acc += s;
    }
    out[j * out_stride] = static_cast<float>(acc);
  }
}

template <class Block, void (*Deq)(const Block*, float*, int64_t)>
float one(int64_t n, const void* w_row, const uint16_t* xh) {
  float r;
  multi<Block, Deq>(n, w_row, xh, 0, 1, &r, 0);
  return r;
}

template <class Block, void (*Deq)(const Block*, float*, int64_t)>
void set(KernelTable& t, TensorType type) {
  TypeKernels& k = t.types[static_cast<uint32_t>(type) & 31];
  k.vec_dot_f16act = one<Block, Deq>;
  k.vec_dot_f16act_multi = multi<Block, Deq>;
}

}  // namespace

void fill_f16act_scalar(KernelTable& t) {
  t.f32_to_f16_row = f32_to_f16_row;
  set<block_q4_0, ref::dequantize_row_q4_0>(t, TensorType::Q4_0);
  set<block_q4_1, ref::dequantize_row_q4_1>(t, TensorType::Q4_1);
  set<block_q8_0, ref::dequantize_row_q8_0>(t, TensorType::Q8_0);
}

}  // namespace pllm::kern
