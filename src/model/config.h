// Hyper-parameters of a transformer, read from GGUF metadata.
#pragma once
#include <string>
#include <vector>

#include "base/result.h"
#include "gguf/gguf.h"

namespace pllm {

enum class RopeOrder { normal, neox };  // normal: adjacent pairs (llama); neox: halves (qwen2)

struct ModelConfig {
  std::string arch;     // general.architecture
  int n_layer = 0;      // {arch}.block_count
  int n_embd = 0;       // {arch}.embedding_length
  int n_ff = 0;         // the widest layer's feed-forward size (sizes scratch); per layer: n_ff_at(l)
  // {arch}.feed_forward_length: one value for every layer, or an array of n_layer values
  // (pruned models; llama.cpp reads it the same way). [n_layer], each > 0.
  std::vector<int> n_ff_layer;
  int n_head = 0;       // {arch}.attention.head_count
  int n_head_kv = 0;    // {arch}.attention.head_count_kv (GQA), defaults to n_head
  int head_dim = 0;     // {arch}.attention.key_length, defaults to n_embd / n_head
  int n_rot = 0;        // {arch}.rope.dimension_count, defaults to head_dim
  int n_vocab = 0;      // rows of token_embd
  int n_ctx_train = 0;  // {arch}.context_length
  float rope_base = 10000.0f;  // {arch}.rope.freq_base
  float rope_linear_scale = 1.0f;  // positions are divided by {arch}.rope.scaling.factor (linear)
  float rms_eps = 1e-5f;           // {arch}.attention.layer_norm_rms_epsilon
  RopeOrder rope_order = RopeOrder::normal;
  float attn_scale = 0.0f;         // multiplies q·k before the softmax; 0 = 1/sqrt(head_dim)

  // Sliding-window attention (Gemma 3): "local" layers see only the last sliding_window
  // positions (pos_q - pos_k < sliding_window) and use their own RoPE base; every
  // swa_pattern-th layer ((l + 1) % swa_pattern == 0) is "global" (full causal attention,
  // rope_base and the linear rope scaling). sliding_window 0: every layer is global.
  int sliding_window = 0;          // {arch}.attention.sliding_window
  int swa_pattern = 0;             // {arch}.attention.sliding_window_pattern (gemma3: 6)
  float rope_base_local = 10000.0f;  // {arch}.rope.freq_base_swa (gemma3: 10000)
  // Gemma 4 lists the pattern per layer ({arch}.attention.sliding_window_pattern as an array of
  // bools, 1 = sliding): then local_layer [n_layer] says, not swa_pattern.
  std::vector<uint8_t> local_layer;
  bool is_local_layer(int l) const {
    if (!local_layer.empty()) return sliding_window > 0 && local_layer[size_t(l)] != 0;
    return sliding_window > 0 && swa_pattern > 0 && (l + 1) % swa_pattern != 0;
  }

  // Scales of the granite / minicpm graph (1: none): the embedding is multiplied by
  // embed_scale, every block's output by residual_scale before it joins the residual stream,
  // and the logits by logit_mul (granite's 1 / logit_scale).
  float embed_scale = 1.0f;
  float residual_scale = 1.0f;
  float logit_mul = 1.0f;
  // Layers without RoPE: every no_rope_step-th one ((l + 1) % no_rope_step == 0, SmolLM3's
  // NoPE layers), or all of them (rope_off: granite's rope.scaling.finetuned = false).
  int no_rope_step = 0;
  bool rope_off = false;
  bool has_rope(int l) const { return !rope_off && (no_rope_step == 0 || (l + 1) % no_rope_step != 0); }
  // LongRoPE (phi3): the rope_factors_long table replaces rope_factors_short in a session
  // whose context is longer than rope_orig_ctx; rotated dims are multiplied by
  // rope_attn_factor ({arch}.rope.scaling.attn_factor; 1 when absent).
  // Gemma 2's soft-capping (0: none): attention scores become attn_softcap * tanh(s /
  // attn_softcap) after scaling, logits final_softcap * tanh(z / final_softcap).
  float attn_softcap = 0.0f;
  float final_softcap = 0.0f;
  bool longrope = false;  // {arch}.rope.scaling.type = "longrope"
  int rope_orig_ctx = 0;
  float rope_attn_factor = 1.0f;

  // Hybrid models (lfm2): a layer whose head_count_kv is 0 has no attention but a gated short
  // convolution over the last conv_taps positions ({arch}.shortconv.l_cache), whose state
  // the sequence's cache keeps beside the attention layers' keys and values (KvCache).
  std::vector<uint8_t> recurrent_layer;  // [n_layer] 1 for a convolution layer; empty: none
  int conv_taps = 0;
  bool is_recurrent(int l) const { return !recurrent_layer.empty() && recurrent_layer[size_t(l)] != 0; }

  // Gated DeltaNet layers (qwen35; the recurrent_layer ones there, conv_taps = ssm.conv_kernel):
  // dn_k_heads key heads and dn_v_heads value heads of dn_head each (ssm.group_count,
  // ssm.time_step_rank, ssm.state_size); value head j reads key head j % dn_k_heads (ggml's
  // tiling). The causal convolution runs over the dn_conv_dim() channels of q, k, v; each value
  // head's delta-rule state is a [dn_head][dn_head] matrix, kept in the sequence's cache.
  int dn_head = 0, dn_k_heads = 0, dn_v_heads = 0;
  bool delta_net() const { return dn_v_heads > 0; }
  int dn_key_dim() const { return dn_head * dn_k_heads; }
  int dn_value_dim() const { return dn_head * dn_v_heads; }
  int dn_conv_dim() const { return 2 * dn_key_dim() + dn_value_dim(); }
  size_t dn_state_floats() const { return size_t(dn_v_heads) * size_t(dn_head) * size_t(dn_head); }
  // The width of a convolution layer's rows: its q, k, v channels (DeltaNet), else n_embd (lfm2).
  int conv_row_dim() const { return delta_net() ? dn_conv_dim() : n_embd; }
  // Gated attention (qwen35): attn_q holds per head the query, then its output gate (2 q_dim rows).
  bool attn_out_gate = false;
  // Interleaved multimodal RoPE (qwen35's rope.dimension_sections [4]): for text, a rotated pair
  // whose section is the fourth does not rotate (model/arch_qwen35.cpp); all zeros: plain RoPE.
  int rope_sections[4] = {0, 0, 0, 0};

  // Gemma 4: the sliding-window layers have their own head size ({arch}.attention.key_length_swa)
  // and RoPE width (rope.dimension_count_swa); head_dim is then the widest (it sizes the scratch
  // and the attention kernels' bound) and head_dim_layer [n_layer] each layer's (empty: head_dim
  // everywhere). The activations of layer l are q_dim_at(l) / kv_dim_at(l) wide.
  std::vector<int> head_dim_layer;
  int n_rot_local = 0;  // RoPE width of the sliding-window layers (gemma4), 0: n_rot
  int head_dim_at(int l) const { return head_dim_layer.empty() ? head_dim : head_dim_layer[size_t(l)]; }
  int q_dim_at(int l) const { return n_head * head_dim_at(l); }
  int kv_dim_at(int l) const { return n_head_kv * head_dim_at(l); }
  // KV sharing (gemma4's attention.shared_kv_layers): layer l attends over the keys and values
  // of layer kv_source[l] and writes none of its own (kv_source[l] == l: its own). Empty: none.
  std::vector<int> kv_source;
  int kv_layer(int l) const { return kv_source.empty() ? l : kv_source[size_t(l)]; }
  bool shares_kv(int l) const { return kv_layer(l) != l; }
  // Gemma 4's per-layer embeddings: n_embd_per_layer values per layer and token (0: none).
  int n_embd_per_layer = 0;

  int n_ff_at(int l) const { return n_ff_layer[size_t(l)]; }
  bool n_ff_uniform() const;  // every layer has the same feed-forward size
  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_head_kv * head_dim; }
};

// Reads and validates the hyper-parameters every architecture has (llama.cpp's key names
// under the "{arch}." prefix): sizes, head counts, head size, RoPE, norm epsilon. What an
// architecture adds (e.g. the sliding window below) its arch file reads after this.
// head_count_kv may be an array of n_layer values, all equal but for zeros; a zero marks a
// layer without attention (recurrent_layer), which only an arch that builds such layers
// accepts (recurrent_layers); the others get one error.
Result<ModelConfig> read_transformer_config(const GgufFile& f, const std::string& arch,
                                            bool recurrent_layers = false);

// Sliding-window attention ("{arch}.attention.sliding_window", required unless default_window
// > 0; the pattern and the local RoPE base "{arch}.rope.freq_base_swa" when present, else
// default_pattern and default_local_base). A per-layer pattern (an array of bools, gemma4:
// ModelConfig::local_layer) only where per_layer_pattern says the arch writes one.
Result<void> read_sliding_window(const GgufFile& f, ModelConfig& c, int default_pattern, int default_window = 0,
                                 double default_local_base = 10000.0, bool per_layer_pattern = false);

// "key" as an array of at least n_layer bools (or integers), the first n_layer as 0 / 1 (qwen35's
// recurrent_layers, which also lists its MTP blocks; gemma4's sliding_window_pattern).
Result<std::vector<uint8_t>> read_layer_flags(const GgufFile& f, const std::string& key, int n_layer);

// A head size the attention kernels take: a multiple of 16, at most kMaxHeadDim (512).
Result<void> check_head_dim(const GgufFile& f, int head_dim);

// "{c.arch}.<key>" as a float > 0, or dflt when absent; an error naming the key otherwise.
Result<float> read_positive_or(const GgufFile& f, const ModelConfig& c, const std::string& key, double dflt);

}  // namespace pllm
