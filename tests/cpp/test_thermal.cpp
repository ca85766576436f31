// Thermal sources: the shared scales and the app / scripted / simulated sources (the sysfs
// reader is in test_thermal_sysfs.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "runtime/thermal_source.h"

namespace pllm {
namespace {

// Android's normalisation, written out independently: 1.0 at severe, 0.0 at 30 °C below.
float android_headroom(float temp_c, float severe_c) { return (temp_c - (severe_c - 30.0f)) / 30.0f; }

TEST(ThermalScale, HeadroomFollowsAndroid) {
  EXPECT_FLOAT_EQ(thermal_headroom(50.0f, 50.0f), 1.0f);
  EXPECT_FLOAT_EQ(thermal_headroom(20.0f, 50.0f), 0.0f);
  EXPECT_FLOAT_EQ(thermal_headroom(41.0f, 50.0f), android_headroom(41.0f, 50.0f));
  EXPECT_FLOAT_EQ(thermal_headroom(53.0f, 50.0f), android_headroom(53.0f, 50.0f));
  EXPECT_FLOAT_EQ(thermal_headroom(-10.0f, 50.0f), 0.0f);  // never negative
  EXPECT_TRUE(std::isnan(thermal_headroom(NAN, 50.0f)));
  EXPECT_TRUE(std::isnan(thermal_headroom(40.0f, NAN)));
}

TEST(ThermalScale, LevelFromHeadroomBands) {
  EXPECT_EQ(thermal_level_from_headroom(NAN), kThermalNone);
  EXPECT_EQ(thermal_level_from_headroom(0.0f), kThermalNone);
  EXPECT_EQ(thermal_level_from_headroom(android_headroom(38, 50)), kThermalNone);       // 12 °C below
  EXPECT_EQ(thermal_level_from_headroom(android_headroom(42, 50)), kThermalLight);      // 8 below
  EXPECT_EQ(thermal_level_from_headroom(android_headroom(47, 50)), kThermalModerate);   // 3 below
  EXPECT_EQ(thermal_level_from_headroom(1.0f), kThermalSevere);
  EXPECT_EQ(thermal_level_from_headroom(android_headroom(55, 50)), kThermalSevere);     // 5 past
  EXPECT_EQ(thermal_level_from_headroom(android_headroom(62, 50)), kThermalCritical);   // 12 past
  EXPECT_EQ(thermal_level_from_headroom(INFINITY), kThermalCritical);
}

TEST(ThermalScale, IosStateMapping) {
  EXPECT_EQ(thermal_level_from_ios_state(0).value(), kThermalNone);
  EXPECT_EQ(thermal_level_from_ios_state(1).value(), kThermalLight);
  EXPECT_EQ(thermal_level_from_ios_state(2).value(), kThermalSevere);
  EXPECT_EQ(thermal_level_from_ios_state(3).value(), kThermalCritical);
  for (int bad : {-1, 4, 100}) {
    auto r = thermal_level_from_ios_state(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, Status::invalid_argument);
  }
}

TEST(AppThermal, InvalidUntilSetThenReportsWhatWasSet) {
  AppThermalSource app;
  EXPECT_FALSE(app.read(0).valid);
  ASSERT_TRUE(app.set_level(kThermalSevere).ok());
  ThermalReading r = app.read(0);
  EXPECT_TRUE(r.valid);
  EXPECT_EQ(r.level, kThermalSevere);
  EXPECT_TRUE(std::isnan(r.headroom));
  ASSERT_TRUE(app.set_headroom(0.75f).ok());
  EXPECT_FLOAT_EQ(app.read(0).headroom, 0.75f);
}

TEST(AppThermal, HeadroomAloneMakesItValid) {
  AppThermalSource app;
  ASSERT_TRUE(app.set_headroom(NAN).ok());  // Android's "no forecast": accepted, still unknown
  EXPECT_FALSE(app.read(0).valid);
  ASSERT_TRUE(app.set_headroom(0.5f).ok());
  ThermalReading r = app.read(0);
  EXPECT_TRUE(r.valid);
  EXPECT_EQ(r.level, kThermalNone);
}

TEST(AppThermal, RejectsOutOfRangeAndKeepsTheLastGoodValue) {
  AppThermalSource app;
  ASSERT_TRUE(app.set_level(kThermalLight).ok());
  ASSERT_TRUE(app.set_headroom(0.5f).ok());
  for (int bad : {-1, 7, 1000}) EXPECT_EQ(app.set_level(bad).error().code, Status::invalid_argument) << bad;
  for (float bad : {-0.1f, 10.5f, INFINITY, -INFINITY})
    EXPECT_EQ(app.set_headroom(bad).error().code, Status::invalid_argument) << bad;
  ThermalReading r = app.read(0);
  EXPECT_EQ(r.level, kThermalLight);
  EXPECT_FLOAT_EQ(r.headroom, 0.5f);
}

// Setters from the app's threads while the engine reads: every read sees values that were set
// (ThreadSanitizer builds check the accesses themselves).
TEST(AppThermal, ConcurrentSettersAndReads) {
  AppThermalSource app;
  std::thread levels([&] {
    for (int i = 0; i < 20000; ++i) (void)app.set_level(i % 2 == 0 ? kThermalLight : kThermalSevere);
  });
  std::thread headrooms([&] {
    for (int i = 0; i < 20000; ++i) (void)app.set_headroom(i % 2 == 0 ? 0.25f : 0.75f);
  });
  for (int i = 0; i < 20000; ++i) {
    ThermalReading r = app.read(i);
    if (!r.valid) continue;
    EXPECT_TRUE(r.level == kThermalNone || r.level == kThermalLight || r.level == kThermalSevere);
    EXPECT_TRUE(std::isnan(r.headroom) || r.headroom == 0.25f || r.headroom == 0.75f);
  }
  levels.join();
  headrooms.join();
}

TEST(ScriptedThermal, StepsHoldUntilTheNext) {
  auto s = ScriptedThermalSource::create({{1000, kThermalLight, 0.7f}, {3000, kThermalSevere, 1.1f}});
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_FALSE(s->read(999).valid);
  EXPECT_EQ(s->read(1000).level, kThermalLight);
  EXPECT_FLOAT_EQ(s->read(2999).headroom, 0.7f);
  EXPECT_EQ(s->read(3000).level, kThermalSevere);
  EXPECT_TRUE(s->read(1'000'000).valid);
  EXPECT_EQ(s->read(1'000'000).level, kThermalSevere);
}

TEST(ScriptedThermal, RejectsBadSteps) {
  EXPECT_FALSE(ScriptedThermalSource::create({{2000, 0, NAN}, {1000, 0, NAN}}).ok());
  EXPECT_FALSE(ScriptedThermalSource::create({{0, 7, NAN}}).ok());
  EXPECT_FALSE(ScriptedThermalSource::create({{0, -1, NAN}}).ok());
  EXPECT_FALSE(ScriptedThermalSource::create({{0, 0, -0.5f}}).ok());
  EXPECT_TRUE(ScriptedThermalSource::create({}).ok());
}

SimulatedThermalParams sim_params() {
  SimulatedThermalParams p;
  p.ambient_c = 30.0f;
  p.limit_c = 50.0f;
  p.c_per_busy = 30.0f;
  p.tau_s = 60.0f;
  return p;
}

TEST(SimulatedThermal, RejectsBadParameters) {
  for (auto edit : {+[](SimulatedThermalParams& p) { p.tau_s = 0; }, +[](SimulatedThermalParams& p) { p.tau_s = -1; },
                    +[](SimulatedThermalParams& p) { p.ambient_c = NAN; },
                    +[](SimulatedThermalParams& p) { p.c_per_busy = -1; },
                    +[](SimulatedThermalParams& p) { p.limit_c = INFINITY; }}) {
    SimulatedThermalParams p = sim_params();
    edit(p);
    EXPECT_FALSE(SimulatedThermalSource::create(p).ok());
  }
}

TEST(SimulatedThermal, FollowsTheFirstOrderModel) {
  const SimulatedThermalParams p = sim_params();
  auto sim = SimulatedThermalSource::create(p);
  ASSERT_TRUE(sim.ok());
  ThermalReading r0 = sim->read(0);
  EXPECT_TRUE(r0.valid);
  EXPECT_FLOAT_EQ(r0.temp_c, p.ambient_c);
  EXPECT_EQ(r0.level, kThermalNone);
  // One time constant at 100 % busy closes 1 - 1/e of the gap to ambient + c_per_busy.
  ASSERT_TRUE(sim->add_busy(60'000, 60'000).ok());
  EXPECT_NEAR(sim->temp_c(), p.ambient_c + p.c_per_busy * (1.0 - std::exp(-1.0)), 1e-3);
  // Half busy for another tau: the same law toward ambient + c/2.
  const double t1 = sim->temp_c(), steady = p.ambient_c + 0.5 * p.c_per_busy;
  ASSERT_TRUE(sim->add_busy(120'000, 30'000).ok());
  EXPECT_NEAR(sim->temp_c(), steady + (t1 - steady) * std::exp(-1.0), 1e-3);
}

TEST(SimulatedThermal, ResultDoesNotDependOnReportGranularity) {
  auto coarse = SimulatedThermalSource::create(sim_params());
  auto fine = SimulatedThermalSource::create(sim_params());
  ASSERT_TRUE(coarse.ok() && fine.ok());
  ASSERT_TRUE(coarse->add_busy(90'000, 67'500).ok());  // 75 % busy
  for (int64_t t = 100; t <= 90'000; t += 100) ASSERT_TRUE(fine->add_busy(t, 75).ok());
  EXPECT_NEAR(coarse->temp_c(), fine->temp_c(), 1e-2);
}

TEST(SimulatedThermal, SustainedWorkReachesSevereAndIdleCoolsDown) {
  const SimulatedThermalParams p = sim_params();
  auto sim = SimulatedThermalSource::create(p);
  ASSERT_TRUE(sim.ok());
  int first_severe_ms = -1;
  for (int64_t t = 1000; t <= 600'000; t += 1000) {
    ASSERT_TRUE(sim->add_busy(t, 1000).ok());
    ThermalReading r = sim->read(t);
    EXPECT_FLOAT_EQ(r.headroom, thermal_headroom(r.temp_c, p.limit_c));
    if (first_severe_ms < 0 && r.level >= kThermalSevere) first_severe_ms = int(t);
  }
  ASSERT_GT(first_severe_ms, 0);
  // The model crosses the limit when ambient + c (1 - e^(-t/tau)) = limit.
  const double crossing_ms = -1000.0 * p.tau_s * std::log(1.0 - (p.limit_c - p.ambient_c) / p.c_per_busy);
  EXPECT_NEAR(first_severe_ms, crossing_ms, 1000.0);
  ThermalReading cooled = sim->read(600'000 + 20 * 60'000);
  EXPECT_NEAR(cooled.temp_c, p.ambient_c, 0.1);
  EXPECT_EQ(cooled.level, kThermalNone);
}

TEST(SimulatedThermal, ReadProjectsIdleWithoutCommitting) {
  auto a = SimulatedThermalSource::create(sim_params());
  auto b = SimulatedThermalSource::create(sim_params());
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(a->add_busy(30'000, 30'000).ok());
  ASSERT_TRUE(b->add_busy(30'000, 30'000).ok());
  const float projected = a->read(40'000).temp_c;
  EXPECT_LT(projected, a->temp_c());  // idle cools
  // a was read in between, b was not: the next busy report must land both in the same place.
  ASSERT_TRUE(a->add_busy(50'000, 20'000).ok());
  ASSERT_TRUE(b->add_busy(50'000, 20'000).ok());
  EXPECT_FLOAT_EQ(a->temp_c(), b->temp_c());
  // An idle report is what read() projected.
  auto c = SimulatedThermalSource::create(sim_params());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->add_busy(30'000, 30'000).ok());
  ASSERT_TRUE(c->add_busy(40'000, 0).ok());
  EXPECT_FLOAT_EQ(c->temp_c(), projected);
}

TEST(SimulatedThermal, BusyBeyondTheIntervalCountsAsFull) {
  auto a = SimulatedThermalSource::create(sim_params());
  auto b = SimulatedThermalSource::create(sim_params());
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(a->add_busy(1000, 5000).ok());
  ASSERT_TRUE(b->add_busy(1000, 1000).ok());
  EXPECT_FLOAT_EQ(a->temp_c(), b->temp_c());
  EXPECT_GT(a->temp_c(), sim_params().ambient_c);
}

TEST(SimulatedThermal, RejectsNegativeBusyAndTimeGoingBack) {
  auto sim = SimulatedThermalSource::create(sim_params(), 5000);
  ASSERT_TRUE(sim.ok());
  EXPECT_EQ(sim->add_busy(6000, -1).error().code, Status::invalid_argument);
  EXPECT_EQ(sim->add_busy(4999, 0).error().code, Status::invalid_argument);
  ASSERT_TRUE(sim->add_busy(6000, 1000).ok());
  EXPECT_EQ(sim->add_busy(5500, 0).error().code, Status::invalid_argument);
  EXPECT_FLOAT_EQ(sim->read(6000).temp_c, sim->temp_c());
}

}  // namespace
}  // namespace pllm
