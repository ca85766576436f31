// ThermalGovernor: turns thermal readings and measured token times into caps on the
// engine's own work. A pure state machine: the caller ticks it with the time and what it saw;
// no clock, no threads, no I/O.
//
// Levels index a caps table (default below); the governor's level is clamped to the table, so
// OS levels past the last row use the last row.
//   * Hotter: the OS level (or the level its headroom implies, whichever is higher) above the
//     governor's level moves it there at once.
//   * Cooler: only after every tick for relax_hold_ms has been cooler, and then one level at a
//     time (each further level needs another full hold). A hotter or equal tick restarts the
//     hold, so a signal wobbling faster than the hold never relaxes anything.
//   * Invalid readings are neither hotter nor cooler: the level holds and the relax hold restarts.
//   * Slowdown: OS thermal states lag the silicon, so the governor also watches the per-token
//     time. For every (load, threads) it keeps a baseline, the lowest median of `window`
//     consecutive samples seen at level 0; when the median of the last `window` samples is more
//     than slowdown_ratio x baseline it steps down one level, even while the OS says none, but
//     no sooner than slowdown_hold_ms after the previous change (a step needs time to cool the
//     device before the next is judged). A change clears the sample windows (samples under
//     other caps say nothing), and while the window still says slow the governor does not
//     relax.
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "runtime/thermal_source.h"

namespace pllm {

inline constexpr float kUnlimitedStepsPerS = std::numeric_limits<float>::infinity();

struct Caps {
  int max_batch = 1;
  float max_decode_steps_per_s = kUnlimitedStepsPerS;
  int max_threads = 1;
  int level = 0;  // the governor's level (the row of the table in force)
};

struct CapsRow {
  int max_batch = 1;
  float max_decode_steps_per_s = kUnlimitedStepsPerS;
  int fewer_threads = 0;  // max_threads = max(1, total_threads - fewer_threads)
};

// Level 0: batch 8, unlimited; 1: batch 6, 12 steps/s; 2: batch 4, 6 steps/s;
// 3 (and every higher OS level): batch 2, 3 steps/s, one thread fewer.
std::vector<CapsRow> default_caps_table();

struct GovernorConfig {
  int total_threads = 0;  // what the engine runs at level 0; must be set (>= 1)
  std::vector<CapsRow> table = default_caps_table();
  int64_t relax_hold_ms = 10'000;
  float slowdown_ratio = 1.25f;  // recent median above ratio x baseline is a slowdown
  int64_t slowdown_hold_ms = 10'000;
  int window = 8;                // samples per median
};

// One measured decode step: ms per token with `load` rows in the batch on `threads` threads,
// the rows' contexts averaging `context` tokens. A token costs more as its context grows
// (attention reads the whole KV cache), so samples are compared only within one load, thread
// count and 256-token context band: a long answer is not a slowdown.
struct TokenTiming {
  int load = 1;
  int threads = 1;
  float ms_per_token = 0.0f;
  int context = 0;
};

class ThermalGovernor {
 public:
  static Result<ThermalGovernor> create(GovernorConfig cfg);

  // Errors (state unchanged): time going backwards, a reading level outside 0..6, a timing
  // with load/threads < 1 or a non-positive or non-finite ms_per_token.
  Result<Caps> tick(int64_t now_ms, const ThermalReading& reading,
                    std::optional<TokenTiming> timing = std::nullopt);

  Caps caps() const;
  int level() const { return level_; }
  int changes() const { return changes_; }
  const std::string& last_reason() const { return last_reason_; }  // empty before a change

 private:
  explicit ThermalGovernor(GovernorConfig cfg) : cfg_(std::move(cfg)) {}

  struct LoadStats {
    std::vector<float> recent;  // ring of the last `window` samples
    size_t next = 0;
    float baseline_ms = 0.0f;  // 0: none yet
  };
  struct Verdict {
    float median_ms;
    float baseline_ms;
  };
  // Adds the sample; once its window is full, updates the baseline (at level 0) and returns
  // the window's median next to the baseline.
  std::optional<Verdict> record(const TokenTiming& t);
  float median_of(const std::vector<float>& xs);
  void change_to(int level, int64_t now_ms, std::string reason);
  int max_level() const { return int(cfg_.table.size()) - 1; }

  GovernorConfig cfg_;
  int level_ = 0;
  int changes_ = 0;
  std::string last_reason_;
  std::optional<int64_t> last_ms_;
  std::optional<int64_t> cooler_since_ms_;
  std::optional<int64_t> changed_at_ms_;
  bool slow_ = false;  // the last full window was a slowdown
  std::map<std::tuple<int, int, int>, LoadStats> stats_;  // by (load, threads, context band)
  std::vector<float> scratch_;                       // median workspace, reused
};

}  // namespace pllm
