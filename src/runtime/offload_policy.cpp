#include "runtime/offload_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace pllm {
namespace {

int preference_rank(BackendKind k) { return k == BackendKind::npu ? 0 : (k == BackendKind::gpu ? 1 : 2); }

float power_of(const KindPower& p, BackendKind k) {
  return k == BackendKind::npu ? p.npu : (k == BackendKind::gpu ? p.gpu : p.cpu);
}

float phase_cost(const BackendInfo& b, Phase phase) {
  return phase == Phase::prefill ? b.cost_ms_per_token_prefill : b.cost_ms_per_token_decode;
}

bool positive_finite(float x) { return std::isfinite(x) && x > 0.0f; }
// NaN is "unknown" and allowed; otherwise finite and >= 0.
bool unknown_or_nonnegative(float x) { return std::isnan(x) || (std::isfinite(x) && x >= 0.0f); }

Error bad(const std::string& what) { return make_error(Status::invalid_argument, "offload policy: " + what); }

Result<void> check_inputs(Phase phase, std::span<const BackendInfo> backends, const LiveSignals& live,
                          const OffloadConfig& cfg) {
  if (!(live.other_cpu_util >= 0.0f && live.other_cpu_util <= 1.0f))
    return bad("other_cpu_util must be within [0, 1]");
  if (!unknown_or_nonnegative(live.thermal_headroom)) return bad("thermal_headroom must be >= 0 or NaN");
  if (!unknown_or_nonnegative(live.mem_bandwidth_gbps)) return bad("mem_bandwidth_gbps must be >= 0 or NaN");
  if (!std::isfinite(cfg.hot_headroom) || !(cfg.max_slowdown_vs_fastest >= 1.0f) ||
      !positive_finite(cfg.power.npu) || !positive_finite(cfg.power.gpu) || !positive_finite(cfg.power.cpu) ||
      !positive_finite(cfg.gbps_per_decode_thread))
    return bad("config out of range");
  for (const BackendInfo& b : backends) {
    if (!b.available) continue;
    if (!positive_finite(phase_cost(b, phase)) || b.max_threads < 1)
      return bad("backend '" + b.name + "' needs a finite cost > 0 for the phase and max_threads >= 1");
  }
  return {};
}

int cpu_threads(const BackendInfo& b, Phase phase, const LiveSignals& live, bool hot, const OffloadConfig& cfg) {
  int threads = int(std::lround(float(b.max_threads) * (1.0f - live.other_cpu_util)));
  if (hot) threads -= 1;
  if (phase == Phase::decode && !std::isnan(live.mem_bandwidth_gbps)) {
    const float bus_threads = std::ceil(live.mem_bandwidth_gbps / cfg.gbps_per_decode_thread);
    if (bus_threads < float(threads)) threads = int(bus_threads);  // compared as float: no overflow
  }
  return std::max(1, threads);
}

}  // namespace

Result<OffloadChoice> choose_offload(Phase phase, std::span<const BackendInfo> backends, const LiveSignals& live,
                                     const OffloadConfig& cfg) {
  PLLM_TRY(check_inputs(phase, backends, live, cfg));
  float fastest = std::numeric_limits<float>::infinity();
  for (const BackendInfo& b : backends)
    if (b.available) fastest = std::min(fastest, phase_cost(b, phase));
  if (std::isinf(fastest)) return make_error(Status::unsupported, "offload policy: no available backend");

  const bool hot = !std::isnan(live.thermal_headroom) && live.thermal_headroom >= cfg.hot_headroom;
  // Smaller is better; list order breaks the remaining ties (strict < keeps the first).
  auto score = [&](const BackendInfo& b) {
    const float cost = phase_cost(b, phase), rank = float(preference_rank(b.kind));
    return hot ? std::pair(cost * power_of(cfg.power, b.kind), rank) : std::pair(rank, cost);
  };
  size_t best = backends.size();
  for (size_t i = 0; i < backends.size(); ++i) {
    const BackendInfo& b = backends[i];
    if (!b.available || (!hot && phase_cost(b, phase) > cfg.max_slowdown_vs_fastest * fastest)) continue;
    if (best == backends.size() || score(b) < score(backends[best])) best = i;
  }

  const BackendInfo& chosen = backends[best];
  OffloadChoice out;
  out.backend = best;
  out.threads = chosen.kind == BackendKind::cpu ? cpu_threads(chosen, phase, live, hot, cfg) : chosen.max_threads;
  out.reason = hot ? "hot: lowest cost x power" : "preferred kind within the slowdown bound";
  return out;
}

}  // namespace pllm
