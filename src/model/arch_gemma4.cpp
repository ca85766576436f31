// Gemma 4 dense text models (E2B / E4B shapes), as llama.cpp's gemma4 graph computes them
// (src/models/gemma4.cpp, hyper-parameters from conversion/gemma.py's Gemma4Model):
//   x = embed(token) * sqrt(n_embd)
//   per-layer inputs (n_embd_per_layer P > 0), per row, block l of n_layer blocks of P:
//     in_l = (rmsnorm((W_pl · x)_l / sqrt(n_embd)) * per_layer_proj_norm + ple_table[token]_l * sqrt(P)) / sqrt(2)
//   per layer l (local: attention.sliding_window_pattern[l], a sliding-window layer):
//     h = rmsnorm(x) * attn_norm;  q = per-head rmsnorm(Wq·h) * q_norm, then NEOX RoPE
//     unless the layer shares an earlier layer's keys and values (shared_kv_layers, the last
//     ones): k = per-head rmsnorm(Wk·h) * k_norm, RoPE; v = per-head rmsnorm(Wv·h) (no weight;
//     without attn_v, v comes from Wk·h before its norm)
//     att = softmax(q·k) v (scale 1: the q/k norms set the size), causal, local layers only
//           pos_q - pos_k < sliding_window
//     x += rmsnorm(Wo·att) * post_attention_norm
//     x += rmsnorm(Wdown·(gelu_tanh(Wgate·h) * (Wup·h))) * post_ffw_norm   (h = rmsnorm(x) * ffn_norm)
//     x += rmsnorm(Wproj·(gelu_tanh(Winp_gate·x) * in_l)) * post_norm     (per-layer inputs)
//     x *= layer_output_scale
//   logits = final_softcap * tanh(token_embd · (rmsnorm(x) * output_norm) / final_softcap)
// Local layers have their own head size (key_length_swa) and RoPE (rope.dimension_count_swa,
// rope.freq_base_swa); full layers use rope.freq_base with rope_freqs.weight, whose factors
// of 1e30 leave all but the first pairs unrotated ("proportional" RoPE). A shared layer reads
// the KV of the last local (local layer) or full (full layer) layer before the shared ones, as
// llama.cpp's KV cache maps them. Gemma 4's norm weights are stored as they multiply (no +1).
// MoE files (26B-A4B: ffn_gate_inp) are refused.
#include <cmath>

#include "model/arch.h"
#include "model/blocks.h"
#include "model/model.h"

namespace pllm {
namespace {

constexpr const char* kArch = "gemma4";

Error bad(const GgufFile& f, const std::string& what) { return make_error(Status::bad_format, f.path() + ": " + what); }

Result<int> read_dim(const GgufFile& f, const std::string& key, int dflt) {
  PLLM_ASSIGN(uint64_t v, f.get_u64_or(key, uint64_t(dflt)));
  if (v > (1u << 16)) return bad(f, key + " = " + std::to_string(v) + " is out of range");
  return int(v);
}

// Per-layer head sizes and RoPE widths: key_length is the full layers', key_length_swa the
// local layers' (llama.cpp's n_embd_head_k_full / _swa; the value lengths must match).
Result<void> read_head_sizes(const GgufFile& f, ModelConfig& c) {
  const std::string p = std::string(kArch) + ".";
  const int full = c.head_dim;
  PLLM_ASSIGN(const int swa, read_dim(f, p + "attention.key_length_swa", full));
  PLLM_ASSIGN(const int swa_v, read_dim(f, p + "attention.value_length_swa", swa));
  if (swa_v != swa)
    return make_error(Status::unsupported, f.path() + ": value_length_swa " + std::to_string(swa_v) +
                                               " != key_length_swa " + std::to_string(swa) + " is not supported");
  PLLM_TRY(check_head_dim(f, swa));
  PLLM_ASSIGN(c.n_rot_local, read_dim(f, p + "rope.dimension_count_swa", std::min(c.n_rot, swa)));
  if (c.n_rot_local % 2 != 0 || c.n_rot_local > swa)
    return bad(f, "rope.dimension_count_swa " + std::to_string(c.n_rot_local) + " must be even and at most " +
                      std::to_string(swa));
  c.head_dim_layer.resize(size_t(c.n_layer));
  for (int l = 0; l < c.n_layer; ++l) c.head_dim_layer[size_t(l)] = c.is_local_layer(l) ? swa : full;
  c.head_dim = std::max(full, swa);  // the widest sizes the scratch
  return {};
}

// The last shared_kv_layers layers attend over the KV of layer n - 2 (local) or n - 1 (full),
// n the first shared layer: llama.cpp's reuse map for gemma3n / gemma4, which needs those two
// layers to be of the shared layers' kinds.
Result<void> read_kv_sharing(const GgufFile& f, ModelConfig& c) {
  PLLM_ASSIGN(uint64_t shared, f.get_u64_or(std::string(kArch) + ".attention.shared_kv_layers", 0));
  if (shared == 0) return {};
  if (shared + 2 > uint64_t(c.n_layer))
    return bad(f, "attention.shared_kv_layers = " + std::to_string(shared) + " leaves fewer than 2 of the " +
                      std::to_string(c.n_layer) + " layers with their own keys and values");
  const int first = c.n_layer - int(shared);
  c.kv_source.resize(size_t(c.n_layer));
  for (int l = 0; l < c.n_layer; ++l) {
    const int src = l < first ? l : first - (c.is_local_layer(l) ? 2 : 1);
    if (c.is_local_layer(src) != c.is_local_layer(l))
      return bad(f, "layer " + std::to_string(l) + " would share the keys and values of layer " + std::to_string(src) +
                        ", a layer of the other kind (sliding window / full attention)");
    c.kv_source[size_t(l)] = src;
  }
  return {};
}

Result<ModelConfig> read_gemma4_config(const GgufFile& f) {
  const std::string p = std::string(kArch) + ".";
  PLLM_ASSIGN(uint64_t experts, f.get_u64_or(p + "expert_count", 0));
  if (experts > 0 || f.tensor("blk.0.ffn_gate_inp.weight"))
    return make_error(Status::unsupported, f.path() + ": Gemma 4 mixture-of-experts models (26B-A4B) are not "
                                                      "supported, only the dense ones (E2B, E4B)");
  PLLM_ASSIGN(ModelConfig c, read_transformer_config(f, kArch));
  c.rope_order = RopeOrder::neox;
  PLLM_TRY(read_sliding_window(f, c, 0, 0, 10000.0, /*per_layer_pattern=*/true));
  if (c.local_layer.empty()) return bad(f, "gemma4 needs attention.sliding_window_pattern as one bool per layer");
  PLLM_TRY(read_head_sizes(f, c));
  PLLM_TRY(read_kv_sharing(f, c));
  PLLM_ASSIGN(c.n_embd_per_layer, read_dim(f, p + "embedding_length_per_layer_input", 0));
  // A table row is read block by block on the stack (cpu_layers.cpp: per_layer_inputs).
  if (c.n_embd_per_layer > 8192) return bad(f, "embedding_length_per_layer_input is out of range");
  PLLM_ASSIGN(double cap, f.get_f64_or(p + "final_logit_softcapping", 0.0));
  if (!(cap >= 0.0)) return bad(f, "final_logit_softcapping out of range");
  c.final_softcap = float(cap);
  c.attn_scale = 1.0f;  // llama.cpp: f_attention_scale = 1 (the q/k norms set the scores' size)
  return c;
}

// One layer's per-layer input tensors and output scale.
Result<void> load_layer_extras(const GgufFile& f, const ModelConfig& c, int l, LayerWeights& L) {
  const std::string p = "blk." + std::to_string(l) + ".";
  if (f.tensor(p + "ffn_gate_inp.weight"))
    return make_error(Status::unsupported, f.path() + ": layer " + std::to_string(l) +
                                               " has experts (ffn_gate_inp): Gemma 4 MoE is not supported");
  if (c.n_embd_per_layer > 0) {
    PLLM_ASSIGN(L.ple_gate, get_matrix(f, p + "inp_gate.weight", c.n_embd_per_layer, c.n_embd));
    PLLM_ASSIGN(L.ple_proj, get_matrix(f, p + "proj.weight", c.n_embd, c.n_embd_per_layer));
    PLLM_ASSIGN(L.ple_post_norm, get_vector(f, p + "post_norm.weight", c.n_embd));
  }
  if (f.tensor(p + "layer_output_scale.weight")) {
    PLLM_ASSIGN(const float* s, get_vector(f, p + "layer_output_scale.weight", 1));
    L.out_scale = *s;
  }
  return {};
}

Result<void> load_per_layer_embeddings(const GgufFile& f, const ModelConfig& c, ModelWeights& w) {
  const int64_t W = int64_t(c.n_layer) * c.n_embd_per_layer;
  PLLM_ASSIGN(w.ple_token_embd, get_matrix(f, "per_layer_token_embd.weight", w.token_embd.rows, W));
  // Each layer's block of a row is read on its own: it must start on a quantisation block.
  const int64_t blk = type_traits(uint32_t(w.ple_token_embd.type))->block_elems;  // a type get_matrix took
  if (c.n_embd_per_layer % blk != 0)
    return make_error(Status::unsupported, f.path() + ": per_layer_token_embd's type has blocks of " +
                                               std::to_string(blk) + " values, which do not divide " +
                                               "embedding_length_per_layer_input " + std::to_string(c.n_embd_per_layer));
  PLLM_ASSIGN(w.ple_model_proj, get_matrix(f, "per_layer_model_proj.weight", W, c.n_embd));
  PLLM_ASSIGN(w.ple_proj_norm, get_vector(f, "per_layer_proj_norm.weight", c.n_embd_per_layer));
  return {};
}

Result<void> load_gemma4_weights(const GgufFile& f, const ModelConfig& c, ModelWeights& w) {
  PLLM_TRY(load_embeddings(f, c, w));
  w.layers.resize(size_t(c.n_layer));
  bool any_full = false;
  for (int l = 0; l < c.n_layer; ++l) {
    LayerWeights& L = w.layers[size_t(l)];
    PLLM_TRY(load_attention(f, c, l, L,
                            {.q_k_norm = Presence::required, .post_norm = Presence::required, .v = Presence::optional}));
    PLLM_TRY(load_gated_ffn(f, c, l, L, {.post_norm = Presence::required}));
    PLLM_TRY(load_layer_extras(f, c, l, L));
    any_full |= !c.is_local_layer(l);
  }
  if (c.n_embd_per_layer > 0) PLLM_TRY(load_per_layer_embeddings(f, c, w));
  // rope_freqs (the full layers' proportional RoPE) is required where there is a full layer.
  const float* factors = nullptr;
  if (any_full) {
    PLLM_ASSIGN(factors, get_vector(f, "rope_freqs.weight", c.n_rot / 2));
  }
  w.rope_inv_freq = rope_inv_freq(c.rope_base, c.n_rot, c.rope_linear_scale, factors);
  w.rope_inv_freq_local = rope_inv_freq(c.rope_base_local, c.n_rot_local, 1.0f);
  return {};
}

Result<void> gemma4_forward(const Model& m, LayerOps& ops) {
  const ModelConfig& c = m.config();
  const ModelWeights& w = m.weights();
  const int P = c.n_embd_per_layer;
  PLLM_TRY(ops.embed(w.token_embd, std::sqrt(float(c.n_embd))));
  if (P > 0) {
    ops.project("per_layer_model_proj", -1, {{&w.ple_model_proj, Act::ple}}, Act::x);
    PLLM_TRY(ops.per_layer_inputs({&w.ple_token_embd, w.ple_proj_norm, 1.0f / std::sqrt(float(c.n_embd)),
                                   std::sqrt(float(P)), 1.0f / std::sqrt(2.0f)},
                                  Act::ple));
  }
  for (int l = 0; l < c.n_layer; ++l) {
    if (ops.cancelled()) return make_error(Status::cancelled, "cancelled");
    if (ops.skipped(l)) continue;
    const LayerWeights& L = w.layers[size_t(l)];
    const bool local = c.is_local_layer(l);
    AttnBlockSpec spec{AttnScore(c.attn_scale),
                       local ? RopeSpec{w.rope_inv_freq_local.data(), c.n_rot_local, true}
                             : RopeSpec{w.rope_inv_freq.data(), c.n_rot, true}};
    spec.v_norm = true;
    spec.own_kv = !c.shares_kv(l);
    attention_block(ops, l, L, spec);
    ffn_block(ops, l, L, c.n_ff_at(l), Glu::gelu_tanh);
    if (P > 0) {  // x += rmsnorm(Wproj · (gelu(Wgate · x) * in_l)) * post_norm
      ops.project("per_layer_gate", l, {{&L.ple_gate, Act::gate}}, Act::x);
      ops.per_layer_input(l, Act::ple, Act::up);
      ops.glu(l, Glu::gelu_tanh, P);
      ops.project("per_layer_proj", l, {{&L.ple_proj, Act::proj}}, Act::gate);
      ops.residual(l, Act::proj, nullptr, L.ple_post_norm, 1.0f);
    }
    if (L.out_scale != 1.0f) ops.scale(l, Act::x, L.out_scale);
  }
  ops.head(w.output_norm, w.output, {.softcap = c.final_softcap});
  return {};
}

}  // namespace

const ArchDescriptor kArchGemma4 = {kArch, read_gemma4_config, load_gemma4_weights, gemma4_forward};

}  // namespace pllm
