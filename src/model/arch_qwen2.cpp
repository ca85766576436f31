// Qwen2 / Qwen2.5 / DeepSeek-R1-Distill-Qwen: the llama block with Q/K/V biases and
// NEOX-ordered RoPE (rotating the two halves of each head rather than adjacent pairs).
#include "model/arch.h"

namespace pllm {
namespace {

Result<ModelConfig> read_qwen2_config(const GgufFile& f) {
  PLLM_ASSIGN(ModelConfig c, read_llama_family_config(f, "qwen2"));
  c.rope_order = RopeOrder::neox;
  c.qkv_bias = true;
  return c;
}

}  // namespace

const ArchDescriptor kArchQwen2 = {"qwen2", read_qwen2_config, llama_family_load_weights,
                                   llama_family_forward};

}  // namespace pllm
