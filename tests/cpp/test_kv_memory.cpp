// KV memory grows with use (model/kv_cache.h, base/reserved_memory.h): committed bytes
// follow the KV blocks in use, shrink on truncate / reset / a shorter imported prefix, stop
// at the ring of a windowed layer; refilling released blocks gives bit-identical attention;
// and the C API reports it for a real session (skipped without the model file).
#include <gtest/gtest.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "base/reserved_memory.h"
#include "kernels/kernels.h"
#include "model/kv_cache.h"
#include "pocketllm/pocketllm.h"
#include "real_model.h"

namespace pllm {
namespace {

constexpr int kHd = 64;
constexpr int kDim = 2 * kHd;  // two kv heads
constexpr int B = KvCache::kBlock;

ModelConfig tiny_config(int n_layer) {
  ModelConfig c;
  c.n_layer = n_layer;
  c.n_embd = 128;
  c.n_head = 4;
  c.n_head_kv = 2;
  c.head_dim = kHd;
  c.n_rot = kHd;
  c.n_ff = 256;
  return c;
}

size_t page_up(size_t n) {
  const size_t p = ReservedMemory::page_size();
  return (n + p - 1) / p * p;
}
int blocks(int n) { return (n + B - 1) / B; }

// Keys and values of position p (layer l): a fixed function, so a refill stores the same.
void kv_row(int l, int p, std::vector<float>& k, std::vector<float>& v) {
  std::mt19937 rng(unsigned(p * 131 + l));
  std::normal_distribution<float> nd;
  k.resize(kDim);
  v.resize(kDim);
  for (int i = 0; i < kDim; ++i) k[size_t(i)] = nd(rng), v[size_t(i)] = nd(rng);
}

// Stores positions end() .. n - 1 in batches of `batch`.
void fill(KvCache& kv, int n, int batch = 1) {
  std::vector<float> k, v;
  while (kv.end() < n) {
    const int p0 = kv.end(), m = std::min(batch, n - p0);
    ASSERT_TRUE(kv.begin_batch(p0, m).ok());
    for (int l = 0; l < kv.n_layer(); ++l)
      for (int p = p0; p < p0 + m; ++p) {
        kv_row(l, p, k, v);
        kv.store(l, p, k.data(), v.data());
      }
  }
}

// Committed bytes of a cache without a window holding n of n_ctx positions, from the layout
// the header describes: per layer, each array page-aligned, rows up to the block holding
// n - 1 (the last block ends at n_ctx).
size_t expected_committed(KvType t, int n_layer, int n, int n_ctx = 1000) {
  const size_t slots = size_t(std::min(blocks(n) * B, n_ctx));
  switch (t) {
    case KvType::f32: return size_t(n_layer) * 2 * page_up(slots * kDim * 4);
    case KvType::f16: return size_t(n_layer) * 2 * page_up(slots * kDim * 2);
    case KvType::q8: return size_t(n_layer) * 2 * (page_up(slots * kDim) + page_up(slots * (kDim / 64) * 4));
    case KvType::q4: break;
  }
  return 0;
}

class KvMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!ReservedMemory::grows_on_demand()) GTEST_SKIP() << "plain allocation on this platform: nothing grows";
  }
};

#if defined(__linux__)
// Pages of [p, p + len) resident in memory (mincore), so the test sees the system's view,
// not the cache's own bookkeeping.
size_t resident_pages(const uint8_t* p, size_t len) {
  const size_t page = ReservedMemory::page_size(), n = (len + page - 1) / page;
  std::vector<unsigned char> v(n);
  if (mincore(const_cast<uint8_t*>(p), len, v.data()) != 0) return SIZE_MAX;
  size_t r = 0;
  for (unsigned char x : v) r += x & 1;
  return r;
}

TEST_F(KvMemory, ReservedMemoryCommitsAndReleasesPages) {
  const size_t page = ReservedMemory::page_size();
  ReservedMemory m(64 * page + 1);
  ASSERT_EQ(m.size(), 65 * page);
  EXPECT_EQ(resident_pages(m.data(), m.size()), 0u);  // reserved, nothing touched
  ASSERT_TRUE(m.commit(8 * page, 16 * page));
  EXPECT_EQ(resident_pages(m.data(), m.size()), 16u);
  EXPECT_EQ(resident_pages(m.data() + 8 * page, 16 * page), 16u);
  m.data()[8 * page + 5] = 42;
  m.data()[23 * page] = 7;
  m.release(16 * page, 8 * page);
  EXPECT_EQ(resident_pages(m.data(), m.size()), 8u);
  EXPECT_EQ(m.data()[8 * page + 5], 42);  // the kept pages keep their data
  EXPECT_EQ(m.data()[23 * page], 0);      // a released page reads as zero
  ReservedMemory moved = std::move(m);
  EXPECT_EQ(m.data(), nullptr);
  EXPECT_EQ(moved.data()[8 * page + 5], 42);
}
#endif

TEST_F(KvMemory, CommittedGrowsByBlocksAndShrinksOnTruncate) {
  const ModelConfig c = tiny_config(2);
  for (KvType t : {KvType::f32, KvType::f16, KvType::q8}) {
    SCOPED_TRACE(kv_type_name(t));
    KvCache kv(c, {t, 0, 4}, 1000, 16, {});
    EXPECT_EQ(kv.committed_bytes(), 0u);  // nothing before the first store
    for (int n : {1, 63, 64, 65, 128, 129, 300, 1000}) {
      fill(kv, n, 7);
      EXPECT_EQ(kv.committed_bytes(), expected_committed(t, 2, n)) << n << " positions";
    }
    EXPECT_EQ(kv.committed_bytes(), kv.bytes());  // a full cache holds what it reserved
    EXPECT_EQ(kv.truncate(130), 130);
    EXPECT_EQ(kv.committed_bytes(), expected_committed(t, 2, 130));
    EXPECT_EQ(kv.truncate(64), 64);
    EXPECT_EQ(kv.committed_bytes(), expected_committed(t, 2, 64));
    EXPECT_EQ(kv.truncate(0), 0);  // Session::reset
    EXPECT_EQ(kv.committed_bytes(), 0u);
    fill(kv, 200, 16);
    EXPECT_EQ(kv.committed_bytes(), expected_committed(t, 2, 200));
  }
}

TEST_F(KvMemory, Q4CommitsTailAndGroupsByBlocks) {
  const ModelConfig c = tiny_config(1);
  KvCache kv(c, {KvType::q4, 0, 4}, 4096, 8, {});
  // The f16 rows of the newest positions: a ring of round_up(G + batch, G) = 64 rows, K and V.
  const size_t tail = 2 * page_up(64 * kDim * 2);
  // A group block (kv_cache.cpp): k scale+min [D] f16 | codes [G][D/2] | v scale+min [G][D/32]
  // f16 | codes [G][D/2], each part 128-byte aligned; a KV block is two groups.
  const size_t group = 4 * kDim + 32 * kDim / 2 + 32 * (kDim / 32) * 4 + 32 * kDim / 2;
  EXPECT_EQ(kv.committed_bytes(), 0u);
  for (int n : {1, 31, 32, 63, 64, 95, 96, 200, 1000}) {
    fill(kv, n, 8);
    const size_t groups = size_t((n / 32 + 1) / 2 * 2);  // complete groups, rounded to a block
    EXPECT_EQ(kv.committed_bytes(), tail + page_up(groups * group)) << n << " positions";
  }
  EXPECT_LT(kv.committed_bytes() * 3, kv.bytes());  // 4096 positions reserved
  EXPECT_EQ(kv.truncate(40), 32);                   // the group at 32 is quantised: resume at its start
  EXPECT_EQ(kv.committed_bytes(), tail + page_up(2 * group));
  EXPECT_EQ(kv.truncate(0), 0);
  EXPECT_EQ(kv.committed_bytes(), 0u);
}

TEST_F(KvMemory, WindowedLayersStopAtTheirRing) {
  const ModelConfig c = tiny_config(2);
  for (KvType t : {KvType::f16, KvType::q8, KvType::q4}) {
    SCOPED_TRACE(kv_type_name(t));
    KvCache kv(c, {t, 100, 4}, 16, 4, {});  // 4 sinks + a ring of ~100: under two blocks
    fill(kv, 50, 4);
    const size_t early = kv.committed_bytes();
    fill(kv, 400, 4);
    const size_t full = kv.committed_bytes();
    EXPECT_GT(full, early);
    EXPECT_EQ(full, kv.bytes());  // all of the ring, nothing more
    fill(kv, 1500, 4);
    EXPECT_EQ(kv.committed_bytes(), full);  // wrapping many times commits nothing new
  }
  // Gemma-style local layer 0 (window 8) beside a global layer 1 of 4096 positions: the
  // local layer stays at its ring while the global one grows.
  KvCache mixed(c, {KvType::f16, 0, 4}, 4096, 1, {8, 0});
  KvCache global(tiny_config(1), {KvType::f16, 0, 4}, 4096, 1, {});
  fill(mixed, 300);
  fill(global, 300);
  const size_t ring = mixed.committed_bytes() - global.committed_bytes();
  EXPECT_EQ(ring, 2 * page_up(8 * kDim * 2));  // 8 slots of K and of V (ring rounded to 8)
}

// Attention at the last position of every layer and kv head (bitwise), through attend_part.
std::vector<float> attend_all(const KvCache& kv, int pos) {
  std::vector<float> inv_freq(kHd / 2, 0.01f), out;
  const RopeSpec rope{inv_freq.data(), kHd, false};
  std::vector<float> q(kHd);
  for (int i = 0; i < kHd; ++i) q[size_t(i)] = 0.05f * float(i % 7) - 0.1f;
  for (int l = 0; l < kv.n_layer(); ++l)
    for (int h = 0; h < 2; ++h) {
      AttnAccum a;
      attn_accum_init(a, kHd);
      kv.attend_part(l, pos, h, 1, q.data(), 0.125f, rope, 0, 1, &a);
      float o[kHd];
      attn_accum_finish(a, kHd, o);
      out.insert(out.end(), o, o + kHd);
    }
  return out;
}

TEST_F(KvMemory, RefillAfterReleaseGivesTheSameAttention) {
  const ModelConfig c = tiny_config(2);
  for (KvType t : {KvType::f32, KvType::f16, KvType::q8, KvType::q4})
    for (int window : {0, 70}) {
      SCOPED_TRACE(std::string(kv_type_name(t)) + " window " + std::to_string(window));
      KvCache kv(c, {t, window, 4}, 512, 8, {});
      fill(kv, 300, 8);
      const std::vector<float> before = attend_all(kv, 299);
      const size_t committed = kv.committed_bytes();
      const int m = kv.truncate(window ? 250 : 100);  // no window: back across several blocks
      ASSERT_GT(m, 0);
      if (window == 0) {
        EXPECT_LT(kv.committed_bytes(), committed);
      }
      fill(kv, 300, 8);
      EXPECT_EQ(kv.committed_bytes(), committed);
      const std::vector<float> after = attend_all(kv, 299);
      ASSERT_EQ(before.size(), after.size());
      EXPECT_EQ(0, std::memcmp(before.data(), after.data(), before.size() * sizeof(float)));
    }
}

TEST_F(KvMemory, ShorterImportedPrefixReleasesBlocks) {
  const ModelConfig c = tiny_config(2);
  KvCache src(c, {KvType::f16, 0, 4}, 1024, 8, {});
  fill(src, 40);
  std::vector<uint8_t> snap(src.prefix_bytes(40).value());
  ASSERT_TRUE(src.export_prefix(40, snap.data()).ok());
  KvCache dst(c, {KvType::f16, 0, 4}, 1024, 8, {});
  fill(dst, 700, 8);
  ASSERT_TRUE(dst.import_prefix(40, snap.data(), snap.size()).ok());
  EXPECT_EQ(dst.end(), 40);
  EXPECT_EQ(dst.committed_bytes(), expected_committed(KvType::f16, 2, 40, 1024));
  KvCache fresh(c, {KvType::f16, 0, 4}, 1024, 8, {});  // an empty cache commits what it imports
  ASSERT_TRUE(fresh.import_prefix(40, snap.data(), snap.size()).ok());
  EXPECT_EQ(fresh.committed_bytes(), expected_committed(KvType::f16, 2, 40, 1024));
  fill(dst, 300, 8);
  fill(src, 300, 8);
  EXPECT_EQ(0, std::memcmp(attend_all(dst, 299).data(), attend_all(src, 299).data(), 2 * 2 * kHd * sizeof(float)));
}

TEST_F(KvMemory, SessionThroughTheCApi) {
  if (access(real_model_path().c_str(), R_OK) != 0) GTEST_SKIP() << "model not found at " << real_model_path();
  pllm_model_params mp = pllm_model_default_params();
  pllm_model* model = nullptr;
  ASSERT_EQ(pllm_model_load(real_model_path().c_str(), &mp, &model), PLLM_OK);
  pllm_session_params sp = pllm_session_default_params();
  sp.n_ctx = 4096;
  sp.n_threads = 2;
  pllm_session* s = nullptr;
  ASSERT_EQ(pllm_session_create(model, &sp, &s), PLLM_OK);
  const uint64_t reserved = pllm_session_kv_bytes(s);
  EXPECT_EQ(pllm_session_kv_committed_bytes(s), 0u);
  const pllm_token prompt[] = {1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47};
  ASSERT_EQ(pllm_session_eval(s, prompt, 10, nullptr), PLLM_OK);
  const uint64_t one_block = pllm_session_kv_committed_bytes(s);
  EXPECT_GT(one_block, 0u);
  EXPECT_EQ(one_block * (4096 / B), reserved);  // f16 rows: every block the same size
  pllm_session_reset(s);
  EXPECT_EQ(pllm_session_kv_committed_bytes(s), 0u);
  EXPECT_EQ(pllm_session_kv_committed_bytes(nullptr), 0u);
  pllm_session_free(s);
  pllm_model_free(model);
}

}  // namespace
}  // namespace pllm
