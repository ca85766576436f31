// The llama-family transformer (llama, SmolLM2, TinyLlama, Llama 3.x; qwen2 reuses it):
//   x = embed(token)
//   per layer:  x += Wo · attention(rope(Wq·rmsnorm(x)), rope(Wk·…), Wv·…)
//               x += Wdown · (silu(Wgate·rmsnorm(x)) * (Wup·rmsnorm(x)))
//   logits = Wout · rmsnorm(x)
#include <cmath>

#include "model/arch.h"
#include "model/blocks.h"
#include "model/model.h"

namespace pllm {
namespace {

Result<ModelConfig> read_llama_config(const GgufFile& f) { return read_llama_family_config(f, "llama"); }
Result<ModelConfig> read_deci_config(const GgufFile& f) { return read_llama_family_config(f, "deci"); }

}  // namespace

Result<void> llama_family_load_weights(const GgufFile& f, const ModelConfig& c, ModelWeights& w) {
  const TensorInfo* emb = f.tensor("token_embd.weight");
  if (!emb) return make_error(Status::bad_format, f.path() + ": missing tensor 'token_embd.weight'");
  if (emb->dims.size() != 2 || emb->dims[1] == 0 || emb->dims[1] > (1u << 24))
    return make_error(Status::bad_format, f.path() + ": tensor 'token_embd.weight' has a bad shape");
  const int64_t n_vocab = int64_t(emb->dims[1]);
  PLLM_ASSIGN(w.token_embd, get_matrix(f, "token_embd.weight", n_vocab, c.n_embd));
  PLLM_ASSIGN(w.output_norm, get_vector(f, "output_norm.weight", c.n_embd));
  if (f.tensor("output.weight")) {
    PLLM_ASSIGN(w.output, get_matrix(f, "output.weight", n_vocab, c.n_embd));
  } else {
    w.output = w.token_embd;  // tied embeddings
  }
  w.layers.resize(size_t(c.n_layer));
  for (int i = 0; i < c.n_layer; ++i) {
    LayerWeights& L = w.layers[size_t(i)];
    const std::string p = "blk." + std::to_string(i) + ".";
    PLLM_ASSIGN(L.attn_norm, get_vector(f, p + "attn_norm.weight", c.n_embd));
    PLLM_ASSIGN(L.wq, get_matrix(f, p + "attn_q.weight", c.q_dim(), c.n_embd));
    PLLM_ASSIGN(L.wk, get_matrix(f, p + "attn_k.weight", c.kv_dim(), c.n_embd));
    PLLM_ASSIGN(L.wv, get_matrix(f, p + "attn_v.weight", c.kv_dim(), c.n_embd));
    if (c.qkv_bias) {
      PLLM_ASSIGN(L.bq, get_vector(f, p + "attn_q.bias", c.q_dim()));
      PLLM_ASSIGN(L.bk, get_vector(f, p + "attn_k.bias", c.kv_dim()));
      PLLM_ASSIGN(L.bv, get_vector(f, p + "attn_v.bias", c.kv_dim()));
    }
    PLLM_ASSIGN(L.wo, get_matrix(f, p + "attn_output.weight", c.n_embd, c.q_dim()));
    PLLM_ASSIGN(L.ffn_norm, get_vector(f, p + "ffn_norm.weight", c.n_embd));
    PLLM_ASSIGN(L.w_gate, get_matrix(f, p + "ffn_gate.weight", c.n_ff_at(i), c.n_embd));
    PLLM_ASSIGN(L.w_up, get_matrix(f, p + "ffn_up.weight", c.n_ff_at(i), c.n_embd));
    PLLM_ASSIGN(L.w_down, get_matrix(f, p + "ffn_down.weight", c.n_embd, c.n_ff_at(i)));
    // Output biases, which llama.cpp's llama and deci load when present (a compensated
    // prune writes them); its qwen2 does not, so neither do we.
    if (c.arch != "qwen2") {
      if (f.tensor(p + "attn_output.bias")) {
        PLLM_ASSIGN(L.bo, get_vector(f, p + "attn_output.bias", c.n_embd));
      }
      if (f.tensor(p + "ffn_down.bias")) {
        PLLM_ASSIGN(L.b_down, get_vector(f, p + "ffn_down.bias", c.n_embd));
      }
    }
  }
  // RoPE frequencies; Llama 3.x stores per-frequency divisors in rope_freqs.weight.
  const int half = c.n_rot / 2;
  const float* factors = nullptr;
  if (f.tensor("rope_freqs.weight")) {
    PLLM_ASSIGN(factors, get_vector(f, "rope_freqs.weight", half));
  }
  w.rope_inv_freq.resize(size_t(half));
  for (int i = 0; i < half; ++i) {
    double inv = std::pow(double(c.rope_base), -2.0 * i / double(c.n_rot));
    if (factors) inv /= double(factors[i]);
    w.rope_inv_freq[size_t(i)] = float(inv / double(c.rope_linear_scale));
  }
  return {};
}

Result<void> llama_family_forward(const Model& m, LayerOps& ops) {
  const ModelConfig& c = m.config();
  const ModelWeights& w = m.weights();
  const float scale = c.attn_scale > 0.0f ? c.attn_scale : 1.0f / std::sqrt(float(c.head_dim));
  const AttnBlockSpec attn{scale, RopeSpec{w.rope_inv_freq.data(), c.n_rot, c.rope_order == RopeOrder::neox}};
  PLLM_TRY(ops.embed(w.token_embd, 1.0f));
  for (int l = 0; l < c.n_layer; ++l) {
    if (ops.cancelled()) return make_error(Status::cancelled, "cancelled");
    attention_block(ops, l, w.layers[size_t(l)], attn);
    ffn_block(ops, l, w.layers[size_t(l)], c.n_ff_at(l), Glu::silu);
  }
  ops.head(w.output_norm, w.output);
  return {};
}

const ArchDescriptor kArchLlama = {"llama", read_llama_config, llama_family_load_weights,
                                   llama_family_forward};
const ArchDescriptor kArchDeci = {"deci", read_deci_config, llama_family_load_weights, llama_family_forward};

}  // namespace pllm
