#include "simulate_ui.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace cli::sim {
namespace {

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

// Layout, input and drawing stand-in: burns CPU (not wall time), so a UI thread that the
// engine's threads crowd off the cores takes longer, as a real one does.
void burn_cpu(double ms) {
  const double t0 = thread_cpu_ms();
  volatile double x = 1.0;
  while (thread_cpu_ms() - t0 < ms)
    for (int i = 0; i < 200; ++i) x = x * 1.0000001 + 1e-9;
}

}  // namespace

UiSimulator::UiSimulator(const FrameSpec& spec, std::function<double()> clock_ms,
                         std::function<void(double, double)> on_vsync, std::function<void(double, double)> on_ui_done)
    : spec_(spec), clock_(std::move(clock_ms)), on_vsync_(std::move(on_vsync)), on_ui_done_(std::move(on_ui_done)) {}

void UiSimulator::start(double t0_ms, double until_ms) {
  vsyncs_ = int(std::floor((until_ms - t0_ms) / spec_.period_ms + 1e-9));
  ui_ = std::thread([this, t0_ms, until_ms] { ui_loop(t0_ms, until_ms); });
  if (on_vsync_) vsync_ = std::thread([this, t0_ms, until_ms] { vsync_loop(t0_ms, until_ms); });
}

void UiSimulator::join() {
  if (ui_.joinable()) ui_.join();
  if (vsync_.joinable()) vsync_.join();
}

void UiSimulator::sleep_until(double t_ms) const {
  const double wait = t_ms - clock_();
  if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(wait));
}

void UiSimulator::ui_loop(double t0, double until_ms) {
  const double p = spec_.period_ms;
  for (long k = 0;;) {
    const double vsync = t0 + double(k) * p;
    if (vsync + p > until_ms + 1e-9) break;
    sleep_until(vsync);
    burn_cpu(spec_.ui_work_ms);
    const double done = clock_();
    FrameRecord f{vsync, done - vsync, done > vsync + p};
    frames_.push_back(f);
    if (on_ui_done_) on_ui_done_(vsync, f.latency_ms);
    // Frames whose vsync passed while this one was still being drawn are skipped.
    const long next = std::max(k + 1, long(std::ceil((done - t0) / p)));
    missed_so_far.fetch_add(int(f.missed) + int(next - k - 1), std::memory_order_relaxed);
    k = next;
  }
}

void UiSimulator::vsync_loop(double t0, double until_ms) {
  for (long k = 0;; ++k) {
    const double vsync = t0 + double(k) * spec_.period_ms;
    if (vsync + spec_.period_ms > until_ms + 1e-9) break;
    sleep_until(vsync);
    on_vsync_(vsync, spec_.period_ms);
  }
}

int UiSimulator::missed() const {
  int on_time = 0;
  for (const FrameRecord& f : frames_) on_time += f.missed ? 0 : 1;
  return vsyncs_ - on_time;
}

}  // namespace cli::sim
