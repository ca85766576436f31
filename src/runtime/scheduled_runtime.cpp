// ScheduledRuntime: requests, sessions, the step and the driver thread.
#include "runtime/scheduled_runtime.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "runtime/prefix_reuse.h"
#include "runtime/scheduled_runtime_parts.h"
#include "runtime/trace_log.h"

namespace pllm {
namespace {

std::function<double()> steady_clock_ms() {
  const auto t0 = std::chrono::steady_clock::now();
  return [t0] { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(); };
}

}  // namespace

ScheduledRuntime::ScheduledRuntime(std::shared_ptr<const Model> model, std::shared_ptr<Engine> engine,
                                   RuntimeConfig cfg, Scheduler sched, FramePolicy policy)
    : model_(std::move(model)),
      engine_(std::move(engine)),
      cfg_(std::move(cfg)),
      scratch_(std::make_unique<StepBuffers>()),
      sched_(std::move(sched)),
      frame_policy_(std::move(policy)) {
  clock_ = cfg_.clock_ms ? cfg_.clock_ms : steady_clock_ms();
}

Result<std::unique_ptr<ScheduledRuntime>> ScheduledRuntime::create(std::shared_ptr<const Model> model,
                                                                   std::shared_ptr<Engine> engine,
                                                                   RuntimeConfig cfg) {
  if (!model || !engine) return make_error(Status::invalid_argument, "runtime: null model or engine");
  if (cfg.max_batch_rows < 1) return make_error(Status::invalid_argument, "runtime: max_batch_rows must be >= 1");
  if (!(cfg.interactive_ttft_bound_ms >= 0) || !(cfg.background_ttft_bound_ms >= 0))
    return make_error(Status::invalid_argument, "runtime: first-token bounds must be >= 0");
  if (cfg.kv_budget_tokens < 1) return make_error(Status::invalid_argument, "runtime: kv_budget_tokens must be >= 1");
  if (cfg.governor && cfg.governor->total_threads == 0) cfg.governor->total_threads = engine->n_threads();
  std::optional<ThermalGovernor> gov;
  if (cfg.governor) {
    PLLM_ASSIGN(ThermalGovernor g, ThermalGovernor::create(*cfg.governor));
    gov.emplace(std::move(g));
  }
  PLLM_ASSIGN(Scheduler sched, Scheduler::create(cfg.scheduler));
  PLLM_ASSIGN(FramePolicy policy, FramePolicy::create(cfg.frame_policy));
  std::unique_ptr<ScheduledRuntime> rt(new ScheduledRuntime(std::move(model), std::move(engine), std::move(cfg),
                                                            std::move(sched), std::move(policy)));
  rt->governor_ = std::move(gov);
  return rt;
}

ScheduledRuntime::~ScheduledRuntime() { stop(); }

Result<int64_t> ScheduledRuntime::add_session(const SessionConfig& cfg) {
  if (cfg.n_batch < cfg_.scheduler.prefill_chunk)
    return make_error(Status::invalid_argument, "runtime: the session's n_batch (" + std::to_string(cfg.n_batch) +
                                                    ") must hold a prefill chunk (" +
                                                    std::to_string(cfg_.scheduler.prefill_chunk) + ")");
  PLLM_ASSIGN(std::unique_ptr<Session> s, Session::create(model_, cfg, engine_));
  std::lock_guard lk(mu_);
  if (compute_tag_ && *compute_tag_ != s->compute_tag())
    return make_error(Status::invalid_argument,
                      "runtime: every session steps in one forward pass, so all need the same activation mode");
  compute_tag_ = s->compute_tag();
  const int64_t key = next_session_++;
  auto slot = std::make_unique<Slot>();
  slot->session = std::move(s);
  slots_.emplace(key, std::move(slot));
  return key;
}

Result<void> ScheduledRuntime::remove_session(int64_t key) {
  std::vector<Delivery> events;
  {
    removers_.fetch_add(1);
    std::lock_guard step_lk(step_mu_);
    removers_.fetch_sub(1);
    std::lock_guard lk(mu_);
    auto it = slots_.find(key);
    if (it == slots_.end()) return make_error(Status::invalid_argument, "runtime: no session " + std::to_string(key));
    // Reset ends every pending request of the session and forgets its KV accounting.
    PLLM_TRY(sched_.submit({kControlBit | next_id_++, key, RequestClass::control, {}, clock_(),
                            RequestKind::control, 0, ControlAction::reset}));
    PLLM_ASSIGN(StepPlan plan, sched_.plan_controls());
    for (const EndedRequest& e : plan.ended) finish(e, events);
    slots_.erase(key);
  }
  deliver(events);
  idle_cv_.notify_all();
  return {};
}

Result<uint64_t> ScheduledRuntime::submit(int64_t session, RuntimeRequest req) {
  if (req.klass == RequestClass::control)
    return make_error(Status::invalid_argument, "runtime: use control() for cancel, reset and interrupt");
  if (req.prompt.empty() && req.max_tokens <= 0)
    return make_error(Status::invalid_argument, "runtime: a request needs a prompt or max_tokens > 0");
  if (req.max_tokens < 0) return make_error(Status::invalid_argument, "runtime: max_tokens must be >= 0");
  const int32_t n_vocab = model_->config().n_vocab;
  for (int32_t t : req.prompt)  // tokens, or image rows (runtime/image_rows.h)
    if (t < kMinImageRowId || t >= n_vocab)
      return make_error(Status::invalid_argument, "runtime: prompt token " + std::to_string(t) + " is out of range");
  std::lock_guard lk(mu_);
  auto it = slots_.find(session);
  if (it == slots_.end()) return make_error(Status::invalid_argument, "runtime: no session " + std::to_string(session));
  for (int32_t t : req.prompt)
    if (t < 0 && !it->second->session->image_rows().contains(t))
      return make_error(Status::invalid_argument, "runtime: prompt token " + std::to_string(t) +
                                                      " is not an image row the session knows (send the image again)");
  const uint64_t id = next_id_++;
  const double now = clock_();
  auto live = std::make_unique<Live>();
  live->id = id;
  live->session = session;
  live->submit_ms = now;
  if (req.draft.kind != DraftKind::none) {
    // Made for the session (a draft model's session shares the engine); per request, so a
    // session's next request may draft another way.
    PLLM_ASSIGN(live->drafter, make_drafter(req.draft, *it->second->session));
    live->draft_length.emplace(0, req.draft.max_tokens, live->drafter->free());
  }
  const bool idle = std::none_of(live_.begin(), live_.end(), [&](const auto& kv) { return kv.second->session == session; });
  if (idle && !req.prompt.empty()) {
    live->cached = int(restore_prefix_locked(session, *it->second, req.prompt));
    req.prompt.erase(req.prompt.begin(), req.prompt.begin() + live->cached);
  }
  SchedulerRequest sr{0, session, req.klass, req.base_weight, now, RequestKind::prefill, 0, ControlAction::cancel};
  if (!req.prompt.empty()) {
    sr.id = prompt_part(id);
    sr.tokens = int(std::min<size_t>(req.prompt.size(), size_t(1) << 30));
    PLLM_TRY(sched_.submit(sr));
    live->prompt_pending = true;
  }
  if (req.max_tokens > 0) {
    sr.id = gen_part(id);
    sr.kind = RequestKind::generate;
    sr.tokens = req.max_tokens;
    sr.draft_tokens = live->drafter ? req.draft.max_tokens : 0;
    auto r = sched_.submit(sr);
    if (!r.ok()) {
      // The prompt part is queued already; the request cannot be half-taken. Only a bad
      // weight fails here, and the prompt part would have failed first on it.
      return r.error();
    }
    live->gen_pending = true;
  }
  if (tracing())
    cfg_.trace->async_begin("request", id, {{"interactive", req.klass == RequestClass::interactive ? 1.0 : 0.0},
                                            {"prompt_tokens", double(req.prompt.size())},
                                            {"max_tokens", double(req.max_tokens)},
                                            {"session", double(session)}});
  if (req.klass == RequestClass::interactive && preemptible_step_) {
    // Interactive work preempts background work within one step: a step of background rows
    // stops at its next layer; its prompt chunks run again, and its decode rows feed their
    // (already streamed) tokens again, so no output changes.
    for (auto& [key, slot] : slots_)
      if (slot->in_flight) {
        slot->preempted = true;
        slot->session->request_cancel();
      }
    preemptible_step_ = false;
    if (tracing()) cfg_.trace->instant("preempt_step", {{"request", double(id)}});
  }
  if (req.on_event) live->on_event = std::make_shared<const RuntimeCallback>(std::move(req.on_event));
  live->req = std::move(req);
  live_.emplace(id, std::move(live));
  ++wake_seq_;
  work_cv_.notify_all();
  return id;
}

Result<void> ScheduledRuntime::control(int64_t session, ControlAction action) {
  std::lock_guard lk(mu_);
  auto it = slots_.find(session);
  if (it == slots_.end()) return make_error(Status::invalid_argument, "runtime: no session " + std::to_string(session));
  PLLM_TRY(sched_.submit({kControlBit | next_id_++, session, RequestClass::control, {}, clock_(),
                          RequestKind::control, 0, action}));
  // A row of this session in the running step stops there (the session stays as before it).
  // The in-flight row is the front request's, which every action ends.
  if (it->second->in_flight) it->second->session->request_cancel();
  ++wake_seq_;
  work_cv_.notify_all();
  return {};
}

Result<void> ScheduledRuntime::frame(double frame_start_ms, double period_ms) {
  std::lock_guard lk(mu_);
  if (!std::isfinite(period_ms) || period_ms <= 0)
    return make_error(Status::invalid_argument, "frame: the period must be finite and > 0");
  PLLM_TRY(sched_.on_frame(frame_start_ms));
  frame_policy_.on_frame(frame_start_ms, period_ms, clock_());
  engine_->set_active_threads(shape_locked(clock_()).threads);  // a step in flight: from its next op
  auto_period_ms_ = 0;  // the app's clock takes over from frame_period()
  next_auto_frame_ms_.reset();
  if (tracing()) cfg_.trace->instant("frame", {{"period_ms", period_ms}});
  ++wake_seq_;
  work_cv_.notify_all();
  return {};
}

Result<void> ScheduledRuntime::frame_period(double period_ms) {
  std::lock_guard lk(mu_);
  if (!std::isfinite(period_ms) || period_ms < 0)
    return make_error(Status::invalid_argument, "runtime: the frame period (" + std::to_string(period_ms) +
                                                    " ms) must be 0 or more");
  auto_period_ms_ = period_ms;
  next_auto_frame_ms_.reset();
  if (period_ms == 0) {
    sched_.stop_frames();
    frame_policy_.stop_frames();
  }
  ++wake_seq_;
  work_cv_.notify_all();
  return {};
}

void ScheduledRuntime::auto_frame_locked(double now) {
  if (auto_period_ms_ <= 0) return;
  if (!next_auto_frame_ms_) next_auto_frame_ms_ = now;
  if (now < *next_auto_frame_ms_) return;
  // The frame that holds `now` (frames the engine slept through are skipped, not replayed).
  const double k = std::floor((now - *next_auto_frame_ms_) / auto_period_ms_);
  const double start = *next_auto_frame_ms_ + k * auto_period_ms_;
  (void)sched_.on_frame(start);  // later than the last frame's start: cannot fail
  frame_policy_.on_frame(start, auto_period_ms_, start);  // its own frames are never late
  next_auto_frame_ms_ = start + auto_period_ms_;
}

void ScheduledRuntime::stop_frames() {
  std::lock_guard lk(mu_);
  auto_period_ms_ = 0;
  next_auto_frame_ms_.reset();
  sched_.stop_frames();
  frame_policy_.stop_frames();
  ++wake_seq_;
  work_cv_.notify_all();
}

Result<void> ScheduledRuntime::report_ui_frame(double frame_start_ms, double ui_ms) {
  std::lock_guard lk(mu_);
  PLLM_TRY(frame_policy_.report_ui(frame_start_ms, ui_ms));
  // The UI is idle until the next vsync: a step in flight takes every thread from its next op.
  if (sched_.frame_mode()) engine_->set_active_threads(shape_locked(clock_()).threads);
  return {};
}

int ScheduledRuntime::ttft_over_bound() const { return ttft_over_bound_.load(std::memory_order_relaxed); }

FrameStats ScheduledRuntime::frame_stats() const {
  std::lock_guard lk(mu_);
  return FrameStats{frame_policy_.ui_estimate_ms(), frame_policy_.holds(), frame_policy_.probes(),
                    frame_policy_.misses()};
}

size_t ScheduledRuntime::pending() const {
  std::lock_guard lk(mu_);
  return live_.size();
}

Caps ScheduledRuntime::caps() const {
  std::lock_guard lk(mu_);
  if (governor_) return governor_->caps();
  return Caps{cfg_.max_batch_rows, kUnlimitedStepsPerS, engine_->n_threads(), 0};
}

bool ScheduledRuntime::tracing() const { return cfg_.trace && cfg_.trace->enabled(); }

int ScheduledRuntime::governor_changes() const {
  std::lock_guard lk(mu_);
  return governor_ ? governor_->changes() : 0;
}

const Session* ScheduledRuntime::session(int64_t key) const {
  std::lock_guard lk(mu_);
  auto it = slots_.find(key);
  return it == slots_.end() ? nullptr : it->second->session.get();
}

// Only for a session with no context and nothing pending (so no step touches it); at least
// one prompt token is left to compute, for the logits the generation starts from.
size_t ScheduledRuntime::restore_prefix_locked(int64_t key, Slot& slot, std::span<const int32_t> prompt) {
  PrefixCache* pc = cfg_.prefix_cache.get();
  if (!pc || !slot.session->history().empty()) return 0;
  const size_t n = restore_cached_prefix(*slot.session, *pc, prompt, 0, prompt.size() - 1);
  if (n == 0) return 0;
  slot.has_logits = false;
  (void)sched_.report_kv(key, int64_t(n));  // a count >= 0: cannot fail
  return n;
}

FrameShape ScheduledRuntime::shape_locked(double now) {
  const int all = engine_->n_threads();
  FrameShape shape{all, true};
  if (sched_.frame_mode()) shape = frame_policy_.shape(now, all, int(std::thread::hardware_concurrency()));
  if (governor_) shape.threads = std::clamp(governor_->caps().max_threads, 1, shape.threads);
  return shape;
}

StepBudget ScheduledRuntime::budget_locked() const {
  StepBudget b;
  b.max_batch_rows = cfg_.max_batch_rows;
  if (governor_) b.max_batch_rows = std::max(1, std::min(b.max_batch_rows, governor_->caps().max_batch));
  b.kv_tokens = cfg_.kv_budget_tokens;
  return b;
}

}  // namespace pllm
