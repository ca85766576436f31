// The layer seam (model/layer_ops.h) on the Vulkan device: each call records dispatches into
// the step's command buffer; nothing runs until VulkanBackend submits it. Errors while
// recording (an upload that fails, a weight type without a shader) are kept and reported
// by error() after the pass.
#pragma once
#include <span>

#include "backends/vulkan/vk_state.h"
#include "model/layer_ops.h"
#include "model/step.h"

namespace pllm::vk {

// One row of the step: its sequence (index into the step's SeqSteps) and position.
struct StepRow {
  int seq;
  int pos;
  int32_t token;
  const float* embd = nullptr;  // an image row's embedding (SeqStep::embeddings), else null
};

class VulkanLayers final : public LayerOps {
 public:
  // seq_row0[s]: the first row of sequence s (its rows are contiguous).
  VulkanLayers(Backend& b, const ModelConfig& c, std::span<const SeqStep> seqs, std::span<const StepRow> rows,
               std::span<const int> seq_row0, std::span<const int> out_rows, bool int8);

  bool cancelled() const override;
  Result<void> embed(const Matrix& table, float scale) override;
  void norm(const char* name, int layer, Act src, const float* w, Act dst) override;
  void project(const char* name, int layer, std::initializer_list<Product> products, Act in) override;
  void qkv_to_cache(int l, const QkvSpec& s) override;
  void attend(int l, AttnScore score, const RopeSpec& rope) override;
  // Never reached: a model with convolution layers steps on the CPU (unmirrored_feature).
  void short_conv(int l, const float* kernel, Act b, Act c, Act x, Act out) override;
  void split_q_gate(int l, Act qg, Act q, Act gate) override;
  void sigmoid_gate(int l, Act x, Act gate) override;
  void delta_net(int l, const DeltaNetSpec& s, Act qkv, Act z, Act beta, Act alpha, Act conv, Act out) override;
  Result<void> per_layer_inputs(const PerLayerInputSpec& s, Act ple) override;
  void per_layer_input(int l, Act ple, Act dst) override;
  void scale(int l, Act a, float s) override;
  void glu(int l, Glu kind, int n_ff) override;
  void residual(int l, Act from, const float* bias, const float* post_norm, float scale) override;
  void head(const float* norm, const Matrix& out, const HeadSpec& spec) override;

  const Result<void>& error() const { return err_; }

 private:
  View act(Act a, int row0 = 0, int n = -1) const;  // rows [row0, row0 + n) of an activation
  int width(Act a) const;
  View weight_vector(const float* p, int n);
  View rope_table(const float* inv_freq, int n_rot);
  void fail(Error e) {
    if (err_.ok()) err_ = std::move(e);
  }

  Backend& b_;
  const ModelConfig& c_;
  std::span<const SeqStep> seqs_;
  std::span<const StepRow> rows_;
  std::span<const int> seq_row0_;
  std::span<const int> out_rows_;  // rows whose logits are wanted, in output order
  int ff_ = 0;                     // the widest layer's n_ff: the row stride of gate and up
  bool int8_;
  const float* cs_keys_[2] = {nullptr, nullptr};  // inv_freq of the RoPE tables filled this step
  Result<void> err_;
};

}  // namespace pllm::vk
