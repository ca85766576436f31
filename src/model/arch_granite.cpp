// Granite (3.x, 4.0 dense: 350M, 1B) and MiniCPM, which share llama.cpp's granite graph: the
// llama block with four scales, x = embed * embedding_scale, each block's output times
// residual_scale, q·k times attention.scale, logits divided by logit_scale (required for
// granite). MiniCPM has defaults for files without the keys: embedding 12, residual
// 1.4 / sqrt(n_layer), logits n_embd / 256. Granite's rope.scaling.finetuned = false turns
// RoPE off. LongRoPE files (rope.scaling.type "longrope") take the short/long factor tables.
#include <algorithm>
#include <cmath>

#include "model/arch.h"

namespace pllm {
namespace {

Result<void> read_rope_switch_and_longrope(const GgufFile& f, ModelConfig& c) {
  const std::string p = c.arch + ".";
  if (f.find(p + "rope.scaling.finetuned")) {
    PLLM_ASSIGN(bool finetuned, f.get_bool(p + "rope.scaling.finetuned"));
    c.rope_off = c.arch == "granite" && !finetuned;  // MiniCPM always rotates
  }
  if (c.longrope) {
    PLLM_ASSIGN(uint64_t orig, f.get_u64_or(p + "rope.scaling.original_context_length", 0));
    c.rope_orig_ctx = int(std::min<uint64_t>(orig, 1u << 24));
  }
  return {};
}

Result<ModelConfig> read_granite_config(const GgufFile& f) {
  PLLM_ASSIGN(ModelConfig c, read_transformer_config(f, "granite"));
  if (!f.find("granite.logit_scale")) return make_error(Status::bad_format, f.path() + ": missing metadata 'granite.logit_scale'");
  PLLM_ASSIGN(float logit_scale, read_positive_or(f, c, "logit_scale", 1.0));
  c.logit_mul = 1.0f / logit_scale;
  PLLM_ASSIGN(c.residual_scale, read_positive_or(f, c, "residual_scale", 1.0));
  PLLM_ASSIGN(c.embed_scale, read_positive_or(f, c, "embedding_scale", 1.0));
  PLLM_ASSIGN(c.attn_scale, read_positive_or(f, c, "attention.scale", 1.0 / std::sqrt(double(c.head_dim))));
  PLLM_TRY(read_rope_switch_and_longrope(f, c));
  return c;
}

Result<ModelConfig> read_minicpm_config(const GgufFile& f) {
  PLLM_ASSIGN(ModelConfig c, read_transformer_config(f, "minicpm"));
  PLLM_ASSIGN(float logit_scale, read_positive_or(f, c, "logit_scale", 256.0 / double(c.n_embd)));
  c.logit_mul = 1.0f / logit_scale;
  PLLM_ASSIGN(c.residual_scale, read_positive_or(f, c, "residual_scale", 1.4 / std::sqrt(double(c.n_layer))));
  PLLM_ASSIGN(c.embed_scale, read_positive_or(f, c, "embedding_scale", 12.0));
  PLLM_TRY(read_rope_switch_and_longrope(f, c));
  return c;
}

// Optional Q/K/V and output biases, as llama.cpp's granite loads them.
Result<void> load_granite_weights(const GgufFile& f, const ModelConfig& c, ModelWeights& w) {
  const AttnTensors attn{.qkv_bias = Presence::optional, .out_bias = Presence::optional};
  if (!c.longrope) return load_llama_family_weights(f, c, w, attn, {.down_bias = Presence::optional});
  PLLM_TRY(load_embeddings(f, c, w));
  PLLM_TRY(load_layers(f, c, w, attn, {.down_bias = Presence::optional}));
  return load_longrope(f, c, w);
}

}  // namespace

const ArchDescriptor kArchGranite = {"granite", read_granite_config, load_granite_weights, llama_family_forward};
const ArchDescriptor kArchMiniCPM = {"minicpm", read_minicpm_config, load_granite_weights, llama_family_forward};

}  // namespace pllm
