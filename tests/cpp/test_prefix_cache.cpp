// PrefixCache (runtime/prefix_cache.*) wired into generate() on the real SmolLM2 file
// (skipped when absent): greedy output is the same with and without the cache for every
// snapshot-capable KV type and across turns; the disk tier survives the cache object (a
// new process), ignores and deletes damaged files, keeps within its byte budget, and one
// cache serves several sessions on several threads.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "real_model.h"
#include "runtime/generator.h"
#include "runtime/prefix_cache.h"
#include "runtime/prefix_reuse.h"

namespace pllm {
namespace {

namespace fs = std::filesystem;
std::shared_ptr<const Model> g_model;

class PrefixCacheTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (access(real_model_path().c_str(), R_OK) != 0) return;
    auto m = Model::load(real_model_path(), false);
    ASSERT_TRUE(m.ok()) << m.error().message;
    g_model = *m;
  }
  static void TearDownTestSuite() { g_model.reset(); }
  void SetUp() override {
    if (!g_model) GTEST_SKIP() << "model not found at " << real_model_path();
    dir_ = fs::temp_directory_path() / ("pllm_prefix_test_" + std::to_string(getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::unique_ptr<Session> session(KvType t, std::shared_ptr<PrefixCache> pc = nullptr) {
    SessionConfig c;
    c.n_ctx = 512;
    c.n_threads = 1;
    c.kv.type = t;
    auto s = Session::create(g_model, c);
    EXPECT_TRUE(s.ok());
    (*s)->set_prefix_cache(std::move(pc));
    return std::move(*s);
  }
  std::shared_ptr<PrefixCache> cache(size_t ram, uint64_t disk = 0, std::vector<std::string>* warnings = nullptr) {
    PrefixCacheParams p;
    p.ram_bytes = ram;
    if (disk) {
      p.dir = dir_.string();
      p.disk_bytes = disk;
    }
    auto c = PrefixCache::create(g_model->identity(), p, [warnings](const std::string& m) {
      if (warnings) warnings->push_back(m);
    });
    EXPECT_TRUE(c.ok());
    return *c;
  }
  fs::path dir_;
};

std::vector<int32_t> tokens(int n, int salt = 0) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(100 + (i * 37 + salt * 11) % 2000);
  return t;
}

struct Out {
  std::vector<int32_t> ids;
  GenerateStats st;
};

Out gen(Session& s, const std::vector<int32_t>& prompt, int max_tokens = 6) {
  GenerateParams p;
  p.sampling.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  Out o;
  auto r = generate(s, prompt, p, [&](int32_t id, std::string_view) {
    if (id >= 0) o.ids.push_back(id);
    return true;
  });
  EXPECT_TRUE(r.ok());
  if (r.ok()) o.st = *r;
  return o;
}

TEST_F(PrefixCacheTest, SameGreedyOutputAcrossTurnsForEveryType) {
  for (KvType t : {KvType::f16, KvType::q8, KvType::q4}) {
    SCOPED_TRACE(kv_type_name(t));
    auto pc = cache(size_t(1) << 30);
    auto ref = session(t);
    // Turn 1 in session a fills the cache; session b (fresh) restores it; turn 2 extends
    // turn 1 with its answer and new text, so b restores a longer prefix again.
    std::vector<int32_t> p1 = tokens(150);
    auto a = session(t, pc);
    const Out r1 = gen(*ref, p1), a1 = gen(*a, p1);
    EXPECT_EQ(a1.ids, r1.ids);
    EXPECT_EQ(a1.st.n_restored, 0);
    auto b = session(t, pc);
    const Out b1 = gen(*b, p1);
    EXPECT_EQ(b1.ids, r1.ids);
    EXPECT_EQ(b1.st.n_restored, 128);
    std::vector<int32_t> p2 = p1;
    p2.insert(p2.end(), r1.ids.begin(), r1.ids.end());
    const auto more = tokens(70, 5);
    p2.insert(p2.end(), more.begin(), more.end());
    auto c = session(t, pc);
    const Out r2 = gen(*ref, p2), a2 = gen(*a, p2), c2 = gen(*c, p2);
    EXPECT_EQ(a2.ids, r2.ids);
    EXPECT_EQ(c2.ids, r2.ids);
    EXPECT_EQ(c2.st.n_restored, 192);  // the prefix turn 2 in session a inserted
    const auto s = pc->stats();
    EXPECT_GE(s.ram_hits, 2u);
    EXPECT_GT(s.restored_tokens, 0u);
  }
}

TEST_F(PrefixCacheTest, DiskTierOutlivesTheCacheAndDropsDamagedFiles) {
  const auto p = tokens(80);  // one 64-position block restored (ASan runs this case: keep it short)
  Out first;
  {
    auto pc = cache(size_t(1) << 30, uint64_t(1) << 30);
    auto s = session(KvType::f16, pc);
    first = gen(*s, p);
    pc->flush();
    EXPECT_EQ(pc->stats().disk_writes, 1u);
  }
  int files = 0;
  for (auto& e : fs::directory_iterator(dir_)) files += e.path().extension() == ".kv";
  EXPECT_EQ(files, 1);
  {  // a new cache object (as a new process would): RAM misses, the disk hits
    auto pc = cache(size_t(1) << 30, uint64_t(1) << 30);
    auto s = session(KvType::f16, pc);
    const Out o = gen(*s, p);
    EXPECT_EQ(o.ids, first.ids);
    EXPECT_EQ(o.st.n_restored, 64);
    EXPECT_EQ(pc->stats().disk_hits, 1u);
  }
  // Corrupt the file: a warning, the file is deleted, the output is unchanged.
  for (auto& e : fs::directory_iterator(dir_)) {
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1000);
    f.put('\x5a');
  }
  {
    std::vector<std::string> warnings;
    auto pc = cache(size_t(1) << 30, uint64_t(1) << 30, &warnings);
    auto s = session(KvType::f16, pc);
    const Out o = gen(*s, p);
    EXPECT_EQ(o.ids, first.ids);
    EXPECT_EQ(o.st.n_restored, 0);
    EXPECT_EQ(pc->stats().disk_bad_files, 1u);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("checksum"), std::string::npos) << warnings[0];
    pc->flush();  // and the recomputed prefix was written again
    EXPECT_EQ(pc->stats().disk_writes, 1u);
  }
  // Truncated file.
  for (auto& e : fs::directory_iterator(dir_)) fs::resize_file(e.path(), 100);
  {
    std::vector<std::string> warnings;
    auto pc = cache(0, uint64_t(1) << 30, &warnings);
    auto s = session(KvType::f16, pc);
    EXPECT_EQ(gen(*s, p).ids, first.ids);
    EXPECT_EQ(warnings.size(), 1u);
  }
}

TEST_F(PrefixCacheTest, BudgetsEvictLeastRecentlyUsed) {
  // Each 128-token f16 snapshot of SmolLM2 is ~2.9 MB: room for one on disk, one in RAM.
  auto pc = cache(size_t(4) << 20, uint64_t(4) << 20);
  auto s = session(KvType::f16, pc);
  gen(*s, tokens(130, 1));
  gen(*s, tokens(130, 2));
  pc->flush();
  const auto st = pc->stats();
  EXPECT_EQ(st.ram_entries, 1u);
  EXPECT_LE(st.ram_bytes, size_t(4) << 20);
  EXPECT_EQ(st.disk_writes, 2u);
  EXPECT_GE(st.disk_evictions, 1u);
  uint64_t total = 0;
  int files = 0;
  for (auto& e : fs::directory_iterator(dir_)) {
    total += fs::file_size(e.path());
    ++files;
  }
  EXPECT_EQ(files, 1);
  EXPECT_LE(total, uint64_t(4) << 20);
  // The survivor is the newer prompt: it restores.
  auto fresh = session(KvType::f16, pc);
  EXPECT_EQ(gen(*fresh, tokens(130, 2)).st.n_restored, 128);
}

TEST_F(PrefixCacheTest, SharedBySessionsOnSeveralThreads) {
  auto pc = cache(size_t(1) << 30, uint64_t(1) << 30);
  const auto p = tokens(140, 3);
  auto ref = session(KvType::f16);
  const auto want = gen(*ref, p).ids;
  std::vector<std::vector<int32_t>> got(3);
  std::vector<std::thread> th;
  for (int i = 0; i < 3; ++i)
    th.emplace_back([&, i] {
      auto s = session(KvType::f16, pc);
      got[size_t(i)] = gen(*s, p).ids;
      got[size_t(i)] = gen(*s, p).ids;  // second turn reuses in-session
    });
  for (auto& t : th) t.join();
  for (auto& g : got) EXPECT_EQ(g, want);
  pc->flush();
}

TEST_F(PrefixCacheTest, WindowedSessionsBypassTheCache) {
  auto pc = cache(size_t(1) << 30);
  SessionConfig c;
  c.n_ctx = 512;
  c.n_threads = 1;
  c.kv.window = 100;
  auto s = Session::create(g_model, c);
  ASSERT_TRUE(s.ok());
  (*s)->set_prefix_cache(pc);
  gen(**s, tokens(150));
  EXPECT_EQ(pc->stats().inserts, 0u);
}

// KV computed with int8 activations differs from exact KV: sessions in different activation
// modes sharing one cache never restore each other's entries; the same mode does.
TEST_F(PrefixCacheTest, ActivationModesDoNotShareEntries) {
  auto pc = cache(size_t(1) << 30);
  auto make = [&](bool int8) {
    SessionConfig c;
    c.n_ctx = 512;
    c.n_threads = 1;
    c.act = int8 ? ActMode::int8 : kDefaultActMode;
    auto s = Session::create(g_model, c);
    EXPECT_TRUE(s.ok());
    (*s)->set_prefix_cache(pc);
    return std::move(*s);
  };
  const std::vector<int32_t> p = tokens(150);
  auto exact = make(false);
  EXPECT_EQ(gen(*exact, p).st.n_restored, 0);
  auto int8 = make(true);
  EXPECT_EQ(gen(*int8, p).st.n_restored, 0) << "an int8 session restored an exact-mode prefix";
  auto int8b = make(true);
  EXPECT_EQ(gen(*int8b, p).st.n_restored, 128) << "same mode must still share";
  auto exact2 = make(false);
  EXPECT_EQ(gen(*exact2, p).st.n_restored, 128);
  EXPECT_NE(exact->compute_tag(), int8->compute_tag());
}

// Prewarm (runtime/prefix_reuse.h): a finished prewarm is reused by generate(); one superseded by
// generate() mid-way leaves the output unchanged; prewarm restores from and fills the cache.
TEST_F(PrefixCacheTest, PrewarmIsPickedUpAndSupersededCleanly) {
  const auto p = tokens(220, 9);
  auto ref = session(KvType::f16);
  const auto want = gen(*ref, p).ids;

  auto a = session(KvType::f16);
  prewarm(*a, std::vector<int32_t>(p.begin(), p.begin() + 150));
  ASSERT_TRUE(a->wait_background().ok());
  EXPECT_EQ(a->history().size(), 150u);
  const Out o = gen(*a, p);
  EXPECT_EQ(o.st.n_reused, 150);
  EXPECT_EQ(o.ids, want);

  auto b = session(KvType::f16);
  prewarm(*b, p);
  const Out ob = gen(*b, p);  // stops the prewarm wherever it is
  EXPECT_EQ(ob.ids, want);
  auto r = b->wait_background();
  EXPECT_TRUE(r.ok() || r.error().code == Status::cancelled);

  auto pc = cache(size_t(1) << 30);
  auto c = session(KvType::f16, pc);
  prewarm(*c, std::vector<int32_t>(p.begin(), p.begin() + 200));
  ASSERT_TRUE(c->wait_background().ok());
  EXPECT_EQ(pc->stats().inserts, 1u);
  auto d = session(KvType::f16, pc);
  prewarm(*d, std::vector<int32_t>(p.begin(), p.begin() + 200));
  ASSERT_TRUE(d->wait_background().ok());
  EXPECT_EQ(pc->stats().restored_tokens, 192u);
  const Out od = gen(*d, p);
  EXPECT_EQ(od.st.n_reused, 200);
  EXPECT_EQ(od.ids, want);
  // A superseding prewarm, then destruction while one runs: no hang, no crash.
  prewarm(*d, tokens(300, 4));
  prewarm(*d, tokens(300, 5));
}

}  // namespace
}  // namespace pllm
