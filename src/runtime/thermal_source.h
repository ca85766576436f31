// Thermal signals for the governor. Every source reports one ThermalReading on the
// scales Android uses, so the governor sees the same numbers from a phone's OS, from sysfs,
// from a simulation or from a test script:
//   level    AThermalStatus: 0 none, 1 light, 2 moderate, 3 severe, 4 critical, 5 emergency,
//            6 shutdown.
//   headroom AThermal_getThermalHeadroom: 1.0 at the SEVERE threshold, 0.0 at 30 °C below it
//            (Android's TemperatureWatcher normalisation), > 1 past it; NaN when unknown.
// Time is passed in (now_ms) so that every source is deterministic under a fake clock.
#pragma once
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "base/result.h"

namespace pllm {

// AThermalStatus; readings carry it as a plain int, as the C API will.
enum ThermalLevel : int {
  kThermalNone = 0,
  kThermalLight,
  kThermalModerate,
  kThermalSevere,
  kThermalCritical,
  kThermalEmergency,
  kThermalShutdown,
};

inline constexpr float kUnknownThermal = std::numeric_limits<float>::quiet_NaN();

struct ThermalReading {
  int level = kThermalNone;
  float headroom = kUnknownThermal;
  float temp_c = kUnknownThermal;  // the hottest zone
  bool valid = false;              // false: the source knows nothing (no sensor, no report yet)
};

class ThermalSource {
 public:
  virtual ~ThermalSource() = default;
  virtual ThermalReading read(int64_t now_ms) = 0;
};

// Android's headroom scale: 1.0 at `severe_c`, 1/30 per °C, never below 0.
float thermal_headroom(float temp_c, float severe_c);

// The level a headroom implies, so that a source that only knows a temperature (sysfs, the
// simulation) and an app that only passes AThermal_getThermalHeadroom give comparable levels:
//   >= 4/3 (10 °C past severe) critical | >= 1 severe | >= 5/6 (5 °C below) moderate |
//   >= 2/3 (10 °C below) light | otherwise or NaN none.
int thermal_level_from_headroom(float headroom);

// iOS ProcessInfo.ThermalState (nominal 0, fair 1, serious 2, critical 3) as an AThermal level:
// nominal -> none, fair -> light, serious -> severe, critical -> critical.
Result<int> thermal_level_from_ios_state(int state);

// Linux thermal zones: <root>/thermal_zone*/temp (millidegrees C, text) and the zone's trip
// points. Per zone (°C): headroom = thermal_headroom(temp, lowest passive trip, else lowest hot
// trip), level = the larger of thermal_level_from_headroom(headroom), critical (4) at a `hot`
// trip and shutdown (6) at a `critical` trip (the kernel powers off there). The reading takes
// the hottest temperature, the largest headroom and the largest level over the valid zones:
// the zone nearest its own limit decides, even if another is hotter in absolute terms.
// A zone is skipped when its temp is missing, unreadable, not an integer or outside
// [-40, 150] °C (sensor error codes, wrong units), or its mode reads "disabled"; a bad trip
// point is ignored. Zones without trip points still give temp_c. No valid zone -> !valid.
// The tree is scanned on every read (a handful of small files; tick at ~1 Hz).
class SysfsThermalSource : public ThermalSource {
 public:
  explicit SysfsThermalSource(std::string root = "/sys/class/thermal") : root_(std::move(root)) {}
  ThermalReading read(int64_t now_ms) override;

 private:
  std::string root_;
};

// Pushed by the app through the C API (Android AThermal listener / iOS thermalState
// notification): thread-safe setters, read from the engine thread. valid once a level or a
// finite headroom has been set.
class AppThermalSource : public ThermalSource {
 public:
  Result<void> set_level(int level);           // 0..6
  Result<void> set_headroom(float headroom);   // [0, 10], or NaN for "unknown" (what Android
                                               // returns when it has no forecast)
  ThermalReading read(int64_t now_ms) override;

 private:
  std::atomic<int> level_{-1};  // -1: never set
  std::atomic<float> headroom_{kUnknownThermal};
};

// A first-order (RC) thermal model, for tests and for desktops without sensors:
//   dT/dt = (ambient_c + c_per_busy * u - T) / tau_s,   u = busy fraction in [0, 1].
// The caller reports how long the engine computed in each interval (add_busy); between two
// reports u is constant and the step is solved exactly, so the result does not depend on how
// often it is called. read() projects the last report forward as idle without committing it
// (an engine that stopped reporting has stopped working). headroom = thermal_headroom(T,
// limit_c), so T >= limit_c reads severe, limit_c - 5 moderate, limit_c - 10 light,
// limit_c + 10 critical.
struct SimulatedThermalParams {
  float ambient_c = 30.0f;
  float limit_c = 50.0f;      // the severe threshold (a phone's skin limit is ~45-50 °C)
  float c_per_busy = 30.0f;   // steady-state rise above ambient at 100 % busy
  float tau_s = 60.0f;        // time constant
};

class SimulatedThermalSource : public ThermalSource {
 public:
  static Result<SimulatedThermalSource> create(const SimulatedThermalParams& p, int64_t start_ms = 0);
  // busy_ms of compute in (last report, now_ms]; more than the interval counts as 100 %.
  Result<void> add_busy(int64_t now_ms, int64_t busy_ms);
  ThermalReading read(int64_t now_ms) override;
  float temp_c() const { return temp_c_; }  // at the last report

 private:
  SimulatedThermalSource(const SimulatedThermalParams& p, int64_t start_ms)
      : p_(p), last_ms_(start_ms), temp_c_(p.ambient_c) {}
  float advance(float temp_c, int64_t dt_ms, float busy) const;

  SimulatedThermalParams p_;
  int64_t last_ms_;
  float temp_c_;
};

// A fixed script: step i holds from at_ms until the next step; !valid before the first.
struct ThermalStep {
  int64_t at_ms = 0;
  int level = kThermalNone;
  float headroom = kUnknownThermal;
};

class ScriptedThermalSource : public ThermalSource {
 public:
  // Steps must be in non-decreasing at_ms order with levels 0..6.
  static Result<ScriptedThermalSource> create(std::vector<ThermalStep> steps);
  ThermalReading read(int64_t now_ms) override;

 private:
  explicit ScriptedThermalSource(std::vector<ThermalStep> steps) : steps_(std::move(steps)) {}
  std::vector<ThermalStep> steps_;
};

}  // namespace pllm
