#include "runtime/frame_policy.h"

#include <algorithm>
#include <cmath>

namespace pllm {

Result<FramePolicy> FramePolicy::create(const FramePolicyConfig& cfg) {
  const auto bad = [](double x) { return !std::isfinite(x) || x < 0; };
  if (bad(cfg.late_ms) || bad(cfg.hold_ms) || bad(cfg.max_hold_ms) || cfg.max_hold_ms < cfg.hold_ms)
    return make_error(Status::invalid_argument, "frame policy: hold and late times must be finite, >= 0, hold <= max");
  if (bad(cfg.guard_ms)) return make_error(Status::invalid_argument, "frame policy: guard_ms must be finite and >= 0");
  if (!(cfg.headroom > 0 && cfg.headroom <= 1)) return make_error(Status::invalid_argument, "frame policy: headroom must be in (0, 1]");
  if (!(cfg.initial_inflation >= 1 && std::isfinite(cfg.initial_inflation)))
    return make_error(Status::invalid_argument, "frame policy: initial_inflation must be >= 1");
  if (cfg.history < 1 || cfg.slow_frames < 1)
    return make_error(Status::invalid_argument, "frame policy: history and slow_frames must be >= 1");
  return FramePolicy(cfg);
}

void FramePolicy::on_frame(double frame_start_ms, double period_ms, double now_ms) {
  if (period_ms_ > 0) {
    const bool skipped = frame_start_ms - frame_start_ms_ > 1.5 * period_ms_;
    const bool late = now_ms - frame_start_ms > cfg_.late_ms;
    if (skipped || late) note_miss(now_ms);
  }
  frame_start_ms_ = frame_start_ms;
  period_ms_ = period_ms;
  ui_done_ = false;
}

void FramePolicy::Ring::add(double x, int history) {
  if (ms.size() < size_t(history)) {
    ms.push_back(x);
  } else {
    ms[next] = x;
    next = (next + 1) % ms.size();
  }
  scratch.assign(ms.begin(), ms.end());
  const auto k = std::ptrdiff_t(std::min(scratch.size() * 9 / 10, scratch.size() - 1));
  std::nth_element(scratch.begin(), scratch.begin() + k, scratch.end());
  p90 = scratch[size_t(k)];
}

int FramePolicy::Ring::over(double limit) const {
  return int(std::count_if(ms.begin(), ms.end(), [&](double x) { return x > limit; }));
}

Result<void> FramePolicy::report_ui(double frame_start_ms, double ui_ms) {
  if (!std::isfinite(ui_ms) || ui_ms < 0 || !std::isfinite(frame_start_ms))
    return make_error(Status::invalid_argument, "report_ui: the UI time must be finite and >= 0");
  const double now = frame_start_ms + ui_ms;
  if (std::abs(frame_start_ms - frame_start_ms_) < 0.5) ui_done_ = true;
  if (whole_) {
    whole_ms_.add(ui_ms, kRecent);
    if (period_ms_ > 0 && ui_ms > period_ms_) note_miss(now);
    else if (period_ms_ > 0 && whole_ms_.over(cfg_.headroom * period_ms_) >= cfg_.slow_frames) to_one_core_left(now);
    return {};
  }
  if (period_ms_ > 0 && ui_ms > period_ms_) ++misses_;  // with its own core: not the engine's doing
  own_.add(ui_ms, cfg_.history);
  // What the last whole stretch did to the UI, against what it needed alone right after.
  if (!whole_ms_.ms.empty() && own_after_.ms.size() < size_t(kRecent)) {
    own_after_.add(ui_ms, kRecent);
    if (own_after_.ms.size() == size_t(kRecent) && own_after_.p90 > 0)
      inflation_ = std::clamp(whole_ms_.p90 / own_after_.p90, 1.0, 8.0);
  }
  return {};
}

void FramePolicy::note_miss(double now_ms) {
  ++misses_;
  if (whole_) to_one_core_left(now_ms);
}

void FramePolicy::to_one_core_left(double now_ms) {
  own_after_ = Ring{};
  ++holds_;
  hold_len_ms_ = std::clamp(hold_len_ms_ > 0 ? 2 * hold_len_ms_ : cfg_.hold_ms, cfg_.hold_ms, cfg_.max_hold_ms);
  hold_until_ms_ = now_ms + hold_len_ms_;
  whole_ = false;
  last_change_ms_ = now_ms;
}

double FramePolicy::ui_estimate_ms() const { return own_.p90; }

FrameShape FramePolicy::shape(double now_ms, int all_threads, int cores) {
  const FrameShape whole{all_threads, true};
  if (!frame_mode() || all_threads <= 1 || (cores > 0 && all_threads < cores)) return whole;
  if (whole_ && hold_len_ms_ > 0 && now_ms - last_change_ms_ > hold_len_ms_) {
    // A clean stretch as long as the last hold: the next hold starts shorter.
    hold_len_ms_ = hold_len_ms_ / 2 < cfg_.hold_ms ? 0 : hold_len_ms_ / 2;
    last_change_ms_ = now_ms;
  }
  if (!whole_ && now_ms >= hold_until_ms_) {
    // Probe the whole machine when the UI's own time, inflated as measured, leaves headroom;
    // an app that reports nothing is probed after each hold (its misses bring it back).
    const bool fits = own_.ms.empty() || own_.p90 * inflation_ <= cfg_.headroom * period_ms_;
    if (fits) {
      whole_ = true;
      whole_ms_ = Ring{};
      ++probes_;
      last_change_ms_ = now_ms;
    }
  }
  if (whole_) return whole;
  if (ui_done_ && now_ms < frame_start_ms_ + period_ms_ - cfg_.guard_ms) return FrameShape{all_threads, false, true};
  return FrameShape{all_threads - 1, false};
}

}  // namespace pllm
