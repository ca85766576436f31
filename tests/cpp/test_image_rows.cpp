// ImageRows (runtime/image_rows.h), the store behind image rows in a session's history: ids map
// to their tile and row, runs stop where the tile's rows stop, a tile is encoded once however
// many callers ask at once (this binary also runs under TSan), a failed encode is tried again,
// the least recently used tiles are forgotten past kMaxTiles, and ids that clash are refused.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "runtime/image_rows.h"

using namespace pllm;

namespace {

// A tile of rows ids first, first - 1, ...; each row's embedding is its id in every column.
std::shared_ptr<ImageTile> tile(int32_t first, int rows, std::atomic<int>* calls = nullptr, bool bidirectional = false,
                                int sleep_ms = 0) {
  auto t = std::make_shared<ImageTile>();
  for (int r = 0; r < rows; ++r) t->ids.push_back(first - r);
  t->bidirectional = bidirectional;
  const std::vector<int32_t> ids = t->ids;
  t->encode = [ids, calls, sleep_ms](ThreadPool&) -> Result<std::vector<float>> {
    if (calls) ++*calls;
    if (sleep_ms) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    std::vector<float> v;
    for (int32_t id : ids) v.insert(v.end(), 4, float(id));
    return v;
  };
  return t;
}

}  // namespace

TEST(ImageRows, RunsFollowTheTilesRows) {
  ImageRows rows;
  ASSERT_TRUE(rows.add(tile(-10, 3)).ok());
  ASSERT_TRUE(rows.add(tile(-20, 2, nullptr, true)).ok());
  const std::vector<int32_t> ids = {-10, -11, -12, -20, -21, 5};
  auto a = rows.run_at(ids);
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->first_row, 0);
  EXPECT_EQ(a->n, 3);
  EXPECT_FALSE(a->tile->bidirectional);
  auto b = rows.run_at(std::span<const int32_t>(ids).subspan(1));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->first_row, 1);
  EXPECT_EQ(b->n, 2);
  auto c = rows.run_at(std::span<const int32_t>(ids).subspan(3));
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->tile->bidirectional);
  EXPECT_EQ(c->n, 2);
  // Rows out of order: the run stops at the first row that is not the next one.
  const std::vector<int32_t> skip = {-10, -12};
  EXPECT_EQ(rows.run_at(skip)->n, 1);
  EXPECT_TRUE(rows.contains(-21));
  EXPECT_FALSE(rows.contains(-22));
  const std::vector<int32_t> unknown = {-99};
  auto u = rows.run_at(unknown);
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.error().code, Status::invalid_argument);
  EXPECT_NE(u.error().message.find("send the image again"), std::string::npos);
}

TEST(ImageRows, EncodesOnceAndKeepsTheResult) {
  ImageRows rows;
  ThreadPool pool(1);
  std::atomic<int> calls{0};
  auto t = tile(-5, 2, &calls);
  ASSERT_TRUE(rows.add(t).ok());
  auto e1 = rows.embeddings(*t, pool);
  auto e2 = rows.embeddings(*t, pool);
  ASSERT_TRUE(e1.ok() && e2.ok());
  EXPECT_EQ(e1->get(), e2->get());
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(rows.encodes(), 1);
  ASSERT_EQ((*e1)->size(), 8u);
  EXPECT_EQ((**e1)[4], -6.0f);
  // The same image again (a new tile object with the same ids): recognised, not encoded again.
  ASSERT_TRUE(rows.add(tile(-5, 2, &calls)).ok());
  EXPECT_EQ(rows.size(), 1u);
  EXPECT_TRUE(rows.embeddings(*t, pool).ok());
  EXPECT_EQ(calls.load(), 1);
}

TEST(ImageRows, CallersAtOnceShareOneEncode) {
  ImageRows rows;
  ThreadPool pool(1);
  std::atomic<int> calls{0};
  auto t = tile(-7, 3, &calls, false, 50);
  ASSERT_TRUE(rows.add(t).ok());
  std::vector<std::thread> threads;
  std::vector<const std::vector<float>*> got(4, nullptr);
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      auto e = rows.embeddings(*t, pool);
      if (e.ok()) got[size_t(i)] = e->get();
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(calls.load(), 1);
  for (const auto* p : got) EXPECT_EQ(p, got[0]);
  EXPECT_NE(got[0], nullptr);
}

TEST(ImageRows, AFailedEncodeIsTriedAgain) {
  ImageRows rows;
  ThreadPool pool(1);
  auto t = tile(-3, 1);
  int tries = 0;
  auto good = t->encode;
  t->encode = [&tries, good](ThreadPool& p) -> Result<std::vector<float>> {
    if (++tries == 1) return make_error(Status::out_of_memory, "no memory this time");
    return good(p);
  };
  ASSERT_TRUE(rows.add(t).ok());
  auto e = rows.embeddings(*t, pool);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code, Status::out_of_memory);
  EXPECT_TRUE(rows.embeddings(*t, pool).ok());
  EXPECT_EQ(tries, 2);
}

TEST(ImageRows, ForgetsTheLeastRecentlyUsedTiles) {
  ImageRows rows;
  const int n = int(ImageRows::kMaxTiles) + 1;
  for (int i = 0; i < n; ++i) ASSERT_TRUE(rows.add(tile(-1 - 4 * i, 4)).ok());
  EXPECT_EQ(rows.size(), ImageRows::kMaxTiles);
  const std::vector<int32_t> first = {-1}, second = {-5};
  EXPECT_FALSE(rows.run_at(first).ok());  // the oldest went
  EXPECT_TRUE(rows.run_at(second).ok());
  ASSERT_TRUE(rows.add(tile(-1 - 4 * n, 4)).ok());  // -5 was used just now: the next oldest goes
  EXPECT_TRUE(rows.run_at(second).ok());
  const std::vector<int32_t> third = {-9};
  EXPECT_FALSE(rows.run_at(third).ok());
}

TEST(ImageRows, RefusesClashingAndNonNegativeIds) {
  ImageRows rows;
  ASSERT_TRUE(rows.add(tile(-10, 3)).ok());
  auto clash = rows.add(tile(-11, 2));  // -11 is a row of the first tile
  ASSERT_FALSE(clash.ok());
  auto positive = rows.add(tile(2, 1));
  ASSERT_FALSE(positive.ok());
  EXPECT_EQ(positive.error().code, Status::invalid_argument);
  auto below = rows.add(tile(kMinImageRowId, 2));  // kMinImageRowId, then one below it
  ASSERT_FALSE(below.ok());
  EXPECT_FALSE(rows.add(nullptr).ok());
  EXPECT_EQ(rows.size(), 1u);
}
