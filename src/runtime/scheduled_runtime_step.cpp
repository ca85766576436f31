// ScheduledRuntime: one step (plan, sample, forward, complete), ending requests, moving paused
// sessions out and back, the governor, and the driver thread.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "runtime/prefix_reuse.h"
#include "runtime/scheduled_runtime.h"
#include "runtime/scheduled_runtime_parts.h"
#include "runtime/trace_log.h"

namespace pllm {

namespace {

// log-softmax of the raw logits at `token`, and the k most likely tokens with theirs.
void log_probs(std::span<const float> logits, int32_t token, int k, RuntimeEvent& ev) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float x : logits) sum += std::exp(double(x - mx));
  const float lse = mx + float(std::log(sum));
  ev.logprob = logits[size_t(token)] - lse;
  // The k (<= 20) best in one pass, kept sorted by insertion: no vocabulary-sized index array.
  k = std::min<int>(k, int(logits.size()));
  for (size_t i = 0; i < logits.size(); ++i) {
    const float x = logits[i] - lse;
    if (int(ev.top.size()) == k && (k == 0 || x <= ev.top.back().second)) continue;
    if (int(ev.top.size()) == k) ev.top.pop_back();
    auto at = std::find_if(ev.top.begin(), ev.top.end(), [&](const auto& t) { return x > t.second; });
    ev.top.insert(at, {int32_t(i), x});
  }
}

}  // namespace

Result<StepOutcome> ScheduledRuntime::step() {
  std::vector<Delivery> events;
  Result<StepOutcome> r = StepOutcome{};
  // A remove_session waiting for the step lock goes first: the mutex is not fair, and a
  // driver that takes it again at once left a remover (an HTTP client gone) waiting seconds.
  while (removers_.load(std::memory_order_acquire) > 0) std::this_thread::yield();
  {
    std::lock_guard step_lk(step_mu_);
    TraceLog* log = tracing() ? cfg_.trace : nullptr;
    const int64_t t0 = log ? TraceLog::now_ns() : 0;
    r = step_locked(events);
    if (log && r.ok()) trace_step(*log, t0, *r);
  }
  deliver(events);  // end events: outside the step, so their callbacks may remove sessions
  idle_cv_.notify_all();
  if (r.ok() && r->kind == StepOutcome::Kind::ran && cfg_.on_step) cfg_.on_step(*r);
  return r;
}

Result<StepOutcome> ScheduledRuntime::step_locked(std::vector<Delivery>& events) {
  const double t_start = clock_();
  StepOutcome out;
  StepPlan plan;
  std::vector<RowWork>& work = scratch_->work;  // reused: a steady step allocates no buffers here
  work.clear();
  {
    std::lock_guard lk(mu_);
    StepBudget budget = budget_locked();
    out.max_batch_rows = budget.max_batch_rows;
    out.governor_level = governor_ ? governor_->level() : 0;
    if (live_.empty()) {  // controls on sessions with nothing pending change nothing worth a plan
      out.kind = StepOutcome::Kind::idle;
    } else if (t_start < next_step_ms_) {
      out.kind = StepOutcome::Kind::throttled;
      out.resume_at_ms = next_step_ms_;
      return out;
    }
    auto_frame_locked(t_start);
    check_ttft_bounds_locked(t_start);
    const FrameShape shape = shape_locked(t_start);
    budget.cost_key = shape.threads;  // steps on fewer threads cost more: each count learns its own
    PLLM_ASSIGN(plan, sched_.plan_step(t_start, budget));
    apply_plan_effects_locked(plan, events);
    const bool changed = !plan.ended.empty() || !plan.controls.empty() || !plan.paused.empty() || !plan.resumed.empty();
    out.threads = shape.threads;
    engine_->set_active_threads(out.threads);  // under the lock: frame() and report_ui_frame() change it too
    for (const PlanRow& row : plan.rows) {
      RowWork w;
      w.row = row;
      w.slot = slots_.at(row.session).get();
      w.live = live_.at(row.request / 2).get();
      w.slot->in_flight = true;
      work.push_back(std::move(w));
    }
    preemptible_step_ = std::all_of(plan.rows.begin(), plan.rows.end(), [&](const PlanRow& r) {
      return live_.at(r.request / 2)->req.klass == RequestClass::background;
    });
    if (plan.rows.empty()) {
      out.kind = changed ? StepOutcome::Kind::ran
                 : plan.wait_for_frame ? StepOutcome::Kind::wait_frame
                                       : StepOutcome::Kind::idle;
      if (out.kind == StepOutcome::Kind::wait_frame && next_auto_frame_ms_) out.resume_at_ms = *next_auto_frame_ms_;
      out.step_ms = clock_() - t_start;
      return out;
    }
  }

  // Sampling and the forward pass run outside the lock: the slots and requests of the rows
  // stay put (only this thread, or remove_session under step_mu_, erases them).
  const int32_t n_vocab = model_->config().n_vocab;
  std::vector<SessionStep>& steps = scratch_->steps;
  steps.clear();
  std::vector<size_t>& step_of = scratch_->step_of;
  step_of.assign(work.size(), SIZE_MAX);
  std::vector<float>& logprob_scratch = scratch_->logits;  // raw logits, for requests asking logprobs
  for (size_t i = 0; i < work.size(); ++i) {
    RowWork& w = work[i];
    Session& s = *w.slot->session;
    Live& live = *w.live;
    if (live.reason) {  // its prompt part ended early: so does the generation
      w.result = RowResult{0, false, live.status == Status::ok ? Status::cancelled : live.status};
      continue;
    }
    std::span<const int32_t> tokens;
    bool logits = true;
    if (w.row.is_prefill) {
      tokens = std::span<const int32_t>(live.req.prompt).subspan(size_t(live.prompted), size_t(w.row.n_tokens));
      logits = size_t(live.prompted + w.row.n_tokens) == live.req.prompt.size();  // the last chunk's
    } else if (live.replay_token) {  // its last pass was stopped, or a guess was not kept: the token is streamed already
      w.token = *live.replay_token;
      live.replay_token.reset();
      tokens = std::span<const int32_t>(&w.token, 1);
    } else {
      if (!w.slot->has_logits) {  // nothing to sample from: no context (reset, or never prompted)
        w.result = RowResult{0, false, Status::invalid_argument};
        continue;
      }
      if (!live.sampler) live.sampler = std::make_unique<Sampler>(live.req.sampling, n_vocab, live.req.grammar);
      if (live.req.top_logprobs >= 0) logprob_scratch.assign(s.last_logits(), s.last_logits() + n_vocab);
      w.token = live.sampler->sample(s.last_logits(), s.history());
      if (w.token == Sampler::kNoToken) {  // the grammar allows no token: the request fails
        w.result = RowResult{0, false, Status::invalid_argument};
        continue;
      }
      if (!emit_token(live, w.token, live.req.top_logprobs >= 0 ? logprob_scratch.data() : nullptr)) {
        w.result = RowResult{0, true, Status::ok};  // nothing may follow: no step to compute it
        continue;
      }
      tokens = std::span<const int32_t>(&w.token, 1);
    }
    float* all_logits = nullptr;
    if (!w.row.is_prefill && live.drafter) {
      auto row = draft_row(w);
      if (!row.ok()) {
        w.result = RowResult{0, false, row.error().code};
        continue;
      }
      tokens = *row;
      all_logits = live.verify_logits.data();
    }
    step_of[i] = steps.size();
    steps.push_back(SessionStep{&s, tokens, logits, all_logits, {}, all_logits != nullptr});
  }
  const double t_fwd = clock_();
  if (!steps.empty()) (void)Session::step(steps);  // a step-wide error is in every result too
  out.forward_ms = clock_() - t_fwd;

  std::vector<RowResult>& results = scratch_->results;
  results.clear();
  int64_t context_sum = 0;
  bool cut = false;  // a row came back stopped for an interactive submit
  for (size_t i = 0; i < work.size(); ++i) {
    RowWork& w = work[i];
    if (step_of[i] != SIZE_MAX) {
      const SessionStep& st = steps[step_of[i]];
      if (st.result.ok() && st.logits_all) {
        w.result = settle_verify(w, out.forward_ms);
      } else if (st.result.ok()) {
        w.result = RowResult{w.row.n_tokens, false, Status::ok};
        w.slot->has_logits = st.logits;
        if (w.row.is_prefill) w.live->prompted += w.row.n_tokens;
      } else if (w.slot->preempted && st.result.error().code == Status::cancelled) {
        w.result = RowResult{0, false, Status::ok};  // preempted: the row runs again later
        if (!w.row.is_prefill) w.live->replay_token = w.token;
        cut = true;
      } else {
        w.result = RowResult{0, false, st.result.error().code};
      }
    }
    (w.row.is_prefill ? out.prefill_tokens : out.decode_rows) += w.row.is_prefill ? w.row.n_tokens : 1;
    if (!w.row.is_prefill) context_sum += int64_t(w.slot->session->history().size());
    results.push_back(w.result);
  }
  out.mean_context = out.decode_rows ? int(context_sum / out.decode_rows) : 0;
  if (cut) preempted_steps_.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard lk(mu_);
    for (RowWork& w : work) {
      w.slot->in_flight = false;
      w.slot->preempted = false;
      w.slot->session->clear_cancel();  // a cancel that came during the step is queued as a control too
    }
    preemptible_step_ = false;
    PLLM_TRY(sched_.complete(plan, out.forward_ms, results));
    for (const EndedRequest& e : sched_.take_ended()) finish(e, events);
    out.kind = StepOutcome::Kind::ran;
    out.step_ms = clock_() - t_start;
    tick_governor(t_start, out);
  }
  return out;
}

bool ScheduledRuntime::emit_token(Live& live, int32_t token, const float* raw_logits) {
  if (model_->tokenizer().is_end_of_generation(token)) return false;
  if (live.on_event && *live.on_event) {
    RuntimeEvent ev;
    ev.kind = RuntimeEvent::Kind::token;
    ev.request = live.id;
    ev.session = live.session;
    ev.token = token;
    ev.index = live.generated;
    if (raw_logits) log_probs({raw_logits, size_t(model_->config().n_vocab)}, token, live.req.top_logprobs, ev);
    (*live.on_event)(ev);
  }
  if (live.generated == 0) {
    const double now = clock_();
    check_ttft_bound(live, now);
    if (tracing()) cfg_.trace->instant("first_token", {{"request", double(live.id)}, {"ttft_ms", now - live.submit_ms}});
  }
  ++live.generated;
  return !(live.sampler->grammar() && live.sampler->grammar()->is_finished());
}

// One span per step that ran (its rows, threads, caps and the backend: 0 = CPU, the only
// one until a GPU backend exists), the counters the docs' plots and a Perfetto view need, and
// an instant when a frame is full.
void ScheduledRuntime::trace_step(TraceLog& log, int64_t t0_ns, const StepOutcome& out) {
  if (out.kind == StepOutcome::Kind::wait_frame) log.instant("frame_full");
  if (out.kind != StepOutcome::Kind::ran || out.decode_rows + out.prefill_tokens == 0) return;
  const int64_t t1 = TraceLog::now_ns();
  log.complete("step", t0_ns, t1,
               {{"decode_rows", double(out.decode_rows)},
                {"prefill_tokens", double(out.prefill_tokens)},
                {"threads", double(out.threads)},
                {"backend", 0.0}});
  log.counter("batch_rows", out.decode_rows + (out.prefill_tokens > 0 ? 1 : 0));
  log.counter("tokens_per_s", out.step_ms > 0 ? 1000.0 * (out.decode_rows + out.prefill_tokens) / out.step_ms : 0);
  log.counter("thermal_level", out.governor_level);
  log.counter("max_batch_rows", out.max_batch_rows);
  log.counter("threads", out.threads);
  std::lock_guard lk(mu_);
  int64_t kv = 0;
  for (const auto& [key, slot] : slots_) kv += int64_t(slot->session->history().size());
  log.counter("kv_tokens", double(kv));
}

void ScheduledRuntime::tick_governor(double step_start_ms, const StepOutcome& out) {
  if (!governor_) return;
  const double now = clock_();
  const ThermalReading reading = cfg_.thermal ? cfg_.thermal->read(int64_t(now)) : ThermalReading{};
  std::optional<TokenTiming> timing;
  if (out.decode_rows > 0 && out.prefill_tokens == 0 && out.forward_ms > 0)
    timing = TokenTiming{out.decode_rows, out.threads, float(out.forward_ms / out.decode_rows), out.mean_context};
  const int before = governor_->level();
  auto caps = governor_->tick(int64_t(now), reading, timing);
  if (!caps.ok()) return;  // only a clock going back; the caps in force stay
  if (caps->level != before && tracing())
    cfg_.trace->instant("governor", {{"level", double(caps->level)},
                                     {"max_batch", double(caps->max_batch)},
                                     {"max_steps_per_s", std::isfinite(caps->max_decode_steps_per_s) ? caps->max_decode_steps_per_s : -1.0},
                                     {"max_threads", double(caps->max_threads)}});
  if (tracing() && reading.valid && std::isfinite(reading.temp_c)) cfg_.trace->counter("temp_c", reading.temp_c);
  if (std::isfinite(caps->max_decode_steps_per_s) && caps->max_decode_steps_per_s > 0)
    next_step_ms_ = step_start_ms + 1000.0 / caps->max_decode_steps_per_s;
  else
    next_step_ms_ = 0;
}

void ScheduledRuntime::apply_plan_effects_locked(const StepPlan& plan, std::vector<Delivery>& events) {
  for (const EndedRequest& e : plan.ended) finish(e, events);
  for (int64_t key : plan.resets) {
    auto it = slots_.find(key);
    if (it == slots_.end()) continue;
    it->second->session->reset();
    it->second->has_logits = false;
    it->second->stash.reset();
  }
  apply_moves(plan);
}

// A request still without a token past its class's bound is counted once and traced.
void ScheduledRuntime::check_ttft_bound(Live& live, double now) {
  const double bound =
      live.req.klass == RequestClass::interactive ? cfg_.interactive_ttft_bound_ms : cfg_.background_ttft_bound_ms;
  if (live.over_bound || bound <= 0 || live.generated > 0 || live.req.max_tokens == 0 || now - live.submit_ms <= bound)
    return;
  live.over_bound = true;
  ttft_over_bound_.fetch_add(1, std::memory_order_relaxed);
  if (tracing())
    cfg_.trace->instant("ttft_over_bound", {{"request", double(live.id)}, {"bound_ms", bound},
                                            {"interactive", live.req.klass == RequestClass::interactive ? 1.0 : 0.0}});
}

void ScheduledRuntime::check_ttft_bounds_locked(double now) {
  for (auto& [id, live] : live_) check_ttft_bound(*live, now);
}

void ScheduledRuntime::apply_moves(const StepPlan& plan) {
  for (int64_t key : plan.paused) {
    auto it = slots_.find(key);
    if (it == slots_.end()) continue;
    Slot& slot = *it->second;
    Session& s = *slot.session;
    // A windowed cache cannot be snapshotted: it stays resident (its window bounds it anyway).
    auto snap = s.save_prefix(s.history().size());
    if (!snap.ok()) continue;
    Stash st;
    st.kv = std::move(*snap);
    if (slot.has_logits) st.logits.assign(s.last_logits(), s.last_logits() + model_->config().n_vocab);
    slot.stash = std::move(st);
    s.reset();  // returns its KV blocks
    slot.has_logits = false;
  }
  for (int64_t key : plan.resumed) {
    auto it = slots_.find(key);
    if (it == slots_.end() || !it->second->stash) continue;
    Slot& slot = *it->second;
    Stash st = std::move(*slot.stash);
    slot.stash.reset();
    if (!st.kv.empty() && !slot.session->restore_prefix(st.kv, /*verified=*/true).ok()) continue;
    if (!st.logits.empty()) {
      std::copy(st.logits.begin(), st.logits.end(), slot.session->last_logits());
      slot.has_logits = true;
    }
  }
}

void ScheduledRuntime::finish(const EndedRequest& e, std::vector<Delivery>& events) {
  if (e.request & kControlBit) return;
  auto it = live_.find(e.request / 2);
  if (it == live_.end()) return;
  Live& live = *it->second;
  EndReason reason = e.reason;
  Status status = e.status;
  if (reason == EndReason::failed && status == Status::cancelled) reason = EndReason::cancelled;  // stopped mid-step
  if (e.request == prompt_part(live.id)) {
    live.prompt_pending = false;
    // The session holds the finished prompt: offer its block-aligned prefix.
    if (reason == EndReason::done && cfg_.prefix_cache)
      if (auto slot = slots_.find(live.session); slot != slots_.end())
        offer_cached_prefix(*slot->second->session, *cfg_.prefix_cache, slot->second->session->history().size());
    if (reason != EndReason::done && !live.reason) {
      live.reason = reason;
      live.status = status;
    }
    if (live.gen_pending) return;  // the generation runs next (or ends at once after an early end)
  } else {
    live.gen_pending = false;
    if (live.prompt_pending) return;
  }
  RuntimeEvent ev;
  ev.kind = RuntimeEvent::Kind::end;
  ev.request = live.id;
  ev.session = live.session;
  ev.reason = live.reason.value_or(reason);
  ev.status = live.reason ? live.status : status;
  ev.n_generated = live.generated;
  ev.n_cached = live.cached;
  ev.draft = live.draft_stats;
  if (tracing())
    cfg_.trace->async_end("request", live.id, {{"generated", double(live.generated)}, {"reason", double(ev.reason)}});
  events.push_back(Delivery{live.on_event, ev});
  live_.erase(it);
}

void ScheduledRuntime::deliver(const std::vector<Delivery>& events) {
  for (const Delivery& d : events)
    if (d.to && *d.to) (*d.to)(d.event);
}

Result<void> ScheduledRuntime::start() {
  std::lock_guard lk(mu_);
  if (driver_.joinable()) return make_error(Status::invalid_argument, "runtime: the driver thread is running");
  stop_ = false;
  driver_ = std::thread([this] { driver_loop(); });
  return {};
}

void ScheduledRuntime::stop() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
    ++wake_seq_;
  }
  work_cv_.notify_all();
  if (driver_.joinable()) driver_.join();
}

bool ScheduledRuntime::wait_idle(double timeout_ms) {
  std::unique_lock lk(mu_);
  return idle_cv_.wait_for(lk, std::chrono::duration<double, std::milli>(timeout_ms), [&] { return live_.empty(); });
}

void ScheduledRuntime::driver_loop() {
  for (;;) {
    uint64_t seen;
    {
      std::lock_guard lk(mu_);
      if (stop_) return;
      seen = wake_seq_;
    }
    auto r = step();
    std::unique_lock lk(mu_);
    if (!r.ok()) {  // the runtime itself is broken (a bug): stop stepping, keep the error
      driver_error_ = r.error();
      return;
    }
    const auto woken = [&] { return stop_ || wake_seq_ != seen; };
    switch (r->kind) {
      case StepOutcome::Kind::ran:
        break;
      case StepOutcome::Kind::idle:
        work_cv_.wait(lk, woken);
        break;
      case StepOutcome::Kind::wait_frame:
        if (r->resume_at_ms > 0)  // the runtime's own frames: the next one starts then
          work_cv_.wait_for(lk, std::chrono::duration<double, std::milli>(std::max(0.0, r->resume_at_ms - clock_())),
                            woken);
        else  // the app's frame clock wakes it
          work_cv_.wait(lk, woken);
        break;
      case StepOutcome::Kind::throttled:
        work_cv_.wait_for(lk, std::chrono::duration<double, std::milli>(std::max(0.0, r->resume_at_ms - clock_())),
                          woken);
        break;
    }
  }
}

}  // namespace pllm
