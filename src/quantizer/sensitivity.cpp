// Per-tensor sensitivity analysis (see sensitivity.h).
#include "quantizer/sensitivity.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <new>

#include "quantizer/quantize_model.h"
#include "quantizer/type_plan.h"

namespace pllm {
namespace {

double log_sum_exp(const float* x, int n) {
  float mx = x[0];
  for (int i = 1; i < n; ++i) mx = std::max(mx, x[i]);
  double s = 0;
  for (int i = 0; i < n; ++i) s += std::exp(double(x[i]) - mx);
  return double(mx) + std::log(s);
}

// KL(base || cur) of one position: base as log-probabilities, cur as logits.
double kl_position(const float* base_lp, const float* cur, int n) {
  const double lse = log_sum_exp(cur, n);
  double kl = 0;
  for (int i = 0; i < n; ++i) {
    const double lb = base_lp[i];
    kl += std::exp(lb) * (lb - (double(cur[i]) - lse));
  }
  return std::max(kl, 0.0);
}

// Squared error of the dequantised `q` against x, per column weighted by imp (or plain).
double weight_error(const float* x, const std::vector<uint8_t>& q, TensorType type, int64_t rows, int64_t cols,
                    const float* imp) {
  const size_t rb = size_t(*row_bytes(uint32_t(type), uint64_t(cols)));
  std::vector<float> y(static_cast<size_t>(cols));
  double e = 0;
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row_any(uint32_t(type), q.data() + size_t(r) * rb, y.data(), cols);
    const float* xr = x + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      const double d = double(xr[c]) - double(y[size_t(c)]);
      e += (imp ? double(imp[c]) : 1.0) * d * d;
    }
  }
  return e;
}

}  // namespace

Result<SensitivityReport> measure_sensitivity(const std::shared_ptr<Model>& model, std::span<const int32_t> tokens,
                                              const SensitivityOptions& opts) {
  if (opts.method == QuantMethod::act && !opts.stats)
    return make_error(Status::invalid_argument, "method act needs activation statistics");
  PLLM_ASSIGN(auto cal, Calibrator::create(model, opts.calib));
  const int V = model->config().n_vocab;
  const int64_t n_tok = cal->planned_tokens(tokens.size());
  std::vector<float> base_lp;
  try {
    base_lp.resize(size_t(n_tok) * size_t(V));
  } catch (const std::bad_alloc&) {
    return make_error(Status::out_of_memory, "not enough memory for the reference log-probabilities of " +
                                                 std::to_string(n_tok) + " tokens: use fewer sensitivity tokens");
  }
  ThreadPool pool(opts.calib.n_threads > 0 ? opts.calib.n_threads : default_thread_count());
  int64_t row = 0;
  PLLM_TRY(cal->run(tokens, nullptr, [&](const CalibBatch& b) -> Result<void> {
    pool.run(b.n, [&](int64_t i) {
      const float* l = b.logits + size_t(i) * size_t(V);
      float* out = base_lp.data() + size_t(row + i) * size_t(V);
      const double lse = log_sum_exp(l, V);
      for (int k = 0; k < V; ++k) out[k] = float(double(l[k]) - lse);
    });
    row += b.n;
    return {};
  }));

  SensitivityReport rep;
  rep.tokens = n_tok;
  const GgufFile& file = model->file();
  std::vector<const TensorInfo*> targets;
  for (const TensorInfo& t : file.tensors())
    if (t.dims.size() == 2) targets.push_back(&t);
  std::vector<double> kl_pos;
  for (size_t ti = 0; ti < targets.size(); ++ti) {
    const TensorInfo& t = *targets[ti];
    if (opts.progress) opts.progress(ti, targets.size(), t.name);
    const int64_t cols = int64_t(t.dims[0]), rows = int64_t(t.dims[1]);
    PLLM_ASSIGN(std::vector<float> x, dequantize_tensor(t));
    std::vector<float> imp;
    if (opts.method == QuantMethod::act)
      if (const ChannelStats* s = opts.stats->find(t.name)) imp = column_importance(*s);
    const float* w = imp.empty() ? nullptr : imp.data();
    const TensorType T = fallback_type(opts.type, uint64_t(cols));
    const std::vector<uint8_t> q = quantize_matrix(x.data(), rows, cols, T, opts.method, w, pool);

    PLLM_TRY(model->override_matrix(t.name, T, q.data()));
    double kl_sum = 0;
    row = 0;
    auto run = cal->run(tokens, nullptr, [&](const CalibBatch& b) -> Result<void> {
      kl_pos.assign(size_t(b.n), 0.0);
      pool.run(b.n, [&](int64_t i) {
        kl_pos[size_t(i)] = kl_position(base_lp.data() + size_t(row + i) * size_t(V), b.logits + size_t(i) * size_t(V), V);
      });
      for (double v : kl_pos) kl_sum += v;
      row += b.n;
      return {};
    });
    PLLM_TRY(model->restore_matrix(t.name));  // before anything else can fail
    PLLM_TRY(run);

    SensitivityEntry e;
    e.name = t.name;
    e.n_elements = t.n_elements;
    e.weight_error = weight_error(x.data(), q, T, rows, cols, w);
    e.candidates.push_back(PlanCandidate{T, q.size(), n_tok > 0 ? kl_sum / double(n_tok) : 0.0});
    const std::vector<TensorType> types = plan_candidate_types(opts.type, uint64_t(cols));
    for (size_t k = 1; k < types.size(); ++k) {
      const TensorType U = types[k];
      const std::vector<uint8_t> qu = quantize_matrix(x.data(), rows, cols, U, opts.method, w, pool);
      const double eu = weight_error(x.data(), qu, U, rows, cols, w);
      double kl = e.kl();  // both lossless: the same weights
      if (e.weight_error > 0)
        kl = e.kl() * eu / e.weight_error;
      else if (eu > 0)
        continue;  // a lossless base says nothing about a lossy type
      e.candidates.push_back(PlanCandidate{U, qu.size(), kl});
    }
    rep.entries.push_back(std::move(e));
  }
  if (opts.progress) opts.progress(targets.size(), targets.size(), "");
  return rep;
}

std::vector<TensorType> plan_candidate_types(TensorType base, uint64_t cols) {
  std::vector<TensorType> types{fallback_type(base, cols)};
  for (TensorType t : {TensorType::Q4_0, TensorType::Q4_K, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1,
                       TensorType::Q6_K, TensorType::Q8_0, TensorType::F16})
    if (t != types[0] && row_bytes(uint32_t(t), cols).has_value()) types.push_back(t);
  return types;
}

std::vector<PlanItem> plan_items(const SensitivityReport& r) {
  std::vector<PlanItem> items;
  for (const SensitivityEntry& e : r.entries) items.push_back(PlanItem{e.name, e.n_elements, e.candidates});
  return items;
}

}  // namespace pllm
