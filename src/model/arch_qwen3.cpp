// Qwen3 (0.6B-32B dense): qwen2's block without Q/K/V biases (llama.cpp loads them when a file
// has them) and with a per-head RMSNorm of q and k before the NEOX RoPE. The head size is
// its own key (Qwen3-0.6B: 128 while n_embd / n_head = 64).
#include "model/arch.h"

namespace pllm {
namespace {

Result<ModelConfig> read_qwen3_config(const GgufFile& f) {
  PLLM_ASSIGN(ModelConfig c, read_transformer_config(f, "qwen3"));
  c.rope_order = RopeOrder::neox;
  return c;
}

Result<void> load_qwen3_weights(const GgufFile& f, const ModelConfig& c, ModelWeights& w) {
  return load_llama_family_weights(f, c, w, {.qkv_bias = Presence::optional, .q_k_norm = Presence::required}, {});
}

}  // namespace

const ArchDescriptor kArchQwen3 = {"qwen3", read_qwen3_config, load_qwen3_weights, llama_family_forward};

}  // namespace pllm
