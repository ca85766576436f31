// KV snapshots (model/kv_snapshot.*, Session::save_prefix / restore_prefix) on the real
// SmolLM2 file (skipped when absent): for every KV type a restored session gives logits
// bit-identical to the session that computed the prefix; damaged or foreign snapshots are
// refused with an error and leave the session as it was.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <unistd.h>
#include <vector>

#include "base/hash.h"
#include "model/kv_snapshot.h"
#include "real_model.h"
#include "runtime/session.h"

namespace pllm {
namespace {

std::shared_ptr<const Model> g_model;

class KvSnapshot : public ::testing::Test {
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
  }
  static std::unique_ptr<Session> session(KvType t, int window = 0) {
    SessionConfig c;
    c.n_ctx = 256;
    c.n_threads = 2;
    c.kv.type = t;
    c.kv.window = window;
    auto s = Session::create(g_model, c);
    EXPECT_TRUE(s.ok());
    return std::move(*s);
  }
};

std::vector<int32_t> tokens(int n, int salt = 0) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(100 + (i * 37 + salt * 11) % 2000);
  return t;
}

// Logits of every one of `next` after whatever the session holds, then of one more token
// decoded on its own.
std::vector<float> continue_logits(Session& s, const std::vector<int32_t>& next) {
  const size_t nv = size_t(s.model().config().n_vocab);
  std::vector<float> all(next.size() * nv);
  EXPECT_TRUE(s.eval(next, all.data()).ok());
  const int32_t one[1] = {next[0]};
  EXPECT_TRUE(s.eval_last(one).ok());
  all.insert(all.end(), s.last_logits(), s.last_logits() + nv);
  return all;
}

TEST_F(KvSnapshot, RoundTripIsBitIdenticalForEveryType) {
  for (KvType t : {KvType::f32, KvType::f16, KvType::q8, KvType::q4}) {
    SCOPED_TRACE(kv_type_name(t));
    // 100 = three quantised q4 groups + a 4-row tail; 64 ends on a group boundary.
    for (int n : {100, 64}) {
      auto a = session(t);
      const auto prompt = tokens(100);
      ASSERT_TRUE(a->eval_last(prompt).ok());
      a->truncate(size_t(n));
      ASSERT_EQ(a->history().size(), size_t(n));
      auto snap = a->save_prefix(size_t(n));
      ASSERT_TRUE(snap.ok()) << snap.error().message;
      auto b = session(t);
      ASSERT_TRUE(b->eval_last(tokens(20, 3)).ok());  // unrelated contents are replaced
      auto r = b->restore_prefix(*snap);
      ASSERT_TRUE(r.ok()) << r.error().message;
      EXPECT_EQ(b->history(), a->history());
      const auto next = tokens(40, 7);  // crosses a q4 group boundary after the restore
      const auto la = continue_logits(*a, next), lb = continue_logits(*b, next);
      ASSERT_EQ(la.size(), lb.size());
      EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)), 0);
    }
  }
}

TEST_F(KvSnapshot, Q4OnlyWhereTheCacheCanResume) {
  // A partial group is exported from its f16 rows, which the cache keeps for the newest
  // group + one batch (32 + 64 = 96 positions here).
  auto a = session(KvType::q4);
  ASSERT_TRUE(a->eval_last(tokens(100)).ok());
  EXPECT_TRUE(a->save_prefix(40).ok());   // quantised group, f16 rows still kept
  EXPECT_TRUE(a->save_prefix(64).ok());
  EXPECT_TRUE(a->save_prefix(98).ok());   // inside the newest group
  EXPECT_FALSE(a->save_prefix(101).ok()); // more than the session holds
  auto b = session(KvType::q4);
  ASSERT_TRUE(b->eval_last(tokens(200)).ok());
  EXPECT_FALSE(b->save_prefix(40).ok());  // its f16 rows are gone: only group boundaries
  EXPECT_TRUE(b->save_prefix(64).ok());
  EXPECT_TRUE(b->save_prefix(130).ok());  // 128 >= 200 - 96
}

TEST_F(KvSnapshot, WindowedCacheRefuses) {
  auto a = session(KvType::f16, 64);
  ASSERT_TRUE(a->eval_last(tokens(30)).ok());
  auto snap = a->save_prefix(30);
  ASSERT_FALSE(snap.ok());
  EXPECT_EQ(snap.error().code, Status::unsupported);
}

TEST_F(KvSnapshot, DamagedOrForeignSnapshotsAreRefused) {
  auto a = session(KvType::f16);
  ASSERT_TRUE(a->eval_last(tokens(70)).ok());
  auto snap = a->save_prefix(70);
  ASSERT_TRUE(snap.ok());
  const std::vector<uint8_t> good = *snap;
  auto b = session(KvType::f16);
  ASSERT_TRUE(b->eval_last(tokens(5, 1)).ok());
  const auto before = b->history();
  auto refused = [&](const std::vector<uint8_t>& bytes, Status code) {
    auto r = b->restore_prefix(bytes);
    EXPECT_FALSE(r.ok());
    if (!r.ok()) {
      EXPECT_EQ(r.error().code, code) << r.error().message;
    }
    EXPECT_EQ(b->history(), before);
  };
  for (size_t at : {size_t(3), size_t(20), size_t(64), size_t(64 + 70 * 4 + 5), good.size() - 1}) {
    auto bad = good;
    bad[at] ^= 0x10;
    refused(bad, Status::bad_format);
  }
  refused(std::vector<uint8_t>(good.begin(), good.end() - 1), Status::bad_format);
  refused(std::vector<uint8_t>(good.begin(), good.begin() + 40), Status::bad_format);
  refused({}, Status::bad_format);
  auto old = good;
  old[8] = 0;  // format version 0
  refused(old, Status::bad_format);
  // Another model: same bytes under a different identity (the checksum is valid).
  auto foreign = make_kv_snapshot(a->kv_cache(), g_model->identity() ^ 1, a->history());
  ASSERT_TRUE(foreign.ok());
  refused(*foreign, Status::invalid_argument);
  // Another KV type.
  auto q8 = session(KvType::q8);
  ASSERT_TRUE(q8->eval_last(tokens(70)).ok());
  auto q8_snap = q8->save_prefix(70);
  ASSERT_TRUE(q8_snap.ok());
  refused(*q8_snap, Status::invalid_argument);
  // And the good one still restores.
  EXPECT_TRUE(b->restore_prefix(good).ok());
  EXPECT_EQ(b->history(), a->history());
}

TEST(Hash, IndependentOfHowTheInputIsSplit) {
  std::vector<uint8_t> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 7 + 3);
  const uint64_t whole = hash64(data.data(), data.size());
  for (size_t cut : {1, 3, 8, 13, 999}) {
    Hasher h;
    h.update(data.data(), cut);
    h.update(data.data() + cut, data.size() - cut);
    EXPECT_EQ(h.digest(), whole);
  }
  EXPECT_NE(hash64(data.data(), 999), whole);
  data[500] ^= 1;
  EXPECT_NE(hash64(data.data(), data.size()), whole);
}

TEST_F(KvSnapshot, ModelIdentityIsStable) {
  EXPECT_NE(g_model->identity(), 0u);
  auto again = Model::load(real_model_path(), true);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->identity(), g_model->identity());
}

}  // namespace
}  // namespace pllm
