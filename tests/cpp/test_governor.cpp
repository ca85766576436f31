// ThermalGovernor: caps per level, immediate step-down, hold-time relax one level at a time,
// no flapping on a wobbling signal, the slowdown detector, and bad input. Time is a plain
// int64 ms passed to every tick (a fake clock).
#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "runtime/governor.h"

namespace pllm {
namespace {

constexpr int kThreads = 4;

ThermalReading os(int level, float headroom = NAN) {
  ThermalReading r;
  r.level = level;
  r.headroom = headroom;
  r.valid = true;
  return r;
}

ThermalGovernor make(GovernorConfig cfg = {}) {
  cfg.total_threads = cfg.total_threads ? cfg.total_threads : kThreads;
  auto g = ThermalGovernor::create(std::move(cfg));
  EXPECT_TRUE(g.ok()) << g.error().message;
  return std::move(g).value();
}

// Ticks every step_ms over [from, to) with the same reading; returns the level at the end.
int hold_reading(ThermalGovernor& g, int64_t from, int64_t to, int64_t step_ms, const ThermalReading& r) {
  for (int64_t t = from; t < to; t += step_ms) EXPECT_TRUE(g.tick(t, r).ok());
  return g.level();
}

TEST(Governor, DefaultTableIsTheSpecifiedOne) {
  ThermalGovernor g = make();
  struct Want {
    int batch;
    float steps;
    int threads;
  };
  const Want want[] = {{8, INFINITY, kThreads}, {6, 12, kThreads}, {4, 6, kThreads}, {2, 3, kThreads - 1}};
  for (int level = 0; level < 4; ++level) {
    Caps c = g.tick(level, os(level)).value();
    EXPECT_EQ(c.level, level);
    EXPECT_EQ(c.max_batch, want[level].batch) << level;
    EXPECT_EQ(c.max_decode_steps_per_s, want[level].steps) << level;
    EXPECT_EQ(c.max_threads, want[level].threads) << level;
  }
}

TEST(Governor, OneThreadNeverDropsToZero) {
  GovernorConfig cfg;
  cfg.total_threads = 1;
  ThermalGovernor g = make(cfg);
  EXPECT_EQ(g.tick(0, os(kThermalSevere))->max_threads, 1);
}

TEST(Governor, StepsDownAtOnceToTheSignalledLevel) {
  ThermalGovernor g = make();
  EXPECT_EQ(g.tick(0, os(kThermalNone))->level, 0);
  EXPECT_EQ(g.changes(), 0);
  EXPECT_TRUE(g.last_reason().empty());
  EXPECT_EQ(g.tick(500, os(kThermalModerate))->level, 2);  // skips level 1
  EXPECT_EQ(g.changes(), 1);
  EXPECT_NE(g.last_reason().find("os"), std::string::npos) << g.last_reason();
}

TEST(Governor, LevelsPastTheTableUseItsLastRow) {
  ThermalGovernor g = make();
  Caps c = g.tick(0, os(kThermalEmergency)).value();
  EXPECT_EQ(c.level, 3);
  EXPECT_EQ(c.max_batch, 2);
  GovernorConfig two_rows;
  two_rows.table = {{8, INFINITY, 0}, {1, 1.0f, 0}};
  ThermalGovernor small = make(two_rows);
  EXPECT_EQ(small.tick(0, os(kThermalShutdown))->level, 1);
}

TEST(Governor, HeadroomAloneStepsDown) {
  ThermalGovernor g = make();
  // 1.5 °C below Android's severe threshold: moderate, while the status still says none.
  EXPECT_EQ(g.tick(0, os(kThermalNone, 1.0f - 1.5f / 30.0f))->level, kThermalModerate);
  EXPECT_EQ(g.tick(100, os(kThermalNone, 1.05f))->level, kThermalSevere);
}

TEST(Governor, RelaxesOneLevelPerHoldTime) {
  ThermalGovernor g = make();  // hold 10 s
  ASSERT_EQ(g.tick(0, os(kThermalSevere))->level, 3);
  // Cool from t = 1000, ticking every 500 ms: one level per full 10 s of cool ticks.
  EXPECT_EQ(hold_reading(g, 1000, 11'000, 500, os(kThermalNone)), 3);
  EXPECT_EQ(g.tick(11'000, os(kThermalNone))->level, 2);
  EXPECT_NE(g.last_reason().find("cooler"), std::string::npos) << g.last_reason();
  EXPECT_EQ(hold_reading(g, 11'500, 21'000, 500, os(kThermalNone)), 2);
  EXPECT_EQ(g.tick(21'000, os(kThermalNone))->level, 1);
  EXPECT_EQ(hold_reading(g, 21'500, 31'000, 500, os(kThermalNone)), 1);
  EXPECT_EQ(g.tick(31'000, os(kThermalNone))->level, 0);
  EXPECT_EQ(g.changes(), 4);
}

TEST(Governor, RelaxStopsAtTheSignalledLevel) {
  ThermalGovernor g = make();
  ASSERT_EQ(g.tick(0, os(kThermalSevere))->level, 3);
  EXPECT_EQ(hold_reading(g, 1000, 200'000, 500, os(kThermalLight)), 1);
}

TEST(Governor, WobblingSignalDoesNotFlap) {
  ThermalGovernor g = make();
  ASSERT_EQ(g.tick(0, os(kThermalModerate))->level, 2);
  for (int64_t t = 500; t < 120'000; t += 500) {
    const int level = (t / 500) % 2 == 0 ? kThermalModerate : kThermalNone;
    ASSERT_EQ(g.tick(t, os(level))->level, 2) << t;
  }
  EXPECT_EQ(g.changes(), 1);
}

TEST(Governor, WobbleBelowTheLevelRelaxesOnlyToItsTop) {
  ThermalGovernor g = make();
  ASSERT_EQ(g.tick(0, os(kThermalSevere))->level, 3);
  for (int64_t t = 500; t < 120'000; t += 500) {
    const int level = (t / 500) % 2 == 0 ? kThermalLight : kThermalNone;
    ASSERT_TRUE(g.tick(t, os(level)).ok());
  }
  EXPECT_EQ(g.level(), 1);
}

TEST(Governor, InvalidReadingsHoldTheLevelAndPauseRelaxing) {
  ThermalGovernor g = make();
  ASSERT_EQ(g.tick(0, os(kThermalModerate))->level, 2);
  EXPECT_EQ(hold_reading(g, 500, 60'000, 500, ThermalReading{}), 2);
  // Cool ticks with an unknown one every 5 s never make up a 10 s hold.
  for (int64_t t = 60'000; t < 120'000; t += 500) {
    const ThermalReading r = t % 5000 == 0 ? ThermalReading{} : os(kThermalNone);
    ASSERT_EQ(g.tick(t, r)->level, 2) << t;
  }
}

TEST(Governor, ZeroHoldRelaxesOneLevelPerTick) {
  GovernorConfig cfg;
  cfg.relax_hold_ms = 0;
  ThermalGovernor g = make(cfg);
  ASSERT_EQ(g.tick(0, os(kThermalSevere))->level, 3);
  EXPECT_EQ(g.tick(1, os(kThermalNone))->level, 2);
  EXPECT_EQ(g.tick(2, os(kThermalNone))->level, 1);
}

// --- slowdown detector ---

constexpr int kWindow = 4;

GovernorConfig slow_cfg() {
  GovernorConfig cfg;
  cfg.window = kWindow;
  return cfg;
}

// Feeds n decode timings (one per 100 ms tick from *t) while the OS says `level`.
void feed(ThermalGovernor& g, int64_t& t, int n, TokenTiming timing, int level = kThermalNone) {
  for (int i = 0; i < n; ++i, t += 100) ASSERT_TRUE(g.tick(t, os(level), timing).ok());
}

TEST(GovernorSlowdown, StepsDownWhileTheOsSaysNone) {
  ThermalGovernor g = make(slow_cfg());
  int64_t t = 0;
  feed(g, t, kWindow, {4, kThreads, 10.0f});  // baseline 10 ms at level 0
  feed(g, t, 1, {4, kThreads, 13.0f});        // one slow outlier is not a trend
  EXPECT_EQ(g.level(), 0);
  feed(g, t, kWindow - 1, {4, kThreads, 13.0f});  // 30 % slower across the window
  EXPECT_EQ(g.level(), 1);
  EXPECT_EQ(g.changes(), 1);
  EXPECT_NE(g.last_reason().find("slowdown"), std::string::npos) << g.last_reason();
}

TEST(GovernorSlowdown, TwentyPercentIsWithinTolerance) {
  ThermalGovernor g = make(slow_cfg());
  int64_t t = 0;
  feed(g, t, kWindow, {4, kThreads, 10.0f});
  feed(g, t, 10 * kWindow, {4, kThreads, 12.0f});
  EXPECT_EQ(g.level(), 0);
}

// Feeds slow timings until the governor steps down; returns the tick time of the step.
int64_t feed_until_step(ThermalGovernor& g, int64_t& t, TokenTiming timing) {
  const int from = g.level();
  for (int i = 0; i < 4 * kWindow && g.level() == from; ++i, t += 100) EXPECT_TRUE(g.tick(t, os(kThermalNone), timing).ok());
  EXPECT_EQ(g.level(), from + 1);
  return t - 100;
}

TEST(GovernorSlowdown, StepsAtMostOncePerHold) {
  ThermalGovernor g = make(slow_cfg());  // slowdown hold 10 s
  int64_t t = 0;
  feed(g, t, kWindow, {4, kThreads, 10.0f});
  const int64_t stepped_at = feed_until_step(g, t, {4, kThreads, 14.0f});
  ASSERT_EQ(g.level(), 1);
  feed(g, t, int((stepped_at + 10'000 - t) / 100), {4, kThreads, 14.0f});  // still slow, within the hold
  EXPECT_EQ(g.level(), 1);
  ASSERT_EQ(t, stepped_at + 10'000);
  feed(g, t, 1, {4, kThreads, 14.0f});
  EXPECT_EQ(g.level(), 2);
  EXPECT_EQ(g.changes(), 2);
}

TEST(GovernorSlowdown, NeedsAFreshWindowAfterAChange) {
  GovernorConfig cfg = slow_cfg();
  cfg.slowdown_hold_ms = 0;
  ThermalGovernor g = make(cfg);
  int64_t t = 0;
  feed(g, t, kWindow, {4, kThreads, 10.0f});
  feed_until_step(g, t, {4, kThreads, 14.0f});
  feed(g, t, kWindow - 1, {4, kThreads, 14.0f});
  EXPECT_EQ(g.level(), 1);
  feed(g, t, 1, {4, kThreads, 14.0f});
  EXPECT_EQ(g.level(), 2);
}

TEST(GovernorSlowdown, ComparesOnlyTheSameLoadAndThreads) {
  ThermalGovernor g = make(slow_cfg());
  int64_t t = 0;
  feed(g, t, kWindow, {4, kThreads, 10.0f});
  feed(g, t, 3 * kWindow, {2, kThreads, 20.0f});      // another load: its own baseline
  feed(g, t, 3 * kWindow, {4, kThreads - 1, 20.0f});  // fewer threads: its own baseline
  EXPECT_EQ(g.level(), 0);
  EXPECT_EQ(g.changes(), 0);
}

// A long answer makes every token slower (attention over a longer context): not a slowdown.
// The same slower tokens within one context band are.
TEST(GovernorSlowdown, ComparesOnlyTheSameContextBand) {
  ThermalGovernor g = make(slow_cfg());
  int64_t t = 0;
  feed(g, t, kWindow, {4, kThreads, 10.0f, 100});
  feed(g, t, 3 * kWindow, {4, kThreads, 14.0f, 900});  // a longer context: its own baseline
  EXPECT_EQ(g.level(), 0);
  feed(g, t, kWindow, {4, kThreads, 14.0f, 200});  // the first band again, 40 % slower
  EXPECT_EQ(g.level(), 1);
  EXPECT_FALSE(g.tick(t, os(kThermalNone), TokenTiming{4, kThreads, 10.0f, -1}).ok());
}

TEST(GovernorSlowdown, BaselineIsTheFastestWindowAtLevelZero) {
  ThermalGovernor g = make(slow_cfg());
  int64_t t = 0;
  feed(g, t, kWindow, {4, kThreads, 12.0f});
  feed(g, t, kWindow, {4, kThreads, 10.0f});
  feed(g, t, kWindow, {4, kThreads, 13.0f});  // within 25 % of 12, not of 10
  EXPECT_EQ(g.level(), 1);
}

TEST(GovernorSlowdown, NoBaselineIsTakenAboveLevelZero) {
  ThermalGovernor g = make(slow_cfg());
  int64_t t = 0;
  feed(g, t, kWindow, {4, kThreads, 10.0f}, kThermalLight);
  feed(g, t, 3 * kWindow, {4, kThreads, 20.0f}, kThermalLight);
  EXPECT_EQ(g.level(), 1);
  EXPECT_EQ(g.changes(), 1);  // only the OS step
}

TEST(GovernorSlowdown, NoRelaxWhileStillSlow) {
  GovernorConfig cfg = slow_cfg();
  cfg.table = {{8, INFINITY, 0}, {4, 6.0f, 0}};  // level 1 is the last: slowness cannot step further
  ThermalGovernor g = make(cfg);
  int64_t t = 0;
  feed(g, t, kWindow, {4, kThreads, 10.0f});
  feed_until_step(g, t, {4, kThreads, 14.0f});
  feed(g, t, 300, {4, kThreads, 14.0f});  // 30 s, OS none, still slow: no relax
  EXPECT_EQ(g.level(), 1);
  feed(g, t, kWindow, {4, kThreads, 10.0f});  // back to speed
  feed(g, t, 101, {4, kThreads, 10.0f});      // then a full 10 s hold
  EXPECT_EQ(g.level(), 0);
  EXPECT_EQ(g.changes(), 2);
}

TEST(GovernorSlowdown, AtTheLastLevelItHolds) {
  ThermalGovernor g = make(slow_cfg());
  int64_t t = 0;
  feed(g, t, kWindow, {2, kThreads - 1, 10.0f});
  feed(g, t, 1, {2, kThreads - 1, 10.0f}, kThermalSevere);
  ASSERT_EQ(g.level(), 3);
  feed(g, t, 5 * kWindow, {2, kThreads - 1, 30.0f}, kThermalSevere);
  EXPECT_EQ(g.level(), 3);
  EXPECT_EQ(g.changes(), 1);
}

// --- bad input ---

TEST(Governor, RejectsBadConfig) {
  auto bad = [](auto edit) {
    GovernorConfig cfg;
    cfg.total_threads = kThreads;
    edit(cfg);
    auto g = ThermalGovernor::create(cfg);
    return !g.ok() && g.error().code == Status::invalid_argument;
  };
  EXPECT_TRUE(bad([](GovernorConfig& c) { c.total_threads = 0; }));
  EXPECT_TRUE(bad([](GovernorConfig& c) { c.table.clear(); }));
  EXPECT_TRUE(bad([](GovernorConfig& c) { c.table[1].max_batch = 0; }));
  EXPECT_TRUE(bad([](GovernorConfig& c) { c.table[1].max_decode_steps_per_s = 0; }));
  EXPECT_TRUE(bad([](GovernorConfig& c) { c.table[1].max_decode_steps_per_s = NAN; }));
  EXPECT_TRUE(bad([](GovernorConfig& c) { c.table[1].fewer_threads = -1; }));
  EXPECT_TRUE(bad([](GovernorConfig& c) { c.relax_hold_ms = -1; }));
  EXPECT_TRUE(bad([](GovernorConfig& c) { c.slowdown_hold_ms = -1; }));
  EXPECT_TRUE(bad([](GovernorConfig& c) { c.slowdown_ratio = 1.0f; }));
  EXPECT_TRUE(bad([](GovernorConfig& c) { c.slowdown_ratio = NAN; }));
  EXPECT_TRUE(bad([](GovernorConfig& c) { c.window = 0; }));
  EXPECT_FALSE(bad([](GovernorConfig&) {}));
}

TEST(Governor, RejectsBadTicksAndKeepsItsState) {
  ThermalGovernor g = make();
  ASSERT_EQ(g.tick(1000, os(kThermalLight))->level, 1);
  EXPECT_EQ(g.tick(999, os(kThermalSevere)).error().code, Status::invalid_argument);
  EXPECT_EQ(g.tick(2000, os(7)).error().code, Status::invalid_argument);
  EXPECT_EQ(g.tick(2000, os(-1)).error().code, Status::invalid_argument);
  for (TokenTiming bad : {TokenTiming{0, 1, 10.0f}, TokenTiming{1, 0, 10.0f}, TokenTiming{1, 1, 0.0f},
                          TokenTiming{1, 1, -3.0f}, TokenTiming{1, 1, NAN}, TokenTiming{1, 1, INFINITY}})
    EXPECT_EQ(g.tick(2000, os(kThermalSevere), bad).error().code, Status::invalid_argument);
  EXPECT_EQ(g.level(), 1);
  EXPECT_EQ(g.changes(), 1);
  EXPECT_EQ(g.tick(1000, os(kThermalLight))->level, 1);  // the clock did not move on the errors
}

}  // namespace
}  // namespace pllm
