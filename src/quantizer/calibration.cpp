// Calibration driver (see calibration.h).
#include "quantizer/calibration.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace pllm {

Result<std::vector<int32_t>> tokenize_text_file(const Model& model, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(Status::io_error, "cannot read calibration text " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return make_error(Status::io_error, "cannot read calibration text " + path);
  const std::string text = ss.str();
  if (text.empty()) return make_error(Status::invalid_argument, "calibration text " + path + " is empty");
  PLLM_ASSIGN(std::vector<int32_t> ids, model.tokenizer().encode(text, true, false));
  if (ids.size() < 2) return make_error(Status::invalid_argument, "calibration text " + path + " is too short");
  return ids;
}

Result<std::unique_ptr<Calibrator>> Calibrator::create(std::shared_ptr<const Model> model,
                                                       const CalibrationOptions& opts) {
  if (!model) return make_error(Status::invalid_argument, "no model");
  if (opts.n_ctx < 2 || opts.n_ctx > (1 << 20))
    return make_error(Status::invalid_argument,
                      "calibration context must be 2..1048576 tokens (got " + std::to_string(opts.n_ctx) + ")");
  if (opts.max_tokens < 0) return make_error(Status::invalid_argument, "calibration token count must be >= 0");
  if (opts.n_batch < 1) return make_error(Status::invalid_argument, "calibration batch must be >= 1");
  std::unique_ptr<Calibrator> c(new Calibrator());
  c->opts_ = opts;
  c->opts_.n_batch = std::min(opts.n_batch, opts.n_ctx);
  SessionConfig sc;
  sc.n_ctx = opts.n_ctx;
  sc.n_batch = c->opts_.n_batch;
  sc.n_threads = opts.n_threads;
  sc.kv.type = KvType::f32;  // exact: statistics and reference logits without KV rounding
  sc.act = ActMode::exact;  // nor activation rounding
  PLLM_ASSIGN(c->session_, Session::create(std::move(model), sc));
  try {
    c->logits_.resize(size_t(c->opts_.n_batch) * size_t(c->session_->model().config().n_vocab));
  } catch (const std::bad_alloc&) {
    return make_error(Status::out_of_memory, "not enough memory for the calibration logits");
  }
  return c;
}

int64_t Calibrator::planned_tokens(size_t n_text) const {
  const int64_t n = int64_t(n_text);
  return opts_.max_tokens > 0 ? std::min(n, opts_.max_tokens) : n;
}

Result<int64_t> Calibrator::run(std::span<const int32_t> text, ActObserver* observer, const CalibLogitsFn& on_logits,
                                const CalibProgressFn& progress) {
  const int64_t total = planned_tokens(text.size());
  const Model& m = session_->model();
  const int n_vocab = m.config().n_vocab;
  const bool bos_first = m.tokenizer().add_bos() && m.tokenizer().bos() >= 0;
  const bool want_logits = on_logits || observer;
  struct Detach {  // the observer is attached for this run only, whatever happens
    Session& s;
    ~Detach() { s.set_act_observer(nullptr); }
  } detach{*session_};
  session_->set_act_observer(observer);

  std::vector<int32_t> chunk;
  int64_t done = 0;
  for (int64_t c = 0; done < total; ++c) {
    const int64_t len = std::min<int64_t>(opts_.n_ctx, total - done);
    chunk.assign(text.begin() + done, text.begin() + done + len);
    if (bos_first) chunk[0] = m.tokenizer().bos();
    session_->reset();
    for (int pos = 0; pos < len; pos += opts_.n_batch) {
      const int n = int(std::min<int64_t>(opts_.n_batch, len - pos));
      PLLM_TRY(session_->eval({chunk.data() + pos, size_t(n)}, want_logits ? logits_.data() : nullptr));
      if (on_logits) PLLM_TRY(on_logits(CalibBatch{c, pos, n, chunk.data() + pos, logits_.data(), n_vocab}));
      if (progress) progress(done + pos + n, total);
    }
    done += len;
  }
  return done;
}

}  // namespace pllm
