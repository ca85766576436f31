// Test helpers for the scheduler: request builders, a true step cost the tests control, and a
// fake engine that runs a plan's rows in full.
#pragma once
#include <gtest/gtest.h>

#include <vector>

#include "runtime/scheduler.h"

namespace pllm::sim {

// What a step really costs in these tests (the planner only learns it from complete()).
struct TrueCost {
  double fixed_ms = 1.2, row_ms = 0.35, token_ms = 0.03;
  double operator()(int decode_rows, int prefill_tokens) const {
    return fixed_ms + row_ms * decode_rows + token_ms * prefill_tokens;
  }
};

inline SchedulerRequest work(uint64_t id, int64_t session, RequestKind kind, int tokens, double enqueue_ms,
                             RequestClass klass = RequestClass::interactive) {
  return SchedulerRequest{.id = id, .session = session, .klass = klass, .base_weight = std::nullopt,
                          .enqueue_ms = enqueue_ms, .kind = kind, .tokens = tokens, .action = ControlAction::cancel};
}

inline SchedulerRequest control(uint64_t id, int64_t session, ControlAction action, double enqueue_ms) {
  SchedulerRequest r = work(id, session, RequestKind::control, 0, enqueue_ms, RequestClass::control);
  r.action = action;
  return r;
}

inline int decode_rows(const StepPlan& p) {
  int n = 0;
  for (const PlanRow& r : p.rows) n += r.is_prefill ? 0 : 1;
  return n;
}

inline int prefill_tokens(const StepPlan& p) {
  int n = 0;
  for (const PlanRow& r : p.rows) n += r.is_prefill ? r.n_tokens : 0;
  return n;
}

// Every row processed in full, no EOS.
inline std::vector<RowResult> all_done(const StepPlan& p) {
  std::vector<RowResult> out;
  for (const PlanRow& r : p.rows) out.push_back(RowResult{r.n_tokens, false, Status::ok});
  return out;
}

inline Scheduler make_scheduler(const SchedulerConfig& cfg = {}) {
  auto s = Scheduler::create(cfg);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  return std::move(s).value();
}

inline StepPlan plan(Scheduler& s, double now_ms, const StepBudget& budget = {}) {
  auto p = s.plan_step(now_ms, budget);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  return p.ok() ? std::move(p).value() : StepPlan{};
}

// Plans at now_ms and completes the rows in full at a cost of step_ms.
inline StepPlan step(Scheduler& s, double now_ms, double step_ms = 10, const StepBudget& budget = {}) {
  StepPlan p = plan(s, now_ms, budget);
  if (!p.rows.empty()) {
    auto r = s.complete(p, step_ms, all_done(p));
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  }
  return p;
}

inline const PlanRow* row_of(const StepPlan& p, int64_t session) {
  for (const PlanRow& r : p.rows)
    if (r.session == session) return &r;
  return nullptr;
}

inline const EndedRequest* ended(const StepPlan& p, uint64_t request) {
  for (const EndedRequest& e : p.ended)
    if (e.request == request) return &e;
  return nullptr;
}

}  // namespace pllm::sim
