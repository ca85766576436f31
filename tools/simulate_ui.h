// `pocketllm simulate`: a UI thread that needs ui_work_ms of CPU every frame, competing for
// the cores with the engine's threads for real, and a vsync thread that feeds the engine's
// frame clock.
#pragma once
#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "simulate_scenario.h"

namespace cli::sim {

struct FrameRecord {
  double vsync_ms = 0;    // when the frame's work could start
  double latency_ms = 0;  // from vsync to the end of its work
  bool missed = false;    // finished after the next vsync (the frame was not ready in time)
};

class UiSimulator {
 public:
  // clock_ms: the runtime's clock. on_vsync(frame_start_ms, period_ms) runs on the vsync
  // thread at every vsync (the engine's frame clock); on_ui_done(frame_start_ms, ui_ms) on
  // the UI thread when a frame's work is done (the app reporting its UI time); either may be
  // empty.
  UiSimulator(const FrameSpec& spec, std::function<double()> clock_ms,
              std::function<void(double, double)> on_vsync, std::function<void(double, double)> on_ui_done = {});
  ~UiSimulator() { join(); }
  // Frames every period from t0_ms (the run's start) until until_ms.
  void start(double t0_ms, double until_ms);
  void join();

  // After join(): one record per frame the UI produced; vsyncs it skipped while still busy
  // with an earlier frame count as missed too.
  const std::vector<FrameRecord>& frames() const { return frames_; }
  int vsyncs() const { return vsyncs_; }
  int missed() const;
  std::atomic<int> missed_so_far{0};  // live, for the timeline

 private:
  void sleep_until(double t_ms) const;
  void ui_loop(double t0, double until_ms);
  void vsync_loop(double t0, double until_ms);

  FrameSpec spec_;
  std::function<double()> clock_;
  std::function<void(double, double)> on_vsync_;
  std::function<void(double, double)> on_ui_done_;
  std::thread ui_, vsync_;
  std::vector<FrameRecord> frames_;
  int vsyncs_ = 0;
};

}  // namespace cli::sim
