#include "runtime/session.h"

#include <algorithm>

#include "model/kv_snapshot.h"
#include "runtime/prefix_cache.h"

namespace pllm {

namespace {

// Per layer: its own sliding window (Gemma 3's local layers), 0 for full attention.
std::vector<int> layer_windows(const ModelConfig& c) {
  std::vector<int> w(size_t(c.n_layer), 0);
  for (int l = 0; l < c.n_layer; ++l)
    if (c.is_local_layer(l)) w[size_t(l)] = c.sliding_window;
  return w;
}

}  // namespace

Session::Session(std::shared_ptr<const Model> model, std::shared_ptr<Engine> engine, int n_ctx,
                 const SessionConfig& cfg)
    : model_(std::move(model)),
      engine_(std::move(engine)),
      n_ctx_(n_ctx),
      n_batch_(std::min(cfg.n_batch, n_ctx)),
      act_mode_(cfg.act),
      fuse_(cfg.fuse),
      image_rows_(cfg.image_rows ? cfg.image_rows : std::make_shared<ImageRows>()) {
  kv_ = std::make_unique<KvCache>(model_->config(), cfg.kv, n_ctx_, n_batch_, layer_windows(model_->config()));
  if (cfg.profile) tracer_ = std::make_unique<Tracer>();
  history_.reserve(size_t(n_ctx));
  logits_.resize(size_t(model_->config().n_vocab));
}

Result<std::unique_ptr<Session>> Session::create(std::shared_ptr<const Model> model, const SessionConfig& cfg,
                                                 std::shared_ptr<Engine> engine) {
  if (!model) return make_error(Status::invalid_argument, "no model");
  if (model->vocab_only()) return make_error(Status::invalid_argument, "model was loaded vocab-only");
  if (cfg.n_ctx < 0 || cfg.n_ctx > (1 << 20))
    return make_error(Status::invalid_argument, "context size " + std::to_string(cfg.n_ctx) + " is out of range");
  if (cfg.n_threads < 0 || cfg.n_threads > 256)
    return make_error(Status::invalid_argument, "thread count " + std::to_string(cfg.n_threads) + " is out of range");
  if (cfg.n_batch < 1 || cfg.n_batch > 4096) return make_error(Status::invalid_argument, "bad batch size");
  if (act_mode_name(cfg.act) == "unknown")
    return make_error(Status::invalid_argument, "unknown activation mode " + std::to_string(int(cfg.act)));
  if (cfg.act == ActMode::int8_static && model->act_scale_counts().n_static == 0)
    return make_error(Status::invalid_argument,
                      "static activations need calibrated scales, and " + model->file().path() +
                          " has none (no pocketllm.act_scale.* metadata; pocketllm calibrate-act writes them)");
  PLLM_TRY(KvCache::validate(model->config(), cfg.kv));
  const int n_ctx = cfg.n_ctx > 0 ? cfg.n_ctx : std::min(model->config().n_ctx_train, 4096);
  if (!engine) {
    PLLM_ASSIGN(engine, Engine::create(cfg.n_threads, cfg.backend));
  }
  try {
    return std::unique_ptr<Session>(new Session(std::move(model), std::move(engine), n_ctx, cfg));
  } catch (const std::bad_alloc&) {
    return make_error(Status::out_of_memory, "not enough memory for a context of " + std::to_string(n_ctx));
  }
}

namespace {
// The session whose background work this thread runs: its own calls must not wait for themselves.
thread_local const Session* tl_background = nullptr;
}  // namespace

Session::~Session() {
  stop_background();
  engine_->forget_cache(kv_.get());
}

void Session::stop_background() {
  if (tl_background == this || !background_.joinable()) return;
  cancel_.store(true);
  background_.join();
  cancel_.store(false);
}

Result<void> Session::wait_background() {
  if (tl_background != this && background_.joinable()) background_.join();
  return background_result_;
}

void Session::start_background(BackgroundWork work) {
  stop_background();
  background_result_ = Result<void>();
  background_ = std::thread([this, w = std::move(work)] {
    tl_background = this;
    lower_thread_priority(10);  // as the background lane's workers (Linux nice)
    lane_ = Engine::Lane::background;
    background_result_ = w(*this);
    lane_ = Engine::Lane::foreground;  // before the thread ends: whoever joins it sees the foreground lane
    tl_background = nullptr;
  });
}

StepOptions Session::step_options() const { return {act_mode_, fuse_, tracer_.get(), observer_}; }

Result<void> Session::run(std::span<const int32_t> tokens, float* logits, bool all_logits,
                          std::span<const uint8_t> skip_layers, bool as_decode_steps) {
  if (tokens.empty()) return make_error(Status::invalid_argument, "no tokens to evaluate");
  if (!unbounded() && history_.size() + tokens.size() > size_t(n_ctx()))
    return make_error(Status::out_of_range, std::to_string(history_.size() + tokens.size()) +
                                                " tokens do not fit the context of " + std::to_string(n_ctx()));
  size_t done = 0;
  while (done < tokens.size()) {
    const std::span<const int32_t> rest = tokens.subspan(done);
    SeqStep seq{kv_.get(), {}, nullptr, all_logits, &cancel_, as_decode_steps};
    std::shared_ptr<const std::vector<float>> embd;  // alive until the step is done
    size_t n = std::min(rest.size(), size_t(n_batch_));
    if (rest[0] >= 0) {  // text, up to the next image row
      n = size_t(std::find_if(rest.begin(), rest.begin() + ptrdiff_t(n), [](int32_t t) { return t < 0; }) -
                 rest.begin());
    } else {  // one image tile's rows (runtime/image_rows.h)
      if (!skip_layers.empty() || as_decode_steps)
        return make_error(Status::invalid_argument, "image rows cannot be drafted or verified");
      PLLM_ASSIGN(const ImageRun run, image_rows_->run_at(rest));
      if (run.tile->bidirectional && run.first_row > 0) return resume_image(run, tokens, logits, all_logits, done);
      if (run.tile->bidirectional && size_t(run.n) > size_t(n_batch_))
        return make_error(Status::invalid_argument, std::to_string(run.n) + " image rows that see each other need one "
                                                    "step, but the session's batch is " + std::to_string(n_batch_) +
                                                    " rows (raise n_batch)");
      n = run.tile->bidirectional ? size_t(run.n) : std::min(n, size_t(run.n));
      PLLM_TRY(engine_->run_on_threads(
          [&](ThreadPool& pool) -> Result<void> {
            PLLM_ASSIGN(embd, image_rows_->embeddings(*run.tile, pool));
            return {};
          },
          lane_));
      const size_t E = size_t(model_->config().n_embd);
      if (embd->size() != run.tile->ids.size() * E)
        return make_error(Status::invalid_argument, "an image's embeddings do not match the model's width");
      seq.embeddings = embd->data() + size_t(run.first_row) * E;
      seq.bidirectional = run.tile->bidirectional;
    }
    seq.tokens = rest.first(n);
    if (all_logits) seq.logits = logits + done * size_t(model_->config().n_vocab);
    else if (done + n == tokens.size()) seq.logits = logits;
    StepOptions opt = step_options();
    opt.skip_layers = skip_layers;
    auto r = engine_->forward(*model_, {&seq, 1}, opt, lane_);
    if (!r.ok()) {  // the failed batch may have written part of the cache: forget it
      history_.resize(size_t(kv_->truncate(int(history_.size()))));
      return r.error();
    }
    history_.insert(history_.end(), rest.begin(), rest.begin() + ptrdiff_t(n));
    done += n;
  }
  return {};
}

Result<void> Session::resume_image(const ImageRun& at, std::span<const int32_t> tokens, float* logits,
                                   bool all_logits, size_t done) {
  // The history ends inside an image whose rows see each other (truncated there): they must run
  // together, so the rows already held run again with the rest.
  const auto& ids = at.tile->ids;
  const size_t r = size_t(at.first_row);
  if (done > 0 || history_.size() < r ||
      !std::equal(ids.begin(), ids.begin() + ptrdiff_t(r), history_.end() - ptrdiff_t(r)))
    return make_error(Status::invalid_argument, "an image's rows out of order");
  const std::vector<int32_t> before = history_;
  truncate(history_.size() - r);  // may keep fewer (a window slid past): those run again too
  std::vector<int32_t> again(before.begin() + ptrdiff_t(history_.size()), before.end());
  const size_t n_again = again.size();
  again.insert(again.end(), tokens.begin(), tokens.end());
  if (!all_logits) return run(again, logits, false);
  // Every row's logits: the caller's rows are the last tokens.size() of the run.
  const size_t V = size_t(model_->config().n_vocab);
  std::vector<float> all(again.size() * V);
  PLLM_TRY(run(again, all.data(), true));
  std::copy(all.begin() + ptrdiff_t(n_again * V), all.end(), logits);
  return {};
}

void Session::truncate(size_t n) {
  stop_background();
  if (n >= history_.size()) return;
  history_.resize(size_t(kv_->truncate(int(n))));
}

Result<void> Session::truncate_exactly(size_t n) {
  stop_background();
  if (n >= history_.size()) return {};
  const size_t kept = size_t(kv_->truncate(int(n)));
  if (kept == n) {
    history_.resize(n);
    return {};
  }
  // The rare case (a window slid past, a q4 group quantised): the tokens the cache dropped, again.
  const std::vector<int32_t> lost(history_.begin() + ptrdiff_t(kept), history_.begin() + ptrdiff_t(n));
  history_.resize(kept);
  return run(lost, nullptr, false);
}

Result<std::vector<uint8_t>> Session::save_prefix(size_t n) {
  stop_background();
  if (n > history_.size())
    return make_error(Status::out_of_range, "snapshot of " + std::to_string(n) + " tokens, but the session holds " +
                                                std::to_string(history_.size()));
  return make_kv_snapshot(*kv_, model_->identity(), std::span<const int32_t>(history_.data(), n));
}

Result<void> Session::restore_prefix(std::span<const uint8_t> snapshot, bool verified) {
  stop_background();
  PLLM_ASSIGN(const KvSnapshotView view, parse_kv_snapshot(snapshot, !verified));
  if (!unbounded() && size_t(view.n_pos) >= size_t(n_ctx()))
    return make_error(Status::out_of_range, "snapshot of " + std::to_string(view.n_pos) +
                                                " tokens does not fit the context of " + std::to_string(n_ctx()));
  const int n_vocab = model_->config().n_vocab;
  std::vector<int32_t> ids = view.token_ids();
  for (int32_t id : ids)  // tokens, or image rows (their KV is restored; they are not run)
    if (id < kMinImageRowId || id >= n_vocab) return make_error(Status::bad_format, "KV snapshot holds an invalid token id");
  PLLM_TRY(restore_kv_snapshot(*kv_, model_->identity(), view));
  history_.assign(ids.begin(), ids.end());
  return {};
}

Result<void> Session::eval(std::span<const int32_t> tokens, float* logits_all) {
  stop_background();
  return run(tokens, logits_all, logits_all != nullptr);
}

Result<void> Session::eval_as_steps(std::span<const int32_t> tokens, float* logits_all) {
  stop_background();
  return run(tokens, logits_all, true, {}, /*as_decode_steps=*/true);
}

Result<void> Session::eval_last(std::span<const int32_t> tokens) {
  stop_background();
  return run(tokens, logits_.data(), false);
}

Result<void> Session::eval_skipping(std::span<const int32_t> tokens, std::span<const uint8_t> skip_layers,
                                   float* logits_all) {
  stop_background();
  return logits_all ? run(tokens, logits_all, true, skip_layers) : run(tokens, logits_.data(), false, skip_layers);
}

uint32_t Session::compute_tag() const { return uint32_t(act_mode_); }

}  // namespace pllm
