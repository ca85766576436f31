// Scheduler: requests, control requests, frames and completion (plan_step is in
// scheduler_plan.cpp).
#include "runtime/scheduler.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace pllm {
namespace {

bool is_prefill_kind(RequestKind k) { return k == RequestKind::prefill || k == RequestKind::prewarm; }

Result<void> check_request(const SchedulerRequest& r) {
  const std::string who = "request " + std::to_string(r.id) + ": ";
  if (!std::isfinite(r.enqueue_ms)) return make_error(Status::invalid_argument, who + "enqueue time is not finite");
  const bool control_kind = r.kind == RequestKind::control;
  if (control_kind != (r.klass == RequestClass::control))
    return make_error(Status::invalid_argument, who + "control requests (and only they) have class control");
  if (r.kind == RequestKind::prewarm && r.klass != RequestClass::background)
    return make_error(Status::invalid_argument, who + "a pre-warm runs at background priority: class background");
  if (control_kind) {
    if (r.base_weight) return make_error(Status::invalid_argument, who + "control requests have no weight");
    return {};
  }
  if (r.tokens < 1)
    return make_error(Status::invalid_argument, who + "needs at least 1 token, not " + std::to_string(r.tokens));
  if (r.base_weight && *r.base_weight < 0)
    return make_error(Status::invalid_argument, who + "weight must be >= 0, not " + std::to_string(*r.base_weight));
  if (r.draft_tokens < 0 || (r.draft_tokens > 0 && r.kind != RequestKind::generate))
    return make_error(Status::invalid_argument, who + "draft_tokens must be >= 0, and only a generate request drafts");
  return {};
}

}  // namespace

Result<Scheduler> Scheduler::create(const SchedulerConfig& cfg) {
  if (cfg.interactive_weight < 0 || cfg.background_weight < 0)
    return make_error(Status::invalid_argument, "scheduler: class weights must be >= 0");
  if (cfg.prefill_chunk < 1) return make_error(Status::invalid_argument, "scheduler: prefill_chunk must be >= 1");
  if (cfg.max_tokens_per_frame < 1)
    return make_error(Status::invalid_argument, "scheduler: max_tokens_per_frame must be >= 1");
  if (!(cfg.max_background_step_ms > 0) || cfg.min_background_chunk < 1)
    return make_error(Status::invalid_argument, "scheduler: max_background_step_ms must be > 0, min_background_chunk >= 1");
  PLLM_ASSIGN(CostModel cost, CostModel::create(cfg.cost));
  return Scheduler(cfg, std::move(cost));
}

Result<void> Scheduler::submit(const SchedulerRequest& r) {
  PLLM_TRY(check_request(r));
  bool taken = std::any_of(controls_.begin(), controls_.end(), [&](const QueuedControl& c) { return c.req.id == r.id; });
  for (const auto& [key, s] : sessions_)
    taken = taken || std::any_of(s.queue.begin(), s.queue.end(), [&](const Pending& p) { return p.req.id == r.id; });
  if (taken) return make_error(Status::invalid_argument, "request id " + std::to_string(r.id) + " is still pending");
  const uint64_t seq = next_seq_++;
  if (r.kind == RequestKind::control) {
    controls_.push_back(QueuedControl{r, seq});
    return {};
  }
  const int class_weight = r.klass == RequestClass::interactive ? cfg_.interactive_weight : cfg_.background_weight;
  sessions_[r.session].queue.push_back(Pending{r, seq, r.base_weight.value_or(class_weight), 0});
  return {};
}

Result<void> Scheduler::report_kv(int64_t session, int64_t kv_tokens) {
  if (kv_tokens < 0)
    return make_error(Status::invalid_argument, "session " + std::to_string(session) + ": KV tokens must be >= 0");
  sessions_[session].kv_tokens = kv_tokens;
  return {};
}

Result<void> Scheduler::on_frame(double frame_start_ms) {
  if (!std::isfinite(frame_start_ms)) return make_error(Status::invalid_argument, "frame: the start is not finite");
  if (frame_ && frame_start_ms < frame_->start_ms)
    return make_error(Status::invalid_argument, "frame: the frame clock went back from " +
                                                    std::to_string(frame_->start_ms) + " to " +
                                                    std::to_string(frame_start_ms) + " ms");
  frame_ = Frame{frame_start_ms};
  for (auto& [key, s] : sessions_) s.frame_tokens = 0;
  return {};
}

double Scheduler::priority(const SessionState& s, double now_ms) const {
  double best = 0;
  for (const Pending& p : s.queue) {
    const double since = std::max(p.req.enqueue_ms, s.last_served_ms.value_or(p.req.enqueue_ms));
    best = std::max(best, p.weight + std::max(0.0, now_ms - since) / 10.0);
  }
  return best;
}

void Scheduler::end_front(int64_t key, SessionState& s, EndReason reason, Status status) {
  const Pending& p = s.queue.front();
  ended_.push_back(EndedRequest{p.req.id, key, reason, p.done, status});
  s.queue.pop_front();
}

// The queue is in submission order, so what came before a control is a prefix of it.
void Scheduler::end_submitted_before(uint64_t seq, int64_t key, SessionState& s, EndReason reason) {
  while (!s.queue.empty() && s.queue.front().seq < seq) end_front(key, s, reason);
}

void Scheduler::apply_controls(StepPlan& plan) {
  for (const auto& [c, seq] : controls_) {
    plan.controls.push_back(c.id);
    auto it = sessions_.find(c.session);
    if (c.action == ControlAction::reset) plan.resets.push_back(c.session);  // even one never seen
    if (it == sessions_.end()) continue;
    SessionState& s = it->second;
    switch (c.action) {
      case ControlAction::cancel:
        end_submitted_before(seq, c.session, s, EndReason::cancelled);
        break;
      case ControlAction::reset:
        end_submitted_before(seq, c.session, s, EndReason::reset);
        s.kv_tokens = 0;
        s.paused = false;  // nothing left to bring back
        break;
      case ControlAction::interrupt:
        if (!s.queue.empty() && s.queue.front().seq < seq) end_front(c.session, s, EndReason::interrupted);
        break;
    }
  }
  controls_.clear();
}

Result<void> Scheduler::complete(const StepPlan& plan, double actual_ms, std::span<const RowResult> results) {
  if (!outstanding_) return make_error(Status::invalid_argument, "complete: no plan with rows is waiting");
  const std::vector<PlanRow>& rows = outstanding_->rows;
  if (plan.step != outstanding_->step)
    return make_error(Status::invalid_argument, "complete: step " + std::to_string(plan.step) +
                                                    " is not the one waiting (" + std::to_string(outstanding_->step) + ")");
  if (results.size() != rows.size())
    return make_error(Status::invalid_argument, "complete: " + std::to_string(results.size()) + " results for " +
                                                    std::to_string(rows.size()) + " rows");
  int decode_rows = 0, prefill_tokens = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const RowResult& r = results[i];
    const std::string where = "complete: row " + std::to_string(i) + ": ";
    if (r.tokens_done < 0 || r.tokens_done > rows[i].n_tokens)
      return make_error(Status::invalid_argument, where + "tokens_done must be 0.." + std::to_string(rows[i].n_tokens));
    if (r.eos && rows[i].is_prefill) return make_error(Status::invalid_argument, where + "a prefill row cannot end in EOS");
    if (r.status != Status::ok && r.tokens_done != 0)
      return make_error(Status::invalid_argument, where + "a failed row processed no tokens");
    if (r.rows_run < 0 || r.rows_run > rows[i].n_tokens || (r.rows_run > 0 && rows[i].is_prefill))
      return make_error(Status::invalid_argument, where + "rows_run must be 0.." + std::to_string(rows[i].n_tokens) +
                                                      " (decode rows only)");
    if (rows[i].is_prefill) {
      prefill_tokens += rows[i].n_tokens;
    } else {  // a verify row's guesses cost as prompt tokens do
      ++decode_rows;
      prefill_tokens += std::max(1, r.rows_run) - 1;
    }
  }
  // A step cut short (an ok row that processed fewer tokens than planned: preempted) says
  // nothing about what the planned step costs. A decode row that kept fewer guesses than it
  // ran did run whole.
  bool whole = true;
  for (size_t i = 0; i < rows.size(); ++i) {
    const RowResult& r = results[i];
    const int ran = rows[i].is_prefill ? r.tokens_done : r.tokens_done > 0 ? rows[i].n_tokens : 0;
    whole = whole && (r.status != Status::ok || ran == rows[i].n_tokens);
  }
  if (!std::isfinite(actual_ms) || actual_ms < 0)
    return make_error(Status::invalid_argument, "complete: the step's cost must be a finite number >= 0");
  if (whole) PLLM_TRY(cost_for(outstanding_->cost_key).observe(decode_rows, prefill_tokens, actual_ms));
  for (size_t i = 0; i < rows.size(); ++i) {
    SessionState& s = sessions_.at(rows[i].session);  // the front request is the row's: only plans pop it
    Pending& p = s.queue.front();
    const RowResult& r = results[i];
    p.done += r.tokens_done;
    s.kv_tokens += r.tokens_done;
    if (r.status != Status::ok) {
      end_front(rows[i].session, s, EndReason::failed, r.status);
    } else if (p.done >= p.req.tokens) {
      end_front(rows[i].session, s, EndReason::done);
    } else if (r.eos) {
      end_front(rows[i].session, s, EndReason::eos);
    }
  }
  outstanding_.reset();
  return {};
}

int64_t Scheduler::kv_tokens(int64_t session) const {
  auto it = sessions_.find(session);
  return it == sessions_.end() ? 0 : it->second.kv_tokens;
}

bool Scheduler::paused(int64_t session) const {
  auto it = sessions_.find(session);
  return it != sessions_.end() && it->second.paused;
}

size_t Scheduler::pending(int64_t session) const {
  auto it = sessions_.find(session);
  return it == sessions_.end() ? 0 : it->second.queue.size();
}

CostModel& Scheduler::cost_for(int cost_key) {
  if (cost_key == 0) return cost_;
  auto it = costs_.find(cost_key);
  if (it == costs_.end()) it = costs_.emplace(cost_key, CostModel::create(cfg_.cost).value()).first;  // cfg checked
  return it->second;
}

double Scheduler::predict_ms(int cost_key, int decode_rows, int prefill_tokens) {
  CostModel& own = cost_for(cost_key);
  if (own.trusted(decode_rows, prefill_tokens)) return own.predict_ms(decode_rows, prefill_tokens);
  for (const auto& [key, other] : costs_)
    if (key != cost_key && other.trusted(decode_rows, prefill_tokens))
      return other.predict_ms(decode_rows, prefill_tokens) * std::max(1.0, double(key) / double(cost_key));
  // Nothing backs it: a prompt token costs no more than a decode row (a batch of prompt rows
  // shares each weight read), so bound the tokens by as many rows, which decode steps teach
  // early; the prior alone was 9x short for one thread (a 125-token chunk planned at 35 ms
  // took 338 ms and held an interactive request up).
  return std::max(own.predict_ms(decode_rows, prefill_tokens), own.predict_ms(decode_rows + prefill_tokens, 0));
}

const CostModel& Scheduler::cost_model(int cost_key) const {
  if (cost_key == 0) return cost_;
  auto it = costs_.find(cost_key);
  return it == costs_.end() ? cost_ : it->second;
}

bool Scheduler::front_is_prefill(const SessionState& s) { return is_prefill_kind(s.queue.front().req.kind); }

}  // namespace pllm
