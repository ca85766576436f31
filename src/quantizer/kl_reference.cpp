// KL divergence against reference distributions (see kl_reference.h).
#include "quantizer/kl_reference.h"

#include <algorithm>
#include <cmath>
#include <new>

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

}  // namespace

Result<std::unique_ptr<KlReference>> KlReference::create(std::shared_ptr<const Model> model,
                                                         std::span<const int32_t> tokens,
                                                         const CalibrationOptions& calib) {
  std::unique_ptr<KlReference> r(new KlReference());
  r->n_vocab_ = model->config().n_vocab;
  PLLM_ASSIGN(r->cal_, Calibrator::create(std::move(model), calib));
  r->tokens_.assign(tokens.begin(), tokens.end());
  r->n_tok_ = r->cal_->planned_tokens(tokens.size());
  const int V = r->n_vocab_;
  try {
    r->base_lp_.resize(size_t(r->n_tok_) * size_t(V));
  } catch (const std::bad_alloc&) {
    return make_error(Status::out_of_memory, "not enough memory for the reference log-probabilities of " +
                                                 std::to_string(r->n_tok_) + " tokens: use fewer sensitivity tokens");
  }
  r->pool_ = std::make_unique<ThreadPool>(calib.n_threads > 0 ? calib.n_threads : default_thread_count());
  int64_t row = 0;
  KlReference& k = *r;
  PLLM_TRY(k.cal_->run(k.tokens_, nullptr, [&](const CalibBatch& b) -> Result<void> {
    k.pool_->run(b.n, [&](int64_t i) {
      const float* l = b.logits + size_t(i) * size_t(V);
      float* out = k.base_lp_.data() + size_t(row + i) * size_t(V);
      const double lse = log_sum_exp(l, V);
      for (int j = 0; j < V; ++j) out[j] = float(double(l[j]) - lse);
    });
    row += b.n;
    return {};
  }));
  return r;
}

Result<double> KlReference::measure() {
  const int V = n_vocab_;
  double kl_sum = 0;
  int64_t row = 0;
  PLLM_TRY(cal_->run(tokens_, nullptr, [&](const CalibBatch& b) -> Result<void> {
    kl_pos_.assign(size_t(b.n), 0.0);
    pool_->run(b.n, [&](int64_t i) {
      kl_pos_[size_t(i)] = kl_position(base_lp_.data() + size_t(row + i) * size_t(V), b.logits + size_t(i) * size_t(V), V);
    });
    for (double v : kl_pos_) kl_sum += v;
    row += b.n;
    return {};
  }));
  return n_tok_ > 0 ? kl_sum / double(n_tok_) : 0.0;
}

}  // namespace pllm
