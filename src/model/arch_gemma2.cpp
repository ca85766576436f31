// Gemma 2 (2B, 9B, 27B), as llama.cpp's gemma2 graph computes it: Gemma 3's block without the
// per-head q/k norms, every other layer local (sliding_window_pattern 2: even layers; window
// 4096 when the file does not say), one RoPE base for both kinds of layer (freq_base_swa when
// present) with the linear scaling on both, and soft-capping of the attention scores
// (attn_logit_softcapping, default 50) and of the logits (final_logit_softcapping, default 30).
// Queries are scaled by head_dim^-0.5, or (n_embd / n_head)^-0.5 on the 27B (46 layers).
#include <cmath>

#include "model/arch.h"

namespace pllm {
namespace {

constexpr const char* kArch = "gemma2";

Result<ModelConfig> read_gemma2_config(const GgufFile& f) {
  PLLM_ASSIGN(ModelConfig c, read_transformer_config(f, kArch));
  c.rope_order = RopeOrder::neox;
  PLLM_TRY(read_sliding_window(f, c, 2, /*default_window=*/4096, /*default_local_base=*/c.rope_base));
  PLLM_ASSIGN(c.attn_softcap, read_positive_or(f, c, "attn_logit_softcapping", 50.0));
  PLLM_ASSIGN(c.final_softcap, read_positive_or(f, c, "final_logit_softcapping", 30.0));
  const double head = c.n_layer == 46 ? double(c.n_embd) / double(c.n_head) : double(c.head_dim);
  c.attn_scale = float(1.0 / std::sqrt(head));
  return c;
}

Result<void> load_gemma2_weights(const GgufFile& f, const ModelConfig& c, ModelWeights& w) {
  PLLM_TRY(load_embeddings(f, c, w));
  PLLM_TRY(load_layers(f, c, w, {.post_norm = Presence::required}, {.post_norm = Presence::required}));
  w.rope_inv_freq = rope_inv_freq(c.rope_base, c.n_rot, c.rope_linear_scale);
  w.rope_inv_freq_local = rope_inv_freq(c.rope_base_local, c.n_rot, c.rope_linear_scale);
  return {};
}

}  // namespace

const ArchDescriptor kArchGemma2 = {kArch, read_gemma2_config, load_gemma2_weights, gemma_family_forward};

}  // namespace pllm
