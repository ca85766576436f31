// Which type each tensor of a model gets.
//
// Rules, in order of precedence:
//   1. tensors that are not 2-D (norms, biases, rope factors) stay F32;
//   2. an explicit per-tensor choice (a --target-bpw plan);
//   3. the first --tensor-type REGEX=TYPE whose regex matches part of the name;
//   4. unless --pure, llama.cpp's default for the output head: output.weight (or
//      token_embd.weight when the output is tied to it) is q6_k when the base type has
//      fewer bits (q2_k ... q5_k, iq4_nl, iq4_xs) and stays at the base type otherwise
//      (f32, f16, bf16, q8_0, q6_k);
//   5. unless --pure, the rules of a llama.cpp mix (QuantMix: q2_k, q3_k_m, q4_k_s, q4_k_m,
//      q5_k_m, iq4_nl, iq4_xs; llama-quantize's llama_tensor_get_type without an importance
//      matrix, for dense models): attn_v (and attn_qkv / attn_kv_b), ffn_down and
//      attn_output get more bits by layer position (kMixRules in type_plan.cpp);
//   6. the base type.
// Then, when the row length (dims[0]) is not a multiple of the chosen type's block, the
// type falls back explicitly, as llama.cpp's quantiser does (its choices, in the version
// bench/setup_llamacpp.sh builds): q4_k -> q5_0, q5_k -> q5_1, q2_k and q3_k -> q4_0,
// iq4_xs -> iq4_nl, q6_k -> q8_0, and any 32-element type -> f16 when the row is not a
// multiple of 32. Every fallback is reported.
#pragma once
#include <cstdint>
#include <map>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "gguf/gguf.h"
#include "quant/types.h"

namespace pllm {

struct TensorTypeRule {
  std::string pattern;  // as given, for messages
  std::regex re;
  TensorType type;
};
// "REGEX=TYPE" (the last '=' separates them). Errors: no '=', bad regex, unknown type.
Result<TensorTypeRule> parse_tensor_type_rule(std::string_view spec);

// llama.cpp's quantisation mixes (llama-quantize's file types) that add per-tensor rules.
enum class QuantMix : uint8_t { none, q2_k, q3_k_m, q4_k_s, q4_k_m, q5_k_m, iq4_nl, iq4_xs };

// A --type: its base type and mix. A mix name (q2_k, q3_k_m, q4_k_s, q4_k_m, q5_k_m, iq4_nl,
// iq4_xs; q2_k, iq4_nl and iq4_xs are type names too: as --type they are llama.cpp's mixes,
// with --pure the type alone) or any output type (no mix).
struct QuantPreset {
  TensorType base = TensorType::Q4_0;
  QuantMix mix = QuantMix::none;
};
Result<QuantPreset> parse_quant_preset(std::string_view s);
// "q4_k_m" for a mix, the base type's name otherwise.
std::string quant_preset_name(const QuantPreset& p);

// What the mix rules read of the model: each attn_v-like and ffn_down tensor's ordinal
// among its kind (llama.cpp counts them in (layer, name) order), how many there are of
// attn_v-like ones, the blocks (ffn_down's fractions are of these) and query heads per KV
// head (layer 0's; 0 when it has no KV heads, as llama.cpp's n_gqa).
struct MixShape {
  std::map<std::string, int, std::less<>> ordinal;
  int n_attn_v = 0;
  int n_layer = 0;
  int n_gqa = 1;
};
MixShape mix_shape(const GgufFile& f);

struct TypePlanOptions {
  TensorType base = TensorType::Q4_0;
  QuantMix mix = QuantMix::none;
  MixShape shape;  // read by the mix rules only
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

// llama.cpp's general.file_type (LLAMA_FTYPE_MOSTLY_*) of a preset. A K-type alone names the
// nearest file type: q3_k Q3_K_S, q5_k Q5_K_S (whose rules for dense models are the head
// rule only), q4_k Q4_K_S (without Q4_K_S's own rules, which --type q4_k_s applies).
uint32_t llama_file_type(const QuantPreset& p);

}  // namespace pllm
