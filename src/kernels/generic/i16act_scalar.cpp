// int16-activation scalar twins (TypeKernels::vec_dot_i16act_tile and
// KernelTable::quantize_row_q16): what every SIMD int16 kernel must compute.
//
// Activations are rounded once per 32-element block to d * qs with d = amax / 32767 (a step
// of 2^-16 of the block maximum; int8 mode's step is 2^-8 of it). The dot is the one of
// dequantize_row's weights (the reference dequantiser) with d * qs, accumulated in double,
// so its only errors are the activation rounding and the final rounding to float.
#include <cmath>
#include <cstdint>

#include "kernels/internal.h"
#include "quant/blocks.h"
#include "quant/reference.h"

namespace pllm::kern {

namespace {

// round(v) as vcvtps2dq / fcvtns give it (nearest, ties to even; NaN and out-of-range
// values become INT32_MIN), clamped to the int16 code range.
int16_t code(float v) {
  const int32_t q = (v >= -2147483648.0f && v < 2147483648.0f) ? static_cast<int32_t>(std::nearbyint(v)) : INT32_MIN;
  return static_cast<int16_t>(q < -32767 ? -32767 : (q > 32767 ? 32767 : q));
}

void quantize_row_q16(const float* x, void* y, int64_t n) {
  auto* out = static_cast<block_q16*>(y);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + 32 * b;
    float amax = 0.0f;
    for (int l = 0; l < 32; ++l) amax = std::fmax(amax, std::fabs(xb[l]));
    const float d = amax / 32767.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int32_t sum = 0;
    for (int l = 0; l < 32; ++l) {
      out[b].qs[l] = code(xb[l] * id);
      sum += out[b].qs[l];
    }
    out[b].d = d;
    out[b].sum = sum;
  }
}

// K: elements per weight block (the unit dequantize_row works on).
template <class Block, int K, void (*Deq)(const Block*, float*, int64_t)>
void tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t xq_stride, int n_x,
          float* out, int64_t out_stride) {
  float buf[K];
  for (int r = 0; r < n_rows; ++r) {
    const auto* wr = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w) + size_t(r) * w_stride);
    for (int x = 0; x < n_x; ++x) {
      const auto* a = reinterpret_cast<const block_q16*>(static_cast<const uint8_t*>(xq) + size_t(x) * xq_stride);
      double acc = 0.0;
      for (int64_t b = 0; b < n / K; ++b) {
        Deq(wr + b, buf, K);
        for (int l = 0; l < K; ++l) {
          const block_q16& ab = a[(b * K + l) / 32];
          acc += static_cast<double>(buf[l]) * (static_cast<double>(ab.d) * ab.qs[(b * K + l) % 32]);
        }
      }
      out[int64_t(x) * out_stride + r] = static_cast<float>(acc);
    }
  }
}

template <class Block, int K, void (*Deq)(const Block*, float*, int64_t)>
void set(KernelTable& t, TensorType type) {
  t.types[static_cast<uint32_t>(type) & 31].vec_dot_i16act_tile = tile<Block, K, Deq>;
}

}  // namespace

void fill_i16act_scalar(KernelTable& t) {
  t.quantize_row_q16 = quantize_row_q16;
  set<block_q4_0, 32, ref::dequantize_row_q4_0>(t, TensorType::Q4_0);
  set<block_q4_1, 32, ref::dequantize_row_q4_1>(t, TensorType::Q4_1);
  set<block_q5_0, 32, ref::dequantize_row_q5_0>(t, TensorType::Q5_0);
  set<block_q5_1, 32, ref::dequantize_row_q5_1>(t, TensorType::Q5_1);
  set<block_q8_0, 32, ref::dequantize_row_q8_0>(t, TensorType::Q8_0);
  set<block_q4_K, 256, ref::dequantize_row_q4_K>(t, TensorType::Q4_K);
  set<block_q6_K, 256, ref::dequantize_row_q6_K>(t, TensorType::Q6_K);
  set<block_q2_K, 256, ref::dequantize_row_q2_K>(t, TensorType::Q2_K);
  set<block_q3_K, 256, ref::dequantize_row_q3_K>(t, TensorType::Q3_K);
  set<block_q5_K, 256, ref::dequantize_row_q5_K>(t, TensorType::Q5_K);
  set<block_iq4_nl, 32, ref::dequantize_row_iq4_nl>(t, TensorType::IQ4_NL);
  set<block_iq4_xs, 256, ref::dequantize_row_iq4_xs>(t, TensorType::IQ4_XS);
}

}  // namespace pllm::kern
