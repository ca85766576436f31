// Scheduler::plan_step: sessions admitted by priority under the caps (one minimal row each),
// then prefill rows grown to the chunk that still fits the time and KV left.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "runtime/scheduler.h"

namespace pllm {

enum class LeftOut { no, row_cap, time, frame_tokens, memory, interactive };

struct Scheduler::Candidate {
  int64_t key = 0;
  SessionState* s = nullptr;
  double priority = 0;
  double wait_start = 0;  // ties go to the one waiting longer
  bool interactive = false;  // its front request is interactive
  bool urgent = false;       // ... and has produced no token yet (its prompt, or its first token)
  bool admitted = false;
  bool sized = false;        // its prompt row has been sized to the time
  LeftOut left_out = LeftOut::no;
};

class Scheduler::PlanBuilder {
 public:
  PlanBuilder(Scheduler& sched, double now_ms, const StepBudget& budget, StepPlan& plan)
      : sched_(sched), now_(now_ms), budget_(budget), plan_(plan) {
    for (auto& [key, s] : sched_.sessions_) {
      if (!s.paused) resident_kv_ += s.kv_tokens;
      if (s.queue.empty()) continue;
      double wait_start = s.queue.front().req.enqueue_ms;
      if (s.last_served_ms) wait_start = std::max(wait_start, *s.last_served_ms);
      const Pending& front = s.queue.front();
      const bool interactive = front.req.klass == RequestClass::interactive;
      const bool urgent = interactive && (front_is_prefill(s) || front.done == 0);
      cands_.push_back(Candidate{key, &s, sched_.priority(s, now_ms), wait_start, interactive, urgent});
    }
    std::stable_sort(cands_.begin(), cands_.end(), [](const Candidate& a, const Candidate& b) {
      if (a.priority != b.priority) return a.priority > b.priority;
      return a.wait_start < b.wait_start;  // equal: std::map order, by key
    });
    if (budget.time_left_ms) time_left_ms_ = *budget.time_left_ms;
  }

  // In order of priority (aging keeps its meaning under the row cap), but the interactive
  // prompt rows admitted before the first background candidate are sized first, so background
  // rows get only what they leave of the time; and while an admitted interactive request waits
  // for its first token, no background row joins (see "Interactive first" in scheduler.h).
  void admit_all() {
    bool urgent = false, interactive_sized = false;
    for (size_t i = 0; i < cands_.size(); ++i) {
      Candidate& c = cands_[i];
      if (!c.interactive && !interactive_sized) {
        size_prefill_rows(true);
        interactive_sized = true;
      }
      if (!c.interactive && urgent) {
        c.left_out = LeftOut::interactive;
        continue;
      }
      admit(i);
      urgent = urgent || (c.admitted && c.urgent);
    }
    size_prefill_rows(true);
    size_prefill_rows(false);
    size_draft_rows();
  }

  // A speculative request's decode row grows by the guesses the time and KV left allow (at
  // most its draft_tokens, and never past its max tokens: the drawn token is one of them).
  void size_draft_rows() {
    for (Candidate& c : cands_) {
      if (!c.admitted || front_is_prefill(*c.s)) continue;
      const Pending& p = c.s->queue.front();
      int most = std::min<int64_t>({p.req.draft_tokens, p.req.tokens - p.done - 1, std::max<int64_t>(0, free_kv())});
      while (most > 0 && !fits_time(0, most)) --most;
      if (most <= 0) continue;
      row_of(c.key).n_tokens += most;
      row_tokens_ += most;
      prefill_tokens_ += most;
    }
  }

  // Each prefill row of the class, by priority, grows from the one token admission charged to
  // the most of its reserved chunk that the time left allows (background rows: and the cap).
  void size_prefill_rows(bool interactive) {
    const int key = budget_.cost_key;
    for (Candidate& c : cands_) {
      if (!c.admitted || c.sized || c.interactive != interactive || !front_is_prefill(*c.s)) continue;
      c.sized = true;
      PlanRow& row = row_of(c.key);
      int lo = 1, hi = row.n_tokens;  // invariant: lo tokens fit (admission checked 1)
      while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (fits_time(0, mid - 1)) lo = mid; else hi = mid - 1;
      }
      if (!interactive) lo = background_cap(key, lo);
      row_tokens_ -= row.n_tokens - lo;  // the reservation it does not use
      prefill_tokens_ += lo - 1;
      row.n_tokens = lo;
    }
  }

  // A background prompt row of at most `most` tokens, cut to keep the step's predicted cost
  // within max_background_step_ms; the step's first such row keeps min_background_chunk
  // tokens whatever they cost (a model whose token costs more than the cap still reads).
  int background_cap(int key, int most) {
    int lo = std::min(most, background_floor_used_ ? 1 : sched_.cfg_.min_background_chunk), hi = most;
    background_floor_used_ = true;
    while (lo < hi) {
      const int mid = lo + (hi - lo + 1) / 2;
      if (sched_.predict_ms(key, decode_rows_, prefill_tokens_ + mid - 1) <= sched_.cfg_.max_background_step_ms) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  void finish() {
    for (const Candidate& c : cands_) {
      const bool displaced = c.left_out == LeftOut::row_cap || c.left_out == LeftOut::time ||
                             c.left_out == LeftOut::interactive;
      if (displaced && c.s->had_row && !c.s->paused && !c.s->queue.empty() && !plan_.rows.empty())
        plan_.preempted.push_back(c.key);
      if (plan_.rows.empty() && (c.left_out == LeftOut::time || c.left_out == LeftOut::frame_tokens))
        plan_.wait_for_frame = true;
    }
    for (auto& [key, s] : sched_.sessions_) s.had_row = false;
    for (const Candidate& c : cands_) c.s->had_row = c.admitted;
    std::stable_partition(plan_.rows.begin(), plan_.rows.end(), [](const PlanRow& r) { return !r.is_prefill; });
    plan_.cost_key = budget_.cost_key;
    plan_.predicted_ms = sched_.predict_ms(budget_.cost_key, decode_rows_, prefill_tokens_);
  }

 private:
  bool in_frame() const { return sched_.frame_.has_value(); }
  int64_t free_kv() const { return budget_.kv_tokens - resident_kv_ - row_tokens_; }
  bool fits_time(int extra_rows, int extra_tokens) {
    if (!std::isfinite(time_left_ms_)) return true;
    return sched_.predict_ms(budget_.cost_key, decode_rows_ + extra_rows, prefill_tokens_ + extra_tokens) <= time_left_ms_;
  }
  PlanRow& row_of(int64_t key) {
    return *std::find_if(plan_.rows.begin(), plan_.rows.end(), [&](const PlanRow& r) { return r.session == key; });
  }

  // One candidate, in order of priority: a row, or the reason it has none. A decode row is
  // one token; a prefill row reserves the KV of its whole chunk but is charged one token of
  // time here (size_prefill_rows trims it to the time left).
  void admit(size_t i) {
    Candidate& c = cands_[i];
    SessionState& s = *c.s;
    const Pending& p = s.queue.front();
    const bool prefill = front_is_prefill(s);
    const int64_t want = prefill ? std::min(sched_.cfg_.prefill_chunk, p.req.tokens - p.done) : 1;
    // A prompt is known in full: one that can never fit ends now, not when memory runs out.
    const int64_t least_kv = s.kv_tokens + (prefill ? p.req.tokens - p.done : 1);
    int64_t tokens = 0;
    if (int(plan_.rows.size()) >= budget_.max_batch_rows) {
      c.left_out = LeftOut::row_cap;
    } else if (in_frame() && !prefill && s.frame_tokens >= sched_.cfg_.max_tokens_per_frame) {
      c.left_out = LeftOut::frame_tokens;
    } else if (least_kv > budget_.kv_tokens) {
      sched_.end_front(c.key, s, EndReason::kv_exhausted);
      c.left_out = LeftOut::memory;
    } else if (!fits_time(prefill ? 0 : 1, prefill ? 1 : 0)) {
      c.left_out = LeftOut::time;
    } else if ((tokens = reserve_memory(i, want)) == 0) {
      c.left_out = LeftOut::memory;
    }
    if (c.left_out != LeftOut::no) return;
    plan_.rows.push_back(PlanRow{c.key, p.req.id, int(tokens), prefill});
    c.admitted = true;
    row_tokens_ += tokens;
    if (prefill) {
      ++prefill_tokens_;
    } else {
      ++decode_rows_;
      ++s.frame_tokens;
    }
    s.last_served_ms = now_;
  }

  // Makes the candidate resident and returns the KV tokens its row may add: `want` or what
  // is free, 0 when not even one. A paused session comes back only into free memory (or the
  // memory of idle sessions), not past a higher-priority paused one, and not in the plan
  // that paused it; a resident one may also pause lower-priority ones.
  int64_t reserve_memory(size_t i, int64_t want) {
    Candidate& c = cands_[i];
    SessionState& s = *c.s;
    if (s.paused) {
      const bool paused_now = std::find(plan_.paused.begin(), plan_.paused.end(), c.key) != plan_.paused.end();
      if (resume_blocked_ || paused_now) return 0;
      if (free_kv() < s.kv_tokens + 1) make_room(i, s.kv_tokens + 1, /*active_victims=*/false);
      if (free_kv() < s.kv_tokens + 1) {
        resume_blocked_ = true;
        return 0;
      }
      s.paused = false;
      resident_kv_ += s.kv_tokens;
      plan_.resumed.push_back(c.key);
    } else if (free_kv() < want) {
      make_room(i, want, /*active_victims=*/true);
    }
    return std::max<int64_t>(0, std::min(want, free_kv()));
  }

  // Pauses resident sessions that hold KV until `need` tokens are free: idle sessions first
  // (least recently served first), then, when allowed, candidates of lower priority than
  // cands_[i] (lowest first).
  void make_room(size_t i, int64_t need, bool active_victims) {
    std::vector<std::pair<int64_t, SessionState*>> idle;
    for (auto& [key, s] : sched_.sessions_)
      if (s.queue.empty() && !s.paused && s.kv_tokens > 0) idle.emplace_back(key, &s);
    std::stable_sort(idle.begin(), idle.end(), [](const auto& a, const auto& b) {
      return a.second->last_served_ms.value_or(-INFINITY) < b.second->last_served_ms.value_or(-INFINITY);
    });
    for (auto& [key, s] : idle) {
      if (free_kv() >= need) return;
      pause(key, *s);
    }
    if (!active_victims) return;
    for (size_t j = cands_.size(); j-- > i + 1 && free_kv() < need;) {
      SessionState& s = *cands_[j].s;
      if (!s.paused && s.kv_tokens > 0) pause(cands_[j].key, s);
    }
  }

  void pause(int64_t key, SessionState& s) {
    s.paused = true;
    resident_kv_ -= s.kv_tokens;
    plan_.paused.push_back(key);
  }

  Scheduler& sched_;
  double now_;
  StepBudget budget_;
  StepPlan& plan_;
  std::vector<Candidate> cands_;  // sessions with work, highest priority first
  int64_t resident_kv_ = 0;       // KV of the sessions not paused
  int64_t row_tokens_ = 0;        // tokens the planned rows add
  int decode_rows_ = 0, prefill_tokens_ = 0;
  double time_left_ms_ = std::numeric_limits<double>::infinity();
  bool resume_blocked_ = false;
  bool background_floor_used_ = false;  // a background prompt row of this plan got its floor   // a paused session could not come back: none after it may
};

Result<StepPlan> Scheduler::plan_step(double now_ms, const StepBudget& budget) {
  if (!std::isfinite(now_ms)) return make_error(Status::invalid_argument, "plan_step: the time is not finite");
  if (outstanding_)
    return make_error(Status::invalid_argument, "plan_step: step " + std::to_string(outstanding_->step) +
                                                    " is not completed yet");
  if (budget.max_batch_rows < 1 || budget.kv_tokens < 1)
    return make_error(Status::invalid_argument, "plan_step: max_batch_rows and kv_tokens must be >= 1");
  StepPlan plan;
  plan.step = next_step_++;
  apply_controls(plan);
  PlanBuilder builder(*this, now_ms, budget, plan);
  builder.admit_all();
  builder.finish();
  end_plan(plan);
  if (!plan.rows.empty()) outstanding_ = plan;
  return plan;
}

Result<StepPlan> Scheduler::plan_controls() {
  if (outstanding_)
    return make_error(Status::invalid_argument, "plan_controls: step " + std::to_string(outstanding_->step) +
                                                    " is not completed yet");
  StepPlan plan;
  plan.step = next_step_++;
  apply_controls(plan);
  end_plan(plan);
  return plan;
}

void Scheduler::end_plan(StepPlan& plan) {
  plan.ended = std::exchange(ended_, {});
  std::erase_if(sessions_, [](const auto& kv) {  // nothing left to remember
    const SessionState& s = kv.second;
    return s.queue.empty() && !s.paused && s.kv_tokens == 0;
  });
}

}  // namespace pllm
