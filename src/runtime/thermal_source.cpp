#include "runtime/thermal_source.h"

#include <algorithm>

namespace pllm {
namespace {

// Android maps the 30 °C below the SEVERE threshold onto headroom 0..1.
constexpr float kDegreesPerHeadroom = 30.0f;
// Far beyond anything a real forecast reports: a larger value is a caller's unit mistake.
constexpr float kMaxHeadroom = 10.0f;

bool level_in_range(int level) { return level >= kThermalNone && level <= kThermalShutdown; }
bool headroom_in_range(float h) { return std::isnan(h) || (h >= 0.0f && h <= kMaxHeadroom); }

Error bad_level(int level) {
  return make_error(Status::invalid_argument,
                    "thermal level " + std::to_string(level) + " is outside 0 (none) .. 6 (shutdown)");
}
Error bad_headroom(float h) {
  return make_error(Status::invalid_argument,
                    "thermal headroom " + std::to_string(h) + " is outside [0, 10] (NaN means unknown)");
}

}  // namespace

float thermal_headroom(float temp_c, float severe_c) {
  if (std::isnan(temp_c) || std::isnan(severe_c)) return kUnknownThermal;
  return std::max(0.0f, (temp_c - severe_c + kDegreesPerHeadroom) / kDegreesPerHeadroom);
}

int thermal_level_from_headroom(float headroom) {
  if (std::isnan(headroom)) return kThermalNone;
  if (headroom >= 1.0f + 10.0f / kDegreesPerHeadroom) return kThermalCritical;
  if (headroom >= 1.0f) return kThermalSevere;
  if (headroom >= 1.0f - 5.0f / kDegreesPerHeadroom) return kThermalModerate;
  if (headroom >= 1.0f - 10.0f / kDegreesPerHeadroom) return kThermalLight;
  return kThermalNone;
}

Result<int> thermal_level_from_ios_state(int state) {
  switch (state) {
    case 0: return kThermalNone;      // nominal
    case 1: return kThermalLight;     // fair
    case 2: return kThermalSevere;    // serious: iOS is already throttling
    case 3: return kThermalCritical;  // critical
    default:
      return make_error(Status::invalid_argument, "iOS thermal state " + std::to_string(state) +
                                                      " is outside 0 (nominal) .. 3 (critical)");
  }
}

// --- AppThermalSource ---

Result<void> AppThermalSource::set_level(int level) {
  if (!level_in_range(level)) return bad_level(level);
  level_.store(level, std::memory_order_relaxed);
  return {};
}

Result<void> AppThermalSource::set_headroom(float headroom) {
  if (!headroom_in_range(headroom)) return bad_headroom(headroom);
  headroom_.store(headroom, std::memory_order_relaxed);
  return {};
}

ThermalReading AppThermalSource::read(int64_t) {
  ThermalReading r;
  const int level = level_.load(std::memory_order_relaxed);
  r.headroom = headroom_.load(std::memory_order_relaxed);
  r.level = std::max(level, int(kThermalNone));
  r.valid = level >= 0 || !std::isnan(r.headroom);
  return r;
}

// --- SimulatedThermalSource ---

Result<SimulatedThermalSource> SimulatedThermalSource::create(const SimulatedThermalParams& p,
                                                              int64_t start_ms) {
  const bool finite = std::isfinite(p.ambient_c) && std::isfinite(p.limit_c) &&
                      std::isfinite(p.c_per_busy) && std::isfinite(p.tau_s);
  if (!finite || p.tau_s <= 0.0f || p.c_per_busy < 0.0f)
    return make_error(Status::invalid_argument,
                      "simulated thermal model: parameters must be finite, tau_s > 0 and c_per_busy >= 0");
  return SimulatedThermalSource(p, start_ms);
}

float SimulatedThermalSource::advance(float temp_c, int64_t dt_ms, float busy) const {
  const double steady = double(p_.ambient_c) + double(p_.c_per_busy) * busy;
  const double decay = std::exp(-double(dt_ms) / (1000.0 * p_.tau_s));
  return float(steady + (temp_c - steady) * decay);
}

Result<void> SimulatedThermalSource::add_busy(int64_t now_ms, int64_t busy_ms) {
  if (busy_ms < 0)
    return make_error(Status::invalid_argument, "busy time " + std::to_string(busy_ms) + " ms is negative");
  if (now_ms < last_ms_)
    return make_error(Status::invalid_argument, "thermal clock went backwards: " + std::to_string(now_ms) +
                                                    " ms after " + std::to_string(last_ms_) + " ms");
  const int64_t dt = now_ms - last_ms_;
  if (dt == 0) return {};  // an empty interval carries no heat
  const float busy = float(std::min<int64_t>(busy_ms, dt)) / float(dt);
  temp_c_ = advance(temp_c_, dt, busy);
  last_ms_ = now_ms;
  return {};
}

ThermalReading SimulatedThermalSource::read(int64_t now_ms) {
  ThermalReading r;
  r.temp_c = advance(temp_c_, std::max<int64_t>(0, now_ms - last_ms_), 0.0f);
  r.headroom = thermal_headroom(r.temp_c, p_.limit_c);
  r.level = thermal_level_from_headroom(r.headroom);
  r.valid = true;
  return r;
}

// --- ScriptedThermalSource ---

Result<ScriptedThermalSource> ScriptedThermalSource::create(std::vector<ThermalStep> steps) {
  for (size_t i = 0; i < steps.size(); ++i) {
    const ThermalStep& s = steps[i];
    const std::string where = "thermal script step " + std::to_string(i) + ": ";
    if (!level_in_range(s.level)) return make_error(Status::invalid_argument, where + bad_level(s.level).message);
    if (!headroom_in_range(s.headroom))
      return make_error(Status::invalid_argument, where + bad_headroom(s.headroom).message);
    if (i > 0 && s.at_ms < steps[i - 1].at_ms)
      return make_error(Status::invalid_argument, where + "at_ms goes backwards");
  }
  return ScriptedThermalSource(std::move(steps));
}

ThermalReading ScriptedThermalSource::read(int64_t now_ms) {
  auto after = std::upper_bound(steps_.begin(), steps_.end(), now_ms,
                                [](int64_t t, const ThermalStep& s) { return t < s.at_ms; });
  ThermalReading r;
  if (after == steps_.begin()) return r;
  const ThermalStep& s = *(after - 1);
  r.level = s.level;
  r.headroom = s.headroom;
  r.valid = true;
  return r;
}

}  // namespace pllm
