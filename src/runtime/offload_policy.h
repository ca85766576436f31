// Offload policy (issue P8): which backend runs a phase (prefill / decode) and on how many CPU
// threads, from the probed backends and live signals. One deterministic function; the engine
// calls it when a phase starts, and the governor's caps still bound the result.
//
// Backend, among the available ones (an unavailable backend is never looked at further):
//   normal  the preferred kind, NPU -> GPU -> CPU, then the lower cost for the phase, then
//           list order; a backend more than max_slowdown_vs_fastest x the fastest one's cost
//           for the phase is passed over (an NPU that prefills well but decodes slowly).
//   hot     (thermal_headroom >= hot_headroom) the lowest energy proxy, cost for the phase x
//           the kind's relative busy power; ties by preference, then list order.
// CPU threads (other kinds keep their max_threads: host threads that only feed a device):
//   the cores others leave free, round(max_threads x (1 - other_cpu_util)); one fewer when hot;
//   for decode, which is memory-bound, no more than ceil(mem_bandwidth_gbps /
//   gbps_per_decode_thread) since more threads than the bus can feed only add heat; at least 1.
#pragma once
#include <cstddef>
#include <span>
#include <string>

#include "base/result.h"
#include "runtime/thermal_source.h"

namespace pllm {

enum class BackendKind { npu, gpu, cpu };
enum class Phase { prefill, decode };

struct BackendInfo {
  std::string name;
  BackendKind kind = BackendKind::cpu;
  bool available = false;
  float cost_ms_per_token_prefill = 0.0f;  // probed; must be finite and > 0 when available
  float cost_ms_per_token_decode = 0.0f;
  int max_threads = 1;  // host threads it can use
};

struct LiveSignals {
  float thermal_headroom = kUnknownThermal;    // Android's scale, NaN unknown
  float other_cpu_util = 0.0f;                 // 0..1, CPU used by everything but the engine
  float mem_bandwidth_gbps = kUnknownThermal;  // measured; NaN unknown
};

// Relative power while busy: rough phone figures (NPU ~1 W, GPU ~2 W, big CPU cores ~3 W).
struct KindPower {
  float npu = 1.0f;
  float gpu = 2.0f;
  float cpu = 3.0f;
};

struct OffloadConfig {
  float hot_headroom = 0.9f;
  float max_slowdown_vs_fastest = 2.0f;
  KindPower power;
  float gbps_per_decode_thread = 10.0f;  // what one big core streams from DRAM
};

struct OffloadChoice {
  size_t backend = 0;  // index into the backends passed in
  int threads = 1;
  const char* reason = "";  // a literal, for traces
};

// Errors: no available backend, an available backend with a cost for the phase that is not
// finite and > 0 or max_threads < 1, signals out of range (util outside [0, 1], negative or
// infinite headroom or bandwidth), or a config out of range.
Result<OffloadChoice> choose_offload(Phase phase, std::span<const BackendInfo> backends,
                                     const LiveSignals& live, const OffloadConfig& cfg = {});

}  // namespace pllm
