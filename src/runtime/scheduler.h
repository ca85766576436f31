// Scheduler: plans the rows of each batched step (Session::step) for many sessions. Pure
// planning: no threads, no clock of its own, no engine; the caller passes the time, runs
// the plan and reports back with complete().
//
// Protocol: submit() requests at any time; plan_step() -> run the rows -> complete(); then
// plan again. A plan with rows must be completed before the next one is planned.
//
// Priority of a request = base weight + waited ms / 10, where "waited" counts from the later
// of its enqueue time and the last step that gave its session a row: whoever is left out
// gains 1 point every 10 ms, so a background request (100) overtakes an interactive stream
// (500) after at most (500 - 100) * 10 ms plus one step. A session's priority is the highest
// of its pending requests' (a pre-warm an interactive request waits behind runs at the
// interactive priority); its oldest pending request is the one that runs.
//
// Each plan:
//  1. applies the queued control requests (ahead of all generation), each to the requests
//     submitted before it: cancel ends them all, reset does too and clears the session's KV
//     (plan.resets), interrupt ends only the one in progress; later requests stand;
//  2. admits sessions in order of priority, one row each, while the caps allow: at most
//     max_batch_rows rows; in frame mode at most max_tokens_per_frame decode tokens per
//     session per frame (prefill is bounded by time alone); a predicted cost (CostModel,
//     margin included) within the budget's time limit, when it has one; and the KV budget
//     (below). A prefill row is admitted at one token's cost and reserves the KV of its next
//     chunk;
//  3. sizes prefill rows, by priority, to the most of that chunk (<= prefill_chunk tokens)
//     the time left allows, then gives decode rows of speculative requests their guesses
//     (draft_tokens at most, within the time and KV left; a guess costs as a prompt token).
//     Rows are listed decode first (one token, plus guesses), then prefill.
// A session keeps its progress when it is left out (preemption only between steps). A plan
// is empty with wait_for_frame when not even one row fits the time limit or every session
// has had its tokens of the frame. (The runtime protects a UI by threads, not by a time
// window: runtime/frame_policy.h.)
//
// Interactive first: admission stays in order of priority (so aging still lets a
// starved background session overtake), but the prompt rows of the interactive candidates
// admitted before the first background one are sized first, so background rows only get
// what the interactive work leaves of the step's time. While an admitted interactive request
// waits for its first token (its prompt, or its first generated token, is still to run), the
// step carries no background row: even riding decode rows made a one-thread prompt step 30 %
// longer. Background prompt chunks are also kept to what max_background_step_ms allows (but a
// step's first keeps min_background_chunk tokens, for a model whose token costs more), so an
// interactive arrival waits about that long at most for the step in flight (and the runtime
// stops a step of background prompt rows at once).
//
// KV memory: every resident session holds its KV tokens (report_kv(), and each completed
// row adds its tokens). A step may not make the residents hold more than the budget; when
// it would, the least valuable resident sessions are paused (idle ones first, least
// recently served first; then by lowest priority) to make room for a higher-priority row.
// A paused session is listed in plan.paused: the caller moves its KV out (snapshot) and it
// no longer counts. It comes back (plan.resumed, in order of priority, never past a
// higher-priority paused session, never in the plan that paused it) when the free memory,
// plus that of idle sessions, holds its KV plus a row; its requests continue where they
// stopped. A request that cannot fit even alone (its session's KV plus one decode token,
// or plus the rest of its prompt) ends with EndReason::kv_exhausted.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <utility>
#include <span>
#include <vector>

#include "base/result.h"
#include "runtime/cost_model.h"
#include "runtime/end_reason.h"

namespace pllm {

enum class RequestClass { interactive, background, control };
enum class RequestKind {
  prefill,   // tokens: prompt tokens to prefill, in chunks
  generate,  // tokens: at most this many tokens, one decode row each (fewer on EOS)
  prewarm,   // tokens: prompt tokens to prefill ahead of use; class background
  control,   // action on the session; class control
};
enum class ControlAction { cancel, reset, interrupt };

struct SchedulerRequest {
  uint64_t id = 0;          // unique among the requests still pending
  int64_t session = 0;      // opaque session key
  RequestClass klass = RequestClass::interactive;
  std::optional<int> base_weight;  // default: the class's weight (SchedulerConfig)
  double enqueue_ms = 0;
  RequestKind kind = RequestKind::generate;
  int tokens = 0;           // prefill / prewarm: prompt tokens; generate: max new tokens
  ControlAction action = ControlAction::cancel;  // control only
  // generate: up to this many drafted guesses may ride on each decode row (speculative
  // decoding: runtime/speculative.h); the plan sizes them to the time and KV left.
  int draft_tokens = 0;
};

struct SchedulerConfig {
  int interactive_weight = 500;
  int background_weight = 100;
  int prefill_chunk = 64;          // most prompt tokens of one session in one step
  double max_background_step_ms = 50;  // background prompt chunks sized to keep a step this short,
  int min_background_chunk = 16;       // but the step's first one keeps this many tokens
  int max_tokens_per_frame = 3;    // frame mode: decode tokens per session per frame
  CostModelParams cost;
};

// Caps that change at run time, given to each plan.
struct StepBudget {
  int max_batch_rows = 8;       // rows (sessions) in one step; the thermal governor lowers it
  int64_t kv_tokens = 1 << 20;  // KV tokens all resident sessions together may hold
  std::optional<double> time_left_ms;  // the most this step's predicted cost may be; none: no limit
  // Which cost model predicts and learns this step: 0, or the step's thread count. A count
  // whose fit does not back a prediction borrows another count's that does, scaled by the
  // thread ratio (as if compute-bound: pessimistic for decode, which is not).
  int cost_key = 0;
};

struct PlanRow {
  int64_t session = 0;
  uint64_t request = 0;
  int n_tokens = 0;
  bool is_prefill = false;
};

struct EndedRequest {
  uint64_t request = 0;
  int64_t session = 0;
  EndReason reason = EndReason::done;
  int tokens_done = 0;         // prompt tokens prefilled or tokens generated
  Status status = Status::ok;  // failed: the row's status
};

struct StepPlan {
  uint64_t step = 0;                        // complete() checks it
  std::vector<PlanRow> rows;                // decode rows first, then prefill chunks
  std::vector<uint64_t> controls;           // control requests applied before this step
  std::vector<int64_t> resets;              // sessions to clear first (Session::reset; moved-out KV too)
  std::vector<int64_t> paused;              // sessions to move out of memory first
  std::vector<int64_t> resumed;             // paused sessions to bring back first
  std::vector<int64_t> preempted;           // had a row last step, left out now by the row cap, frame time
                                            // or an interactive request's prompt (below)
  std::vector<EndedRequest> ended;          // requests that ended since the previous plan
  double predicted_ms = 0;                  // the cost model's estimate of the rows, margin included
  int cost_key = 0;                         // the budget's: whose cost model learns this step
  bool wait_for_frame = false;              // frame mode: nothing more fits this frame
};

struct RowResult {
  // tokens the row processed (its n_tokens unless it failed; a decode row with guesses: the
  // drawn token and the guesses kept)
  int tokens_done = 0;
  bool eos = false;            // decode rows: the sampled token ends the generation
  Status status = Status::ok;  // not ok: the row failed and its request ends (tokens_done 0)
  int rows_run = 0;            // decode rows: tokens the forward pass ran (1 + guesses); 0: 1
};

class Scheduler {
 public:
  static Result<Scheduler> create(const SchedulerConfig& cfg);

  // Queues a request; control requests take effect at the next plan. Errors on a reused id,
  // a class that does not match the kind, no tokens, a negative weight or a bad time.
  Result<void> submit(const SchedulerRequest& r);
  // The KV tokens a session holds now (e.g. after a prefix-cache restore or a truncation);
  // completed rows are added without being reported.
  Result<void> report_kv(int64_t session, int64_t kv_tokens);

  // Frame mode from now on: a new frame starts, so each session may have max_tokens_per_frame
  // decode tokens again. Errors when the time is not finite or goes back.
  Result<void> on_frame(double frame_start_ms);
  // Back to planning flat out.
  void stop_frames() { frame_.reset(); }
  bool frame_mode() const { return frame_.has_value(); }

  Result<StepPlan> plan_step(double now_ms, const StepBudget& budget);
  // Applies the queued controls only: a plan without rows that admits nothing and leaves
  // every other session's requests as they are (e.g. to reset a session being removed).
  Result<StepPlan> plan_controls();
  // Reports how the last plan's rows went: results[i] for plan.rows[i]. A row may process
  // fewer tokens than planned (preempted); its request goes on, and the step teaches the
  // cost model nothing.
  Result<void> complete(const StepPlan& plan, double actual_ms, std::span<const RowResult> results);

  // The requests that ended since the last plan (complete() ends some), taken now instead of
  // with the next plan; the next plan lists only what ends after this call.
  std::vector<EndedRequest> take_ended() { return std::exchange(ended_, {}); }

  // The cost model of steps planned with StepBudget::cost_key (made on first use).
  const CostModel& cost_model(int cost_key = 0) const;
  // What a step of cost_key's threads is expected to cost (see StepBudget::cost_key).
  double predict_ms(int cost_key, int decode_rows, int prefill_tokens);
  // KV tokens a session holds (resident or paused), 0 when unknown.
  int64_t kv_tokens(int64_t session) const;
  bool paused(int64_t session) const;
  size_t pending(int64_t session) const;

 private:
  struct Pending {
    SchedulerRequest req;
    uint64_t seq = 0;  // submission order: a control acts on what was submitted before it
    int weight = 0;
    int done = 0;      // tokens processed so far
  };
  struct QueuedControl {
    SchedulerRequest req;
    uint64_t seq = 0;
  };
  struct SessionState {
    std::deque<Pending> queue;            // runs front first
    int64_t kv_tokens = 0;
    bool paused = false;
    std::optional<double> last_served_ms;  // when it last got a row
    int frame_tokens = 0;                 // decode tokens planned in the current frame
    bool had_row = false;                 // had a row in the previous plan
  };
  struct Frame {
    double start_ms = 0;
  };
  struct Candidate;  // scheduler_plan.cpp
  class PlanBuilder;

  Scheduler(const SchedulerConfig& cfg, CostModel cost) : cfg_(cfg), cost_(std::move(cost)) {}
  static bool front_is_prefill(const SessionState& s);
  double priority(const SessionState& s, double now_ms) const;
  void end_front(int64_t key, SessionState& s, EndReason reason, Status status = Status::ok);
  void end_submitted_before(uint64_t seq, int64_t key, SessionState& s, EndReason reason);
  void apply_controls(StepPlan& plan);
  void end_plan(StepPlan& plan);  // hands the plan what ended; forgets sessions with nothing left

  CostModel& cost_for(int cost_key);

  SchedulerConfig cfg_;
  CostModel cost_;                            // cost_key 0
  std::map<int, CostModel> costs_;            // other cost keys
  std::map<int64_t, SessionState> sessions_;  // ordered: plans are deterministic
  std::deque<QueuedControl> controls_;
  uint64_t next_seq_ = 0;
  std::vector<EndedRequest> ended_;           // since the last plan
  std::optional<Frame> frame_;
  std::optional<StepPlan> outstanding_;       // planned with rows, not completed yet
  uint64_t next_step_ = 1;
};

}  // namespace pllm
