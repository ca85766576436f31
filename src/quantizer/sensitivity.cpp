// Per-tensor sensitivity analysis (see sensitivity.h).
#include "quantizer/sensitivity.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <new>

#include "quantizer/kl_reference.h"
#include "quantizer/quantize_model.h"
#include "quantizer/type_plan.h"

namespace pllm {
namespace {

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
  PLLM_ASSIGN(auto ref, KlReference::create(model, tokens, opts.calib));
  ThreadPool pool(opts.calib.n_threads > 0 ? opts.calib.n_threads : default_thread_count());

  SensitivityReport rep;
  rep.tokens = ref->tokens();
  const GgufFile& file = model->file();
  std::vector<const TensorInfo*> targets;
  for (const TensorInfo& t : file.tensors())
    if (t.dims.size() == 2) targets.push_back(&t);
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
    auto measured = ref->measure();
    PLLM_TRY(model->restore_matrix(t.name));  // before anything else can fail
    PLLM_TRY(measured);

    SensitivityEntry e;
    e.name = t.name;
    e.n_elements = t.n_elements;
    e.weight_error = weight_error(x.data(), q, T, rows, cols, w);
    e.candidates.push_back(PlanCandidate{T, q.size(), measured.value()});
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
