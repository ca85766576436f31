// A loaded model: config, weight views into the mapping, tokenizer, and the forward pass
// of its architecture. Immutable after load; shared by every session.
#pragma once
#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/result.h"
#include "base/thread_pool.h"
#include "gguf/gguf.h"
#include "model/act_mode.h"
#include "model/act_scales.h"
#include "model/config.h"
#include "model/weights.h"
#include "model/sampling_config.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace pllm {

struct LayerWeights {
  const float* attn_norm = nullptr;  // [n_embd]
  Matrix wq;                         // [q_dim rows x n_embd]
  Matrix wk;                         // [kv_dim x n_embd]
  Matrix wv;                         // [kv_dim x n_embd]
  // The tensors below are null where the architecture has none (model/arch_loaders.h:
  // AttnTensors, FfnTensors say which each loads).
  const float* bq = nullptr;         // [q_dim]   Q/K/V biases (qwen2)
  const float* bk = nullptr;         // [kv_dim]
  const float* bv = nullptr;         // [kv_dim]
  Matrix wo;                         // [n_embd x q_dim]
  const float* bo = nullptr;         // [n_embd] output bias (llama/deci when present: compensated pruning)
  const float* ffn_norm = nullptr;   // [n_embd]
  Matrix w_gate;                     // [n_ff x n_embd]
  Matrix w_up;                       // [n_ff x n_embd]
  Matrix w_down;                     // [n_embd x n_ff]
  const float* b_down = nullptr;     // [n_embd] (llama/deci when present: compensated pruning)
  const float* attn_q_norm = nullptr;    // [head_dim] RMSNorm of every query head
  const float* attn_k_norm = nullptr;    // [head_dim] RMSNorm of every key head
  const float* post_attn_norm = nullptr; // [n_embd] RMSNorm of the attention output
  const float* post_ffn_norm = nullptr;  // [n_embd] RMSNorm of the feed-forward output
  // A convolution layer of a hybrid model (lfm2; ModelConfig::is_recurrent) instead of wq..wo:
  // shortconv.in_proj [3 n_embd x n_embd] read as its three products b, c, x, the depthwise
  // kernel shortconv.conv [n_embd][conv_taps] (f32) and shortconv.out_proj [n_embd x n_embd].
  Matrix conv_b, conv_c, conv_x;
  const float* conv_kernel = nullptr;
  Matrix conv_out;
  // A Gated DeltaNet layer (qwen35; ModelConfig::delta_net) instead of wq..wo: attn_qkv
  // [dn_conv_dim x n_embd] (q, k, v channels), attn_gate (z) [dn_value_dim x n_embd], ssm_beta and
  // ssm_alpha [dn_v_heads x n_embd], ssm_out [n_embd x dn_value_dim]; the depthwise kernel
  // ssm_conv1d [dn_conv_dim][conv_taps] (f32), ssm_dt.bias and ssm_a (-exp(A_log)) [dn_v_heads],
  // ssm_norm [dn_head].
  Matrix dn_qkv, dn_z, dn_beta, dn_alpha, dn_out;
  const float* dn_conv = nullptr;
  const float* dn_dt = nullptr;
  const float* dn_a = nullptr;
  const float* dn_norm = nullptr;
  // Gemma 4: the per-layer input gate inp_gate [n_embd_per_layer x n_embd], its projection proj
  // [n_embd x n_embd_per_layer] and post_norm [n_embd]; layer_output_scale (1 when absent).
  Matrix ple_gate, ple_proj;
  const float* ple_post_norm = nullptr;
  float out_scale = 1.0f;

  // Every matrix view of the layer (those the architecture has no use for have no data), for
  // the code that visits them all (repacking, overrides, activation scales).
  std::array<Matrix*, 18> matrices() {
    return {&wq, &wk, &wv, &wo, &w_gate, &w_up, &w_down, &conv_b, &conv_c, &conv_x, &conv_out,
            &dn_qkv, &dn_z, &dn_beta, &dn_alpha, &dn_out, &ple_gate, &ple_proj};
  }
  // Every 1-D weight of the layer (null where absent).
  std::array<const float**, 15> vectors() {
    return {&attn_norm, &bq, &bk, &bv, &ffn_norm, &attn_q_norm, &attn_k_norm, &post_attn_norm, &post_ffn_norm,
            &conv_kernel, &dn_conv, &dn_dt, &dn_a, &dn_norm, &ple_post_norm};
  }
};

struct ModelWeights {
  Matrix token_embd;                   // [n_vocab x n_embd]
  const float* output_norm = nullptr;  // [n_embd]
  Matrix output;                       // [n_vocab x n_embd]; the embedding when tied
  std::vector<LayerWeights> layers;    // [n_layer]
  std::vector<float> rope_inv_freq;    // [n_rot/2]: base^(-2i/n_rot) / rope_freqs[i]
  std::vector<float> rope_inv_freq_local;  // [n_rot/2] for sliding-window layers (gemma3), else empty
  std::vector<float> rope_inv_freq_long;   // [n_rot/2] LongRoPE's long-context table (phi3), else empty
  // Gemma 4's per-layer embeddings (ModelConfig::n_embd_per_layer > 0): per_layer_token_embd
  // [n_vocab x n_layer * n_embd_per_layer] (left in the file: a step reads its tokens' rows),
  // per_layer_model_proj [n_layer * n_embd_per_layer x n_embd], per_layer_proj_norm [n_embd_per_layer].
  Matrix ple_token_embd, ple_model_proj;
  const float* ple_proj_norm = nullptr;
};

struct ArchDescriptor;
class LayerOps;

// What Model::identity() is, computed from a file without loading the model.
uint64_t compute_model_identity(const GgufFile& f);

// Load-time repacking into 16-row panels (model/repack.h): none; the types whose int16 kernels
// read panels on this CPU (TypeKernels::gemm_i16_panels: the default activation mode); or
// every type with a panel decode kernel (the int8 modes read them too).
enum class RepackMode { none, int16, all };

// The repacking that suits sessions of one activation mode: panels for every type the int8
// kernels read, only the int16 kernels' types, or none for the modes that decode the file's
// layout (exact, f16), which would unpack panels on the fly.
constexpr RepackMode repack_for(ActMode m) {
  return is_int8(m) ? RepackMode::all : m == ActMode::int16 ? RepackMode::int16 : RepackMode::none;
}

class Model {
 public:
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  using Progress = std::function<bool(float)>;  // return false to abort
  // repack: which matrices to hold as 16-row panels (model/repack.h; same memory).
  static Result<std::shared_ptr<const Model>> load(const std::string& path, bool vocab_only,
                                                   const Progress& progress = {}, RepackMode repack = RepackMode::none);
  // The same from a file already parsed (e.g. bytes in memory, MappedFile::from_bytes), without
  // repacking: how the GGUF fuzzer loads models without touching disk.
  static Result<std::shared_ptr<const Model>> load(std::shared_ptr<GgufFile> file, bool vocab_only);
  // Tools only (the quantiser's sensitivity analysis): a model whose weight views can be
  // redirected with override_matrix. Sessions take it as a shared_ptr<const Model> as usual.
  static Result<std::shared_ptr<Model>> load_for_tools(const std::string& path);
  // Tools only: every weight view of tensor `name` (the output head too when it is the tied
  // embedding) reads `data` as `type` from now on: same shape, a type the kernels support.
  // No session of this model may be running meanwhile; the caller keeps `data` alive until
  // restore_matrix(name) points the views back at the file.
  Result<void> override_matrix(std::string_view name, TensorType type, const uint8_t* data);
  Result<void> restore_matrix(std::string_view name);
  // Tools only (the pruner's sensitivity): the output bias added after the layer product
  // `weight` (an attn_output or ffn_down weight) reads `bias` ([n_embd] floats, or null for
  // none) from now on; restore_output_bias goes back to the file's bias or none.
  Result<void> override_output_bias(std::string_view weight, const float* bias);
  Result<void> restore_output_bias(std::string_view weight);

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const GgufFile& file() const { return *file_; }
  bool vocab_only() const { return vocab_only_; }
  ChatFamily chat_family() const { return chat_family_; }
  const std::string& chat_template() const { return chat_template_; }
  // Sampling that suits this model: the file's general.sampling.* keys (temp, top_k, top_p,
  // min_p, penalty_repeat, penalty_last_n; the keys llama.cpp writes) over
  // kModelDefaultSampling (greedy). The seed is left 0.
  const SamplingConfig& sampling_defaults() const { return sampling_defaults_; }
  // 64-bit identity of the weights (hash of every tensor's name, type, shape and offset and
  // of the first and last MiB of tensor data), computed once at load: KV snapshots and
  // prefix-cache entries carry it so one model's cache is never restored into another.
  uint64_t identity() const { return identity_; }
  // Tensors held as panels (0 unless loaded with repack on a CPU with panel kernels).
  int repacked_tensors() const { return repacked_tensors_; }
  // Matrices copied in the file's layout beside the panels (model/repack.h).
  int copied_tensors() const { return copied_tensors_; }
  // How many matrix products have a static activation scale in the file (model/act_scales.h).
  const ActScaleCounts& act_scale_counts() const { return act_scale_counts_; }

  // Runs the architecture's forward pass over a backend's layer operations (model/layer_ops.h):
  // the backend holds the step's rows, caches and activations.
  Result<void> run_layers(LayerOps& ops) const;

 private:
  Model() = default;
  static Result<std::shared_ptr<Model>> load_impl(const std::string& path, bool vocab_only, const Progress& progress,
                                                  RepackMode repack);
  static Result<std::shared_ptr<Model>> load_file(std::shared_ptr<GgufFile> file, bool vocab_only,
                                                  const Progress& progress, RepackMode repack);

  std::shared_ptr<GgufFile> file_;
  const ArchDescriptor* arch_ = nullptr;  // null for vocab-only models
  ModelConfig config_;
  ModelWeights weights_;
  std::unique_ptr<Tokenizer> tokenizer_;
  ChatFamily chat_family_ = ChatFamily::chatml;
  std::string chat_template_;
  SamplingConfig sampling_defaults_;
  bool vocab_only_ = false;
  uint64_t identity_ = 0;
  std::vector<AlignedBuffer<uint8_t>> repacked_;  // panel storage of repacked matrices
  int repacked_tensors_ = 0;
  int copied_tensors_ = 0;
  ActScaleCounts act_scale_counts_;
};

}  // namespace pllm
