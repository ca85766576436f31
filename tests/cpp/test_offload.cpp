// Offload policy with fake backends and cost tables: preference order, availability, the
// slowdown bound, the energy rule when hot, CPU thread counts, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/offload_policy.h"

namespace pllm {
namespace {

BackendInfo backend(const char* name, BackendKind kind, float prefill, float decode, int threads = 1,
                    bool available = true) {
  return BackendInfo{name, kind, available, prefill, decode, threads};
}

// Three backends with close costs: preference alone decides while cool.
std::vector<BackendInfo> trio() {
  return {backend("cpu", BackendKind::cpu, 2.0f, 40.0f, 8), backend("gpu", BackendKind::gpu, 1.5f, 35.0f),
          backend("npu", BackendKind::npu, 1.0f, 30.0f)};
}

const BackendInfo& chosen(const std::vector<BackendInfo>& b, Phase phase, const LiveSignals& live = {},
                          const OffloadConfig& cfg = {}) {
  auto r = choose_offload(phase, b, live, cfg);
  EXPECT_TRUE(r.ok()) << r.error().message;
  static const BackendInfo none{"none"};
  return r.ok() ? b[r->backend] : none;
}

int threads(const std::vector<BackendInfo>& b, Phase phase, const LiveSignals& live) {
  auto r = choose_offload(phase, b, live);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() ? r->threads : -1;
}

LiveSignals signals(float headroom, float util = 0.0f, float gbps = NAN) { return {headroom, util, gbps}; }

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
  b[2] = backend("broken-npu", BackendKind::npu, NAN, -1.0f, 0, false);  // a failed probe
  EXPECT_EQ(chosen(b, Phase::prefill).name, "gpu");
}

TEST(Offload, NoAvailableBackendIsAnError) {
  std::vector<BackendInfo> b = trio();
  for (auto& x : b) x.available = false;
  auto r = choose_offload(Phase::decode, b, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Status::unsupported);
  EXPECT_FALSE(choose_offload(Phase::decode, std::vector<BackendInfo>{}, {}).ok());
}

TEST(Offload, PreferredBackendMuchSlowerThanTheFastestIsPassedOver) {
  // An NPU that prefills fast but decodes at 3x the CPU's cost.
  std::vector<BackendInfo> b = {backend("cpu", BackendKind::cpu, 4.0f, 20.0f, 4),
                                backend("npu", BackendKind::npu, 1.0f, 60.0f)};
  EXPECT_EQ(chosen(b, Phase::prefill).name, "npu");
  EXPECT_EQ(chosen(b, Phase::decode).name, "cpu");
  b[1].cost_ms_per_token_decode = 40.0f;  // exactly the bound (2x): still preferred
  EXPECT_EQ(chosen(b, Phase::decode).name, "npu");
  OffloadConfig strict;
  strict.max_slowdown_vs_fastest = 1.5f;
  EXPECT_EQ(chosen(b, Phase::decode, {}, strict).name, "cpu");
}

TEST(Offload, SameKindCheaperFirstThenListOrder) {
  std::vector<BackendInfo> b = {backend("gpu-a", BackendKind::gpu, 2.0f, 30.0f),
                                backend("gpu-b", BackendKind::gpu, 1.0f, 30.0f)};
  EXPECT_EQ(chosen(b, Phase::prefill).name, "gpu-b");
  EXPECT_EQ(chosen(b, Phase::decode).name, "gpu-a");  // a tie keeps the first listed
}

TEST(Offload, HotChoosesTheLowestCostTimesPower) {
  // Default power: npu 1, gpu 2, cpu 3. Decode energy: cpu 3*10 = 30, gpu 2*12 = 24, npu 1*28 = 28.
  std::vector<BackendInfo> b = {backend("cpu", BackendKind::cpu, 1.0f, 10.0f, 4),
                                backend("gpu", BackendKind::gpu, 1.0f, 12.0f),
                                backend("npu", BackendKind::npu, 1.0f, 28.0f)};
  EXPECT_EQ(chosen(b, Phase::decode, signals(0.5f)).name, "gpu");  // cool: the npu is 2.8x the fastest
  EXPECT_EQ(chosen(b, Phase::decode, signals(0.95f)).name, "gpu");
  // A slow NPU is still the one to use when energy is what counts.
  b[2].cost_ms_per_token_decode = 22.0f;  // energy 22
  EXPECT_EQ(chosen(b, Phase::decode, signals(0.95f)).name, "npu");
  // Equal energy: preference breaks the tie (gpu 2*11 = 22 = npu).
  b[1].cost_ms_per_token_decode = 11.0f;
  EXPECT_EQ(chosen(b, Phase::decode, signals(0.95f)).name, "npu");
  // The power table is configuration.
  OffloadConfig cfg;
  cfg.power.cpu = 1.0f;
  EXPECT_EQ(chosen(b, Phase::decode, signals(0.95f), cfg).name, "cpu");
}

TEST(Offload, HotThresholdIsInclusiveAndUnknownIsCool) {
  std::vector<BackendInfo> b = {backend("cpu", BackendKind::cpu, 1.0f, 10.0f, 4),
                                backend("gpu", BackendKind::gpu, 1.0f, 12.0f)};
  EXPECT_EQ(chosen(b, Phase::decode, signals(0.9f)).name, "gpu");   // hot: 24 < 30
  EXPECT_EQ(chosen(b, Phase::decode, signals(0.89f)).name, "gpu");  // cool: preference
  b[1].cost_ms_per_token_decode = 16.0f;                            // energy 32 > 30
  EXPECT_EQ(chosen(b, Phase::decode, signals(0.9f)).name, "cpu");
  EXPECT_EQ(chosen(b, Phase::decode, signals(0.89f)).name, "gpu");
  EXPECT_EQ(chosen(b, Phase::decode, signals(NAN)).name, "gpu");
}

TEST(Offload, CpuThreadsFollowTheCoresOthersLeaveFree) {
  const std::vector<BackendInfo> b = {backend("cpu", BackendKind::cpu, 2.0f, 20.0f, 8)};
  EXPECT_EQ(threads(b, Phase::prefill, signals(NAN, 0.0f)), 8);
  EXPECT_EQ(threads(b, Phase::prefill, signals(NAN, 0.5f)), 4);
  EXPECT_EQ(threads(b, Phase::prefill, signals(NAN, 0.75f)), 2);
  EXPECT_EQ(threads(b, Phase::prefill, signals(NAN, 1.0f)), 1);  // never zero
}

TEST(Offload, HotTakesOneCpuThreadAway) {
  const std::vector<BackendInfo> b = {backend("cpu", BackendKind::cpu, 2.0f, 20.0f, 8)};
  EXPECT_EQ(threads(b, Phase::prefill, signals(0.95f)), 7);
  EXPECT_EQ(threads(b, Phase::prefill, signals(0.95f, 0.5f)), 3);
  const std::vector<BackendInfo> one = {backend("cpu", BackendKind::cpu, 2.0f, 20.0f, 1)};
  EXPECT_EQ(threads(one, Phase::prefill, signals(0.95f)), 1);
}

TEST(Offload, BandwidthCapsDecodeThreadsOnly) {
  const std::vector<BackendInfo> b = {backend("cpu", BackendKind::cpu, 2.0f, 20.0f, 8)};
  // 10 GB/s per decode thread by default: 25 GB/s feeds 3 threads.
  EXPECT_EQ(threads(b, Phase::decode, signals(NAN, 0.0f, 25.0f)), 3);
  EXPECT_EQ(threads(b, Phase::prefill, signals(NAN, 0.0f, 25.0f)), 8);  // prefill is compute-bound
  EXPECT_EQ(threads(b, Phase::decode, signals(NAN, 0.0f, 500.0f)), 8);
  EXPECT_EQ(threads(b, Phase::decode, signals(NAN, 0.0f, 1e30f)), 8);
  EXPECT_EQ(threads(b, Phase::decode, signals(NAN, 0.0f, 0.0f)), 1);
  EXPECT_EQ(threads(b, Phase::decode, signals(NAN, 0.0f, NAN)), 8);
}

TEST(Offload, DeviceBackendsKeepTheirHostThreads) {
  const std::vector<BackendInfo> b = {backend("gpu", BackendKind::gpu, 1.0f, 10.0f, 2)};
  EXPECT_EQ(threads(b, Phase::decode, signals(0.95f, 1.0f, 0.0f)), 2);
}

TEST(Offload, RejectsBadInput) {
  const std::vector<BackendInfo> good = trio();
  auto fails = [](const std::vector<BackendInfo>& b, const LiveSignals& live, const OffloadConfig& cfg = {}) {
    auto r = choose_offload(Phase::decode, b, live, cfg);
    return !r.ok() && r.error().code == Status::invalid_argument;
  };
  EXPECT_TRUE(fails(good, signals(NAN, 1.5f)));
  EXPECT_TRUE(fails(good, signals(NAN, -0.1f)));
  EXPECT_TRUE(fails(good, signals(NAN, NAN)));
  EXPECT_TRUE(fails(good, signals(-0.5f)));
  EXPECT_TRUE(fails(good, signals(INFINITY)));
  EXPECT_TRUE(fails(good, signals(NAN, 0.0f, -1.0f)));
  EXPECT_TRUE(fails(good, signals(NAN, 0.0f, INFINITY)));
  for (float bad_cost : {0.0f, -1.0f, NAN, INFINITY}) {
    std::vector<BackendInfo> b = good;
    b[0].cost_ms_per_token_decode = bad_cost;
    EXPECT_TRUE(fails(b, {})) << bad_cost;
  }
  std::vector<BackendInfo> no_threads = good;
  no_threads[0].max_threads = 0;
  EXPECT_TRUE(fails(no_threads, {}));
  OffloadConfig cfg;
  cfg.power.gpu = 0.0f;
  EXPECT_TRUE(fails(good, {}, cfg));
  cfg = {};
  cfg.max_slowdown_vs_fastest = 0.5f;
  EXPECT_TRUE(fails(good, {}, cfg));
  cfg = {};
  cfg.gbps_per_decode_thread = NAN;
  EXPECT_TRUE(fails(good, {}, cfg));
  EXPECT_FALSE(fails(good, {}));
}

}  // namespace
}  // namespace pllm
