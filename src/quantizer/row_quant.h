// Row-level conversion between f32 and every tensor type the quantiser reads or writes,
// and the names of the output types and methods.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"
#include "quant/types.h"

namespace pllm {

// rtn: the reference round-to-nearest quantisers (src/quant/reference.h).
// mse: per-block search minimising the squared error (block_search.h).
// act: the same search minimising the error weighted per input column by the mean x² of
//      its activation (needs activation statistics).
enum class QuantMethod { rtn, mse, act };
const char* quant_method_name(QuantMethod m);
Result<QuantMethod> parse_quant_method(std::string_view s);

// Output types: f32, f16, bf16, q8_0, q6_k, q5_0, q5_1, q4_0, q4_1, q4_k, q5_k, q3_k, q2_k,
// iq4_nl, iq4_xs (any case). (--type also takes llama.cpp's mixes: type_plan.h.)
Result<TensorType> parse_quant_type(std::string_view s);
// Lower-case name ("q4_k") of a type.
std::string quant_type_name(TensorType t);
// Whether the quantiser can write t.
bool is_output_type(TensorType t);
// Whether the quantiser can read t (everything the reference dequantisers decode: the
// output types).
bool is_input_type(uint32_t ggml_type);

// Quantises one row of n elements (a multiple of the type's block) to `type` into dst
// (row_bytes(type, n) bytes). search false: the rtn quantiser (weights ignored); true:
// the searching quantiser, weighted when weights (n values >= 0) is not null. Float
// types are converted (no search).
void quantize_row_to(TensorType type, const float* x, const float* weights, bool search, uint8_t* dst, int64_t n);
// Decodes one row of n elements of any input type; false when the type is not readable.
bool dequantize_row_any(uint32_t ggml_type, const uint8_t* src, float* y, int64_t n);

}  // namespace pllm
