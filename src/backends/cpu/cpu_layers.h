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
  template <class F>
  void for_rows(F f);
  // Attention parts of a decode row (1: no split): what its one-row step uses, whatever else
  // the step holds.
  int decode_parts(int l, int r) const;

  const ModelConfig& c_;
  StepScratch& s_;
  ThreadPool& pool_;
  std::span<const SeqStep> seqs_;
  int n_;               // rows
  StepOptions opt_;
};

}  // namespace pllm
