#include "quantizer/prune.h"

#include <algorithm>
#include <cmath>

#include "base/thread_pool.h"
#include "kernels/kernels.h"
#include "quant/types.h"
#include "quantizer/prune_select.h"
#include "quantizer/row_quant.h"
#include "quantizer/type_plan.h"

namespace pllm {
namespace {

constexpr double kMaxRatio = 0.9;

std::string layer_tensor(int l, const char* what) { return "blk." + std::to_string(l) + "." + what; }

uint32_t block_elems(TensorType t) { return type_traits(uint32_t(t))->block_elems; }

// Squared row and column norms of a weight, one dequantised row at a time; col_scale
// (null, or [cols]) multiplies every column first.
NormAccumulator weight_norms(const Matrix& m, const float* col_scale = nullptr) {
  NormAccumulator acc(m.rows, m.cols);
  std::vector<float> row(size_t(m.cols));
  const auto dequant = kernels().for_type(m.type).dequantize_row;
  for (int64_t r = 0; r < m.rows; ++r) {
    dequant(m.row(r), row.data(), m.cols);
    if (col_scale)
      for (int64_t c = 0; c < m.cols; ++c) row[size_t(c)] *= col_scale[c];
    acc.add_row(r, row.data());
  }
  return acc;
}

// Mean x² of every input column of `weight`, from the statistics.
Result<std::vector<double>> mean_sq_of(const ActStats& stats, const std::string& weight, int64_t cols) {
  const ChannelStats* s = stats.find(weight);
  if (!s) return make_error(Status::invalid_argument, "activation statistics have no entry for '" + weight + "'");
  if (int64_t(s->cols()) != cols)
    return make_error(Status::invalid_argument, "activation statistics of '" + weight + "' have " +
                                                    std::to_string(s->cols()) + " columns, the model " +
                                                    std::to_string(cols));
  if (s->count == 0)
    return make_error(Status::invalid_argument, "activation statistics of '" + weight + "' saw no tokens");
  std::vector<double> m(s->sum_sq.size());
  for (size_t c = 0; c < m.size(); ++c) m[c] = s->sum_sq[c] / double(s->count);
  return m;
}

Result<void> check_ratio(double r, const char* what) {
  if (!(r >= 0.0 && r <= kMaxRatio))
    return make_error(Status::invalid_argument, std::string(what) + " ratio " + std::to_string(r) +
                                                    " is out of range (a fraction in [0, 0.9])");
  return {};
}

// --output-type: a type the quantiser writes whose blocks fit the head's rows, and (for the
// act search) statistics that cover the head.
Result<void> check_output_type(const GgufFile& f, const PruneOptions& opts) {
  const TensorType t = *opts.output_type;
  const std::string name = output_head_name(f);
  const TensorInfo* head = f.tensor(name);
  if (!head || head->dims.size() != 2) return make_error(Status::bad_format, "the model has no 2-D '" + name + "'");
  if (!is_output_type(t) || t == TensorType::F32 || t == TensorType::BF16)
    return make_error(Status::invalid_argument, "--output-type " + quant_type_name(t) +
                                                    ": give one of f16, q8_0, q6_k, q5_1, q5_0, q4_1, q4_k, q4_0");
  if (fallback_type(t, head->dims[0]) != t)
    return make_error(Status::invalid_argument,
                      "--output-type " + quant_type_name(t) + ": its " + std::to_string(block_elems(t)) +
                          "-element blocks do not fit the rows of '" + name + "' (" + std::to_string(head->dims[0]) +
                          " elements); choose a 32-element type (q8_0, q5_1, q5_0, q4_1, q4_0) or f16");
  if (opts.requant == QuantMethod::act && opts.stats && !opts.stats->find(name))
    return make_error(Status::invalid_argument, "activation statistics have no entry for '" + name + "'");
  return {};
}


std::vector<int> all_of(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = i;
  return v;
}

// A whole weight as doubles, [rows][cols].
std::vector<double> dequantize_double(const Matrix& m) {
  std::vector<double> out(size_t(m.rows) * size_t(m.cols));
  std::vector<float> row(size_t(m.cols));
  const auto dequant = kernels().for_type(m.type).dequantize_row;
  for (int64_t r = 0; r < m.rows; ++r) {
    dequant(m.row(r), row.data(), m.cols);
    std::copy(row.begin(), row.end(), out.begin() + r * m.cols);
  }
  return out;
}

std::vector<float> to_float(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

// Compensated removal of n_remove groups of `width` input columns of W (ffn_down or
// attn_output): which groups stay, and the fitted columns and bias.
Result<CompensateResult> fit_layer(const PruneOptions& opts, const Matrix& W, const float* bias, int width,
                                   int n_remove) {
  const GramMatrix* G = opts.gram->find(W.name);
  if (!G || G->n != int(W.cols))
    return make_error(Status::invalid_argument, "no Gram matrix for '" +
                                                    std::string(W.name) + "'");
  std::vector<double> b0;
  if (bias) b0.assign(bias, bias + W.rows);
  const std::vector<double> Wd = dequantize_double(W);
  CompensateSpec spec;
  spec.mode = opts.compensate;
  spec.width = width;
  spec.n_remove = n_remove;
  spec.ridge = opts.ridge;
  spec.shrink = opts.shrink;
  auto r = compensate_prune(Wd, int(W.rows), b0, *G, spec);
  if (!r.ok()) return make_error(r.error().code, std::string(W.name) + ": " + r.error().message);
  return r;
}

// One layer's choice of FFN channels (keep_ff of them) and KV groups (keep_kv).
Result<void> plan_layer(const Model& model, const PruneOptions& opts, int l, int keep_ff, int keep_kv,
                        const PrunePlan& plan, LayerPrunePlan& P) {
  const ModelConfig& c = model.config();
  const LayerWeights& L = model.weights().layers[size_t(l)];
  const bool fit = opts.compensate != Compensate::none;
  if (keep_ff == P.n_ff) {
    P.keep_ff = all_of(P.n_ff);
  } else {
    PLLM_ASSIGN(FfnCut cut, cut_ffn(model, opts, l, P.n_ff - keep_ff));
    P.keep_ff = std::move(cut.keep);
    P.down_w = std::move(cut.down_w);
    P.down_bias = std::move(cut.down_bias);
    P.ffn_error = cut.error.back();
  }

  if (keep_kv == P.n_kv) {
    P.keep_kv = all_of(P.n_kv);
  } else if (fit) {
    PLLM_ASSIGN(CompensateResult r, fit_layer(opts, L.wo, L.bo, plan.group * c.head_dim, P.n_kv - keep_kv));
    P.keep_kv = std::move(r.keep);
    P.wo_w = to_float(r.w);
    P.wo_bias = to_float(r.bias);
  } else {
    const NormAccumulator wo = weight_norms(L.wo);
    std::vector<double> score;
    if (opts.stats) {
      PLLM_ASSIGN(auto mean_sq, mean_sq_of(*opts.stats, layer_tensor(l, "attn_output.weight"), L.wo.cols));
      score = group_scores_from_activations(wo.col_sq, mean_sq, P.n_kv, plan.group, c.head_dim);
    } else {
      const NormAccumulator wv = weight_norms(L.wv, L.attn_norm);
      score = group_scores_from_weights(wv.row_sq, wo.col_sq, P.n_kv, plan.group, c.head_dim);
    }
    P.keep_kv = top_k_ascending(score, keep_kv);
  }
  return {};
}

// Every layer, in parallel on opts.n_threads threads; the first error (in layer order) wins.
Result<void> plan_layers(const Model& model, const PruneOptions& opts, const std::vector<int>& keep_ff, int keep_kv,
                         PrunePlan& plan) {
  const int n_layer = int(plan.layers.size());
  std::vector<Result<void>> status(static_cast<size_t>(n_layer));
  ThreadPool pool(std::min(n_layer, opts.n_threads > 0 ? opts.n_threads : default_thread_count()));
  pool.run(n_layer, [&](int64_t l) {
    status[size_t(l)] = plan_layer(model, opts, int(l), keep_ff[size_t(l)], keep_kv, plan, plan.layers[size_t(l)]);
  });
  for (const auto& s : status) PLLM_TRY(s);
  return {};
}

// The compensation's preconditions.
Result<void> check_compensation(const Model& model, const PruneOptions& opts) {
  if (opts.compensate == Compensate::none) return {};
  if (!opts.gram)
    return make_error(Status::invalid_argument, std::string("--compensate ") + compensate_name(opts.compensate) +
                                                    " fits the kept weights on calibration activations: give --calib");
  const std::string& arch = model.config().arch;
  if (compensate_has_bias(opts.compensate) && arch != "llama" && arch != "deci")
    return make_error(Status::unsupported, std::string("--compensate ") + compensate_name(opts.compensate) +
                                               " writes output biases, which llama.cpp's " + arch +
                                               " does not read: use --compensate lsq");
  if (!(opts.ridge >= 0.0) || !std::isfinite(opts.ridge) || opts.ridge > 1e6)
    return make_error(Status::invalid_argument, "--ridge must be a number in [0, 1e6]");
  if (!(opts.shrink >= 0.0) || !std::isfinite(opts.shrink) || opts.shrink > 1e6)
    return make_error(Status::invalid_argument, "--shrink must be a number in [0, 1e6]");
  return {};
}
}  // namespace

Result<FfnCut> cut_ffn(const Model& model, const PruneOptions& opts, int l, int n_remove) {
  const LayerWeights& L = model.weights().layers[size_t(l)];
  FfnCut cut;
  if (opts.compensate != Compensate::none) {
    PLLM_ASSIGN(CompensateResult r, fit_layer(opts, L.w_down, L.b_down, 1, n_remove));
    cut.keep = std::move(r.keep);
    cut.down_w = to_float(r.w);
    cut.down_bias = to_float(r.bias);
    cut.error = std::move(r.error);
    return cut;
  }
  // Dropped without compensation: the channels with the least importance go; a channel's
  // score² is its output's mean power, so their running sum stands in for the error.
  const NormAccumulator down = weight_norms(L.w_down);
  std::vector<double> score;
  if (opts.stats) {
    PLLM_ASSIGN(auto mean_sq, mean_sq_of(*opts.stats, layer_tensor(l, "ffn_down.weight"), L.w_down.cols));
    score = ffn_scores_from_activations(down.col_sq, mean_sq);
  } else {
    const NormAccumulator gate = weight_norms(L.w_gate, L.ffn_norm), up = weight_norms(L.w_up, L.ffn_norm);
    score = ffn_scores_from_weights(gate.row_sq, up.row_sq, down.col_sq);
  }
  const int n = int(score.size());
  cut.keep = top_k_ascending(score, n - n_remove);
  std::vector<bool> kept(size_t(n), false);
  for (int j : cut.keep) kept[size_t(j)] = true;
  std::vector<double> gone;
  for (int j = 0; j < n; ++j)
    if (!kept[size_t(j)]) gone.push_back(score[size_t(j)] * score[size_t(j)]);
  std::sort(gone.begin(), gone.end());
  cut.error.assign(1, 0.0);
  for (double v : gone) cut.error.push_back(cut.error.back() + v);
  return cut;
}

std::string output_head_name(const GgufFile& f) {
  return f.tensor("output.weight") ? "output.weight" : "token_embd.weight";
}

uint64_t count_parameters(const GgufFile& f) {
  uint64_t n = 0;
  for (const TensorInfo& t : f.tensors()) n += t.n_elements;
  return n;
}

Result<PrunePlan> plan_prune(const Model& model, const PruneOptions& opts) {
  PLLM_TRY(check_ratio(opts.ffn_ratio, "--ffn"));
  PLLM_TRY(check_ratio(opts.head_ratio, "--heads"));
  if (opts.requant == QuantMethod::act && !opts.stats)
    return make_error(Status::invalid_argument, "--requant act needs activation statistics (--calib or --stats)");
  if (model.vocab_only()) return make_error(Status::invalid_argument, "model was loaded vocab-only");
  if (opts.output_type) PLLM_TRY(check_output_type(model.file(), opts));
  PLLM_TRY(check_compensation(model, opts));
  const ModelConfig& c = model.config();
  const ModelWeights& w = model.weights();
  // The pruned file is written tensor by tensor under these archs' names and keys; the others
  // (fused tensors, scales tied to sizes) are not handled yet.
  if (c.arch != "llama" && c.arch != "deci" && c.arch != "qwen2" && c.arch != "gemma3")
    return make_error(Status::unsupported, "prune: the " + c.arch + " architecture is not supported yet "
                                           "(llama, deci, qwen2, gemma3 are)");
  PrunePlan plan;
  plan.from_activations = opts.stats != nullptr;
  plan.group = c.n_head / c.n_head_kv;
  plan.head_dim = c.head_dim;

  // Head counts stay one value for every layer (per-layer head counts are not part of the
  // llama/qwen2/gemma3 formats), so every layer keeps the same number of groups.
  int keep_kv = c.n_head_kv;
  if (opts.head_ratio > 0.0) {
    if (c.n_head_kv < 2)
      return make_error(Status::invalid_argument, "--heads: the model has " + std::to_string(c.n_head_kv) +
                                                      " KV head per layer; removing a KV group needs at least 2");
    if (c.arch == "qwen2")
      return make_error(Status::unsupported, "--heads: llama.cpp's qwen2 requires n_head * head_dim = n_embd, so a "
                                             "qwen2 model cannot lose heads and stay loadable there");
    if (c.arch == "gemma3" && c.n_layer == 62)
      return make_error(Status::unsupported, "--heads: Gemma 3 27B derives its attention scale from the head "
                                             "count; pruning its heads is not supported");
    uint32_t align = 1;
    for (const LayerWeights& L : w.layers) align = std::max(align, block_elems(L.wo.type));
    keep_kv = prune_keep_groups(c.n_head_kv, opts.head_ratio, plan.group * c.head_dim, int(align));
    if (keep_kv < 0)
      return make_error(Status::invalid_argument,
                        "--heads: no smaller number of KV groups keeps attn_output's rows whole " +
                            std::to_string(align) + "-element blocks (" + std::to_string(plan.group * c.head_dim) +
                            " columns per group)");
  }

  plan.layers.resize(size_t(c.n_layer));
  plan.ffn_align.resize(size_t(c.n_layer));
  for (int l = 0; l < c.n_layer; ++l) {
    LayerPrunePlan& P = plan.layers[size_t(l)];
    P.n_ff = c.n_ff_at(l);
    P.n_kv = c.n_head_kv;
    plan.ffn_align[size_t(l)] = int(std::max<uint32_t>(32, block_elems(w.layers[size_t(l)].w_down.type)));
  }
  // Layers are independent: fit them in parallel (the compensation's dense algebra dominates).
  std::vector<int> keep_ff(size_t(c.n_layer));
  if (!opts.ffn_keep.empty() && opts.ffn_keep.size() != size_t(c.n_layer))
    return make_error(Status::invalid_argument, "per-layer FFN sizes for " + std::to_string(opts.ffn_keep.size()) +
                                                    " layers, the model has " + std::to_string(c.n_layer));
  for (int l = 0; l < c.n_layer; ++l) {
    const int n_ff = c.n_ff_at(l), align = plan.ffn_align[size_t(l)];
    int k = prune_keep_count(n_ff, opts.ffn_ratio, align);
    if (!opts.ffn_keep.empty()) {
      k = opts.ffn_keep[size_t(l)];
      if (k < 1 || k > n_ff || (k != n_ff && k % align != 0))
        return make_error(Status::invalid_argument, "layer " + std::to_string(l) + ": cannot keep " + std::to_string(k) +
                                                        " of " + std::to_string(n_ff) + " FFN channels (whole " +
                                                        std::to_string(align) + "-channel blocks)");
    }
    keep_ff[size_t(l)] = k;
  }
  PLLM_TRY(plan_layers(model, opts, keep_ff, keep_kv, plan));
  return plan;
}

}  // namespace pllm
