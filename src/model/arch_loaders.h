// Loaders of the tensors the architectures share, under llama.cpp's GGUF tensor names, so
// that an architecture file states only what its layers add or lack (biases, q/k norms,
// post-norms) and every architecture reports a missing or misshapen tensor the same way
// (model/weights.h: get_matrix, get_vector).
#pragma once
#include <string>
#include <vector>

#include "base/result.h"
#include "gguf/gguf.h"
#include "model/config.h"
#include "model/model.h"

namespace pllm {

// Whether an architecture's layers carry a tensor.
enum class Presence {
  absent,    // never loaded, even when the file has it
  optional,  // loaded when the file has it (then checked like a required one)
  required,  // a file without it is an error
};

// What a layer's attention has besides attn_norm, attn_q, attn_k, attn_v and attn_output.
struct AttnTensors {
  Presence qkv_bias = Presence::absent;   // attn_q.bias [q_dim], attn_k.bias, attn_v.bias [kv_dim]
  Presence q_k_norm = Presence::absent;   // attn_q_norm, attn_k_norm [head_dim]: per-head RMSNorm before RoPE
  Presence out_bias = Presence::absent;   // attn_output.bias [n_embd]
  Presence post_norm = Presence::absent;  // post_attention_norm [n_embd]: RMSNorm of the output
  // attn_v: optional in gemma4 (without it the values are the keys' projection before the k
  // norm, llama.cpp's use_alternative_attention: wv is then attn_k).
  Presence v = Presence::required;
};

// What a layer's gated feed-forward has besides ffn_norm, ffn_gate, ffn_up and ffn_down.
struct FfnTensors {
  Presence down_bias = Presence::absent;  // ffn_down.bias [n_embd]
  Presence post_norm = Presence::absent;  // post_ffw_norm [n_embd]: RMSNorm of the output
  bool fused_gate_up = false;  // phi3: one ffn_up [2 n_ff x n_embd] holds the gate, then up
};

// token_embd [n_vocab x n_embd] (n_vocab: its rows), output_norm [n_embd], and output
// [n_vocab x n_embd], or the embedding itself when the file has no output (tied).
// output_norm: the final norm's name (lfm2 writes token_embd_norm.weight).
Result<void> load_embeddings(const GgufFile& f, const ModelConfig& c, ModelWeights& w,
                             const char* output_norm = "output_norm.weight");

// Layer `layer`'s attn_norm [n_embd], attn_q [q_dim x n_embd], attn_k, attn_v [kv_dim x n_embd]
// (or one fused attn_qkv [q_dim + 2 kv_dim x n_embd], read as the three), attn_output
// [n_embd x q_dim] and the tensors of `t`, into L; the layer's own sizes (ModelConfig::q_dim_at,
// kv_dim_at, head_dim_at). A layer that shares another's keys and values (ModelConfig::shares_kv)
// loads no attn_k / attn_v / attn_k_norm: it never computes keys or values.
Result<void> load_attention(const GgufFile& f, const ModelConfig& c, int layer, LayerWeights& L,
                            const AttnTensors& t);

// Layer `layer`'s ffn_norm [n_embd], ffn_gate and ffn_up [n_ff_at(layer) x n_embd], ffn_down
// [n_embd x n_ff_at(layer)] and the tensors of `t`, into L.
Result<void> load_gated_ffn(const GgufFile& f, const ModelConfig& c, int layer, LayerWeights& L,
                            const FfnTensors& t);

// Convolution layer `layer` of a hybrid model (lfm2): attn_norm [n_embd] (the block's input
// norm), shortconv.in_proj [3 n_embd x n_embd] (read as b, c, x), shortconv.conv
// [n_embd][conv_taps] (F32, as llama.cpp writes and keeps it) and shortconv.out_proj.
Result<void> load_short_conv(const GgufFile& f, const ModelConfig& c, int layer, LayerWeights& L);

// Every layer (c.n_layer of them, into w.layers): load_attention (load_short_conv on a
// recurrent layer), then load_gated_ffn.
Result<void> load_layers(const GgufFile& f, const ModelConfig& c, ModelWeights& w, const AttnTensors& attn,
                         const FfnTensors& ffn);

// RoPE inverse frequencies [n_rot / 2]: base^(-2i / n_rot) / factors[i] / linear_scale
// (factors: null for none).
std::vector<float> rope_inv_freq(float base, int n_rot, float linear_scale, const float* factors = nullptr);

// rope_freqs.weight [n_rot / 2], the per-frequency divisors Llama 3.x files carry, when the
// file has it; null otherwise. An error for a LongRoPE file (c.longrope).
Result<const float*> load_rope_factors(const GgufFile& f, const ModelConfig& c);

// LongRoPE (phi3): w.rope_inv_freq from rope_factors_short [n_rot / 2] and, when the file has
// rope_factors_long, w.rope_inv_freq_long (c.rope_orig_ctx must then be set). Without
// factors, plain frequencies.
Result<void> load_longrope(const GgufFile& f, const ModelConfig& c, ModelWeights& w);

}  // namespace pllm
