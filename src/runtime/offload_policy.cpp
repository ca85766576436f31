#include "runtime/offload_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace pllm {
namespace {

int preference_rank(BackendKind k) { return k == BackendKind::npu ? 0 : (k == BackendKind::gpu ? 1 : 2); }

float phase_cost(const BackendInfo& b, Phase phase) {
  return phase == Phase::prefill ? b.cost_ms_per_token_prefill : b.cost_ms_per_token_decode;
}

bool positive_finite(float x) { return std::isfinite(x) && x > 0.0f; }

Error bad(const std::string& what) { return make_error(Status::invalid_argument, "offload policy: " + what); }

Result<void> check_inputs(Phase phase, std::span<const BackendInfo> backends, const OffloadConfig& cfg) {
  if (!(cfg.max_slowdown_vs_fastest >= 1.0f))
    return bad("config out of range");
  for (const BackendInfo& b : backends) {
    if (!b.available) continue;
    if (!positive_finite(phase_cost(b, phase)))
      return bad("backend '" + b.name + "' needs a finite cost > 0 for the phase");
  }
  return {};
}

}  // namespace

Result<size_t> choose_offload(Phase phase, std::span<const BackendInfo> backends, const OffloadConfig& cfg) {
  PLLM_TRY(check_inputs(phase, backends, cfg));
  float fastest = std::numeric_limits<float>::infinity();
  for (const BackendInfo& b : backends)
    if (b.available) fastest = std::min(fastest, phase_cost(b, phase));
  if (std::isinf(fastest)) return make_error(Status::unsupported, "offload policy: no available backend");

  // Smaller is better; list order breaks the remaining ties (strict < keeps the first).
  auto score = [&](const BackendInfo& b) { return std::pair(preference_rank(b.kind), phase_cost(b, phase)); };
  size_t best = backends.size();
  for (size_t i = 0; i < backends.size(); ++i) {
    const BackendInfo& b = backends[i];
    if (!b.available || phase_cost(b, phase) > cfg.max_slowdown_vs_fastest * fastest) continue;
    if (best == backends.size() || score(b) < score(backends[best])) best = i;
  }
  return best;
}

}  // namespace pllm
