// The llama-family transformer (llama, SmolLM2, TinyLlama, Llama 3.x; qwen2, qwen3, smollm3,
// granite, minicpm, phi3 and lfm2 reuse it with what their config and weights add):
//   x = embed(token) * embed_scale
//   per layer:  x += residual_scale * Wo · attention(rope(Wq·rmsnorm(x)), rope(Wk·…), Wv·…)
//                 (lfm2's convolution layers: short_conv_block instead)
//               x += residual_scale * Wdown · (silu(Wgate·rmsnorm(x)) * (Wup·rmsnorm(x)))
//   logits = logit_mul * Wout · rmsnorm(x)
#include <cmath>

#include "model/arch.h"
#include "model/blocks.h"
#include "model/model.h"

namespace pllm {
namespace {

Result<ModelConfig> read_llama_config(const GgufFile& f) { return read_transformer_config(f, "llama"); }
Result<ModelConfig> read_deci_config(const GgufFile& f) { return read_transformer_config(f, "deci"); }

// Output biases, which llama.cpp's llama and deci load when present (a compensated prune
// writes them).
Result<void> load_llama_weights(const GgufFile& f, const ModelConfig& c, ModelWeights& w) {
  return load_llama_family_weights(f, c, w, {.out_bias = Presence::optional}, {.down_bias = Presence::optional});
}

}  // namespace

Result<void> load_llama_family_weights(const GgufFile& f, const ModelConfig& c, ModelWeights& w,
                                       const AttnTensors& attn, const FfnTensors& ffn) {
  PLLM_TRY(load_embeddings(f, c, w));
  PLLM_TRY(load_layers(f, c, w, attn, ffn));
  PLLM_ASSIGN(const float* factors, load_rope_factors(f, c));
  w.rope_inv_freq = rope_inv_freq(c.rope_base, c.n_rot, c.rope_linear_scale, factors);
  return {};
}

Result<void> llama_family_forward(const Model& m, LayerOps& ops) {
  const ModelConfig& c = m.config();
  const ModelWeights& w = m.weights();
  const float scale = c.attn_scale > 0.0f ? c.attn_scale : 1.0f / std::sqrt(float(c.head_dim));
  PLLM_TRY(ops.embed(w.token_embd, c.embed_scale));
  for (int l = 0; l < c.n_layer; ++l) {
    if (ops.cancelled()) return make_error(Status::cancelled, "cancelled");
    if (ops.skipped(l)) continue;
    if (c.is_recurrent(l)) {
      short_conv_block(ops, l, w.layers[size_t(l)]);
    } else {
      attention_block(ops, l, w.layers[size_t(l)], {scale, layer_rope(c, w, l), c.residual_scale});
    }
    ffn_block(ops, l, w.layers[size_t(l)], c.n_ff_at(l), Glu::silu, c.residual_scale);
  }
  ops.head(w.output_norm, w.output, {.mul = c.logit_mul});
  return {};
}

const ArchDescriptor kArchLlama = {"llama", read_llama_config, load_llama_weights, llama_family_forward};
const ArchDescriptor kArchDeci = {"deci", read_deci_config, load_llama_weights, llama_family_forward};

}  // namespace pllm
