// SmolLM3: the llama block where every fourth layer ((l + 1) % 4 == 0) has no RoPE ("NoPE"
// layers; llama.cpp fixes the step at 4). No rope_freqs: llama.cpp rotates without factors.
#include "model/arch.h"

namespace pllm {
namespace {

Result<ModelConfig> read_smollm3_config(const GgufFile& f) {
  PLLM_ASSIGN(ModelConfig c, read_transformer_config(f, "smollm3"));
  c.no_rope_step = 4;
  return c;
}

Result<void> load_smollm3_weights(const GgufFile& f, const ModelConfig& c, ModelWeights& w) {
  PLLM_TRY(load_embeddings(f, c, w));
  PLLM_TRY(load_layers(f, c, w, {.qkv_bias = Presence::optional, .out_bias = Presence::optional}, {}));
  w.rope_inv_freq = rope_inv_freq(c.rope_base, c.n_rot, c.rope_linear_scale);
  return {};
}

}  // namespace

const ArchDescriptor kArchSmolLM3 = {"smollm3", read_smollm3_config, load_smollm3_weights, llama_family_forward};

}  // namespace pllm
