// Row conversions: the reference quantisers/dequantisers for rtn, block_search for
// mse/act.
#include "quantizer/row_quant.h"

#include <cctype>
#include <cstring>

#include "quant/reference.h"
#include "quantizer/block_search.h"

namespace pllm {
namespace {

struct NamedType {
  const char* name;
  TensorType type;
};
constexpr NamedType kOutputTypes[] = {
    {"f32", TensorType::F32},   {"f16", TensorType::F16},   {"bf16", TensorType::BF16},
    {"q8_0", TensorType::Q8_0}, {"q6_k", TensorType::Q6_K}, {"q5_0", TensorType::Q5_0},
    {"q5_1", TensorType::Q5_1}, {"q4_0", TensorType::Q4_0}, {"q4_1", TensorType::Q4_1},
    {"q4_k", TensorType::Q4_K}, {"q5_k", TensorType::Q5_K}, {"q3_k", TensorType::Q3_K},
    {"q2_k", TensorType::Q2_K}, {"iq4_nl", TensorType::IQ4_NL}, {"iq4_xs", TensorType::IQ4_XS},
};

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = char(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

// Runs the block function of a block type over a row.
template <class Block, class Fn>
void search_row(Fn fn, int block, const float* x, const float* w, uint8_t* dst, int64_t n) {
  auto* y = reinterpret_cast<Block*>(dst);
  for (int64_t b = 0; b < n / block; ++b) fn(x + b * block, w ? w + b * block : nullptr, y + b);
}

}  // namespace

const char* quant_method_name(QuantMethod m) {
  switch (m) {
    case QuantMethod::rtn: return "rtn";
    case QuantMethod::mse: return "mse";
    case QuantMethod::act: return "act";
  }
  return "?";
}

Result<QuantMethod> parse_quant_method(std::string_view s) {
  const std::string l = lower(s);
  if (l == "rtn") return QuantMethod::rtn;
  if (l == "mse") return QuantMethod::mse;
  if (l == "act") return QuantMethod::act;
  return make_error(Status::invalid_argument, "unknown method '" + std::string(s) + "' (rtn, mse or act)");
}

Result<TensorType> parse_quant_type(std::string_view s) {
  const std::string l = lower(s);
  for (const NamedType& t : kOutputTypes)
    if (l == t.name) return t.type;
  std::string all;
  for (const NamedType& t : kOutputTypes) all += (all.empty() ? "" : ", ") + std::string(t.name);
  return make_error(Status::invalid_argument, "unknown type '" + std::string(s) + "' (one of " + all + ")");
}

std::string quant_type_name(TensorType t) {
  for (const NamedType& n : kOutputTypes)
    if (n.type == t) return n.name;
  const auto tr = type_traits(uint32_t(t));
  return tr ? lower(tr->name) : "type" + std::to_string(uint32_t(t));
}

bool is_output_type(TensorType t) {
  for (const NamedType& n : kOutputTypes)
    if (n.type == t) return true;
  return false;
}

// Everything the reference dequantisers decode is also written.
bool is_input_type(uint32_t ggml_type) { return is_output_type(static_cast<TensorType>(ggml_type)); }

void quantize_row_to(TensorType type, const float* x, const float* w, bool search, uint8_t* dst, int64_t n) {
  switch (type) {
    case TensorType::F32: std::memcpy(dst, x, size_t(n) * sizeof(float)); return;
    case TensorType::F16: ref::quantize_row_f16(x, reinterpret_cast<uint16_t*>(dst), n); return;
    case TensorType::BF16: ref::quantize_row_bf16(x, reinterpret_cast<uint16_t*>(dst), n); return;
    default: break;
  }
  if (!search) {
    switch (type) {
      case TensorType::Q8_0: ref::quantize_row_q8_0(x, reinterpret_cast<block_q8_0*>(dst), n); return;
      case TensorType::Q6_K: ref::quantize_row_q6_K(x, reinterpret_cast<block_q6_K*>(dst), n); return;
      case TensorType::Q5_0: ref::quantize_row_q5_0(x, reinterpret_cast<block_q5_0*>(dst), n); return;
      case TensorType::Q5_1: ref::quantize_row_q5_1(x, reinterpret_cast<block_q5_1*>(dst), n); return;
      case TensorType::Q4_0: ref::quantize_row_q4_0(x, reinterpret_cast<block_q4_0*>(dst), n); return;
      case TensorType::Q4_1: ref::quantize_row_q4_1(x, reinterpret_cast<block_q4_1*>(dst), n); return;
      case TensorType::Q4_K: ref::quantize_row_q4_K(x, reinterpret_cast<block_q4_K*>(dst), n); return;
      case TensorType::Q5_K: ref::quantize_row_q5_K(x, reinterpret_cast<block_q5_K*>(dst), n); return;
      case TensorType::Q3_K: ref::quantize_row_q3_K(x, reinterpret_cast<block_q3_K*>(dst), n); return;
      case TensorType::Q2_K: ref::quantize_row_q2_K(x, reinterpret_cast<block_q2_K*>(dst), n); return;
      case TensorType::IQ4_NL: ref::quantize_row_iq4_nl(x, reinterpret_cast<block_iq4_nl*>(dst), n); return;
      case TensorType::IQ4_XS: ref::quantize_row_iq4_xs(x, reinterpret_cast<block_iq4_xs*>(dst), n); return;
      default: return;
    }
  }
  switch (type) {
    case TensorType::Q8_0: search_row<block_q8_0>(search_q8_0, QK8_0, x, w, dst, n); return;
    case TensorType::Q6_K: search_row<block_q6_K>(search_q6_K, QK_K, x, w, dst, n); return;
    case TensorType::Q5_0: search_row<block_q5_0>(search_q5_0, QK5_0, x, w, dst, n); return;
    case TensorType::Q5_1: search_row<block_q5_1>(search_q5_1, QK5_1, x, w, dst, n); return;
    case TensorType::Q4_0: search_row<block_q4_0>(search_q4_0, QK4_0, x, w, dst, n); return;
    case TensorType::Q4_1: search_row<block_q4_1>(search_q4_1, QK4_1, x, w, dst, n); return;
    case TensorType::Q4_K: search_row<block_q4_K>(search_q4_K, QK_K, x, w, dst, n); return;
    case TensorType::Q5_K: search_row<block_q5_K>(search_q5_K, QK_K, x, w, dst, n); return;
    case TensorType::Q3_K: search_row<block_q3_K>(search_q3_K, QK_K, x, w, dst, n); return;
    case TensorType::Q2_K: search_row<block_q2_K>(search_q2_K, QK_K, x, w, dst, n); return;
    case TensorType::IQ4_NL: search_row<block_iq4_nl>(search_iq4_nl, QK4_0, x, w, dst, n); return;
    case TensorType::IQ4_XS: search_row<block_iq4_xs>(search_iq4_xs, QK_K, x, w, dst, n); return;
    default: return;
  }
}

bool dequantize_row_any(uint32_t ggml_type, const uint8_t* src, float* y, int64_t n) {
  switch (static_cast<TensorType>(ggml_type)) {
    case TensorType::F32: std::memcpy(y, src, size_t(n) * sizeof(float)); return true;
    case TensorType::F16: ref::dequantize_row_f16(reinterpret_cast<const uint16_t*>(src), y, n); return true;
    case TensorType::BF16: ref::dequantize_row_bf16(reinterpret_cast<const uint16_t*>(src), y, n); return true;
    case TensorType::Q8_0: ref::dequantize_row_q8_0(reinterpret_cast<const block_q8_0*>(src), y, n); return true;
    case TensorType::Q6_K: ref::dequantize_row_q6_K(reinterpret_cast<const block_q6_K*>(src), y, n); return true;
    case TensorType::Q5_0: ref::dequantize_row_q5_0(reinterpret_cast<const block_q5_0*>(src), y, n); return true;
    case TensorType::Q5_1: ref::dequantize_row_q5_1(reinterpret_cast<const block_q5_1*>(src), y, n); return true;
    case TensorType::Q4_0: ref::dequantize_row_q4_0(reinterpret_cast<const block_q4_0*>(src), y, n); return true;
    case TensorType::Q4_1: ref::dequantize_row_q4_1(reinterpret_cast<const block_q4_1*>(src), y, n); return true;
    case TensorType::Q4_K: ref::dequantize_row_q4_K(reinterpret_cast<const block_q4_K*>(src), y, n); return true;
    case TensorType::Q2_K: ref::dequantize_row_q2_K(reinterpret_cast<const block_q2_K*>(src), y, n); return true;
    case TensorType::Q3_K: ref::dequantize_row_q3_K(reinterpret_cast<const block_q3_K*>(src), y, n); return true;
    case TensorType::Q5_K: ref::dequantize_row_q5_K(reinterpret_cast<const block_q5_K*>(src), y, n); return true;
    case TensorType::IQ4_NL:
      ref::dequantize_row_iq4_nl(reinterpret_cast<const block_iq4_nl*>(src), y, n);
      return true;
    case TensorType::IQ4_XS:
      ref::dequantize_row_iq4_xs(reinterpret_cast<const block_iq4_xs*>(src), y, n);
      return true;
    default: return false;
  }
}

}  // namespace pllm
