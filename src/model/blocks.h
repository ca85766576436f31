// Shared building blocks of the decoder architectures, composed over the layer seam
// (model/layer_ops.h). An architecture file is a short composition of these.
#pragma once
#include "model/layer_ops.h"
#include "model/model.h"

namespace pllm {

// How one layer's attention block differs between architectures.
struct AttnBlockSpec {
  AttnScore score;  // q·k times its scale (then soft-capped: gemma2) before the softmax
  RopeSpec rope;    // the layer's RoPE (frequencies differ on gemma3's local layers; n_rot 0: none)
  float residual_scale = 1.0f;  // multiplies the block's output (granite)
  bool v_norm = false;   // RMSNorm of every value head, no weight (gemma4)
  bool own_kv = true;    // false: the layer reads another layer's keys and values (gemma4's KV
                         // sharing): only its queries are projected, nothing is stored
};

// x += Wo · attention(rope(Wq·h), rope(Wk·h), Wv·h) with h = rmsnorm(x) * attn_norm; biases,
// q/k norms and the post-attention norm are applied when the layer has them.
void attention_block(LayerOps& ops, int l, const LayerWeights& L, const AttnBlockSpec& s);
// x += Wdown · (act(Wgate·h) * (Wup·h)) with h = rmsnorm(x) * ffn_norm; the post-FFN norm
// when the layer has one.
void ffn_block(LayerOps& ops, int l, const LayerWeights& L, int n_ff, Glu glu, float residual_scale = 1.0f);

// x += Wout · (c * conv(b * x)) with [b, c, x] = Win · rmsnorm(x) * attn_norm: a hybrid
// model's convolution layer (lfm2; LayerOps::short_conv).
void short_conv_block(LayerOps& ops, int l, const LayerWeights& L);

// qwen35's gated attention: [q ‖ gate per head] = Wq · h, k = Wk · h, v = Wv · h with h =
// rmsnorm(x) * attn_norm; per-head q/k norms and RoPE; x += Wo · (attention * sigmoid(gate)).
void gated_attention_block(LayerOps& ops, int l, const LayerWeights& L, const AttnBlockSpec& s);
// qwen35's Gated DeltaNet layer: x += ssm_out · delta_net(attn_qkv · h, attn_gate · h, ssm_beta ·
// h, ssm_alpha · h) with h = rmsnorm(x) * attn_norm (LayerOps::delta_net).
void delta_net_block(LayerOps& ops, int l, const LayerWeights& L);

// The RoPE of layer l of a model with one set of frequencies (every arch but gemma3's local
// layers): none on NoPE layers (c.has_rope), LongRoPE's tables and attn_factor when loaded.
RopeSpec layer_rope(const ModelConfig& c, const ModelWeights& w, int l);

}  // namespace pllm
