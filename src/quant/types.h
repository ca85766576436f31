// Tensor element types as GGUF/ggml number them, and their block layout traits.
#pragma once
#include <cstdint>
#include <optional>

namespace pllm {

// Values are the ggml type ids stored in GGUF files.
enum class TensorType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ4_NL = 20,
  IQ4_XS = 23,
  BF16 = 30,
};

struct TypeTraits {
  const char* name;      // "Q4_K"
  uint32_t block_elems;  // elements per block (1 for plain floats)
  uint32_t block_bytes;  // bytes per block
  bool supported;        // this engine can compute with it
};

// Traits for a raw ggml type id read from a file; nullopt if the id is unknown.
std::optional<TypeTraits> type_traits(uint32_t ggml_type);

// Bytes of one row of n elements, with checked arithmetic; nullopt if n is not a
// multiple of the block size, the type is unknown, or the product overflows.
std::optional<uint64_t> row_bytes(uint32_t ggml_type, uint64_t n);

}  // namespace pllm
