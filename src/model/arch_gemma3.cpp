// Gemma 3 (text; e.g. Gemma 3 270M), as llama.cpp's gemma3 graph and HF Gemma3 compute it:
//   x = embed(token) * sqrt(n_embd)
//   per layer l (local = sliding-window layer unless (l + 1) % swa_pattern == 0):
//     q, k, v = Wq·h, Wk·h, Wv·h   with h = rmsnorm(x) * attn_norm
//     q, k   <- per-head rmsnorm (attn_q_norm / attn_k_norm), then NEOX RoPE with base
//               rope_base_local (10000) on local layers, rope_base (1e6, linear scaling) on global ones
//     att    = softmax(attn_scale * q·k) v over positions pos_k <= pos_q, and on local layers
//               only pos_q - pos_k < sliding_window; GQA
//     x     += rmsnorm(Wo·att) * post_attention_norm
//     x     += rmsnorm(Wdown·(gelu_tanh(Wgate·h) * (Wup·h))) * post_ffw_norm   with h = rmsnorm(x) * ffn_norm
//   logits = token_embd · (rmsnorm(x) * output_norm)   (tied; no final soft-capping in Gemma 3)
// The GGUF norm weights already include Gemma's "+1", so every norm is a plain x / rms(x) * w.
#include <cmath>

#include "model/arch.h"
#include "model/blocks.h"
#include "model/model.h"

namespace pllm {
namespace {

constexpr const char* kArch = "gemma3";

Result<ModelConfig> read_gemma3_config(const GgufFile& f) {
  PLLM_ASSIGN(ModelConfig c, read_transformer_config(f, kArch));
  c.rope_order = RopeOrder::neox;
  // llama.cpp fixes the pattern at 6 for gemma3; the key wins when a file has it.
  PLLM_TRY(read_sliding_window(f, c, 6));
  // Queries are scaled by query_pre_attn_scalar^-0.5: head_dim for every size except the
  // 27B (62 layers), which uses n_embd / n_head (llama.cpp does the same).
  float qpas = float(c.head_dim);
  if (c.n_layer == 62) qpas = float(c.n_embd) / float(c.n_head);
  PLLM_ASSIGN(c.attn_scale, read_positive_or(f, c, "attention.scale", 1.0 / std::sqrt(double(qpas))));
  return c;
}

Result<void> load_gemma3_weights(const GgufFile& f, const ModelConfig& c, ModelWeights& w) {
  PLLM_TRY(load_embeddings(f, c, w));  // tied in every released Gemma 3
  PLLM_TRY(load_layers(f, c, w, {.q_k_norm = Presence::required, .post_norm = Presence::required},
                       {.post_norm = Presence::required}));
  // Global layers use rope_base and the linear scaling, local layers their own base, unscaled.
  w.rope_inv_freq = rope_inv_freq(c.rope_base, c.n_rot, c.rope_linear_scale);
  w.rope_inv_freq_local = rope_inv_freq(c.rope_base_local, c.n_rot, 1.0f);
  return {};
}

}  // namespace

Result<void> gemma_family_forward(const Model& m, LayerOps& ops) {
  const ModelConfig& c = m.config();
  const ModelWeights& w = m.weights();
  PLLM_TRY(ops.embed(w.token_embd, std::sqrt(float(c.n_embd))));
  for (int l = 0; l < c.n_layer; ++l) {
    if (ops.cancelled()) return make_error(Status::cancelled, "cancelled");
    if (ops.skipped(l)) continue;
    // Local layers see the last sliding_window positions (the KV cache gives them their own
    // ring of that size) and use their own RoPE table.
    const float* inv_freq = c.is_local_layer(l) ? w.rope_inv_freq_local.data() : w.rope_inv_freq.data();
    attention_block(ops, l, w.layers[size_t(l)],
                    {AttnScore(c.attn_scale, c.attn_softcap), RopeSpec{inv_freq, c.n_rot, /*neox=*/true}});
    ffn_block(ops, l, w.layers[size_t(l)], c.n_ff_at(l), Glu::gelu_tanh);
  }
  ops.head(w.output_norm, w.output, {.softcap = c.final_softcap});
  return {};
}

const ArchDescriptor kArchGemma3 = {kArch, read_gemma3_config, load_gemma3_weights, gemma_family_forward};

}  // namespace pllm
