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
// Either the file's layout (row r at data + r * row_bytes), or, after load-time repacking
// (model/repack.h), 16-row panels (quant/panel.h): panel p at data + p * 16 * row_bytes.
struct Matrix {
  std::string_view name;  // the GGUF tensor name (lives in the GgufFile the Model owns)
  const uint8_t* data = nullptr;
  TensorType type = TensorType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_bytes = 0;
  bool panels = false;
  // Static int8 activation scale of this product's input (ActMode::int8_static), from the
  // file's pocketllm.act_scale.* metadata (model/act_scales.h); 0: none, quantise
  // dynamically. Products that share an input carry the same value.
  float act_scale = 0.0f;
  // File layout only.
  const uint8_t* row(int64_t r) const { return data + size_t(r) * row_bytes; }
  // Panels only: the panel holding rows [16 p, 16 p + 16).
  const uint8_t* panel(int64_t p) const { return data + size_t(p) * 16 * row_bytes; }
};

// Rows longer than this are never repacked: paths that need the file's layout unpack
// panel rows onto the stack (the embedding lookup, Vulkan's upload) or into one 16-row tile
// per thread (matmul.cpp: 512 KiB each). 32 KiB holds a Q8_0 row of 30,000 columns; at 8 KiB
// the Q6_K ffn_down of Qwen2.5-3B (11,008 columns: 9,030 bytes a row) and every Q8_0 matrix
// wider than 7,700 columns missed the panels and decoded at half their streaming speed.
inline constexpr size_t kMaxPanelRowBytes = 32768;

// Row r in the file's layout, whatever the storage: a pointer into the matrix, or (panels)
// the row unpacked into buf (row_bytes bytes).
const uint8_t* file_row(const Matrix& m, int64_t r, uint8_t* buf);

// Looks up `name`, checks its shape is exactly [cols, rows] and that the kernels support
// its type. Errors name the tensor and the file.
Result<Matrix> get_matrix(const GgufFile& f, const std::string& name, int64_t rows, int64_t cols);
// Rows [first, first + n) of m (file layout) as a matrix of its own: a fused tensor
// (attn_qkv, phi3's gate‖up ffn_up) read as the products it holds.
Matrix row_slice(const Matrix& m, int64_t first, int64_t n);
// A 1-D F32 vector of n elements (norm weights, biases).
Result<const float*> get_vector(const GgufFile& f, const std::string& name, int64_t n);

}  // namespace pllm
