// Offload policy: which backend runs a phase (prefill / decode), from the probed or measured
// cost of each. One deterministic function; the engine (runtime/engine.h, backend auto) asks it
// per step from the ms per token it measured on the device and on the CPU.
//
// Among the available backends (an unavailable one is never looked at further): the preferred
// kind, NPU -> GPU -> CPU, then the lower cost for the phase, then list order; a backend more
// than max_slowdown_vs_fastest x the fastest one's cost for the phase is passed over (an NPU
// that prefills well but decodes slowly).
#pragma once
#include <cstddef>
#include <span>
#include <string>

#include "base/result.h"

namespace pllm {

enum class BackendKind { npu, gpu, cpu };
enum class Phase { prefill, decode };

struct BackendInfo {
  std::string name;
  BackendKind kind = BackendKind::cpu;
  bool available = false;
  float cost_ms_per_token_prefill = 0.0f;  // must be finite and > 0 when available
  float cost_ms_per_token_decode = 0.0f;
};

struct OffloadConfig {
  float max_slowdown_vs_fastest = 2.0f;
};

// Returns the index of the chosen backend. Errors: no available backend, an available backend
// whose cost for the phase is not finite and > 0, or a config out of range.
Result<size_t> choose_offload(Phase phase, std::span<const BackendInfo> backends, const OffloadConfig& cfg = {});

}  // namespace pllm
