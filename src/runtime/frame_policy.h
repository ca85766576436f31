// FramePolicy: how many engine threads a step may use while an app draws frames,
// chosen from what the frames are measured to need. Pure: no threads, no clock of its own
// (the runtime passes the time), so it is tested on a fake clock.
//
// Two shapes, and a controller between them:
//   * whole machine: every engine thread. The UI thread, when it wakes at vsync, is
//     time-sliced with a worker (the OS favours the thread that slept, so a light UI loses
//     little: its frame takes about `inflation` times its own work);
//   * one core left: one thread fewer (an engine with one thread per core), so the UI has a
//     core of its own, whatever the step's length. An engine with fewer threads than cores
//     leaves a core anyway and always runs whole.
// The earlier rule was "one core left" always, plus at most period - reserve of work per frame from
// the frame start: it halved the engine of a 2-core phone for a light UI, and put the
// engine's work exactly where the UI's is (right after vsync). Its overflow step, one per
// frame, also took every row, a whole background prompt chunk included, on one thread.
//
// The controller, fed by the app's UI time per frame (report_ui: vsync to its work done) or,
// when the app reports nothing, by its frame clock (a frame() call that comes late, or after
// skipped vsyncs, means the UI thread that runs the vsync callback was busy):
//   * it starts whole (a heavy UI's first frames move it within a frame or two);
//   * whole -> one core left when a frame misses, or when `slow_frames` of the last 10
//     reported frames took more than `headroom` of the period; then it stays there at least
//     hold_ms (doubling on each repeat, up to max_hold_ms; halving after a clean stretch as
//     long as the hold);
//   * one core left -> whole when the hold has passed and the UI's own time (the 90th
//     percentile of the last `history` reports with a core left), times the inflation
//     measured the last time it ran whole (the 90th percentile of its last 10 frames over that
//     of the first 10 frames with a core left, so both see the same UI load), fits `headroom`
//     of the period. An app that reports nothing is probed after each hold.
// Percentiles, not maxima: one frame the OS delayed must not keep a light UI off the machine.
//
// With one core left, the part of a frame after the UI reported its work done (until
// guard_ms before the next vsync) is the UI's idle time: the engine takes every thread there
// too. The thread pool changes its count between ops, so the runtime applies this mid-step,
// at the report and at the next vsync (ScheduledRuntime::report_ui_frame / frame).
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "base/result.h"

namespace pllm {

struct FramePolicyConfig {
  double headroom = 0.75;      // a frame's UI time may use this much of the period
  int history = 60;            // reported frames the UI estimates cover (1 s at 60 Hz)
  int slow_frames = 3;         // this many of the last 10 over headroom (whole machine): one core left
  double late_ms = 4.0;        // a frame() call later than this after its start: the UI was busy
  double hold_ms = 1000;       // one core left at least this long after a miss or a slow frame
  double max_hold_ms = 16000;
  double initial_inflation = 2.0;  // UI time under whole-machine steps / alone, until measured
  double guard_ms = 1.0;       // one core left: every thread from the UI's report to this before vsync
};

struct FrameShape {
  int threads = 1;
  bool whole_machine = true;  // every engine thread (false: one core left for the UI)
  bool ui_idle = false;       // one core left, but the UI is done with this frame: every thread
};

class FramePolicy {
 public:
  static Result<FramePolicy> create(const FramePolicyConfig& cfg);

  // A frame starts (the app's vsync, or the runtime's own frames); now_ms: when the call came.
  void on_frame(double frame_start_ms, double period_ms, double now_ms);
  // The app's UI work for the frame that started at frame_start_ms took ui_ms (vsync to done).
  // Errors on a negative or non-finite time.
  Result<void> report_ui(double frame_start_ms, double ui_ms);
  void stop_frames() { period_ms_ = 0; }
  bool frame_mode() const { return period_ms_ > 0; }

  // The shape of a step starting now, for an engine of all_threads on a machine of `cores`.
  FrameShape shape(double now_ms, int all_threads, int cores);

  double ui_estimate_ms() const;  // the UI's own time per frame, 90th percentile (0 before any report)
  double inflation() const { return inflation_; }
  bool whole() const { return whole_; }
  int misses() const { return misses_; }      // frames seen missed (reported, late or skipped)
  int holds() const { return holds_; }        // switches to one core left
  int probes() const { return probes_; }      // switches to whole machine

 private:
  explicit FramePolicy(const FramePolicyConfig& cfg) : cfg_(cfg), inflation_(cfg.initial_inflation) {}
  void to_one_core_left(double now_ms);
  void note_miss(double now_ms);

  FramePolicyConfig cfg_;
  double frame_start_ms_ = 0, period_ms_ = 0;
  // Start whole: a heavy UI's first report (or first miss) moves to one core left within a
  // frame or two, while starting with a core left would cost a light UI a hold's throughput.
  bool whole_ = true;
  struct Ring {  // the last `history` reported UI times; p90 kept up to date by add()
    std::vector<double> ms;
    size_t next = 0;
    double p90 = 0;                 // 0 when empty
    std::vector<double> scratch;    // reused: a report allocates nothing once the ring is full
    void add(double x, int history);
    int over(double limit) const;
  };
  static constexpr int kRecent = 10;   // frames the slow-frame count and the inflation look at
  Ring own_;                           // with a core left: the UI's own need
  Ring whole_ms_;                      // the last kRecent frames of the last whole-machine stretch
  Ring own_after_;                     // the first kRecent frames with a core left after it
  double inflation_;
  double hold_until_ms_ = 0, hold_len_ms_ = 0;
  bool ui_done_ = false;               // the current frame's UI work was reported done
  double last_change_ms_ = 0;
  int misses_ = 0, holds_ = 0, probes_ = 0;
};

}  // namespace pllm
