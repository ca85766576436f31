// Per-layer FFN sizes from measured sensitivity (see prune_plan.h).
#include "quantizer/prune_plan.h"

#include <algorithm>
#include <cmath>

#include "base/thread_pool.h"
#include "kernels/kernels.h"
#include "quantizer/kl_reference.h"
#include "quantizer/prune_select.h"

namespace pllm {
namespace {

// Layer l's ffn_down with only `cut`'s channels: the fitted (or original) kept columns at
// their places and zeros elsewhere, [n_embd][n_ff] f32.
std::vector<float> full_size_down(const Matrix& W, const FfnCut& cut) {
  const int64_t rows = W.rows, cols = W.cols;
  std::vector<float> out(size_t(rows) * size_t(cols), 0.0f);
  std::vector<float> row(static_cast<size_t>(cols));
  const auto dequant = kernels().for_type(W.type).dequantize_row;
  const size_t kept = cut.keep.size();
  for (int64_t r = 0; r < rows; ++r) {
    float* dst = out.data() + size_t(r) * size_t(cols);
    if (cut.down_w.empty()) dequant(W.row(r), row.data(), cols);
    for (size_t i = 0; i < kept; ++i) {
      const int j = cut.keep[i];
      dst[j] = cut.down_w.empty() ? row[size_t(j)] : cut.down_w[size_t(r) * kept + i];
    }
  }
  return out;
}

}  // namespace

std::vector<int> FfnSensitivityPlan::keep() const {
  std::vector<int> k;
  for (const FfnPlanLayer& L : layers) k.push_back(L.keep);
  return k;
}

std::vector<int> allocate_blocks(const std::vector<std::vector<double>>& costs, int blocks) {
  std::vector<int> taken(costs.size(), 0);
  for (int b = 0; b < blocks; ++b) {
    int best = -1;
    double best_inc = 0.0;
    for (size_t l = 0; l < costs.size(); ++l) {
      const size_t k = size_t(taken[l]);
      if (k + 1 >= costs[l].size()) continue;
      const double inc = costs[l][k + 1] - costs[l][k];
      if (best < 0 || inc < best_inc) best = int(l), best_inc = inc;  // ties: the lower layer
    }
    if (best < 0) break;
    ++taken[size_t(best)];
  }
  return taken;
}

Result<FfnSensitivityPlan> plan_ffn_sensitivity(const std::shared_ptr<Model>& model, const PruneOptions& opts,
                                                std::span<const int32_t> tokens, const CalibrationOptions& kl,
                                                const std::function<void(int, int)>& progress) {
  if (!(opts.ffn_ratio > 0.0)) return make_error(Status::invalid_argument, "--ffn-plan sensitivity needs --ffn > 0");
  if (!opts.stats && opts.compensate == Compensate::none)
    return make_error(Status::invalid_argument, "--ffn-plan sensitivity needs activation statistics (--calib)");
  const ModelConfig& c = model->config();
  const ModelWeights& w = model->weights();
  const int n_layer = c.n_layer;
  const double cap_ratio = std::min(0.9, 2.0 * opts.ffn_ratio + 0.05);

  FfnSensitivityPlan plan;
  plan.layers.resize(static_cast<size_t>(n_layer));
  std::vector<int> align(static_cast<size_t>(n_layer)), cap(static_cast<size_t>(n_layer));
  int budget_blocks = 0;
  for (int l = 0; l < n_layer; ++l) {
    FfnPlanLayer& L = plan.layers[size_t(l)];
    L.n_ff = c.n_ff_at(l);
    align[size_t(l)] = int(std::max<uint32_t>(32, type_traits(uint32_t(w.layers[size_t(l)].w_down.type))->block_elems));
    L.uniform_keep = prune_keep_count(L.n_ff, opts.ffn_ratio, align[size_t(l)]);
    const int removable = std::max(0, L.n_ff - align[size_t(l)]);  // at least one block stays
    const int c_l = int(std::floor(L.n_ff * cap_ratio / align[size_t(l)])) * align[size_t(l)];
    cap[size_t(l)] = std::clamp(std::max(c_l, L.n_ff - L.uniform_keep), 0, removable);
    budget_blocks += (L.n_ff - L.uniform_keep) / align[size_t(l)];
  }

  // 1. Error curves, the layers in parallel.
  std::vector<FfnCut> curves(static_cast<size_t>(n_layer));
  std::vector<Result<void>> status(static_cast<size_t>(n_layer));
  {
    ThreadPool pool(std::min(n_layer, opts.n_threads > 0 ? opts.n_threads : default_thread_count()));
    pool.run(n_layer, [&](int64_t l) {
      if (cap[size_t(l)] == 0) return;
      auto r = cut_ffn(*model, opts, int(l), cap[size_t(l)]);
      if (r.ok()) curves[size_t(l)] = std::move(r).value();
      else status[size_t(l)] = r.error();
    });
  }
  for (const auto& s : status) PLLM_TRY(s);

  // 2. Probes: one layer cut at a time against the unmodified model.
  PLLM_ASSIGN(auto ref, KlReference::create(model, tokens, kl));
  plan.tokens = ref->tokens();
  for (int l = 0; l < n_layer; ++l) {
    FfnPlanLayer& L = plan.layers[size_t(l)];
    const int probe = L.n_ff - L.uniform_keep;
    if (progress) progress(l, n_layer);
    if (probe == 0) continue;
    PLLM_ASSIGN(FfnCut cut, cut_ffn(*model, opts, l, probe));
    const Matrix& down = w.layers[size_t(l)].w_down;
    const std::vector<float> full = full_size_down(down, cut);
    const std::string name(down.name);
    PLLM_TRY(model->override_matrix(name, TensorType::F32, reinterpret_cast<const uint8_t*>(full.data())));
    const bool bias = !cut.down_bias.empty();
    Result<void> set = bias ? model->override_output_bias(name, cut.down_bias.data()) : Result<void>{};
    auto measured = set.ok() ? ref->measure() : Result<double>(set.error());
    PLLM_TRY(model->restore_matrix(name));  // before anything else can fail
    if (bias) PLLM_TRY(model->restore_output_bias(name));
    PLLM_TRY(measured);
    L.probe_kl = measured.value();
  }
  if (progress) progress(n_layer, n_layer);

  // 3 and 4. Predicted costs per block, then the allocation.
  std::vector<std::vector<double>> costs(static_cast<size_t>(n_layer));
  for (int l = 0; l < n_layer; ++l) {
    const FfnPlanLayer& L = plan.layers[size_t(l)];
    const std::vector<double>& e = curves[size_t(l)].error;
    const int a = align[size_t(l)], probe = L.n_ff - L.uniform_keep;
    costs[size_t(l)].push_back(0.0);
    if (e.empty()) continue;
    const double e_probe = e[size_t(probe)];
    for (int k = a; k <= cap[size_t(l)]; k += a)
      costs[size_t(l)].push_back(e_probe > 0.0 ? L.probe_kl * e[size_t(k)] / e_probe : e[size_t(k)]);
  }
  const std::vector<int> taken = allocate_blocks(costs, budget_blocks);
  for (int l = 0; l < n_layer; ++l) {
    FfnPlanLayer& L = plan.layers[size_t(l)];
    L.keep = L.n_ff - taken[size_t(l)] * align[size_t(l)];
    L.predicted_kl = costs[size_t(l)][size_t(taken[size_t(l)])];
  }
  return plan;
}

}  // namespace pllm
