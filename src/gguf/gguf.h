// Validating GGUF (v2/v3) reader over a memory-mapped file. Tensor data is never
// copied: TensorInfo::data points into the mapping, which the GgufFile keeps alive.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/mapped_file.h"
#include "base/result.h"

namespace pllm {

enum class GgufType : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};
const char* gguf_type_name(GgufType t);

// A metadata value. Arrays keep their element type and decoded elements; string
// values are views into the mapping.
struct GgufValue {
  GgufType type = GgufType::u8;
  GgufType elem_type = GgufType::u8;  // for arrays
  // Scalars: integers widened to int64/uint64, floats to double.
  std::variant<uint64_t, int64_t, double, bool, std::string_view> scalar;
  // Arrays: decoded elements (each a scalar GgufValue without nested arrays).
  std::vector<GgufValue> items;
  uint64_t array_len() const { return items.size(); }
};

struct TensorInfo {
  std::string name;
  uint32_t type = 0;            // ggml type id (see quant/types.h)
  std::vector<uint64_t> dims;   // ne[0] (contiguous, row length) first, as in GGUF
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  uint64_t offset = 0;          // relative to the data section
  const uint8_t* data = nullptr;
};

class GgufFile {
 public:
  // Opens and fully validates a file. Errors name the file and the offending field.
  static Result<std::shared_ptr<GgufFile>> open(const std::string& path);
  // Parse from an existing mapping (also used by tests via open()).
  static Result<std::shared_ptr<GgufFile>> parse(std::shared_ptr<MappedFile> file);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::string& path() const { return file_->path(); }
  uint64_t file_size() const { return file_->size(); }
  // See MappedFile::release: for tensor data the caller has copied (repacked) elsewhere.
  void release_pages(const uint8_t* p, size_t n) const { file_->release(p, n); }
  // Whether p points into the file's bytes (tensor data) rather than a copy elsewhere.
  bool holds(const uint8_t* p) const { return p >= file_->data() && p < file_->data() + file_->size(); }

  const GgufValue* find(std::string_view key) const;
  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return kv_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* tensor(std::string_view name) const;

  // Typed getters: error (naming the key and file) when missing or of the wrong type.
  Result<std::string> get_string(std::string_view key) const;
  Result<uint64_t> get_u64(std::string_view key) const;   // any non-negative integer type
  Result<double> get_f64(std::string_view key) const;     // any float or integer type
  Result<bool> get_bool(std::string_view key) const;
  // Array getters check the element type.
  Result<std::vector<std::string_view>> get_string_array(std::string_view key) const;
  Result<std::vector<double>> get_f64_array(std::string_view key) const;    // numeric arrays
  Result<std::vector<int64_t>> get_i64_array(std::string_view key) const;   // integer arrays
  // With default when absent (still an error when present with a wrong type).
  Result<uint64_t> get_u64_or(std::string_view key, uint64_t dflt) const;
  Result<double> get_f64_or(std::string_view key, double dflt) const;
  Result<std::string> get_string_or(std::string_view key, std::string dflt) const;

 private:
  std::shared_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, GgufValue, std::less<>> kv_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace pllm
