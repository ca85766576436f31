// Scheduler under its budgets: KV memory (pause / resume) and UI frames (10,000 simulated
// frames on a fake clock, against a true step cost the planner only learns by measuring).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <set>

#include "scheduler_sim.h"

namespace pllm {
namespace {

using sim::work;

// The engine's side of KV memory, kept apart from the scheduler's: what each session holds
// and whether it is in memory, from the rows run and the plan's paused / resumed lists.
struct KvLedger {
  std::map<int64_t, int64_t> held;
  std::set<int64_t> moved_out;
  std::set<int64_t> ever_paused, ever_resumed;
  std::vector<int64_t> pause_order;

  void apply(const StepPlan& p) {
    for (int64_t k : p.resumed)
      EXPECT_EQ(std::count(p.paused.begin(), p.paused.end(), k), 0) << "session " << k << " paused and resumed at once";
    for (int64_t k : p.paused) {
      EXPECT_TRUE(moved_out.insert(k).second) << "session " << k << " paused twice";
      ever_paused.insert(k);
      pause_order.push_back(k);
    }
    for (int64_t k : p.resumed) {
      EXPECT_EQ(moved_out.erase(k), 1u) << "session " << k << " resumed but not paused";
      ever_resumed.insert(k);
    }
    for (const PlanRow& r : p.rows) EXPECT_EQ(moved_out.count(r.session), 0u) << "a row for paused session " << r.session;
  }
  int64_t in_memory_after(const StepPlan& p) const {
    int64_t n = 0;
    for (const auto& [k, v] : held) n += moved_out.count(k) ? 0 : v;
    for (const PlanRow& r : p.rows) n += r.n_tokens;
    return n;
  }
};

TEST(SchedulerBudgets, KvOverBudgetPausesLowestPriorityAndResumesItWithAllItsWork) {
  constexpr int64_t kBudget = 400;
  const StepBudget budget{8, kBudget};
  Scheduler s = sim::make_scheduler();
  ASSERT_TRUE(s.submit(work(1, 1, RequestKind::prefill, 150, 0)).ok());
  ASSERT_TRUE(s.submit(work(2, 1, RequestKind::generate, 100, 0)).ok());
  ASSERT_TRUE(s.submit(work(3, 2, RequestKind::prefill, 100, 0, RequestClass::background)).ok());
  ASSERT_TRUE(s.submit(work(4, 2, RequestKind::generate, 80, 0, RequestClass::background)).ok());
  KvLedger ledger;
  std::map<int64_t, int> generated, prefilled;
  std::map<uint64_t, EndReason> ends;
  for (int i = 0; i < 1000 && ends.size() < 6; ++i) {
    const double now = 10.0 * i;
    if (i == 5) {  // a second interactive conversation: 640 tokens wanted in all, 400 fit
      ASSERT_TRUE(s.submit(work(5, 3, RequestKind::prefill, 150, now)).ok());
      ASSERT_TRUE(s.submit(work(6, 3, RequestKind::generate, 60, now)).ok());
    }
    StepPlan p = sim::plan(s, now, budget);
    ledger.apply(p);
    EXPECT_LE(ledger.in_memory_after(p), kBudget) << "step " << i;
    for (const EndedRequest& e : p.ended) ends[e.request] = e.reason;
    if (p.rows.empty()) continue;
    for (const PlanRow& r : p.rows) {
      ledger.held[r.session] += r.n_tokens;
      (r.is_prefill ? prefilled : generated)[r.session] += r.n_tokens;
    }
    ASSERT_TRUE(s.complete(p, 10, sim::all_done(p)).ok());
  }
  ASSERT_EQ(ends.size(), 6u);
  for (const auto& [id, reason] : ends) EXPECT_EQ(reason, EndReason::done) << "request " << id;
  ASSERT_FALSE(ledger.pause_order.empty());
  EXPECT_EQ(ledger.pause_order.front(), 2) << "the background session goes first";
  EXPECT_TRUE(ledger.ever_resumed.count(2));
  // Nothing lost or repeated across the pause: exactly the tokens asked for.
  EXPECT_EQ(prefilled[2], 100);
  EXPECT_EQ(generated[2], 80);
  EXPECT_EQ(prefilled[1], 150);
  EXPECT_EQ(generated[1], 100);
  EXPECT_EQ(prefilled[3], 150);
  EXPECT_EQ(generated[3], 60);
  for (int64_t k : {1, 2, 3}) EXPECT_EQ(s.kv_tokens(k), ledger.held[k]);
}

TEST(SchedulerBudgets, SessionLargerThanTheKvBudgetEndsWithKvExhausted) {
  Scheduler s = sim::make_scheduler();
  ASSERT_TRUE(s.report_kv(1, 100).ok());
  ASSERT_TRUE(s.submit(work(1, 1, RequestKind::generate, 5, 0)).ok());
  ASSERT_TRUE(s.submit(work(2, 2, RequestKind::generate, 5, 0)).ok());
  ASSERT_TRUE(s.submit(work(3, 3, RequestKind::prefill, 101, 0)).ok());  // a prompt that can never fit
  StepPlan p = sim::plan(s, 0, StepBudget{8, 100});
  ASSERT_NE(sim::ended(p, 1), nullptr);
  EXPECT_EQ(sim::ended(p, 1)->reason, EndReason::kv_exhausted);
  ASSERT_NE(sim::ended(p, 3), nullptr);
  EXPECT_EQ(sim::ended(p, 3)->reason, EndReason::kv_exhausted);
  EXPECT_EQ(sim::ended(p, 3)->tokens_done, 0);  // ended before any work was spent on it
  ASSERT_EQ(p.rows.size(), 1u);  // session 2 still runs (session 1 idle, moved out for it)
  EXPECT_EQ(p.rows[0].session, 2);
  EXPECT_EQ(p.paused, std::vector<int64_t>{1});
}

// Two background sessions in memory (weights 100 and 150); an interactive prompt needs the
// room and pauses the lighter one first, then the other. When the prompt is done and its
// session idle, the paused ones come back heavier first.
TEST(SchedulerBudgets, PausedSessionsResumeInOrderOfPriority) {
  Scheduler s = sim::make_scheduler();
  const StepBudget budget{8, 250};
  SchedulerRequest light = work(1, 1, RequestKind::generate, 3, 0, RequestClass::background);
  SchedulerRequest heavy = work(2, 2, RequestKind::generate, 3, 0, RequestClass::background);
  heavy.base_weight = 150;
  ASSERT_TRUE(s.report_kv(1, 100).ok());
  ASSERT_TRUE(s.report_kv(2, 100).ok());
  ASSERT_TRUE(s.submit(light).ok());
  ASSERT_TRUE(s.submit(heavy).ok());
  ASSERT_TRUE(s.submit(work(3, 3, RequestKind::prefill, 200, 0)).ok());
  KvLedger ledger;
  std::vector<int64_t> resumed;
  for (int i = 0; i < 50 && s.pending(1) + s.pending(2) > 0; ++i) {
    StepPlan p = sim::step(s, 10.0 * i, 10, budget);
    ledger.apply(p);
    resumed.insert(resumed.end(), p.resumed.begin(), p.resumed.end());
  }
  EXPECT_EQ(s.pending(1) + s.pending(2), 0u);
  EXPECT_EQ(ledger.pause_order, (std::vector<int64_t>{1, 2, 3}));  // 3: idle once its prompt is in
  EXPECT_EQ(resumed, (std::vector<int64_t>{2, 1}));
}

struct FrameRun {
  int frames = 0, overruns = 0;
  double used_fraction = 0;  // mean share of each frame's work window spent in steps
  int64_t tokens = 0;
};

// Six sessions (three interactive, three background): one alone for the first 25 frames,
// then the other five. Each opens with a reply to a conversation already in memory (so the
// planner first measures one-row decode steps only), then asks for a prompt of 20 to 400
// tokens and a reply of 10 to 60 tokens, over and over: more work than a frame holds. Frames of
// 16 ms, each step planned within the first 8 ms (the time limit the caller gives); each step really costs TrueCost times
// (1 + noise), noise uniform in [-noise, noise]. The planner starts from the default prior.
FrameRun run_frames(int frames, double noise, uint64_t seed) {
  constexpr double kPeriod = 16, kWindow = kPeriod - 8;
  constexpr int kSessions = 6, kOthersJoin = 25;
  const sim::TrueCost truth;
  Scheduler s = sim::make_scheduler();
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> prompt(20, 400), reply(10, 60);
  std::uniform_real_distribution<double> jitter(-noise, noise);
  uint64_t next_id = 1;
  auto submit = [&](int64_t session, RequestKind kind, int tokens, double now) {
    const auto klass = session < 3 ? RequestClass::interactive : RequestClass::background;
    EXPECT_TRUE(s.submit(work(next_id++, session, kind, tokens, now, klass)).ok());
  };
  auto new_turn = [&](int64_t session, double now) {
    EXPECT_TRUE(s.report_kv(session, 0).ok());  // a new conversation
    submit(session, RequestKind::prefill, prompt(rng), now);
    submit(session, RequestKind::generate, reply(rng), now);
  };
  FrameRun run;
  double now = 0;
  for (int f = 0; f < frames; ++f) {
    const double start = f * kPeriod;
    EXPECT_TRUE(s.on_frame(start).ok());
    now = std::max(now, start);
    for (int64_t session = 0; session < kSessions; ++session) {
      if (f != (session == 0 ? 0 : kOthersJoin)) continue;
      EXPECT_TRUE(s.report_kv(session, 300).ok());
      submit(session, RequestKind::generate, 100, now);
    }
    for (;;) {
      StepBudget budget;
      budget.time_left_ms = start + kWindow - now;
      StepPlan p = sim::plan(s, now, budget);
      for (const EndedRequest& e : p.ended)
        if (s.pending(e.session) == 0) new_turn(e.session, now);
      if (p.rows.empty()) break;
      EXPECT_LE(now + p.predicted_ms, start + kWindow + 1e-9) << "planned past the frame";
      const double cost_ms = truth(sim::decode_rows(p), sim::prefill_tokens(p)) * (1 + jitter(rng));
      now += cost_ms;
      for (const PlanRow& r : p.rows) run.tokens += r.n_tokens;
      EXPECT_TRUE(s.complete(p, cost_ms, sim::all_done(p)).ok());
    }
    run.overruns += now > start + kWindow + 1e-9 ? 1 : 0;
    run.used_fraction += std::max(0.0, now - start) / kWindow / frames;
    ++run.frames;
  }
  std::printf("[ frames ] noise +-%.0f %%: %d of %d frames overran, %.1f %% of the work window used\n", noise * 100,
              run.overruns, run.frames, run.used_fraction * 100);
  return run;
}

TEST(SchedulerBudgets, ExactCostsStayWithinEveryFrame) {
  const FrameRun run = run_frames(10000, 0.0, 1);
  EXPECT_EQ(run.overruns, 0);
  // Not trivially within budget: most of each work window is used.
  EXPECT_GT(run.used_fraction, 0.6);
  EXPECT_GT(run.tokens, 10000 * 20);
}

TEST(SchedulerBudgets, NoisyCostsOverrunAtMostOnePercentOfFrames) {
  const FrameRun run = run_frames(10000, 0.2, 2);
  EXPECT_LE(run.overruns, run.frames / 100);
  EXPECT_GT(run.used_fraction, 0.5);
}

}  // namespace
}  // namespace pllm
