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
  PLLM_ASSIGN(ModelConfig c, read_llama_family_config(f, kArch));
  const std::string p = std::string(kArch) + ".";
  c.rope_order = RopeOrder::neox;

  PLLM_ASSIGN(uint64_t window, f.get_u64(p + "attention.sliding_window"));
  if (window == 0 || window > (1u << 24))
    return make_error(Status::bad_format, f.path() + ": attention.sliding_window out of range");
  c.sliding_window = static_cast<int>(window);
  // llama.cpp fixes the pattern at 6 for gemma3; honour the key when a file has it.
  c.swa_pattern = 6;
  if (const GgufValue* v = f.find(p + "attention.sliding_window_pattern")) {
    if (v->type == GgufType::array)
      return make_error(Status::unsupported, f.path() + ": a per-layer sliding_window_pattern is not supported");
    PLLM_ASSIGN(uint64_t pat, f.get_u64(p + "attention.sliding_window_pattern"));
    if (pat == 0 || pat > 1024)
      return make_error(Status::bad_format, f.path() + ": attention.sliding_window_pattern out of range");
    c.swa_pattern = static_cast<int>(pat);
  }
  PLLM_ASSIGN(double base_local, f.get_f64_or(p + "rope.freq_base_swa", 10000.0));
  if (!(base_local > 0.0)) return make_error(Status::bad_format, f.path() + ": rope.freq_base_swa out of range");
  c.rope_base_local = static_cast<float>(base_local);

  // Queries are scaled by query_pre_attn_scalar^-0.5: head_dim for every size except the
  // 27B (62 layers), which uses n_embd / n_head (llama.cpp does the same).
  float qpas = float(c.head_dim);
  if (c.n_layer == 62) qpas = float(c.n_embd) / float(c.n_head);
  PLLM_ASSIGN(double scale, f.get_f64_or(p + "attention.scale", 1.0 / std::sqrt(double(qpas))));
  if (!(scale > 0.0)) return make_error(Status::bad_format, f.path() + ": attention.scale out of range");
  c.attn_scale = static_cast<float>(scale);
  return c;
}

Result<void> load_gemma3_weights(const GgufFile& f, const ModelConfig& c, ModelWeights& w) {
  const TensorInfo* emb = f.tensor("token_embd.weight");
  if (!emb) return make_error(Status::bad_format, f.path() + ": missing tensor 'token_embd.weight'");
  if (emb->dims.size() != 2 || emb->dims[1] == 0 || emb->dims[1] > (1u << 24))
    return make_error(Status::bad_format, f.path() + ": tensor 'token_embd.weight' has a bad shape");
  const int64_t n_vocab = int64_t(emb->dims[1]);
  const int E = c.n_embd, HD = c.head_dim;
  PLLM_ASSIGN(w.token_embd, get_matrix(f, "token_embd.weight", n_vocab, E));  // [n_vocab x n_embd]
  PLLM_ASSIGN(w.output_norm, get_vector(f, "output_norm.weight", E));         // [n_embd]
  if (f.tensor("output.weight")) {
    PLLM_ASSIGN(w.output, get_matrix(f, "output.weight", n_vocab, E));        // [n_vocab x n_embd]
  } else {
    w.output = w.token_embd;  // tied (every released Gemma 3)
  }
  w.layers.resize(size_t(c.n_layer));
  for (int i = 0; i < c.n_layer; ++i) {
    LayerWeights& L = w.layers[size_t(i)];
    const std::string p = "blk." + std::to_string(i) + ".";
    PLLM_ASSIGN(L.attn_norm, get_vector(f, p + "attn_norm.weight", E));                       // [n_embd]
    PLLM_ASSIGN(L.wq, get_matrix(f, p + "attn_q.weight", c.q_dim(), E));                      // [q_dim x n_embd]
    PLLM_ASSIGN(L.wk, get_matrix(f, p + "attn_k.weight", c.kv_dim(), E));                     // [kv_dim x n_embd]
    PLLM_ASSIGN(L.wv, get_matrix(f, p + "attn_v.weight", c.kv_dim(), E));                     // [kv_dim x n_embd]
    PLLM_ASSIGN(L.attn_q_norm, get_vector(f, p + "attn_q_norm.weight", HD));                  // [head_dim]
    PLLM_ASSIGN(L.attn_k_norm, get_vector(f, p + "attn_k_norm.weight", HD));                  // [head_dim]
    PLLM_ASSIGN(L.wo, get_matrix(f, p + "attn_output.weight", E, c.q_dim()));                 // [n_embd x q_dim]
    PLLM_ASSIGN(L.post_attn_norm, get_vector(f, p + "post_attention_norm.weight", E));        // [n_embd]
    PLLM_ASSIGN(L.ffn_norm, get_vector(f, p + "ffn_norm.weight", E));                         // [n_embd]
    PLLM_ASSIGN(L.w_gate, get_matrix(f, p + "ffn_gate.weight", c.n_ff_at(i), E));                   // [n_ff x n_embd]
    PLLM_ASSIGN(L.w_up, get_matrix(f, p + "ffn_up.weight", c.n_ff_at(i), E));                       // [n_ff x n_embd]
    PLLM_ASSIGN(L.w_down, get_matrix(f, p + "ffn_down.weight", E, c.n_ff_at(i)));                   // [n_embd x n_ff]
    PLLM_ASSIGN(L.post_ffn_norm, get_vector(f, p + "post_ffw_norm.weight", E));               // [n_embd]
  }
  // RoPE: global layers use rope_base and the linear scaling, local layers their own base, unscaled.
  const int half = c.n_rot / 2;
  w.rope_inv_freq.resize(size_t(half));
  w.rope_inv_freq_local.resize(size_t(half));
  for (int i = 0; i < half; ++i) {
    const double e = -2.0 * i / double(c.n_rot);
    w.rope_inv_freq[size_t(i)] = float(std::pow(double(c.rope_base), e) / double(c.rope_linear_scale));
    w.rope_inv_freq_local[size_t(i)] = float(std::pow(double(c.rope_base_local), e));
  }
  return {};
}

Result<void> gemma3_forward(const Model& m, LayerOps& ops) {
  const ModelConfig& c = m.config();
  const ModelWeights& w = m.weights();
  PLLM_TRY(ops.embed(w.token_embd, std::sqrt(float(c.n_embd))));
  for (int l = 0; l < c.n_layer; ++l) {
    if (ops.cancelled()) return make_error(Status::cancelled, "cancelled");
    // Local layers see the last sliding_window positions (the KV cache gives them their own
    // ring of that size) and use their own RoPE base.
    const float* inv_freq = c.is_local_layer(l) ? w.rope_inv_freq_local.data() : w.rope_inv_freq.data();
    attention_block(ops, l, w.layers[size_t(l)], {c.attn_scale, RopeSpec{inv_freq, c.n_rot, /*neox=*/true}});
    ffn_block(ops, l, w.layers[size_t(l)], c.n_ff_at(l), Glu::gelu_tanh);
  }
  ops.head(w.output_norm, w.output);
  return {};
}

}  // namespace

const ArchDescriptor kArchGemma3 = {kArch, read_gemma3_config, load_gemma3_weights, gemma3_forward};

}  // namespace pllm
