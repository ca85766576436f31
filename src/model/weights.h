// Views of the weights inside the mapped GGUF file. Nothing is copied: a Matrix points
// at the file's bytes, so every session shares one read-only set of weights.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "gguf/gguf.h"
#include "quant/types.h"

namespace pllm {

// A 2-D weight stored as `rows` rows of `cols` elements each (GGUF dims [cols, rows]).
struct Matrix {
  std::string_view name;  // the GGUF tensor name (lives in the GgufFile the Model owns)
  const uint8_t* data = nullptr;
  TensorType type = TensorType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_bytes = 0;
  // Static int8 activation scale of this product's input (ActMode::int8_static), from the
  // file's pocketllm.act_scale.* metadata (model/act_scales.h); 0: none, quantise
  // dynamically. Products that share an input carry the same value.
  float act_scale = 0.0f;
  const uint8_t* row(int64_t r) const { return data + size_t(r) * row_bytes; }
};

// Looks up `name`, checks its shape is exactly [cols, rows] and that the kernels support
// its type. Errors name the tensor and the file.
Result<Matrix> get_matrix(const GgufFile& f, const std::string& name, int64_t rows, int64_t cols);
// A 1-D F32 vector of n elements (norm weights, biases).
Result<const float*> get_vector(const GgufFile& f, const std::string& name, int64_t n);

}  // namespace pllm
