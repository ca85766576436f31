#include "runtime/governor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace pllm {
namespace {

constexpr int kContextBand = 256;  // tokens of context per band of TokenTiming::context

Error bad_config(const std::string& what) {
  return make_error(Status::invalid_argument, "thermal governor config: " + what);
}

std::string format(const char* fmt, double a, double b, double c = 0, double d = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, fmt, a, b, c, d);
  return buf;
}

}  // namespace

std::vector<CapsRow> default_caps_table() {
  return {
      {8, kUnlimitedStepsPerS, 0},
      {6, 12.0f, 0},
      {4, 6.0f, 0},
      {2, 3.0f, 1},
  };
}

Result<ThermalGovernor> ThermalGovernor::create(GovernorConfig cfg) {
  if (cfg.total_threads < 1) return bad_config("total_threads must be >= 1");
  if (cfg.table.empty()) return bad_config("the caps table is empty");
  for (size_t i = 0; i < cfg.table.size(); ++i) {
    const CapsRow& r = cfg.table[i];
    if (r.max_batch < 1 || !(r.max_decode_steps_per_s > 0.0f) || r.fewer_threads < 0)
      return bad_config("row " + std::to_string(i) +
                        " needs max_batch >= 1, max_decode_steps_per_s > 0 and fewer_threads >= 0");
  }
  if (cfg.relax_hold_ms < 0 || cfg.slowdown_hold_ms < 0) return bad_config("hold times must be >= 0");
  if (!std::isfinite(cfg.slowdown_ratio) || cfg.slowdown_ratio <= 1.0f)
    return bad_config("slowdown_ratio must be finite and > 1");
  if (cfg.window < 1) return bad_config("window must be >= 1");
  return ThermalGovernor(std::move(cfg));
}

Caps ThermalGovernor::caps() const {
  const CapsRow& row = cfg_.table[size_t(level_)];
  return Caps{row.max_batch, row.max_decode_steps_per_s, std::max(1, cfg_.total_threads - row.fewer_threads),
              level_};
}

float ThermalGovernor::median_of(const std::vector<float>& xs) {
  scratch_.assign(xs.begin(), xs.end());
  const auto mid = scratch_.begin() + std::ptrdiff_t(scratch_.size() / 2);
  std::nth_element(scratch_.begin(), mid, scratch_.end());
  if (scratch_.size() % 2 == 1) return *mid;
  return 0.5f * (*mid + *std::max_element(scratch_.begin(), mid));
}

std::optional<ThermalGovernor::Verdict> ThermalGovernor::record(const TokenTiming& t) {
  LoadStats& s = stats_[{t.load, t.threads, t.context / kContextBand}];
  const size_t window = size_t(cfg_.window);
  if (s.recent.size() < window) {
    s.recent.push_back(t.ms_per_token);
  } else {
    s.recent[s.next] = t.ms_per_token;
  }
  s.next = (s.next + 1) % window;
  if (s.recent.size() < window) return std::nullopt;
  const float median = median_of(s.recent);
  // The baseline is the fastest the device has been while nothing was capped: a baseline
  // taken while already hot would hide the slowdown it is there to catch.
  if (level_ == 0 && (s.baseline_ms == 0.0f || median < s.baseline_ms)) s.baseline_ms = median;
  if (s.baseline_ms == 0.0f) return std::nullopt;
  return Verdict{median, s.baseline_ms};
}

void ThermalGovernor::change_to(int level, int64_t now_ms, std::string reason) {
  level_ = level;
  changed_at_ms_ = now_ms;
  ++changes_;
  last_reason_ = std::move(reason);
  cooler_since_ms_.reset();
  slow_ = false;
  // Samples taken under other caps say nothing about the next ones.
  for (auto& [key, s] : stats_) {
    s.recent.clear();
    s.next = 0;
  }
}

Result<Caps> ThermalGovernor::tick(int64_t now_ms, const ThermalReading& reading,
                                   std::optional<TokenTiming> timing) {
  if (last_ms_ && now_ms < *last_ms_)
    return make_error(Status::invalid_argument, "thermal governor: time went backwards from " +
                                                    std::to_string(*last_ms_) + " to " + std::to_string(now_ms) + " ms");
  if (reading.valid && (reading.level < kThermalNone || reading.level > kThermalShutdown))
    return make_error(Status::invalid_argument,
                      "thermal governor: reading level " + std::to_string(reading.level) + " is outside 0..6");
  if (timing && (timing->load < 1 || timing->threads < 1 || !std::isfinite(timing->ms_per_token) ||
                 timing->ms_per_token <= 0.0f || timing->context < 0))
    return make_error(Status::invalid_argument,
                      "thermal governor: a token timing needs load >= 1, threads >= 1, a finite ms > 0 and a "
                      "context >= 0");
  last_ms_ = now_ms;

  std::optional<Verdict> verdict;
  if (timing) verdict = record(*timing);
  const bool slow_now = verdict && verdict->median_ms > cfg_.slowdown_ratio * verdict->baseline_ms;
  if (verdict) slow_ = slow_now;

  const int os_level = reading.valid
                           ? std::min(max_level(), std::max(reading.level, thermal_level_from_headroom(reading.headroom)))
                           : level_;
  const bool slowdown_may_step = !changed_at_ms_ || now_ms - *changed_at_ms_ >= cfg_.slowdown_hold_ms;
  if (os_level > level_) {
    change_to(os_level, now_ms, format("os: level %.0f, headroom %.2f", reading.level, reading.headroom));
  } else if (slow_now && level_ < max_level() && slowdown_may_step) {
    change_to(level_ + 1, now_ms, format("slowdown: %.0f rows x %.0f threads at %.2f ms/token, baseline %.2f ms",
                                 timing->load, timing->threads, verdict->median_ms, verdict->baseline_ms));
  } else if (os_level < level_ && !slow_) {
    if (!cooler_since_ms_) cooler_since_ms_ = now_ms;
    const int64_t cooler_for = now_ms - *cooler_since_ms_;
    if (cooler_for >= cfg_.relax_hold_ms) {
      change_to(level_ - 1, now_ms, format("cooler: os level %.0f for %.0f ms", os_level, double(cooler_for)));
      cooler_since_ms_ = now_ms;  // the next level needs a full hold of its own
    }
  } else {
    cooler_since_ms_.reset();
  }
  return caps();
}

}  // namespace pllm
