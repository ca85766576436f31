// The scheduler's interactive-first rules (issue P12), on a fake clock against a true step
// cost the planner only learns by measuring: an interactive request arriving during long
// background prompts, background chunks kept short, preempted rows, and thread counts that
// learn their own costs.
#include <gtest/gtest.h>

#include <algorithm>

#include "scheduler_sim.h"

namespace pllm {
namespace {

using sim::work;
constexpr auto kBackground = RequestClass::background;

// Runs one plan at `now` with the true cost, returns it and its cost.
std::pair<StepPlan, double> run_step(Scheduler& s, double now, const sim::TrueCost& truth, const StepBudget& b = {}) {
  StepPlan p = sim::plan(s, now, b);
  const double ms = truth(sim::decode_rows(p), sim::prefill_tokens(p));
  if (!p.rows.empty()) EXPECT_TRUE(s.complete(p, ms, sim::all_done(p)).ok());
  return {p, ms};
}

// Three background sessions with 2000-token documents to read, then an interactive question:
// its prompt and first token take the next steps alone, and the step in flight when it
// arrived was short (background chunks are sized to max_background_step_ms).
TEST(SchedulerInteractive, ArrivalDuringLongBackgroundPromptsGetsTheNextStepsAlone) {
  const sim::TrueCost truth{.fixed_ms = 2, .row_ms = 1.5, .token_ms = 0.9};  // 64 tokens: ~60 ms
  SchedulerConfig cfg;
  cfg.max_background_step_ms = 30;
  Scheduler s = sim::make_scheduler(cfg);
  for (int64_t k = 1; k <= 3; ++k) {
    ASSERT_TRUE(s.submit(work(uint64_t(k), k, RequestKind::prefill, 2000, 0, kBackground)).ok());
    ASSERT_TRUE(s.submit(work(uint64_t(10 + k), k, RequestKind::generate, 100, 0, kBackground)).ok());
  }
  double now = 0, longest_background = 0;
  for (int i = 0; i < 60; ++i) {  // the planner learns the true cost meanwhile
    auto [p, ms] = run_step(s, now, truth);
    if (i >= 10) longest_background = std::max(longest_background, ms);
    now += ms;
  }
  EXPECT_LE(longest_background, cfg.max_background_step_ms * 1.25) << "background chunks keep steps short";
  EXPECT_GT(longest_background, cfg.max_background_step_ms * 0.5) << "but not needlessly short";
  // The question: a 45-token prompt, then its reply.
  ASSERT_TRUE(s.submit(work(100, 7, RequestKind::prefill, 45, now)).ok());
  ASSERT_TRUE(s.submit(work(101, 7, RequestKind::generate, 24, now)).ok());
  auto [prompt, prompt_ms] = run_step(s, now, truth);
  ASSERT_EQ(prompt.rows.size(), 1u) << "the background waits";
  EXPECT_EQ(prompt.rows[0].session, 7);
  EXPECT_EQ(prompt.rows[0].n_tokens, 45) << "the whole prompt: interactive rows are sized first";
  EXPECT_EQ(prompt.preempted.size(), 3u);
  now += prompt_ms;
  auto [first, first_ms] = run_step(s, now, truth);
  ASSERT_EQ(first.rows.size(), 1u) << "its first token alone too";
  EXPECT_EQ(first.rows[0].request, 101u);
  now += first_ms;
  auto [after, after_ms] = run_step(s, now, truth);
  EXPECT_EQ(after.rows.size(), 4u) << "then the background rides along with the reply";
  // So the first token came within the longest background step plus its own two steps.
  EXPECT_LE(prompt_ms + first_ms, truth(0, 45) + truth(1, 0) + 1e-9);
}

// A background row left unfinished (preempted mid-step) keeps its request and progress, and
// the cut-short step does not teach the cost model.
TEST(SchedulerInteractive, PreemptedRowKeepsItsRequestAndTeachesNothing) {
  Scheduler s = sim::make_scheduler();
  ASSERT_TRUE(s.submit(work(1, 1, RequestKind::prefill, 100, 0, kBackground)).ok());
  StepPlan p = sim::plan(s, 0);
  ASSERT_EQ(p.rows.size(), 1u);
  const int planned = p.rows[0].n_tokens;
  const int seen = s.cost_model().observations();
  const RowResult cut{0, false, Status::ok};
  ASSERT_TRUE(s.complete(p, 0.5, std::span<const RowResult>(&cut, 1)).ok());
  EXPECT_EQ(s.cost_model().observations(), seen);
  EXPECT_EQ(s.pending(1), 1u);
  EXPECT_EQ(s.kv_tokens(1), 0);
  p = sim::plan(s, 1);
  ASSERT_EQ(p.rows.size(), 1u);
  EXPECT_EQ(p.rows[0].n_tokens, planned) << "the same chunk again";
  ASSERT_TRUE(s.complete(p, 5, sim::all_done(p)).ok());
  EXPECT_EQ(s.cost_model().observations(), seen + 1);
  EXPECT_EQ(s.kv_tokens(1), planned);
}

// Steps on one thread and on two learn apart; a count with no fit yet borrows the other's,
// scaled by the thread ratio, instead of trusting the prior.
TEST(SchedulerInteractive, ThreadCountsLearnTheirOwnCosts) {
  Scheduler s = sim::make_scheduler();
  for (int64_t k = 1; k <= 2; ++k)
    ASSERT_TRUE(s.submit(work(uint64_t(k), k, RequestKind::generate, 1000, 0, kBackground)).ok());
  ASSERT_TRUE(s.report_kv(1, 10).ok());
  ASSERT_TRUE(s.report_kv(2, 10).ok());
  StepBudget two;
  two.cost_key = 2;
  for (int i = 0; i < 40; ++i) {
    StepPlan p = sim::plan(s, i * 10.0, two);
    ASSERT_TRUE(s.complete(p, 10.0 + 0.01 * (i % 3), sim::all_done(p)).ok());
  }
  ASSERT_TRUE(s.cost_model(2).trusted(2, 0));
  EXPECT_NEAR(s.predict_ms(2, 2, 0), 10.0, 1.5);
  EXPECT_FALSE(s.cost_model(1).trusted(2, 0));
  EXPECT_NEAR(s.predict_ms(1, 2, 0), 2 * s.predict_ms(2, 2, 0), 1e-9) << "borrowed, twice as long on one thread";
  StepBudget one;
  one.cost_key = 1;
  for (int i = 0; i < 40; ++i) {
    StepPlan p = sim::plan(s, 400 + i * 20.0, one);
    ASSERT_TRUE(s.complete(p, 17.0 + 0.01 * (i % 3), sim::all_done(p)).ok());
  }
  EXPECT_TRUE(s.cost_model(1).trusted(2, 0));
  EXPECT_NEAR(s.cost_model(1).fit_ms(2, 0), 17.0, 0.1) << "its own fit once it has one";
  EXPECT_GE(s.predict_ms(1, 2, 0), 17.0);
  EXPECT_LE(s.predict_ms(1, 2, 0), 17.0 * 1.25) << "the fit and its margin";
  EXPECT_NEAR(s.cost_model(2).fit_ms(2, 0), 10.0, 0.1) << "untouched by the one-thread steps";
}

}  // namespace
}  // namespace pllm
