// Qwen3.5 (0.8B-9B dense; llama.cpp's "qwen35", src/models/qwen35.cpp): a hybrid of Gated
// DeltaNet layers and gated attention layers, every full_attention_interval-th layer (4) being
// attention unless attention.recurrent_layers lists them:
//   x = embed(token)
//   per layer: x += delta_net_block or gated_attention_block (model/blocks.h) over
//                   rmsnorm(x) * attn_norm
//              x += Wdown · (silu(Wgate·h) * (Wup·h)) with h = rmsnorm(x) * post_attention_norm
//   logits = Wout · rmsnorm(x) (tied to token_embd when the file has no output)
// The attention has per-head q/k norms, a sigmoid output gate (attn_q's rows per head: the
// query, then the gate) and partial NEOX RoPE over rope.dimension_count dims with llama.cpp's
// interleaved MRoPE sections, which for text rotate every pair by the position except those of
// the fourth section (positions (p, p, p, 0)). A multi-token-prediction block
// (nextn_predict_layers) follows the main layers in the file; the main pass ignores it.
#include <cmath>

#include "model/arch.h"
#include "model/blocks.h"
#include "model/model.h"

namespace pllm {
namespace {

Result<uint64_t> get_in(const GgufFile& f, const std::string& key, uint64_t lo, uint64_t hi) {
  PLLM_ASSIGN(uint64_t v, f.get_u64(key));
  if (v < lo || v > hi)
    return make_error(Status::bad_format, f.path() + ": " + key + " = " + std::to_string(v) + " is out of range (" +
                                              std::to_string(lo) + " to " + std::to_string(hi) + ")");
  return v;
}

// Which layers are DeltaNet: attention.recurrent_layers (bools or integers, one per block, the
// MTP blocks' included) when present, else all but every full_attention_interval-th.
Result<void> read_recurrent_layers(const GgufFile& f, ModelConfig& c) {
  const std::string key = "qwen35.attention.recurrent_layers";
  c.recurrent_layer.assign(size_t(c.n_layer), 0);
  if (f.find(key)) {
    PLLM_ASSIGN(c.recurrent_layer, read_layer_flags(f, key, c.n_layer));
  } else {
    PLLM_ASSIGN(uint64_t every, f.get_u64_or("qwen35.full_attention_interval", 4));
    if (every == 0 || every > 1024)
      return make_error(Status::bad_format, f.path() + ": qwen35.full_attention_interval is out of range");
    for (int l = 0; l < c.n_layer; ++l) c.recurrent_layer[size_t(l)] = (uint64_t(l) + 1) % every != 0;
  }
  bool attention = false;
  for (uint8_t r : c.recurrent_layer) attention |= r == 0;
  if (!attention) return make_error(Status::unsupported, f.path() + ": a qwen35 model without attention layers");
  return {};
}

Result<ModelConfig> read_qwen35_config(const GgufFile& f) {
  PLLM_ASSIGN(ModelConfig c, read_transformer_config(f, "qwen35"));
  c.rope_order = RopeOrder::neox;
  c.attn_out_gate = true;
  // block_count counts the MTP blocks after the main layers.
  PLLM_ASSIGN(uint64_t nextn, f.get_u64_or("qwen35.nextn_predict_layers", 0));
  if (nextn >= uint64_t(c.n_layer))
    return make_error(Status::bad_format, f.path() + ": qwen35.nextn_predict_layers = " + std::to_string(nextn) +
                                              " leaves no layers of the " + std::to_string(c.n_layer));
  c.n_layer -= int(nextn);
  c.n_ff_layer.resize(size_t(c.n_layer));
  c.n_ff = 0;
  for (int v : c.n_ff_layer) c.n_ff = std::max(c.n_ff, v);
  PLLM_ASSIGN(uint64_t taps, get_in(f, "qwen35.ssm.conv_kernel", 2, 64));
  // Real files: heads of 128, 16 to 64 of them; the bounds keep a state matrix set (v_heads *
  // head^2 floats per layer and sequence) within 256 MiB whatever a file claims.
  PLLM_ASSIGN(uint64_t head, get_in(f, "qwen35.ssm.state_size", 1, 512));
  PLLM_ASSIGN(uint64_t k_heads, get_in(f, "qwen35.ssm.group_count", 1, 256));
  PLLM_ASSIGN(uint64_t v_heads, get_in(f, "qwen35.ssm.time_step_rank", 1, 256));
  PLLM_ASSIGN(uint64_t inner, get_in(f, "qwen35.ssm.inner_size", 1, 1 << 20));
  // llama.cpp's delta-rule op needs square states (key head = value head) and whole groups.
  if (inner != v_heads * head)
    return make_error(Status::unsupported, f.path() + ": qwen35.ssm.inner_size " + std::to_string(inner) +
                                               " != time_step_rank * state_size (value heads the size of key heads)");
  if (v_heads % k_heads != 0)
    return make_error(Status::bad_format, f.path() + ": qwen35.ssm.time_step_rank is not a multiple of group_count");
  c.conv_taps = int(taps);
  c.dn_head = int(head);
  c.dn_k_heads = int(k_heads);
  c.dn_v_heads = int(v_heads);
  PLLM_TRY(read_recurrent_layers(f, c));
  PLLM_ASSIGN(std::vector<int64_t> sections, f.get_i64_array("qwen35.rope.dimension_sections"));
  if (sections.size() < 3 || sections.size() > 4)
    return make_error(Status::bad_format, f.path() + ": qwen35.rope.dimension_sections must have 3 or 4 values");
  for (size_t i = 0; i < sections.size(); ++i) {
    if (sections[i] < 0 || sections[i] > c.n_rot)
      return make_error(Status::bad_format, f.path() + ": qwen35.rope.dimension_sections is out of range");
    c.rope_sections[i] = int(sections[i]);
  }
  if (c.rope_sections[0] + c.rope_sections[1] + c.rope_sections[2] + c.rope_sections[3] == 0)
    return make_error(Status::bad_format, f.path() + ": qwen35.rope.dimension_sections are all zero");
  return c;
}

// ggml's interleaved MRoPE (ggml_mrope_cache_init with is_imrope) at a text token's positions
// (p, p, p, 0): pair i's sector is i mod the sections' sum; sectors 0, 3, 6, ... below 3 s0
// take the first position, 1, 4, ... below 3 s1 the second, 2, 5, ... below 3 s2 the third,
// the others the fourth (0: no rotation, an inverse frequency of 0).
void imrope_text_freqs(const ModelConfig& c, std::vector<float>& inv) {
  const int* s = c.rope_sections;
  const int total = s[0] + s[1] + s[2] + s[3];
  for (size_t i = 0; i < inv.size(); ++i) {
    const int sector = int(i) % total;
    const bool text = (sector % 3 == 0 && sector < 3 * s[0]) || (sector % 3 == 1 && sector < 3 * s[1]) ||
                      (sector % 3 == 2 && sector < 3 * s[2]);
    if (!text) inv[i] = 0.0f;
  }
}

Result<void> load_delta_net(const GgufFile& f, const ModelConfig& c, const std::string& p, LayerWeights& L) {
  const int E = c.n_embd, CD = c.dn_conv_dim(), VD = c.dn_value_dim(), NV = c.dn_v_heads;
  PLLM_ASSIGN(L.dn_qkv, get_matrix(f, p + "attn_qkv.weight", CD, E));
  PLLM_ASSIGN(L.dn_z, get_matrix(f, p + "attn_gate.weight", VD, E));
  PLLM_ASSIGN(L.dn_beta, get_matrix(f, p + "ssm_beta.weight", NV, E));
  PLLM_ASSIGN(L.dn_alpha, get_matrix(f, p + "ssm_alpha.weight", NV, E));
  PLLM_ASSIGN(L.dn_out, get_matrix(f, p + "ssm_out.weight", E, VD));
  PLLM_ASSIGN(Matrix k, get_matrix(f, p + "ssm_conv1d.weight", CD, c.conv_taps));
  if (k.type != TensorType::F32)
    return make_error(Status::unsupported, f.path() + ": tensor '" + p + "ssm_conv1d.weight' must be F32");
  L.dn_conv = reinterpret_cast<const float*>(k.data);
  PLLM_ASSIGN(L.dn_dt, get_vector(f, p + "ssm_dt.bias", NV));
  PLLM_ASSIGN(L.dn_a, get_vector(f, p + "ssm_a", NV));
  PLLM_ASSIGN(L.dn_norm, get_vector(f, p + "ssm_norm.weight", c.dn_head));
  return {};
}

Result<void> load_gated_attention(const GgufFile& f, const ModelConfig& c, const std::string& p, LayerWeights& L) {
  const int E = c.n_embd, QD = c.q_dim(), KD = c.kv_dim();
  PLLM_ASSIGN(L.wq, get_matrix(f, p + "attn_q.weight", 2 * int64_t(QD), E));
  PLLM_ASSIGN(L.wk, get_matrix(f, p + "attn_k.weight", KD, E));
  PLLM_ASSIGN(L.wv, get_matrix(f, p + "attn_v.weight", KD, E));
  PLLM_ASSIGN(L.attn_q_norm, get_vector(f, p + "attn_q_norm.weight", c.head_dim));
  PLLM_ASSIGN(L.attn_k_norm, get_vector(f, p + "attn_k_norm.weight", c.head_dim));
  PLLM_ASSIGN(L.wo, get_matrix(f, p + "attn_output.weight", E, QD));
  return {};
}

Result<void> load_qwen35_weights(const GgufFile& f, const ModelConfig& c, ModelWeights& w) {
  PLLM_TRY(load_embeddings(f, c, w));
  w.layers.resize(size_t(c.n_layer));
  for (int l = 0; l < c.n_layer; ++l) {
    LayerWeights& L = w.layers[size_t(l)];
    const std::string p = "blk." + std::to_string(l) + ".";
    PLLM_ASSIGN(L.attn_norm, get_vector(f, p + "attn_norm.weight", c.n_embd));
    if (c.is_recurrent(l)) {
      PLLM_TRY(load_delta_net(f, c, p, L));
    } else {
      PLLM_TRY(load_gated_attention(f, c, p, L));
    }
    // The FFN's input norm is named post_attention_norm (llama.cpp: attn_post_norm).
    PLLM_ASSIGN(L.ffn_norm, get_vector(f, p + "post_attention_norm.weight", c.n_embd));
    const int F = c.n_ff_at(l);
    PLLM_ASSIGN(L.w_gate, get_matrix(f, p + "ffn_gate.weight", F, c.n_embd));
    PLLM_ASSIGN(L.w_up, get_matrix(f, p + "ffn_up.weight", F, c.n_embd));
    PLLM_ASSIGN(L.w_down, get_matrix(f, p + "ffn_down.weight", c.n_embd, F));
  }
  w.rope_inv_freq = rope_inv_freq(c.rope_base, c.n_rot, 1.0f);
  imrope_text_freqs(c, w.rope_inv_freq);
  return {};
}

Result<void> qwen35_forward(const Model& m, LayerOps& ops) {
  const ModelConfig& c = m.config();
  const ModelWeights& w = m.weights();
  const float scale = 1.0f / std::sqrt(float(c.head_dim));
  PLLM_TRY(ops.embed(w.token_embd, 1.0f));
  for (int l = 0; l < c.n_layer; ++l) {
    if (ops.cancelled()) return make_error(Status::cancelled, "cancelled");
    if (ops.skipped(l)) continue;
    const LayerWeights& L = w.layers[size_t(l)];
    if (c.is_recurrent(l)) {
      delta_net_block(ops, l, L);
    } else {
      gated_attention_block(ops, l, L, {scale, layer_rope(c, w, l)});
    }
    ffn_block(ops, l, L, c.n_ff_at(l), Glu::silu);
  }
  ops.head(w.output_norm, w.output, {});
  return {};
}

}  // namespace

const ArchDescriptor kArchQwen35 = {"qwen35", read_qwen35_config, load_qwen35_weights, qwen35_forward};

}  // namespace pllm
