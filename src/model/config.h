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
  bool is_local_layer(int l) const { return sliding_window > 0 && swa_pattern > 0 && (l + 1) % swa_pattern != 0; }

  int n_ff_at(int l) const { return n_ff_layer[size_t(l)]; }
  bool n_ff_uniform() const;  // every layer has the same feed-forward size
  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_head_kv * head_dim; }
};

// Reads and validates the hyper-parameters every architecture has (llama.cpp's key names
// under the "{arch}." prefix): sizes, head counts, head size, RoPE, norm epsilon. What an
// architecture adds (e.g. the sliding window below) its arch file reads after this.
Result<ModelConfig> read_transformer_config(const GgufFile& f, const std::string& arch);

// Sliding-window attention ("{arch}.attention.sliding_window", required; the pattern and the
// local RoPE base "{arch}.rope.freq_base_swa" when present, else default_pattern and 10000).
// A per-layer pattern (an array) is not supported.
Result<void> read_sliding_window(const GgufFile& f, ModelConfig& c, int default_pattern);

// "{c.arch}.<key>" as a float > 0, or dflt when absent; an error naming the key otherwise.
Result<float> read_positive_or(const GgufFile& f, const ModelConfig& c, const std::string& key, double dflt);

}  // namespace pllm
