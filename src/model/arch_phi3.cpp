// Phi-3 / Phi-3.5-mini / Phi-4-mini: the llama block with one fused attn_qkv (read as three
// products) and one fused ffn_up holding the gate's rows then the up rows, NEOX RoPE over the
// first rope.dimension_count dims of each head (Phi-4-mini: 96 of 128), and LongRoPE: the
// rope_factors_long table replaces rope_factors_short for a session whose context is longer
// than rope.scaling.original_context_length, and the rotated dims are multiplied by
// rope.scaling.attn_factor. llama.cpp disables the sliding window some files declare; so do we.
#include <algorithm>

#include "model/arch.h"

namespace pllm {
namespace {

Result<ModelConfig> read_phi3_config(const GgufFile& f) {
  PLLM_ASSIGN(ModelConfig c, read_transformer_config(f, "phi3"));
  c.rope_order = RopeOrder::neox;
  c.longrope = false;  // the factor tables below are read whatever the scaling type says
  PLLM_ASSIGN(uint64_t orig, f.get_u64_or("phi3.rope.scaling.original_context_length", 0));
  c.rope_orig_ctx = int(std::min<uint64_t>(orig, 1u << 24));
  PLLM_ASSIGN(c.rope_attn_factor, read_positive_or(f, c, "rope.scaling.attn_factor", 1.0));
  return c;
}

Result<void> load_phi3_weights(const GgufFile& f, const ModelConfig& c, ModelWeights& w) {
  PLLM_TRY(load_embeddings(f, c, w));
  PLLM_TRY(load_layers(f, c, w, {.qkv_bias = Presence::optional}, {.fused_gate_up = true}));
  return load_longrope(f, c, w);
}

}  // namespace

const ArchDescriptor kArchPhi3 = {"phi3", read_phi3_config, load_phi3_weights, llama_family_forward};

}  // namespace pllm
