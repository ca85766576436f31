// Qwen2 / Qwen2.5 / DeepSeek-R1-Distill-Qwen: the llama block with Q/K/V biases and
// NEOX-ordered RoPE (rotating the two halves of each head rather than adjacent pairs).
#include "model/arch.h"

namespace pllm {
namespace {

Result<ModelConfig> read_qwen2_config(const GgufFile& f) {
  PLLM_ASSIGN(ModelConfig c, read_transformer_config(f, "qwen2"));
  c.rope_order = RopeOrder::neox;
  return c;
}

// Q/K/V biases; no output biases (llama.cpp's qwen2 loads none).
Result<void> load_qwen2_weights(const GgufFile& f, const ModelConfig& c, ModelWeights& w) {
  return load_llama_family_weights(f, c, w, {.qkv_bias = Presence::required}, {});
}

}  // namespace

const ArchDescriptor kArchQwen2 = {"qwen2", read_qwen2_config, load_qwen2_weights, llama_family_forward};

}  // namespace pllm
