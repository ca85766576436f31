// ScheduledRuntime: the scheduler (runtime/scheduler.h), the thermal governor
// (runtime/governor.h) and the sessions of one model on one engine, put together. Apps submit
// requests (a prompt to prefill, then tokens to generate) with a class; each step() asks the
// scheduler for the rows that matter most now, runs them as ONE batched forward pass
// (Session::step), samples, streams tokens through the request's callback and reports back.
//
// Threads: submit(), control(), frame() and the getters may be called from any thread (the
// app's UI thread, a vsync callback). step() is called by one thread at a time, either the
// app's own worker or the driver thread start() launches, which waits for work, for the
// next frame or for the governor's rate cap instead of spinning. Callbacks run on the
// stepping thread, outside the runtime's lock, so they may submit or cancel; an end event's
// callback may also remove sessions (a token event's runs inside the step and must not).
//
// What a request sees:
//   * its prompt is appended to the session's context in chunks (a long prompt never holds
//     the others up for more than one chunk), then up to max_tokens tokens are generated, one
//     per step, each sampled from the previous row's logits and then fed back (the session
//     holds the whole exchange afterwards, so the next request continues the conversation);
//   * a token event per generated token, then exactly one end event (done, eos, cancelled,
//     reset, interrupted, failed, kv_exhausted);
//   * pausing (KV budget) moves the session's KV and logits out and back bit for bit, and
//     a background step stopped for an interactive request runs its rows again (a decode
//     row feeds its streamed token again), so a request's tokens do not depend on what
//     else ran (with one activation mode; batched steps equal solo steps, see test_batched_logits.py).
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "base/result.h"
#include "runtime/frame_policy.h"
#include "runtime/governor.h"
#include "runtime/sampler.h"
#include "runtime/scheduler.h"
#include "runtime/session.h"
#include "runtime/speculative.h"
#include "runtime/thermal_source.h"

namespace pllm {

class PrefixCache;
class TraceLog;

struct RuntimeEvent {
  enum class Kind { token, end };
  Kind kind = Kind::token;
  uint64_t request = 0;
  int64_t session = 0;
  int32_t token = -1;        // token: the generated token
  int index = 0;             // token: its index in the request's output (0 = first)
  EndReason reason = EndReason::done;  // end
  Status status = Status::ok;          // end: why it failed
  int n_generated = 0;                 // end: tokens the request generated
  int n_cached = 0;                    // end: prompt tokens restored from the prefix cache
  DraftStats draft;                    // end: speculative decoding's guesses (req.draft)
  // token, when the request asked for logprobs: the token's log-probability under the model
  // (before sampling's penalties and cuts) and the top_logprobs most likely tokens.
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;
};
using RuntimeCallback = std::function<void(const RuntimeEvent&)>;

// The frame policy so far (runtime/frame_policy.h).
struct FrameStats {
  double ui_estimate_ms = 0;  // the UI's own time per frame (90th percentile; 0 before any report)
  int holds = 0;              // switches to one core left for the UI
  int probes = 0;             // switches back to the whole machine
  int misses = 0;             // missed frames it saw (reported, late or skipped vsyncs)
};

struct RuntimeRequest {
  RequestClass klass = RequestClass::interactive;  // interactive or background
  std::optional<int> base_weight;                  // default: the class's weight
  std::vector<int32_t> prompt;                     // appended to the context first (may be empty)
  int max_tokens = 0;                              // then at most this many tokens (0: prefill only)
  SamplingConfig sampling;                         // greedy when temperature <= 0
  GrammarConstraint grammar;                       // the generated text follows it (when set)
  int top_logprobs = -1;                           // >= 0: token events carry logprobs (and this many alternatives)
  // Speculative decoding (runtime/speculative.h): guesses ride on the request's decode rows,
  // as many as the step's time and KV allow (at most draft.max_tokens); output as without.
  DraftSpec draft;
  RuntimeCallback on_event;                        // may be empty
};

// What one step() did.
struct StepOutcome {
  enum class Kind {
    ran,         // a forward pass ran (rows > 0), or only controls/pauses were applied
    idle,        // nothing pending
    wait_frame,  // frame mode: nothing more fits this frame
    throttled,   // the governor's step-rate cap: not before resume_at_ms
  };
  Kind kind = Kind::idle;
  int decode_rows = 0;
  int prefill_tokens = 0;
  double forward_ms = 0;    // the forward pass alone
  double step_ms = 0;       // the whole step (plan, sampling, callbacks included)
  double resume_at_ms = 0;  // throttled: not before; wait_frame under frame_period(): the next frame
  int governor_level = 0;
  int max_batch_rows = 0;   // the row cap in force
  int threads = 0;          // engine threads the step used
  int mean_context = 0;     // decode rows: their mean context (tokens) after the step
};

struct RuntimeConfig {
  SchedulerConfig scheduler;
  int max_batch_rows = 8;                // rows per step before the governor's cap
  // Frame mode: whole machine or one core left for the UI, from what the frames are measured
  // to need (runtime/frame_policy.h).
  FramePolicyConfig frame_policy;
  // A request with no token this long after its submit is counted and traced (an instant
  // "ttft_over_bound"); 0: no bound for the class.
  double interactive_ttft_bound_ms = 1000;
  double background_ttft_bound_ms = 0;
  int64_t kv_budget_tokens = 1 << 20;    // KV tokens all resident sessions together may hold
  ThermalSource* thermal = nullptr;      // read each step when a governor is set; outlives the runtime
  std::optional<GovernorConfig> governor;  // none: no thermal caps (total_threads 0: the engine's)
  std::function<double()> clock_ms;      // default: steady clock, ms since create()
  // Called on the stepping thread after each step that ran (the simulation heats its thermal
  // model with the measured busy time here).
  std::function<void(const StepOutcome&)> on_step;
  TraceLog* trace = nullptr;             // spans and counters, or null; outlives the runtime
  // Shared KV snapshots of prompt prefixes: a request on a session with no context restores
  // the longest cached block-aligned prefix of its prompt at submit() and computes the rest;
  // a prompt that finished prefilling offers its prefix. Null: none.
  std::shared_ptr<PrefixCache> prefix_cache;
};

class ScheduledRuntime {
 public:
  static Result<std::unique_ptr<ScheduledRuntime>> create(std::shared_ptr<const Model> model,
                                                          std::shared_ptr<Engine> engine, RuntimeConfig cfg);
  ~ScheduledRuntime();  // stops the driver thread
  ScheduledRuntime(const ScheduledRuntime&) = delete;
  ScheduledRuntime& operator=(const ScheduledRuntime&) = delete;

  // A new session on the runtime's engine; returns its key. Its n_batch must hold a prefill
  // chunk (cfg.n_batch >= scheduler.prefill_chunk) and its activation mode match the others'.
  Result<int64_t> add_session(const SessionConfig& cfg);
  // Ends its requests (cancelled) and frees it; waits for a step in flight.
  Result<void> remove_session(int64_t key);

  // Queues a request; returns its id. Errors: unknown session, no prompt and no tokens,
  // generation on a session that holds no context and gets no prompt, a prompt token out
  // of the vocabulary, a bad class or weight.
  Result<uint64_t> submit(int64_t session, RuntimeRequest req);
  // cancel: ends the session's requests submitted so far (a row in flight stops mid-step);
  // reset: the same and clears its context; interrupt: ends only the request in progress.
  // Served ahead of all generation at the next step.
  Result<void> control(int64_t session, ControlAction action);

  // Frame mode: the app's frame clock (vsync) calls this at each frame start; each session
  // then gets max_tokens_per_frame decode tokens per frame, and the frame policy picks the
  // threads (frame_policy.h). stop_frames(): flat out again.
  Result<void> frame(double frame_start_ms, double period_ms);
  void stop_frames();
  // Frame mode without a frame clock: frames of period_ms from now on, aligned to the first
  // step's time (0: off, and out of frame mode). An app with a vsync callback calls frame().
  Result<void> frame_period(double period_ms);
  // The app's UI work for the frame that started at frame_start_ms took ui_ms (vsync to
  // done). Optional: without it the runtime reads late and skipped frame() calls.
  Result<void> report_ui_frame(double frame_start_ms, double ui_ms);

  // One scheduling step (see StepOutcome). Errors only when the runtime itself is broken;
  // a request's failure ends that request.
  Result<StepOutcome> step();

  // The driver thread: steps while there is work, sleeps otherwise. stop() joins it.
  Result<void> start();
  void stop();
  // Blocks until no request is pending or timeout_ms passes; true when idle.
  bool wait_idle(double timeout_ms);
  // Why the driver thread stopped by itself (a bug in the runtime), if it did.
  std::optional<Error> driver_error() const {
    std::lock_guard lk(mu_);
    return driver_error_;
  }

  double now_ms() const { return clock_(); }
  size_t pending() const;
  Caps caps() const;
  int governor_changes() const;  // level changes so far (0 without a governor)
  int ttft_over_bound() const;   // requests that waited past their class's first-token bound
  // Steps whose background prompt rows came back stopped for an interactive submit.
  int preempted_steps() const { return preempted_steps_.load(std::memory_order_relaxed); }
  FrameStats frame_stats() const;  // what the frame policy measured and did so far
  const Session* session(int64_t key) const;  // null when unknown; read it only between steps
  int n_threads() const { return engine_->n_threads(); }
  int prefill_chunk() const { return cfg_.scheduler.prefill_chunk; }

 private:
  struct Live;        // a submitted request's state
  struct Stash;       // a paused session's KV and logits
  struct Slot;        // a session and its runtime state
  struct RowWork;     // one planned row while the step runs
  struct StepBuffers;  // the step's vectors, reused
  struct Delivery {   // an event and whom to tell, handed over outside the lock
    std::shared_ptr<const RuntimeCallback> to;
    RuntimeEvent event;
  };

  ScheduledRuntime(std::shared_ptr<const Model> model, std::shared_ptr<Engine> engine, RuntimeConfig cfg,
                   Scheduler sched, FramePolicy policy);
  void apply_moves(const StepPlan& plan);
  void finish(const EndedRequest& e, std::vector<Delivery>& events);
  static void deliver(const std::vector<Delivery>& events);
  Result<StepOutcome> step_locked(std::vector<Delivery>& events);
  StepBudget budget_locked() const;
  FrameShape shape_locked(double now);  // the engine threads a step may use now
  void tick_governor(double now, const StepOutcome& out);
  void check_ttft_bounds_locked(double now);
  void check_ttft_bound(Live& live, double now);
  void apply_plan_effects_locked(const StepPlan& plan, std::vector<Delivery>& events);
  bool tracing() const;  // a trace log is set and enabled
  void trace_step(TraceLog& log, int64_t t0_ns, const StepOutcome& out);
  void driver_loop();
  void auto_frame_locked(double now);
  size_t restore_prefix_locked(int64_t key, Slot& slot, std::span<const int32_t> prompt);
  // A drawn token: streamed (unless it ends the generation), counted. False: the generation
  // ends with it (an end-of-generation token, or a grammar that allows nothing more).
  // raw_logits: its row before sampling (logprobs), or null.
  bool emit_token(Live& live, int32_t token, const float* raw_logits);
  // Speculative decoding (scheduled_runtime_draft.cpp): a decode row's drawn token plus the
  // guesses after it, and, after the forward pass, the guesses kept (the row's result).
  Result<std::span<const int32_t>> draft_row(RowWork& w);
  RowResult settle_verify(RowWork& w, double forward_ms);

  std::shared_ptr<const Model> model_;
  std::shared_ptr<Engine> engine_;
  RuntimeConfig cfg_;
  std::function<double()> clock_;

  mutable std::mutex mu_;           // everything below but the sessions' contents
  std::condition_variable work_cv_;  // submit / control / frame / stop wake the driver
  std::condition_variable idle_cv_;
  std::mutex step_mu_;              // one step at a time; remove_session waits on it
  std::atomic<int> removers_{0};    // remove_session calls waiting for step_mu_ (they go first)
  std::unique_ptr<StepBuffers> scratch_;
  Scheduler sched_;
  std::optional<ThermalGovernor> governor_;
  FramePolicy frame_policy_;
  std::atomic<int> ttft_over_bound_{0};
  std::atomic<int> preempted_steps_{0};
  // The step in flight has only background prompt rows: an interactive submit stops it
  // between layers (its rows keep their progress and run again later).
  bool preemptible_step_ = false;
  std::map<int64_t, std::unique_ptr<Slot>> slots_;
  std::map<uint64_t, std::unique_ptr<Live>> live_;
  int64_t next_session_ = 1;
  uint64_t next_id_ = 1;
  uint64_t wake_seq_ = 0;           // bumped by submit/control/frame/stop: the driver re-plans
  double next_step_ms_ = 0;         // the governor's rate cap: no step before this
  double auto_period_ms_ = 0;       // frame_period(): frames the runtime makes itself
  std::optional<double> next_auto_frame_ms_;
  std::optional<uint32_t> compute_tag_;
  bool stop_ = false;
  std::optional<Error> driver_error_;
  std::thread driver_;
};

}  // namespace pllm
