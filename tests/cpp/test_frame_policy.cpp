// FramePolicy (issue P12) on a fake clock: light, heavy and changing UI loads, an app that
// reports nothing, the UI-idle part of a frame, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "runtime/frame_policy.h"

namespace pllm {
namespace {

constexpr double kPeriod = 1000.0 / 60;
constexpr int kThreads = 2, kCores = 2;

FramePolicy make(const FramePolicyConfig& cfg = {}) {
  auto p = FramePolicy::create(cfg);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  return std::move(p).value();
}

// A UI whose frame takes own_ms(frame) of its own, times `inflation` when the engine ran
// every thread at the frame's vsync (time-sliced with a worker), reported after each frame.
struct UiRun {
  int frames = 0, missed = 0, whole_frames = 0, idle_boosts = 0;
};
UiRun drive(FramePolicy& p, int frames, const std::function<double(int)>& own_ms, double inflation,
          int first_frame = 0, bool report = true) {
  UiRun r;
  for (int f = first_frame; f < first_frame + frames; ++f) {
    const double start = f * kPeriod;
    p.on_frame(start, kPeriod, start + 0.1);
    const FrameShape at_vsync = p.shape(start + 0.2, kThreads, kCores);
    const double ui = own_ms(f) * (at_vsync.threads == kThreads ? inflation : 1.0);
    r.whole_frames += at_vsync.whole_machine ? 1 : 0;
    r.missed += ui > kPeriod ? 1 : 0;
    ++r.frames;
    if (!report) continue;
    EXPECT_TRUE(p.report_ui(start, ui).ok());
    const FrameShape after = p.shape(start + ui + 0.1, kThreads, kCores);
    if (!after.whole_machine && start + ui + 0.1 < start + kPeriod - 1.0) {
      EXPECT_TRUE(after.ui_idle);
      EXPECT_EQ(after.threads, kThreads) << "the UI is done with this frame: every thread";
      ++r.idle_boosts;
    }
  }
  return r;
}

TEST(FramePolicy, LightUiKeepsTheWholeMachine) {
  FramePolicy p = make();
  const UiRun r = drive(p, 600, [](int) { return 3.0; }, 1.6);
  EXPECT_EQ(r.whole_frames, 600);
  EXPECT_EQ(r.missed, 0);
  EXPECT_EQ(p.holds(), 0);
}

TEST(FramePolicy, HeavyUiGetsACoreWithinAFewFramesAndKeepsIt) {
  FramePolicy p = make();
  // 12 ms alone; 1.8x under every thread: 21.6 ms, a miss every frame without a core.
  const UiRun r = drive(p, 600, [](int) { return 12.0; }, 1.8);
  EXPECT_LE(r.missed, 2) << "one miss moves it to one core left";
  EXPECT_LE(r.whole_frames, 2);
  EXPECT_EQ(p.holds(), 1);
  EXPECT_EQ(p.probes(), 0) << "12 ms x the measured 1.8 never fits 75 % of the frame";
  EXPECT_NEAR(p.inflation(), 1.8, 0.01) << "learned from the frames with and without a core";
  EXPECT_NEAR(p.ui_estimate_ms(), 12.0, 1e-9);
  EXPECT_GT(r.idle_boosts, 500) << "the rest of each frame still runs every thread";
}

TEST(FramePolicy, SlowFramesWithoutMissesAlsoLeaveACore) {
  FramePolicy p = make();
  // 8 ms alone, 1.6x = 12.8 ms under every thread: no miss, but over 75 % of the frame.
  const UiRun r = drive(p, 120, [](int) { return 8.0; }, 1.6);
  EXPECT_EQ(r.missed, 0);
  EXPECT_EQ(p.holds(), 1);
  EXPECT_EQ(r.whole_frames, FramePolicyConfig{}.slow_frames);
  EXPECT_FALSE(p.whole());
}

TEST(FramePolicy, ChangingUiLoadFollowsIt) {
  FramePolicy p = make();
  // light 3 s, heavy 3 s, light 6 s (the estimate forgets the heavy frames after `history`)
  const auto load = [](int f) { return f >= 180 && f < 360 ? 12.0 : 3.0; };
  UiRun light = drive(p, 180, load, 1.8, 0);
  EXPECT_EQ(light.whole_frames, 180);
  UiRun heavy = drive(p, 180, load, 1.8, 180);
  EXPECT_LE(heavy.missed, 2);
  EXPECT_LE(heavy.whole_frames, 2);
  UiRun back = drive(p, 360, load, 1.8, 360);
  EXPECT_EQ(back.missed, 0);
  // Whole again once the hold has passed and the last second of frames is light.
  EXPECT_GE(back.whole_frames, 360 - 60 - int(FramePolicyConfig{}.hold_ms / kPeriod) - 2);
  EXPECT_TRUE(p.whole());
  EXPECT_EQ(p.probes(), 1);
}

TEST(FramePolicy, WhatWholeStepsDidToTheUiIsLearned) {
  FramePolicyConfig cfg;
  cfg.hold_ms = 500;
  FramePolicy p = make(cfg);
  // Cheap alone (2 ms) but 10x under every thread: the first frame misses; the inflation
  // it measured (20 / 2) then keeps it from probing again, hold after hold.
  const UiRun r = drive(p, 60 * 10, [](int) { return 2.0; }, 10.0);
  EXPECT_EQ(r.missed, 1);
  EXPECT_EQ(p.holds(), 1);
  EXPECT_EQ(p.probes(), 0);  // 2 ms x 8 > 75 % of the frame
  EXPECT_NEAR(p.inflation(), 8.0, 1e-9) << "10x, clamped to 8";
}

TEST(FramePolicy, AnAppThatReportsNothingIsReadFromItsFrameClock) {
  FramePolicyConfig cfg;
  cfg.hold_ms = 500;
  FramePolicy p = make(cfg);
  EXPECT_TRUE(p.shape(0, kThreads, kCores).whole_machine);
  // On time frames: stays whole.
  for (int f = 0; f < 30; ++f) p.on_frame(f * kPeriod, kPeriod, f * kPeriod + 0.5);
  EXPECT_TRUE(p.shape(30 * kPeriod, kThreads, kCores).whole_machine);
  // A late vsync callback (the UI thread was busy): one core left.
  p.on_frame(30 * kPeriod, kPeriod, 30 * kPeriod + 9);
  FrameShape s = p.shape(30 * kPeriod + 10, kThreads, kCores);
  EXPECT_FALSE(s.whole_machine);
  EXPECT_EQ(s.threads, kThreads - 1);
  EXPECT_FALSE(s.ui_idle) << "no report: the UI's idle part is unknown";
  // On time frames through the hold; then it probes the whole machine.
  int f = 31;
  for (; f * kPeriod < 30 * kPeriod + 9 + 500 + 1; ++f) {
    p.on_frame(f * kPeriod, kPeriod, f * kPeriod + 0.5);
    EXPECT_FALSE(p.shape(f * kPeriod + 1, kThreads, kCores).whole_machine);
  }
  p.on_frame(f * kPeriod, kPeriod, f * kPeriod + 0.5);
  EXPECT_TRUE(p.shape(f * kPeriod + 1, kThreads, kCores).whole_machine);
  // Skipped vsyncs (two) bring it back, and the second hold is twice the first.
  const double t = (f + 3) * kPeriod;
  p.on_frame(t, kPeriod, t + 0.5);
  EXPECT_FALSE(p.shape(t + 1, kThreads, kCores).whole_machine);
  for (int k = 1; k * kPeriod < 600; ++k) p.on_frame(t + k * kPeriod, kPeriod, t + k * kPeriod + 0.5);
  EXPECT_FALSE(p.shape(t + 601, kThreads, kCores).whole_machine) << "the second hold is 1 s";
  EXPECT_EQ(p.misses(), 2);
  EXPECT_EQ(p.holds(), 2);
}

TEST(FramePolicy, EnginesThatLeaveACoreAnywayAlwaysRunWhole) {
  FramePolicy p = make();
  p.on_frame(0, kPeriod, 20);  // late: a miss
  p.on_frame(kPeriod, kPeriod, kPeriod + 20);
  EXPECT_FALSE(p.shape(kPeriod + 21, 4, 4).whole_machine);
  EXPECT_TRUE(p.shape(kPeriod + 21, 3, 4).whole_machine) << "3 threads on 4 cores leave the UI one";
  EXPECT_EQ(p.shape(kPeriod + 21, 1, 1).threads, 1) << "one thread: nothing to leave";
  p.stop_frames();
  EXPECT_TRUE(p.shape(kPeriod + 22, 4, 4).whole_machine) << "out of frame mode: flat out";
}

TEST(FramePolicy, BadInputIsRefused) {
  FramePolicyConfig cfg;
  cfg.headroom = 0;
  EXPECT_FALSE(FramePolicy::create(cfg).ok());
  cfg = {};
  cfg.history = 0;
  EXPECT_FALSE(FramePolicy::create(cfg).ok());
  cfg = {};
  cfg.hold_ms = 5000;
  cfg.max_hold_ms = 1000;
  EXPECT_FALSE(FramePolicy::create(cfg).ok());
  cfg = {};
  cfg.initial_inflation = 0.5;
  EXPECT_FALSE(FramePolicy::create(cfg).ok());
  cfg = {};
  cfg.guard_ms = NAN;
  EXPECT_FALSE(FramePolicy::create(cfg).ok());
  FramePolicy p = make();
  EXPECT_FALSE(p.report_ui(0, -1).ok());
  EXPECT_FALSE(p.report_ui(0, NAN).ok());
  EXPECT_FALSE(p.report_ui(INFINITY, 1).ok());
}

}  // namespace
}  // namespace pllm
