// FramePolicy (issue P12): how many engine threads a step may use at a moment of a UI frame,
// and how long it may take, from what the frames are measured to need. Pure: no threads, no
// clock of its own (the runtime passes the time), so it is tested on a fake clock.
//
// Why not one fixed rule. The UI thread does its frame's work right after vsync (input,
// animation, layout, recording the draw); the rest of the frame it sleeps. P8's rule (always
// one engine thread fewer, and at most period - reserve of work from the frame start) fits a
// UI that needs most of the frame; for a light UI it halves the engine on a 2-core phone for
// nothing, and its window put the engine's work exactly where the UI's is. So:
//
//   * UI busy, [frame start, frame start + UI estimate + guard): "one core left": all threads
//     but one, and no time limit (the UI has its core, whatever the step's length). An
//     engine with one thread per core minus nothing to spare (one thread in all) waits.
//   * UI idle, until the next vsync - guard: "whole machine": every thread, but only a step
//     predicted to end before that vsync (the time limit). A step that does not fit runs with
//     one core left instead (the runtime asks fallback()).
//   * an engine with fewer threads than the machine has cores leaves the UI a core anyway:
//     every thread, no limit.
//
// The UI estimate is the largest UI time the app reported over the last `history` frames
// (report_ui), or `initial_ui_ms` until it reports. An app that reports nothing is read from
// its frame clock: a frame() call that arrives late (its start more than late_ms ago) or
// after skipped vsyncs means the UI thread, which runs the vsync callback, was busy.
//
// A missed frame while the engine ran whole-machine steps in it (the estimate was short, or
// the OS put a worker on the UI's core) holds "one core left" for hold_ms, doubling on each
// repeat up to max_hold_ms and halving after a hold passes clean: light UIs get the machine,
// heavy or erratic ones keep their core.
#pragma once
#include <cstdint>
#include <limits>
#include <vector>

#include "base/result.h"

namespace pllm {

struct FramePolicyConfig {
  double initial_ui_ms = 8.0;  // the UI time per frame assumed until the app reports one
  double guard_ms = 1.0;       // margin after the UI's estimated end and before the next vsync
  int history = 60;            // reported frames the estimate covers (1 s at 60 Hz)
  double late_ms = 2.0;        // a frame() call later than this after its start: the UI was busy
  double hold_ms = 2000;       // after a miss with whole-machine steps: one core left this long
  double max_hold_ms = 16000;
};

struct FrameShape {
  static constexpr double kNoLimit = std::numeric_limits<double>::infinity();
  int threads = 1;                  // 0: do not step before resume_at_ms
  double time_left_ms = kNoLimit;   // the step's predicted cost must fit this
  double resume_at_ms = 0;          // threads 0: the UI's estimated end
  bool whole_machine = false;       // every thread while the UI may be running or about to
};

class FramePolicy {
 public:
  static Result<FramePolicy> create(const FramePolicyConfig& cfg);

  // A frame starts (the app's vsync, or the runtime's own frames); now_ms: when the call came.
  void on_frame(double frame_start_ms, double period_ms, double now_ms);
  // The app's UI work for the frame that started at frame_start_ms took ui_ms (vsync to done).
  // A frame whose work ran past the next vsync is a miss. Errors on a negative or non-finite time.
  Result<void> report_ui(double frame_start_ms, double ui_ms);
  void stop_frames() { period_ms_ = 0; }
  bool frame_mode() const { return period_ms_ > 0; }

  // The shape of a step starting now, for an engine of all_threads on a machine of `cores`.
  FrameShape shape(double now_ms, int all_threads, int cores) const;
  // What a step that did not fit shape()'s time limit runs with instead.
  FrameShape fallback(int all_threads) const;
  // A step ran over [start_ms, end_ms) with `threads` of all_threads.
  void on_step(double start_ms, double end_ms, int threads, int all_threads);

  double ui_estimate_ms() const;
  int misses() const { return misses_; }        // misses seen (reported, late or skipped vsyncs)
  int holds() const { return holds_; }          // misses blamed on whole-machine steps
  bool holding(double now_ms) const { return now_ms < hold_until_ms_; }

 private:
  explicit FramePolicy(const FramePolicyConfig& cfg) : cfg_(cfg) {}
  void miss(double frame_start_ms, double now_ms);

  FramePolicyConfig cfg_;
  double frame_start_ms_ = 0, period_ms_ = 0;
  std::vector<double> ui_ms_;  // ring of the last `history` reports
  size_t next_ui_ = 0;
  double late_ui_ms_ = 0;      // UI time implied by late frame calls (no reports), decays per frame
  double whole_until_ms_ = -std::numeric_limits<double>::infinity();  // last whole-machine step's end
  double hold_until_ms_ = -std::numeric_limits<double>::infinity();
  double hold_len_ = 0;
  int misses_ = 0, holds_ = 0;
};

}  // namespace pllm
