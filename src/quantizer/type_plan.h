// Which type each tensor of a model gets.
//
// Rules, in order of precedence:
//   1. tensors that are not 2-D (norms, biases, rope factors) stay F32;
//   2. an explicit per-tensor choice (a --target-bpw plan);
//   3. the first --tensor-type REGEX=TYPE whose regex matches part of the name;
//   4. unless --pure, llama.cpp's default for the output head: output.weight (or
//      token_embd.weight when the output is tied to it) is q6_k when the base type is a
//      4- or 5-bit type (q4_0, q4_1, q4_k, q5_0, q5_1) and stays at the base type
//      otherwise (f32, f16, bf16, q8_0, q6_k);
//   5. the base type.
// Then, when the row length (dims[0]) is not a multiple of the chosen type's block, the
// type falls back explicitly, as llama.cpp's quantiser does: q4_k -> q5_0 (the same
// 5.5 bits per weight as a 32-element 4-bit type with a scale, and llama.cpp's choice),
// q6_k -> q8_0, and any 32-element type -> f16 when the row is not a multiple of 32.
// Every fallback is reported.
#pragma once
#include <cstdint>
#include <map>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "quant/types.h"

namespace pllm {

struct TensorTypeRule {
  std::string pattern;  // as given, for messages
  std::regex re;
  TensorType type;
};
// "REGEX=TYPE" (the last '=' separates them). Errors: no '=', bad regex, unknown type.
Result<TensorTypeRule> parse_tensor_type_rule(std::string_view spec);

struct TypePlanOptions {
  TensorType base = TensorType::Q4_0;
  bool pure = false;
  std::vector<TensorTypeRule> rules;
  std::map<std::string, TensorType, std::less<>> explicit_types;  // highest precedence
};

struct TypeChoice {
  bool quantized = false;  // false: kept as F32 (not a 2-D weight)
  TensorType wanted = TensorType::F32;  // before the fallback
  TensorType type = TensorType::F32;    // what is written
  bool fallback() const { return wanted != type; }
};

// The type of one tensor. has_output: the model has its own output.weight (else the
// embedding is the output head).
TypeChoice choose_tensor_type(std::string_view name, const std::vector<uint64_t>& dims, bool has_output,
                              const TypePlanOptions& opts);

// The type a row of `cols` elements can hold instead of t (t itself when it fits).
TensorType fallback_type(TensorType t, uint64_t cols);

// llama.cpp's general.file_type for a base type (LLAMA_FTYPE_MOSTLY_*; q4_k is Q4_K_S).
uint32_t llama_file_type(TensorType base);

}  // namespace pllm
