// Gated DeltaNet (qwen35) pieces below the forward pass: the delta-rule kernel
// (KernelTable::delta_rule_step's scalar twin; the other tables equal it: test_act.cpp) against a
// float64 transcription of the rule, and the cache's DeltaNet state (model/kv_cache.h): where truncate() and the snapshots can resume
// (the end, the checkpoint at the newest 64-position boundary, or 0) and that what they
// restore is the state that was there. The forward pass itself is checked against the numpy
// reference and llama.cpp in tests/py/test_qwen35.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/kernels.h"
#include "model/kv_cache.h"

namespace pllm {
namespace {

TEST(DeltaRule, StepMatchesFloat64Rule) {
  for (int n : {1, 7, 32, 33, 128}) {
    std::mt19937 rng{static_cast<uint32_t>(n)};
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_real_distribution<float> ud(0.05f, 0.99f);
    const size_t N = size_t(n);
    std::vector<float> S(N * N, 0.0f), q(N), k(N), v(N), out(N);
    std::vector<double> R(size_t(n) * n, 0.0);  // R[i][j]: key channel i, value channel j
    const float scale = 1.0f / std::sqrt(float(n));
    double worst = 0.0;
    for (int step = 0; step < 20; ++step) {
      for (size_t i = 0; i < N; ++i) {
        q[i] = nd(rng);
        k[i] = nd(rng) / std::sqrt(float(n));
        v[i] = nd(rng);
      }
      const float decay = ud(rng), beta = ud(rng);
      kernels_for(Isa::scalar)->delta_rule_step(S.data(), q.data(), k.data(), v.data(), decay, beta, scale, n,
                                                out.data());
      for (auto& x : R) x *= double(decay);
      std::vector<double> d(N);
      for (int j = 0; j < n; ++j) {
        double sk = 0.0;
        for (int i = 0; i < n; ++i) sk += R[size_t(i) * n + j] * k[size_t(i)];
        d[size_t(j)] = (v[size_t(j)] - sk) * beta;
      }
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) R[size_t(i) * n + j] += double(k[size_t(i)]) * d[size_t(j)];
      for (int j = 0; j < n; ++j) {
        double o = 0.0;
        for (int i = 0; i < n; ++i) o += R[size_t(i) * n + j] * q[size_t(i)];
        o *= double(scale);
        worst = std::max(worst, std::abs(o - double(out[size_t(j)])) / (1.0 + std::abs(o)));
        for (int i = 0; i < n; ++i)  // the state is stored value-major
          ASSERT_NEAR(S[size_t(j) * n + i], R[size_t(i) * n + j], 1e-4 * (1.0 + std::abs(R[size_t(i) * n + j])));
      }
    }
    EXPECT_LT(worst, 1e-5) << "n = " << n;
  }
}

// A qwen35-shaped cache: layers 0 and 1 DeltaNet (3 taps over 2 * 8 + 16 channels, 2 value
// heads of 8), layer 2 attention.
ModelConfig delta_config() {
  ModelConfig c;
  c.n_layer = 3;
  c.n_embd = 64;
  c.n_head = 2;
  c.n_head_kv = 1;
  c.head_dim = 64;
  c.n_rot = 64;
  c.n_ff = 128;
  c.recurrent_layer = {1, 1, 0};
  c.conv_taps = 3;
  c.dn_head = 8;
  c.dn_k_heads = 1;
  c.dn_v_heads = 2;
  return c;
}

class DeltaCache : public ::testing::Test {
 protected:
  ModelConfig c = delta_config();
  const size_t F = c.dn_state_floats();
  const int CD = c.dn_conv_dim();
  // What a forward pass leaves: conv rows and state marked by position, the checkpoint at
  // every 64-boundary the batch crosses (as cpu_delta_net.cpp writes them), batches of 8.
  static float mark(int l, int p, size_t j) { return float(l * 1000000 + p * 100) + float(j % 50); }
  void fill(KvCache& kv, int n, bool skip_layer1 = false) {
    while (kv.end() < n) {
      const int p0 = kv.end(), b = std::min(8, n - p0);
      ASSERT_TRUE(kv.begin_batch(p0, b).ok());
      std::vector<float> kvrow(size_t(c.kv_dim()), 0.5f);
      for (int p = p0; p < p0 + b; ++p) kv.store(2, p, kvrow.data(), kvrow.data());
      for (int l = 0; l < 2; ++l) {
        if (l == 1 && skip_layer1) continue;
        for (int p = p0; p < p0 + b; ++p) {
          for (int j = 0; j < CD; ++j) kv.conv_row(l, p)[j] = mark(l, p, size_t(j));
          for (size_t j = 0; j < F; ++j) kv.delta_state(l)[j] = mark(l, p + 1, j);
          if ((p + 1) % KvCache::kDeltaCheckpoint == 0) {
            std::memcpy(kv.delta_checkpoint(l), kv.delta_state(l), F * sizeof(float));
            for (int t = 0; t < c.conv_taps - 1; ++t)  // the conv rows before p + 1
              std::memcpy(kv.delta_checkpoint_conv(l) + size_t(t) * size_t(CD),
                          kv.conv_row(l, p + 2 - c.conv_taps + t), size_t(CD) * sizeof(float));
            kv.set_delta_checkpoint(l, p + 1);
          }
        }
      }
    }
  }
  // The live state is the one after position n - 1 in every DeltaNet layer, and the ring holds
  // the conv rows before n (what the next step reads).
  bool state_at(KvCache& kv, int n) {
    for (int l = 0; l < 2; ++l) {
      for (size_t j = 0; j < F; ++j)
        if (kv.delta_state(l)[j] != mark(l, n, j)) return false;
      for (int p = std::max(0, n + 1 - c.conv_taps); p < n; ++p)
        for (int j = 0; j < CD; ++j)
          if (kv.conv_row(l, p)[j] != mark(l, p, size_t(j))) return false;
    }
    return true;
  }
};

TEST_F(DeltaCache, TruncateResumesAtTheEndTheCheckpointOrZero) {
  KvCache kv(c, {KvType::f32, 0, 4}, 512, 8, {});
  EXPECT_TRUE(kv.has_delta_state());
  fill(kv, 100);
  EXPECT_EQ(kv.delta_checkpoint_pos(), 64);
  EXPECT_EQ(kv.truncate(100), 100);
  EXPECT_TRUE(state_at(kv, 100));
  EXPECT_EQ(kv.truncate(90), 64);  // no state at 90: the checkpoint's
  EXPECT_TRUE(state_at(kv, 64));
  fill(kv, 100);
  EXPECT_EQ(kv.truncate(63), 0);  // before the checkpoint: only 0
  EXPECT_EQ(kv.delta_checkpoint_pos(), -1);
  fill(kv, 200);  // checkpoints at 64, then 128, then 192
  EXPECT_EQ(kv.delta_checkpoint_pos(), 192);
  EXPECT_EQ(kv.truncate(199), 192);
  EXPECT_TRUE(state_at(kv, 192));
}

TEST_F(DeltaCache, LayersThatDisagreeLeaveNoCheckpoint) {
  KvCache kv(c, {KvType::f32, 0, 4}, 512, 8, {});
  fill(kv, 60);
  fill(kv, 70, /*skip_layer1=*/true);  // a draft without layer 1 (or a step cancelled before it)
  EXPECT_EQ(kv.delta_checkpoint_pos(), -1);
  EXPECT_EQ(kv.truncate(60), 0);
}

TEST_F(DeltaCache, SnapshotsAtTheEndAndTheCheckpointRestoreTheState) {
  KvCache kv(c, {KvType::f16, 0, 4}, 512, 8, {});
  fill(kv, 100);
  const size_t row = size_t(CD) * 4, attn = size_t(c.kv_dim()) * 2 * 2;
  for (int n : {100, 64}) {
    auto bytes = kv.prefix_bytes(n);
    ASSERT_TRUE(bytes.ok()) << bytes.error().message;
    EXPECT_EQ(*bytes, size_t(n) * attn + 2 * (2 * row + F * 4));  // 2 conv rows and the state per DeltaNet layer
    std::vector<uint8_t> snap(*bytes);
    ASSERT_TRUE(kv.export_prefix(n, snap.data()).ok());
    KvCache other(c, {KvType::f16, 0, 4}, 512, 8, {});
    fill(other, 5);
    ASSERT_TRUE(other.import_prefix(n, snap.data(), snap.size()).ok());
    EXPECT_EQ(other.end(), n);
    EXPECT_TRUE(state_at(other, n)) << n;
    for (int l = 0; l < 2; ++l)
      for (int p = n - 2; p < n; ++p) EXPECT_EQ(other.conv_row(l, p)[7], mark(l, p, 7));
    // At a block boundary the restored state is also the checkpoint.
    EXPECT_EQ(other.delta_checkpoint_pos(), n % KvCache::kDeltaCheckpoint == 0 ? n : -1);
  }
  auto no = kv.prefix_bytes(80);
  ASSERT_FALSE(no.ok());
  EXPECT_NE(no.error().message.find("DeltaNet state"), std::string::npos) << no.error().message;
  EXPECT_TRUE(kv.prefix_bytes(0).ok());  // the state at 0 is zeros: nothing to hold
}

}  // namespace
}  // namespace pllm
