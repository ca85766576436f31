// The CPU implementation of the layer seam (model/layer_ops.h) over one step's scratch.
#pragma once
#include <span>

#include "backends/cpu/step_scratch.h"
#include "base/thread_pool.h"
#include "model/config.h"
#include "model/layer_ops.h"
#include "model/step.h"

namespace pllm {

class CpuLayers final : public LayerOps {
 public:
  // The scratch's row tables already describe the n_rows rows of `seqs`, in order.
  CpuLayers(const ModelConfig& c, StepScratch& s, ThreadPool& pool, std::span<const SeqStep> seqs, int n_rows,
            const StepOptions& opt);

  bool cancelled() const override;
  bool skipped(int l) const override { return opt_.skipped(l); }
  Result<void> embed(const Matrix& table, float scale) override;
  void norm(const char* name, int layer, Act src, const float* w, Act dst) override;
  void project(const char* name, int layer, std::initializer_list<Product> products, Act in) override;
  void qkv_to_cache(int l, const QkvSpec& s) override;
  void attend(int l, AttnScore scale, const RopeSpec& rope) override;
  void short_conv(int l, const float* kernel, Act b, Act c, Act x, Act out) override;
  void split_q_gate(int l, Act qg, Act q, Act gate) override;         // cpu_delta_net.cpp
  void sigmoid_gate(int l, Act x, Act gate) override;                  // cpu_delta_net.cpp
  void delta_net(int l, const DeltaNetSpec& s, Act qkv, Act z, Act beta, Act alpha, Act conv,
                 Act out) override;                                    // cpu_delta_net.cpp
  Result<void> per_layer_inputs(const PerLayerInputSpec& s, Act ple) override;
  void per_layer_input(int l, Act ple, Act dst) override;
  void scale(int l, Act a, float s) override;
  void glu(int l, Glu kind, int n_ff) override;
  void residual(int l, Act from, const float* bias, const float* post_norm, float scale) override;
  void head(const float* norm, const Matrix& out, const HeadSpec& spec) override;

 private:
  float* buf(Act a);
  // The activation mode of a sequence's rows: int16 mode rounds decode rows only; a prompt's
  // rows run exact (its f32 GEMM is the faster prefill, and prompts then score as in exact).
  ActMode mode_of(const SeqStep& q) const;
  // Calls f(first_row, n_rows, mode) for each run of consecutive rows that share a mode, over
  // rows counted per sequence by rows_of(seq).
  template <class RowsOf, class F>
  void for_each_mode_run(RowsOf rows_of, F f) const;
  // f(r) for every row r: on the pool for a prompt chunk, here for a decode step's few rows.
  // Row-wise work (norms, RoPE, GLU, residual) goes on the pool only for more rows than
  // kPoolRows (a prompt chunk): a decode step's few rows cost less here than a hand-off. At 3+
  // rows on the pool, a --parallel 4 step of SmolLM2 Q4_0 ran 20 % slower (550 against 658 tok/s).
  static constexpr int kPoolRows = 8;
  template <class F>
  void for_rows(F f) {
    if (n_ > kPoolRows) {
      pool_.run_spread(n_, f);
    } else {
      for (int r = 0; r < n_; ++r) f(int64_t(r));
    }
  }
  // Attention parts of a decode row (1: no split): what its one-row step uses, whatever else
  // the step holds.
  int decode_parts(int l, int r) const;
  // Layer l's causal depthwise convolution of row r (short_conv, delta_net) for the channels
  // j in [j0, j1): out[j] = sum over the row's own conv input and the conv_taps - 1 before it of
  // kernel[j * taps + t] * input, the inputs being this step's rows (`rows`, `width` floats
  // each) where the row's sequence has them (a sequence's rows are consecutive positions), else
  // its cache's; none before 0.
  void causal_conv_row(int l, int64_t r, const float* rows, size_t width, const float* kernel, float* out, size_t j0,
                       size_t j1) const;
  // Then the inputs later steps read (KvCache::conv_row), once every row of the step has read.
  void keep_conv_rows(int l, const float* rows, size_t width);

  const ModelConfig& c_;
  StepScratch& s_;
  ThreadPool& pool_;
  std::span<const SeqStep> seqs_;
  int n_;               // rows
  StepOptions opt_;
};

}  // namespace pllm
