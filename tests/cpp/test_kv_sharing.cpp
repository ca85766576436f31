// KvCache with Gemma 4's layout: layers of different widths (ModelConfig::head_dim_layer) and
// layers that share another layer's keys and values (ModelConfig::kv_source).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/kv_format.h"
#include "model/kv_cache.h"
#include "kv_test_model.h"

namespace pllm {
namespace {

using namespace kvtest;

// Gemma 4: layers of two widths, the last two sharing layers 0 and 1's keys and values. The shared
// layers cost nothing (the cache is the two-layer one's size), read their source's rows, and
// have no part in snapshots; a per-layer window that has not wrapped can be snapshotted.
TEST(KvSharing, SharedLayersAndPerLayerWidths) {
  ModelConfig c = tiny_config(4);
  c.head_dim = 2 * kHd;
  c.head_dim_layer = {kHd, 2 * kHd, kHd, 2 * kHd};
  c.kv_source = {0, 1, 0, 1};
  ModelConfig own = c;
  own.n_layer = 2;
  own.head_dim_layer = {kHd, 2 * kHd};
  own.kv_source.clear();
  for (KvType t : {KvType::f32, KvType::f16, KvType::q8, KvType::q4}) {
    KvCache shared(c, {t, 0, 4}, 256, 16, {32, 0, 32, 0});
    KvCache two(own, {t, 0, 4}, 256, 16, {32, 0});
    EXPECT_EQ(shared.bytes(), two.bytes()) << kv_type_name(t);
    EXPECT_TRUE(shared.layer_shared(2) && shared.layer_shared(3) && !shared.layer_shared(1));
    EXPECT_EQ(shared.layer_kv_dim(1), 2 * kDim);
    EXPECT_EQ(shared.layer_kv_dim(2), kDim);
  }
  KvCache kv(c, {KvType::f32, 0, 4}, 256, 16, {32, 0, 32, 0});
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  std::vector<float> k(2 * kDim), v(2 * kDim);
  ASSERT_TRUE(kv.begin_batch(0, 20).ok());
  for (int p = 0; p < 20; ++p)
    for (int l = 0; l < 2; ++l) {
      for (float& x : k) x = nd(rng);
      for (float& x : v) x = nd(rng);
      kv.store(l, p, k.data(), v.data());
    }
  const auto inv = rope_inv_freq();
  const RopeSpec rope{inv.data(), kHd, false};
  std::vector<float> q(2 * kHd), a(2 * kHd), b(2 * kHd);
  for (float& x : q) x = nd(rng);
  for (int l = 2; l < 4; ++l) {  // the same rows as the source layer: bit for bit
    for (int kvh = 0; kvh < kKvHeads; ++kvh) {
      const int hd = c.head_dim_at(l);
      AttnAccum x, y;
      attn_accum_init(x, hd);
      attn_accum_init(y, hd);
      kv.attend_part(l, 19, kvh, 1, q.data(), 0.125f, rope, 0, 1, &x);
      kv.attend_part(l - 2, 19, kvh, 1, q.data(), 0.125f, rope, 0, 1, &y);
      attn_accum_finish(x, hd, a.data());
      attn_accum_finish(y, hd, b.data());
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), size_t(hd) * 4)) << "layer " << l;
    }
  }
  // Snapshot of 16 positions: only the two own layers' rows, restored bit for bit.
  auto n = kv.prefix_bytes(16);
  ASSERT_TRUE(n.ok()) << n.error().message;
  EXPECT_EQ(*n, size_t(16) * (kDim + 2 * kDim) * 4 * 2);
  std::vector<uint8_t> snap(*n);
  ASSERT_TRUE(kv.export_prefix(16, snap.data()).ok());
  KvCache back(c, {KvType::f32, 0, 4}, 256, 16, {32, 0, 32, 0});
  ASSERT_TRUE(back.import_prefix(16, snap.data(), snap.size()).ok());
  for (int l = 0; l < 4; ++l) {
    const int hd = c.head_dim_at(l);
    AttnAccum x, y;
    attn_accum_init(x, hd);
    attn_accum_init(y, hd);
    kv.attend_part(l, 15, 1, 1, q.data(), 0.125f, rope, 0, 1, &x);
    back.attend_part(l, 15, 1, 1, q.data(), 0.125f, rope, 0, 1, &y);
    attn_accum_finish(x, hd, a.data());
    attn_accum_finish(y, hd, b.data());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), size_t(hd) * 4)) << "layer " << l;
  }
  // Past its ring (32 + 16 - 1 positions, rounded to 48) a windowed layer has overwritten slots.
  ASSERT_TRUE(kv.begin_batch(20, 40).ok());
  for (int p = 20; p < 60; ++p)
    for (int l = 0; l < 2; ++l) kv.store(l, p, k.data(), v.data());
  EXPECT_FALSE(kv.prefix_bytes(16).ok());
}

}  // namespace
}  // namespace pllm
