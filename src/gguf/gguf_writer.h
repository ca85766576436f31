// GGUF v3 writer. Owns everything it writes (keys, strings, tensor bytes), so it never
// depends on a mapping staying alive: metadata copied from an open GgufFile is
// serialised at copy time. Files are written to a temporary name and renamed, so a
// reader sees the old file or the whole new one.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "gguf/gguf.h"

namespace pllm {

class GgufWriter {
 public:
  // GGUF's own limit on tensor names (llama.cpp's GGML_MAX_NAME is 64 including the NUL).
  static constexpr size_t kMaxTensorName = 63;

  // Every key of `f` in its order, values with their original types; a key already set
  // here is replaced in place.
  void copy_metadata(const GgufFile& f);

  // Set (add, or replace keeping the key's position) one value.
  void set_u8(std::string_view key, uint8_t v);
  void set_u32(std::string_view key, uint32_t v);
  void set_i32(std::string_view key, int32_t v);
  void set_u64(std::string_view key, uint64_t v);
  void set_i64(std::string_view key, int64_t v);
  void set_f32(std::string_view key, float v);
  void set_f64(std::string_view key, double v);
  void set_bool(std::string_view key, bool v);
  void set_string(std::string_view key, std::string_view v);
  void set_array_u32(std::string_view key, std::span<const uint32_t> v);
  void set_array_i32(std::string_view key, std::span<const int32_t> v);
  void set_array_u64(std::string_view key, std::span<const uint64_t> v);
  void set_array_f32(std::string_view key, std::span<const float> v);
  void set_array_string(std::string_view key, std::span<const std::string> v);
  // A value read by GgufFile (any type, arrays included), copied.
  void set_value(std::string_view key, const GgufValue& v);
  // Returns whether the key was there.
  bool remove(std::string_view key);
  bool has(std::string_view key) const { return find(key) >= 0; }
  size_t n_keys() const { return kvs_.size(); }

  // dims: ne0 (the row length) first, 1..4 dims, none zero. bytes must be exactly
  // row_bytes(type, dims[0]) * (product of the other dims). Errors: unknown type, bad
  // dims, a row length that is not a multiple of the type's block, wrong byte count,
  // duplicate or over-long name.
  Result<void> add_tensor(std::string name, uint32_t ggml_type, std::vector<uint64_t> dims,
                          std::vector<uint8_t> bytes);
  size_t n_tensors() const { return tensors_.size(); }
  uint64_t tensor_bytes() const;  // sum of tensor data sizes, without padding

  // Writes `path` (GGUF v3): data aligned to general.alignment (default 32; a value that is
  // not a power-of-two integer is an error). Temp file + fsync + rename; on failure the
  // temp file is removed and the error names the path and the reason. An existing path that
  // is not a regular file (a device, a directory) is refused, never replaced.
  Result<void> write(const std::string& path) const;

 private:
  struct Kv {
    std::string key;
    GgufType type;
    std::vector<uint8_t> payload;  // the value as serialised after its type field
  };
  struct Tensor {
    std::string name;
    uint32_t type;
    std::vector<uint64_t> dims;
    std::vector<uint8_t> data;
  };
  long find(std::string_view key) const;
  void put(std::string_view key, GgufType type, std::vector<uint8_t> payload);
  Result<uint64_t> alignment() const;

  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
};

}  // namespace pllm
