#include "model/arch_loaders.h"

#include <cmath>

namespace pllm {
namespace {

// The vector `name` [n] as `p` says: null when absent (or optional and not in the file).
Result<const float*> get_vector_as(const GgufFile& f, Presence p, const std::string& name, int64_t n) {
  if (p == Presence::absent || (p == Presence::optional && !f.tensor(name))) return static_cast<const float*>(nullptr);
  return get_vector(f, name, n);
}

// "blk.<layer>.", the prefix of every tensor of that layer.
std::string layer_prefix(int layer) { return "blk." + std::to_string(layer) + "."; }

}  // namespace

Result<void> load_embeddings(const GgufFile& f, const ModelConfig& c, ModelWeights& w, const char* output_norm) {
  const TensorInfo* emb = f.tensor("token_embd.weight");
  if (!emb) return make_error(Status::bad_format, f.path() + ": missing tensor 'token_embd.weight'");
  if (emb->dims.size() != 2 || emb->dims[1] == 0 || emb->dims[1] > (1u << 24))
    return make_error(Status::bad_format, f.path() + ": tensor 'token_embd.weight' has a bad shape");
  const int64_t n_vocab = int64_t(emb->dims[1]);
  PLLM_ASSIGN(w.token_embd, get_matrix(f, "token_embd.weight", n_vocab, c.n_embd));
  PLLM_ASSIGN(w.output_norm, get_vector(f, output_norm, c.n_embd));
  if (f.tensor("output.weight")) {
    PLLM_ASSIGN(w.output, get_matrix(f, "output.weight", n_vocab, c.n_embd));
  } else {
    w.output = w.token_embd;  // tied embeddings
  }
  return {};
}

Result<void> load_attention(const GgufFile& f, const ModelConfig& c, int layer, LayerWeights& L,
                            const AttnTensors& t) {
  const std::string p = layer_prefix(layer);
  const int E = c.n_embd;
  const int QD = c.q_dim_at(layer), KD = c.kv_dim_at(layer), HD = c.head_dim_at(layer);
  PLLM_ASSIGN(L.attn_norm, get_vector(f, p + "attn_norm.weight", E));
  if (c.shares_kv(layer)) {
    PLLM_ASSIGN(L.wq, get_matrix(f, p + "attn_q.weight", QD, E));
  } else if (f.tensor(p + "attn_qkv.weight")) {
    // One fused [q_dim + 2 kv_dim] tensor (phi3; any file llama.cpp's create_tensor_qkv reads):
    // its three row ranges are the three products, and a fused bias splits the same way.
    PLLM_ASSIGN(Matrix qkv, get_matrix(f, p + "attn_qkv.weight", QD + 2 * int64_t(KD), E));
    L.wq = row_slice(qkv, 0, QD);
    L.wk = row_slice(qkv, QD, KD);
    L.wv = row_slice(qkv, QD + KD, KD);
    PLLM_ASSIGN(const float* b, get_vector_as(f, t.qkv_bias, p + "attn_qkv.bias", QD + 2 * int64_t(KD)));
    if (b) {
      L.bq = b;
      L.bk = b + QD;
      L.bv = b + QD + KD;
    }
  } else {
    PLLM_ASSIGN(L.wq, get_matrix(f, p + "attn_q.weight", QD, E));
    PLLM_ASSIGN(L.wk, get_matrix(f, p + "attn_k.weight", KD, E));
    if (t.v == Presence::optional && !f.tensor(p + "attn_v.weight")) {
      L.wv = L.wk;
    } else {
      PLLM_ASSIGN(L.wv, get_matrix(f, p + "attn_v.weight", KD, E));
    }
  }
  if (!L.bq && !c.shares_kv(layer)) {
    PLLM_ASSIGN(L.bq, get_vector_as(f, t.qkv_bias, p + "attn_q.bias", QD));
    PLLM_ASSIGN(L.bk, get_vector_as(f, t.qkv_bias, p + "attn_k.bias", KD));
    PLLM_ASSIGN(L.bv, get_vector_as(f, t.qkv_bias, p + "attn_v.bias", KD));
    if (!L.bq != !L.bk || !L.bq != !L.bv)
      return make_error(Status::bad_format, f.path() + ": layer " + std::to_string(layer) +
                                                " has some of the attn_q/k/v biases but not all three");
  }
  PLLM_ASSIGN(L.attn_q_norm, get_vector_as(f, t.q_k_norm, p + "attn_q_norm.weight", HD));
  if (!c.shares_kv(layer)) {
    PLLM_ASSIGN(L.attn_k_norm, get_vector_as(f, t.q_k_norm, p + "attn_k_norm.weight", HD));
  }
  PLLM_ASSIGN(L.wo, get_matrix(f, p + "attn_output.weight", E, QD));
  PLLM_ASSIGN(L.bo, get_vector_as(f, t.out_bias, p + "attn_output.bias", E));
  PLLM_ASSIGN(L.post_attn_norm, get_vector_as(f, t.post_norm, p + "post_attention_norm.weight", E));
  return {};
}

Result<void> load_gated_ffn(const GgufFile& f, const ModelConfig& c, int layer, LayerWeights& L,
                            const FfnTensors& t) {
  const std::string p = layer_prefix(layer);
  const int E = c.n_embd, F = c.n_ff_at(layer);
  PLLM_ASSIGN(L.ffn_norm, get_vector(f, p + "ffn_norm.weight", E));
  if (t.fused_gate_up) {  // ffn_up [2 n_ff x n_embd]: the gate's rows, then the up rows
    PLLM_ASSIGN(Matrix gu, get_matrix(f, p + "ffn_up.weight", 2 * int64_t(F), E));
    L.w_gate = row_slice(gu, 0, F);
    L.w_up = row_slice(gu, F, F);
  } else {
    PLLM_ASSIGN(L.w_gate, get_matrix(f, p + "ffn_gate.weight", F, E));
    PLLM_ASSIGN(L.w_up, get_matrix(f, p + "ffn_up.weight", F, E));
  }
  PLLM_ASSIGN(L.w_down, get_matrix(f, p + "ffn_down.weight", E, F));
  PLLM_ASSIGN(L.b_down, get_vector_as(f, t.down_bias, p + "ffn_down.bias", E));
  PLLM_ASSIGN(L.post_ffn_norm, get_vector_as(f, t.post_norm, p + "post_ffw_norm.weight", E));
  return {};
}

Result<void> load_short_conv(const GgufFile& f, const ModelConfig& c, int layer, LayerWeights& L) {
  const std::string p = layer_prefix(layer);
  const int E = c.n_embd;
  PLLM_ASSIGN(L.attn_norm, get_vector(f, p + "attn_norm.weight", E));
  PLLM_ASSIGN(Matrix in, get_matrix(f, p + "shortconv.in_proj.weight", 3 * int64_t(E), E));
  L.conv_b = row_slice(in, 0, E);
  L.conv_c = row_slice(in, E, E);
  L.conv_x = row_slice(in, 2 * int64_t(E), E);
  PLLM_ASSIGN(Matrix k, get_matrix(f, p + "shortconv.conv.weight", E, c.conv_taps));
  if (k.type != TensorType::F32)
    return make_error(Status::unsupported, f.path() + ": tensor '" + p + "shortconv.conv.weight' must be F32");
  L.conv_kernel = reinterpret_cast<const float*>(k.data);
  PLLM_ASSIGN(L.conv_out, get_matrix(f, p + "shortconv.out_proj.weight", E, E));
  return {};
}

Result<void> load_layers(const GgufFile& f, const ModelConfig& c, ModelWeights& w, const AttnTensors& attn,
                         const FfnTensors& ffn) {
  w.layers.resize(size_t(c.n_layer));
  for (int l = 0; l < c.n_layer; ++l) {
    if (c.is_recurrent(l)) {
      PLLM_TRY(load_short_conv(f, c, l, w.layers[size_t(l)]));
    } else {
      PLLM_TRY(load_attention(f, c, l, w.layers[size_t(l)], attn));
    }
    PLLM_TRY(load_gated_ffn(f, c, l, w.layers[size_t(l)], ffn));
  }
  return {};
}

std::vector<float> rope_inv_freq(float base, int n_rot, float linear_scale, const float* factors) {
  std::vector<float> out(size_t(n_rot / 2));
  for (int i = 0; i < n_rot / 2; ++i) {
    double inv = std::pow(double(base), -2.0 * i / double(n_rot));
    if (factors) inv /= double(factors[i]);
    out[size_t(i)] = float(inv / double(linear_scale));
  }
  return out;
}

Result<const float*> load_rope_factors(const GgufFile& f, const ModelConfig& c) {
  if (c.longrope)
    return make_error(Status::unsupported, f.path() + ": LongRoPE scaling is not supported for " + c.arch);
  return get_vector_as(f, Presence::optional, "rope_freqs.weight", c.n_rot / 2);
}

Result<void> load_longrope(const GgufFile& f, const ModelConfig& c, ModelWeights& w) {
  PLLM_ASSIGN(const float* shrt, get_vector_as(f, Presence::optional, "rope_factors_short.weight", c.n_rot / 2));
  PLLM_ASSIGN(const float* lng, get_vector_as(f, Presence::optional, "rope_factors_long.weight", c.n_rot / 2));
  if (!shrt != !lng)
    return make_error(Status::bad_format, f.path() + ": rope_factors_short and rope_factors_long come together");
  if (f.tensor("rope_freqs.weight"))
    return make_error(Status::bad_format, f.path() + ": rope_freqs.weight beside LongRoPE factors");
  w.rope_inv_freq = rope_inv_freq(c.rope_base, c.n_rot, c.rope_linear_scale, shrt);
  if (lng) {
    if (c.rope_orig_ctx <= 0)
      return make_error(Status::bad_format, f.path() + ": rope_factors_long without " + c.arch +
                                                ".rope.scaling.original_context_length");
    w.rope_inv_freq_long = rope_inv_freq(c.rope_base, c.n_rot, c.rope_linear_scale, lng);
  }
  return {};
}

}  // namespace pllm
