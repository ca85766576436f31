// Scheduler planning rules, step by step on a fake clock (runtime/scheduler.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "scheduler_sim.h"

namespace pllm {
namespace {

using sim::control;
using sim::work;
constexpr auto kGen = RequestKind::generate;
constexpr auto kPrefill = RequestKind::prefill;
constexpr auto kBackground = RequestClass::background;

TEST(Scheduler, RejectsBadInput) {
  SchedulerConfig bad;
  bad.prefill_chunk = 0;
  EXPECT_FALSE(Scheduler::create(bad).ok());
  bad = {};
  bad.cost.forget = 1.5;
  EXPECT_FALSE(Scheduler::create(bad).ok());

  Scheduler s = sim::make_scheduler();
  ASSERT_TRUE(s.submit(work(1, 10, kGen, 5, 0)).ok());
  EXPECT_EQ(s.submit(work(1, 11, kGen, 5, 0)).error().code, Status::invalid_argument);  // id still pending
  EXPECT_FALSE(s.submit(work(2, 10, kGen, 0, 0)).ok());                                 // no tokens
  EXPECT_FALSE(s.submit(work(3, 10, RequestKind::prewarm, 5, 0)).ok());                 // pre-warm, interactive
  EXPECT_FALSE(s.submit(work(4, 10, RequestKind::control, 0, 0)).ok());                 // control kind, interactive
  SchedulerRequest weighted = control(5, 10, ControlAction::cancel, 0);
  weighted.base_weight = 7;
  EXPECT_FALSE(s.submit(weighted).ok());
  SchedulerRequest negative = work(6, 10, kGen, 5, 0);
  negative.base_weight = -1;
  EXPECT_FALSE(s.submit(negative).ok());
  EXPECT_FALSE(s.report_kv(10, -1).ok());
  EXPECT_FALSE(s.on_frame(NAN).ok());
  ASSERT_TRUE(s.on_frame(100).ok());
  EXPECT_FALSE(s.on_frame(50).ok());  // the frame clock went back
  s.stop_frames();

  EXPECT_FALSE(s.complete(StepPlan{}, 1, {}).ok());  // nothing planned
  EXPECT_FALSE(s.plan_step(0, StepBudget{0, 100}).ok());
  StepPlan p = sim::plan(s, 0);
  ASSERT_EQ(p.rows.size(), 1u);
  EXPECT_FALSE(s.plan_step(1, {}).ok());           // the previous plan is not completed
  EXPECT_FALSE(s.complete(p, 1, {}).ok());         // no result for its row
  std::vector<RowResult> too_many = {RowResult{2, false, Status::ok}};
  EXPECT_FALSE(s.complete(p, 1, too_many).ok());   // a decode row processes one token
  EXPECT_FALSE(s.complete(p, -1, sim::all_done(p)).ok());
  EXPECT_TRUE(s.complete(p, 1, sim::all_done(p)).ok());
}

TEST(Scheduler, DecodeRowsFirstThenPrefillChunksByPriority) {
  SchedulerConfig cfg;
  cfg.max_background_step_ms = 1e9;  // order and chunks here, not the background cap
  Scheduler s = sim::make_scheduler(cfg);
  ASSERT_TRUE(s.submit(work(1, 1, kPrefill, 200, 0)).ok());               // interactive prompt
  ASSERT_TRUE(s.submit(work(2, 2, kGen, 10, 0, kBackground)).ok());
  ASSERT_TRUE(s.submit(work(3, 3, kGen, 10, 0)).ok());
  ASSERT_TRUE(s.submit(work(4, 4, RequestKind::prewarm, 30, 0, kBackground)).ok());
  StepPlan p = sim::plan(s, 0);
  // Interactive requests wait for their first token (session 3's reply, session 1's prompt),
  // so the step is theirs alone (P12): the decode row, then the prompt chunk.
  ASSERT_EQ(p.rows.size(), 2u);
  EXPECT_EQ(p.rows[0].session, 3);
  EXPECT_EQ(p.rows[1].session, 1);
  EXPECT_EQ(p.rows[0].n_tokens, 1);
  EXPECT_EQ(p.rows[1].n_tokens, 64);  // the default chunk
  EXPECT_TRUE(p.rows[1].is_prefill);
  ASSERT_TRUE(s.complete(p, 10, sim::all_done(p)).ok());
  // Session 1's prompt still waits (3 more chunks): the background keeps waiting.
  for (int k = 1; k <= 3; ++k) {
    p = sim::step(s, 10.0 * k);
    EXPECT_EQ(sim::row_of(p, 2), nullptr) << "step " << k;
    EXPECT_EQ(sim::row_of(p, 4), nullptr) << "step " << k;
    EXPECT_NE(sim::row_of(p, 3), nullptr) << "step " << k;  // it has its first token: a stream now
  }
  // Then decode rows (interactive before background), then the short pre-warm, whole.
  p = sim::plan(s, 40);
  ASSERT_EQ(p.rows.size(), 3u);
  EXPECT_EQ(p.rows[0].session, 3);
  EXPECT_EQ(p.rows[1].session, 2);
  EXPECT_EQ(p.rows[2].session, 4);
  EXPECT_EQ(p.rows[2].n_tokens, 30);
  EXPECT_TRUE(p.rows[2].is_prefill);
}

TEST(Scheduler, LongPromptIsChunkedWhileOthersDecodeEveryStep) {
  SchedulerConfig cfg;
  cfg.max_background_step_ms = 1e9;  // chunks by count alone (BackgroundPromptChunksKeepStepsShort)
  Scheduler s = sim::make_scheduler(cfg);
  ASSERT_TRUE(s.submit(work(1, 1, kGen, 100, 0, kBackground)).ok());
  ASSERT_TRUE(s.submit(work(2, 2, kGen, 100, 0, kBackground)).ok());
  ASSERT_TRUE(s.submit(work(3, 3, kPrefill, 1000, 0, kBackground)).ok());
  int prompt_tokens = 0, prompt_steps = 0;
  for (double now = 0; prompt_tokens < 1000 && now < 1000; now += 10) {
    StepPlan p = sim::step(s, now);
    const PlanRow* chunk = sim::row_of(p, 3);
    ASSERT_NE(chunk, nullptr);
    EXPECT_LE(chunk->n_tokens, 64);
    ASSERT_NE(sim::row_of(p, 1), nullptr) << "a decode row waited for the prompt";
    ASSERT_NE(sim::row_of(p, 2), nullptr) << "a decode row waited for the prompt";
    prompt_tokens += chunk->n_tokens;
    ++prompt_steps;
  }
  EXPECT_EQ(prompt_tokens, 1000);
  EXPECT_EQ(prompt_steps, (1000 + 63) / 64);
  EXPECT_EQ(s.kv_tokens(3), 1000);
}

TEST(Scheduler, ControlRequestsGoBeforeGeneration) {
  Scheduler s = sim::make_scheduler();
  ASSERT_TRUE(s.submit(work(1, 1, kGen, 50, 0, kBackground)).ok());
  ASSERT_TRUE(s.submit(work(2, 2, kGen, 50, 0, kBackground)).ok());
  StepPlan p = sim::plan(s, 0);
  ASSERT_EQ(p.rows.size(), 2u);
  // While the step runs: a cancel of session 1, then more work for it.
  ASSERT_TRUE(s.submit(control(3, 1, ControlAction::cancel, 5)).ok());
  ASSERT_TRUE(s.complete(p, 10, sim::all_done(p)).ok());
  ASSERT_TRUE(s.submit(work(4, 1, kGen, 50, 12, kBackground)).ok());
  p = sim::plan(s, 20);
  EXPECT_EQ(p.controls, std::vector<uint64_t>{3});
  const EndedRequest* e = sim::ended(p, 1);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->reason, EndReason::cancelled);
  EXPECT_EQ(e->tokens_done, 1);
  // Request 4 came after the cancel, so it stands; request 1's row is gone.
  for (const PlanRow& r : p.rows) EXPECT_NE(r.request, 1u);
  ASSERT_NE(sim::row_of(p, 1), nullptr);
  EXPECT_EQ(sim::row_of(p, 1)->request, 4u);
  ASSERT_TRUE(s.complete(p, 10, sim::all_done(p)).ok());

  // Cancel everything of session 2: its rows vanish from the very next plan.
  ASSERT_TRUE(s.submit(control(5, 2, ControlAction::cancel, 30)).ok());
  p = sim::plan(s, 30);
  EXPECT_EQ(sim::row_of(p, 2), nullptr);
  ASSERT_NE(sim::ended(p, 2), nullptr);
  EXPECT_EQ(sim::ended(p, 2)->tokens_done, 2);
  EXPECT_EQ(s.pending(2), 0u);
}

TEST(Scheduler, ResetDropsKvAndInterruptEndsOnlyTheCurrentRequest) {
  Scheduler s = sim::make_scheduler();
  ASSERT_TRUE(s.submit(work(1, 1, kPrefill, 40, 0)).ok());
  ASSERT_TRUE(s.submit(work(2, 1, kGen, 20, 0)).ok());
  ASSERT_TRUE(s.submit(work(3, 1, kGen, 20, 0)).ok());  // the next turn, queued
  sim::step(s, 0);                                       // prompt
  sim::step(s, 10);                                      // token 1 of request 2
  sim::step(s, 20);                                      // token 2
  ASSERT_TRUE(s.submit(control(4, 1, ControlAction::interrupt, 25)).ok());
  StepPlan p = sim::step(s, 30);
  ASSERT_NE(sim::ended(p, 2), nullptr);
  EXPECT_EQ(sim::ended(p, 2)->reason, EndReason::interrupted);
  EXPECT_EQ(sim::ended(p, 2)->tokens_done, 2);
  ASSERT_NE(sim::row_of(p, 1), nullptr);
  EXPECT_EQ(sim::row_of(p, 1)->request, 3u);  // the queued turn goes on
  EXPECT_EQ(s.kv_tokens(1), 40 + 2 + 1);

  ASSERT_TRUE(s.submit(control(5, 1, ControlAction::reset, 35)).ok());
  p = sim::plan(s, 40);
  EXPECT_EQ(p.resets, std::vector<int64_t>{1});
  ASSERT_NE(sim::ended(p, 3), nullptr);
  EXPECT_EQ(sim::ended(p, 3)->reason, EndReason::reset);
  EXPECT_TRUE(p.rows.empty());
  EXPECT_EQ(s.kv_tokens(1), 0);
}

// A session being removed is reset by a plan of its controls alone: the other sessions'
// requests stand, whatever the caps (the runtime once used a one-row, one-token plan for this,
// which ended every other running request as kv_exhausted).
TEST(Scheduler, PlanControlsTouchesOnlyTheControlledSessions) {
  Scheduler s = sim::make_scheduler();
  ASSERT_TRUE(s.submit(work(1, 1, kPrefill, 40, 0)).ok());
  ASSERT_TRUE(s.submit(work(2, 1, kGen, 20, 0)).ok());
  ASSERT_TRUE(s.submit(work(3, 2, kPrefill, 30, 0)).ok());
  ASSERT_TRUE(s.submit(work(4, 2, kGen, 20, 0)).ok());
  sim::step(s, 0);
  sim::step(s, 10);
  const int64_t kv2 = s.kv_tokens(2);
  ASSERT_GT(kv2, 0);
  ASSERT_TRUE(s.submit(control(5, 1, ControlAction::reset, 15)).ok());
  auto p = s.plan_controls();
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_TRUE(p->rows.empty());
  EXPECT_EQ(p->controls, std::vector<uint64_t>{5});
  EXPECT_EQ(p->resets, std::vector<int64_t>{1});
  ASSERT_EQ(p->ended.size(), 1u);
  EXPECT_EQ(p->ended[0].request, 2u);
  EXPECT_EQ(p->ended[0].reason, EndReason::reset);
  EXPECT_EQ(s.pending(2), 1u);
  EXPECT_EQ(s.kv_tokens(2), kv2);
  // Session 2 goes on in the next step.
  StepPlan next = sim::plan(s, 20);
  ASSERT_NE(sim::row_of(next, 2), nullptr);
  EXPECT_EQ(sim::row_of(next, 2)->request, 4u);
  // Not while a step is outstanding.
  EXPECT_FALSE(s.plan_controls().ok());
  ASSERT_TRUE(s.complete(next, 10, sim::all_done(next)).ok());
  EXPECT_TRUE(s.plan_controls().ok());
}

TEST(Scheduler, EosAndFailedRowsEndTheirRequests) {
  Scheduler s = sim::make_scheduler();
  ASSERT_TRUE(s.submit(work(1, 1, kGen, 10, 0)).ok());
  ASSERT_TRUE(s.submit(work(2, 2, kGen, 10, 0)).ok());
  StepPlan p = sim::step(s, 0);
  p = sim::plan(s, 10);
  ASSERT_EQ(p.rows.size(), 2u);
  std::vector<RowResult> results(2);
  for (size_t i = 0; i < 2; ++i) {
    const bool first = p.rows[i].session == 1;
    results[i] = first ? RowResult{1, true, Status::ok} : RowResult{0, false, Status::out_of_range};
  }
  ASSERT_TRUE(s.complete(p, 10, results).ok());
  p = sim::plan(s, 20);
  EXPECT_TRUE(p.rows.empty());
  ASSERT_NE(sim::ended(p, 1), nullptr);
  EXPECT_EQ(sim::ended(p, 1)->reason, EndReason::eos);
  EXPECT_EQ(sim::ended(p, 1)->tokens_done, 2);
  ASSERT_NE(sim::ended(p, 2), nullptr);
  EXPECT_EQ(sim::ended(p, 2)->reason, EndReason::failed);
  EXPECT_EQ(sim::ended(p, 2)->status, Status::out_of_range);
  EXPECT_EQ(sim::ended(p, 2)->tokens_done, 1);
}

// One row per step, an interactive session that always has a next turn queued, and one
// background request. The interactive session is served every step, so at plan time it
// has waited one step: priority 500 + step/10. The background request, never served,
// has 100 + t/10: it cannot win before t = (500 - 100) * 10 and must win by the first
// plan where 100 + t/10 >= 500 + step/10 (ties go to the longer wait).
TEST(Scheduler, AgingServesBackgroundBehindAnInteractiveStream) {
  constexpr double kStep = 10;
  Scheduler s = sim::make_scheduler();
  const StepBudget one_row{1, 1 << 20};
  ASSERT_TRUE(s.submit(work(1000, 2, kGen, 3, 0, kBackground)).ok());
  uint64_t next_id = 1;
  ASSERT_TRUE(s.submit(work(next_id++, 1, kGen, 5, 0)).ok());
  ASSERT_TRUE(s.submit(work(next_id++, 1, kGen, 5, 0)).ok());
  std::vector<double> background_served;
  bool background_done = false;
  for (double now = 0; !background_done && now < 60000; now += kStep) {
    StepPlan p = sim::step(s, now, kStep, one_row);
    for (const EndedRequest& e : p.ended) {
      if (e.session == 1) {  // the stream goes on
        ASSERT_TRUE(s.submit(work(next_id++, 1, kGen, 5, now)).ok());
      }
      if (e.request == 1000) {
        EXPECT_EQ(e.reason, EndReason::done);
        EXPECT_EQ(e.tokens_done, 3);
        background_done = true;
      }
    }
    ASSERT_EQ(p.rows.size(), 1u);
    if (p.rows[0].session == 2) background_served.push_back(now);
  }
  ASSERT_TRUE(background_done);
  ASSERT_EQ(background_served.size(), 3u);
  const double start = (500 - 100) * 10.0;
  double waiting_since = 0;
  for (double t : background_served) {
    EXPECT_GE(t - waiting_since, start);
    EXPECT_LE(t - waiting_since, start + 2 * kStep);
    waiting_since = t;  // served: its wait starts again
  }
}

TEST(Scheduler, MaxBatchRowsCapsRowsAndNobodyStarves) {
  Scheduler s = sim::make_scheduler();
  for (int i = 0; i < 6; ++i)
    ASSERT_TRUE(s.submit(work(uint64_t(i + 1), i, kGen, 5, 0, i < 3 ? RequestClass::interactive : kBackground)).ok());
  const StepBudget two_rows{2, 1 << 20};
  std::set<int64_t> done;
  bool preempted_seen = false;
  for (double now = 0; done.size() < 6 && now < 100000; now += 10) {
    StepPlan p = sim::step(s, now, 10, two_rows);
    EXPECT_LE(p.rows.size(), 2u);
    if (now == 0) {
      for (const PlanRow& r : p.rows) EXPECT_LT(r.session, 3) << "a background row before interactive ones";
    }
    preempted_seen = preempted_seen || !p.preempted.empty();
    for (const EndedRequest& e : p.ended) {
      EXPECT_EQ(e.reason, EndReason::done);
      done.insert(e.session);
    }
  }
  EXPECT_EQ(done.size(), 6u);
  EXPECT_TRUE(preempted_seen);  // three interactive sessions take turns on two rows
}

TEST(Scheduler, MaxTokensPerFrameCapsEachSessionWithinAFrame) {
  SchedulerConfig cfg;
  cfg.max_tokens_per_frame = 3;
  Scheduler s = sim::make_scheduler(cfg);
  ASSERT_TRUE(s.submit(work(1, 1, kGen, 10, 0)).ok());
  ASSERT_TRUE(s.submit(work(2, 2, kGen, 10, 0, kBackground)).ok());
  for (int frame = 0; frame < 3; ++frame) {
    const double start = frame * 1000.0;  // long frames: only the token cap binds
    ASSERT_TRUE(s.on_frame(start).ok());
    std::map<int64_t, int> tokens;
    double now = start;
    for (int guard = 0; guard < 100; ++guard) {
      StepPlan p = sim::plan(s, now);
      if (p.rows.empty()) {
        EXPECT_TRUE(p.wait_for_frame);
        break;
      }
      for (const PlanRow& r : p.rows) tokens[r.session] += r.n_tokens;
      now += 2;
      ASSERT_TRUE(s.complete(p, 2, sim::all_done(p)).ok());
    }
    EXPECT_EQ(tokens[1], 3);
    EXPECT_EQ(tokens[2], 3);
  }
}

TEST(Scheduler, EmptyPlanWhenTheSmallestStepDoesNotFitTheTimeLeft) {
  SchedulerConfig cfg;
  cfg.cost.prior_fixed_ms = 3;
  cfg.cost.prior_row_ms = 1;  // one decode row: 4 ms plus the margin
  Scheduler s = sim::make_scheduler(cfg);
  ASSERT_TRUE(s.submit(work(1, 1, kGen, 10, 0)).ok());
  StepBudget budget;
  budget.time_left_ms = 3;
  StepPlan p = sim::plan(s, 5, budget);
  EXPECT_TRUE(p.rows.empty());
  EXPECT_TRUE(p.wait_for_frame);
  budget.time_left_ms = 6;
  p = sim::plan(s, 18, budget);
  ASSERT_EQ(p.rows.size(), 1u);
  EXPECT_GT(p.predicted_ms, 4.0);
  EXPECT_LE(p.predicted_ms, 6.0);
}

}  // namespace
}  // namespace pllm

namespace pllm {
namespace {

// Speculative decoding: a generate request's decode rows carry up to draft_tokens guesses,
// never more than its tokens left after the drawn one, and only what the time left allows.
TEST(Scheduler, DecodeRowsCarryTheGuessesTimeAndTokensAllow) {
  Scheduler s = sim::make_scheduler();
  SchedulerRequest r = sim::work(1, 1, RequestKind::generate, 5, 0);
  r.draft_tokens = 6;
  ASSERT_TRUE(s.submit(r).ok());
  StepPlan p = sim::plan(s, 0);
  ASSERT_EQ(p.rows.size(), 1u);
  EXPECT_EQ(p.rows[0].n_tokens, 5);  // the drawn token and 4 guesses: 5 tokens in all
  // Two guesses kept of the four run: three tokens done.
  EXPECT_FALSE(s.complete(p, 10, std::vector<RowResult>{RowResult{3, false, Status::ok, 6}}).ok());
  ASSERT_TRUE(s.complete(p, 10, std::vector<RowResult>{RowResult{3, false, Status::ok, 5}}).ok());
  p = sim::plan(s, 10);
  ASSERT_EQ(p.rows.size(), 1u);
  EXPECT_EQ(p.rows[0].n_tokens, 2);  // 2 tokens left: the drawn one and one guess
  ASSERT_TRUE(s.complete(p, 10, std::vector<RowResult>{RowResult{2, false, Status::ok, 2}}).ok());
  p = sim::plan(s, 20);
  EXPECT_TRUE(p.rows.empty());
  ASSERT_NE(sim::ended(p, 1), nullptr);
  EXPECT_EQ(sim::ended(p, 1)->tokens_done, 5);

  // The time left bounds the guesses like any row's (each costs as a prompt token).
  Scheduler t = sim::make_scheduler();
  r.tokens = 100;
  r.draft_tokens = 16;
  ASSERT_TRUE(t.submit(r).ok());
  p = sim::plan(t, 0);
  ASSERT_EQ(p.rows.size(), 1u);
  EXPECT_EQ(p.rows[0].n_tokens, 17);
  const double all_ms = p.predicted_ms;
  ASSERT_TRUE(t.complete(p, 0, std::vector<RowResult>{RowResult{0, false, Status::ok, 0}}).ok());  // preempted
  StepBudget tight;
  tight.time_left_ms = 0.6 * all_ms;
  p = sim::plan(t, 1, tight);
  ASSERT_EQ(p.rows.size(), 1u);
  EXPECT_GT(p.rows[0].n_tokens, 1);
  EXPECT_LT(p.rows[0].n_tokens, 17);
  EXPECT_LE(p.predicted_ms, *tight.time_left_ms);
}

TEST(Scheduler, DraftTokensAreChecked) {
  Scheduler s = sim::make_scheduler();
  SchedulerRequest r = sim::work(1, 1, RequestKind::generate, 5, 0);
  r.draft_tokens = -1;
  EXPECT_FALSE(s.submit(r).ok());
  r = sim::work(2, 1, RequestKind::prefill, 5, 0);
  r.draft_tokens = 2;
  EXPECT_FALSE(s.submit(r).ok());  // only a generate request drafts
  r.draft_tokens = 0;
  ASSERT_TRUE(s.submit(r).ok());
  StepPlan p = sim::plan(s, 0);
  ASSERT_EQ(p.rows.size(), 1u);
  // rows_run is a decode row's count
  EXPECT_FALSE(s.complete(p, 1, std::vector<RowResult>{RowResult{5, false, Status::ok, 1}}).ok());
  EXPECT_TRUE(s.complete(p, 1, sim::all_done(p)).ok());
}

}  // namespace
}  // namespace pllm
