// Offload policy with fake backends and cost tables: preference order, availability, the
// slowdown bound, ties, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/offload_policy.h"

namespace pllm {
namespace {

BackendInfo backend(const char* name, BackendKind kind, float prefill, float decode, bool available = true) {
  return BackendInfo{name, kind, available, prefill, decode};
}

// Three backends with close costs: preference alone decides.
std::vector<BackendInfo> trio() {
  return {backend("cpu", BackendKind::cpu, 2.0f, 40.0f), backend("gpu", BackendKind::gpu, 1.5f, 35.0f),
          backend("npu", BackendKind::npu, 1.0f, 30.0f)};
}

const BackendInfo& chosen(const std::vector<BackendInfo>& b, Phase phase, const OffloadConfig& cfg = {}) {
  auto r = choose_offload(phase, b, cfg);
  EXPECT_TRUE(r.ok()) << r.error().message;
  static const BackendInfo none{"none"};
  return r.ok() ? b[*r] : none;
}

TEST(Offload, PrefersNpuThenGpuThenCpu) {
  std::vector<BackendInfo> b = trio();
  EXPECT_EQ(chosen(b, Phase::prefill).name, "npu");
  EXPECT_EQ(chosen(b, Phase::decode).name, "npu");
  b[2].available = false;
  EXPECT_EQ(chosen(b, Phase::decode).name, "gpu");
  b[1].available = false;
  EXPECT_EQ(chosen(b, Phase::decode).name, "cpu");
}

TEST(Offload, UnavailableBackendsAreNotValidated) {
  std::vector<BackendInfo> b = trio();
  b[2] = backend("broken-npu", BackendKind::npu, NAN, -1.0f, false);  // a failed probe
  EXPECT_EQ(chosen(b, Phase::prefill).name, "gpu");
}

TEST(Offload, NoAvailableBackendIsAnError) {
  std::vector<BackendInfo> b = trio();
  for (auto& x : b) x.available = false;
  auto r = choose_offload(Phase::decode, b);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Status::unsupported);
  EXPECT_FALSE(choose_offload(Phase::decode, std::vector<BackendInfo>{}).ok());
}

TEST(Offload, PreferredBackendMuchSlowerThanTheFastestIsPassedOver) {
  // An NPU that prefills fast but decodes at 3x the CPU's cost.
  std::vector<BackendInfo> b = {backend("cpu", BackendKind::cpu, 4.0f, 20.0f),
                                backend("npu", BackendKind::npu, 1.0f, 60.0f)};
  EXPECT_EQ(chosen(b, Phase::prefill).name, "npu");
  EXPECT_EQ(chosen(b, Phase::decode).name, "cpu");
  b[1].cost_ms_per_token_decode = 40.0f;  // exactly the bound (2x): still preferred
  EXPECT_EQ(chosen(b, Phase::decode).name, "npu");
  OffloadConfig strict;
  strict.max_slowdown_vs_fastest = 1.5f;
  EXPECT_EQ(chosen(b, Phase::decode, strict).name, "cpu");
}

TEST(Offload, SameKindCheaperFirstThenListOrder) {
  std::vector<BackendInfo> b = {backend("gpu-a", BackendKind::gpu, 2.0f, 30.0f),
                                backend("gpu-b", BackendKind::gpu, 1.0f, 30.0f)};
  EXPECT_EQ(chosen(b, Phase::prefill).name, "gpu-b");
  EXPECT_EQ(chosen(b, Phase::decode).name, "gpu-a");  // a tie keeps the first listed
}

TEST(Offload, RejectsBadInput) {
  const std::vector<BackendInfo> good = trio();
  auto fails = [](const std::vector<BackendInfo>& b, const OffloadConfig& cfg = {}) {
    auto r = choose_offload(Phase::decode, b, cfg);
    return !r.ok() && r.error().code == Status::invalid_argument;
  };
  for (float bad_cost : {0.0f, -1.0f, NAN, INFINITY}) {
    std::vector<BackendInfo> b = good;
    b[0].cost_ms_per_token_decode = bad_cost;
    EXPECT_TRUE(fails(b)) << bad_cost;
  }
  OffloadConfig cfg;
  cfg.max_slowdown_vs_fastest = 0.5f;
  EXPECT_TRUE(fails(good, cfg));
  cfg.max_slowdown_vs_fastest = NAN;
  EXPECT_TRUE(fails(good, cfg));
  EXPECT_FALSE(fails(good));
}

}  // namespace
}  // namespace pllm
