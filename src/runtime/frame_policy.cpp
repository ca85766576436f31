#include "runtime/frame_policy.h"

#include <algorithm>
#include <cmath>

namespace pllm {

Result<FramePolicy> FramePolicy::create(const FramePolicyConfig& cfg) {
  const auto bad = [](double x) { return !std::isfinite(x) || x < 0; };
  if (bad(cfg.initial_ui_ms) || bad(cfg.guard_ms) || bad(cfg.late_ms) || bad(cfg.hold_ms) || bad(cfg.max_hold_ms))
    return make_error(Status::invalid_argument, "frame policy: times must be finite and >= 0");
  if (cfg.history < 1) return make_error(Status::invalid_argument, "frame policy: history must be >= 1");
  if (cfg.max_hold_ms < cfg.hold_ms) return make_error(Status::invalid_argument, "frame policy: max_hold_ms < hold_ms");
  return FramePolicy(cfg);
}

void FramePolicy::on_frame(double frame_start_ms, double period_ms, double now_ms) {
  if (period_ms_ > 0 && frame_start_ms - frame_start_ms_ > 1.5 * period_ms_) miss(frame_start_ms_, now_ms);
  else if (period_ms_ > 0 && now_ms - frame_start_ms > cfg_.late_ms) miss(frame_start_ms, now_ms);
  // A hold that passed with a clean stretch as long again after it: the next one starts shorter.
  if (hold_len_ > 0 && now_ms > hold_until_ms_ + hold_len_) {
    hold_len_ = hold_len_ / 2 < cfg_.hold_ms ? 0 : hold_len_ / 2;
    hold_until_ms_ = std::min(hold_until_ms_, now_ms);
  }
  frame_start_ms_ = frame_start_ms;
  period_ms_ = period_ms;
}

Result<void> FramePolicy::report_ui(double frame_start_ms, double ui_ms) {
  if (!std::isfinite(ui_ms) || ui_ms < 0 || !std::isfinite(frame_start_ms))
    return make_error(Status::invalid_argument, "report_ui: the UI time must be finite and >= 0");
  if (ui_ms_.size() < size_t(cfg_.history)) {
    ui_ms_.push_back(ui_ms);
  } else {
    ui_ms_[next_ui_] = ui_ms;
    next_ui_ = (next_ui_ + 1) % ui_ms_.size();
  }
  if (period_ms_ > 0 && ui_ms > period_ms_) miss(frame_start_ms, frame_start_ms + ui_ms);
  return {};
}

void FramePolicy::miss(double frame_start_ms, double now_ms) {
  ++misses_;
  if (whole_until_ms_ <= frame_start_ms) return;  // the engine left the UI its core: not ours to fix
  ++holds_;
  hold_len_ = std::clamp(hold_len_ > 0 ? 2 * hold_len_ : cfg_.hold_ms, cfg_.hold_ms, cfg_.max_hold_ms);
  hold_until_ms_ = std::max(hold_until_ms_, now_ms + hold_len_);
}

double FramePolicy::ui_estimate_ms() const {
  if (ui_ms_.empty()) return cfg_.initial_ui_ms;
  return *std::max_element(ui_ms_.begin(), ui_ms_.end());
}

FrameShape FramePolicy::fallback(int all_threads) const {
  FrameShape s;
  s.threads = std::max(1, all_threads - 1);  // one thread in all: it runs, time-sliced with the UI
  return s;
}

FrameShape FramePolicy::shape(double now_ms, int all_threads, int cores) const {
  FrameShape whole;
  whole.threads = all_threads;
  if (!frame_mode() || (cores > 0 && all_threads < cores)) return whole;
  if (holding(now_ms)) return fallback(all_threads);
  // The frame that holds `now` (the app's clock may skip a call; its frames go on).
  const double k = now_ms > frame_start_ms_ ? std::floor((now_ms - frame_start_ms_) / period_ms_) : 0;
  const double start = frame_start_ms_ + k * period_ms_;
  const double ui_end = start + ui_estimate_ms() + cfg_.guard_ms;
  const double next_vsync = start + period_ms_;
  const double deadline = next_vsync - cfg_.guard_ms;
  if (now_ms >= ui_end && now_ms < deadline) {
    whole.time_left_ms = deadline - now_ms;
    whole.whole_machine = true;
    return whole;
  }
  // One thread in all and an idle part too short for any step: it runs, time-sliced.
  if (all_threads > 1 || deadline - ui_end < cfg_.guard_ms) return fallback(all_threads);
  FrameShape wait;  // one thread in all: keep off the UI's only core while it works
  wait.threads = 0;
  wait.resume_at_ms = now_ms < ui_end ? ui_end : next_vsync + ui_estimate_ms() + cfg_.guard_ms;
  return wait;
}

void FramePolicy::on_step(double start_ms, double end_ms, int threads, int all_threads) {
  (void)start_ms;
  if (threads >= all_threads) whole_until_ms_ = std::max(whole_until_ms_, end_ms);
}

}  // namespace pllm
