// Matrix products on the device: Y[r][o] = sum_i X[r][i] * W[o][i] for the weight types we
// load, one shader variant per type (shaders/matmul_<type>*.comp).
//
// Variants: the float path (what the CPU's exact mode computes: weights decoded to f32,
// f32 activations, f32 sums) reads 16-bit fields through uint loads + unpackHalf2x16 unless
// the context has fp16 storage (Context::use_f16()); the int8 path (the CPU's --int8-act)
// rounds each 32-activation block to int8 with one scale and uses packed int8 dot products
// where the context has them (use_int_dot()), plain int arithmetic otherwise.
#pragma once
#include <memory>

#include "backends/vulkan/vk_kernel.h"
#include "quant/types.h"

namespace pllm::vk {

// A weight matrix on the device, in the GGUF file's row layout (never panels):
// `rows` rows of `cols` elements, row r at data.offset + r * row_bytes. The shaders read whole
// 32-bit words, so the buffer must extend to the matrix's end rounded up to 4 bytes (Q4_0,
// Q5_0, Q8_0 and Q6_K matrices can end 2 bytes into a word): pad the last tensor of a buffer.
struct DevMatrix {
  View data;
  TensorType type = TensorType::F32;
  int64_t rows = 0, cols = 0;
  size_t row_bytes = 0;
};

// Whether a type has a device matmul (F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q3_K, Q4_K, Q5_K,
// Q6_K, IQ4_NL, IQ4_XS; not Q2_K, whose int8 path would need 16-element activation sums).
bool matmul_supported(TensorType t);

class MatmulKernels {
 public:
  // Creates the pipelines for the context's features.
  static Result<std::unique_ptr<MatmulKernels>> create(Context& ctx);
  ~MatmulKernels();
  // Records Y = X · Wᵀ for n rows. X: f32 [n][W.cols], Y: f32 [n][W.rows] (row stride W.rows),
  // both device buffers. int8: round activations as the CPU's int8 mode does. Splits W into
  // row ranges where it is larger than one binding may be (maxStorageBufferRange).
  // Returns unsupported for a type without a shader.
  Result<void> record(Recorder& rec, const DevMatrix& W, View X, View Y, int n, bool int8) const;

 private:
  MatmulKernels() = default;
  // Tests: lower the most bytes one weight binding may span (normally maxStorageBufferRange),
  // so that the row-range split runs on small matrices.
  friend struct MatmulTestAccess;
  void set_max_binding_bytes(uint64_t bytes);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pllm::vk
