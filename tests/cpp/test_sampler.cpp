#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "runtime/sampler.h"

namespace pllm {
namespace {

TEST(Sampler, GreedyPicksArgmax) {
  SamplingConfig c;
  c.temperature = 0;
  Sampler s(c, 5);
  std::vector<float> l = {0.1f, 2.0f, -1.0f, 1.9f, 0.0f};
  EXPECT_EQ(s.sample(l.data(), {}), 1);
}

TEST(Sampler, RepeatPenaltyChangesGreedyChoice) {
  SamplingConfig c;
  c.temperature = 0;
  c.repeat_penalty = 1.5f;
  Sampler s(c, 5);
  std::vector<float> l = {0.1f, 2.0f, -1.0f, 1.9f, 0.0f};
  const int32_t recent[] = {1, 1};
  EXPECT_EQ(s.sample(l.data(), recent), 3);  // 2.0/1.5 < 1.9
  EXPECT_FLOAT_EQ(l[1], 2.0f / 1.5f);        // penalised once despite appearing twice
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedDiffers) {
  auto draw = [](uint64_t seed) {
    SamplingConfig c;
    c.temperature = 1.0f;
    c.top_k = 0;
    c.top_p = 1.0f;
    c.min_p = 0.0f;
    c.seed = seed;
    Sampler s(c, 8);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) {
      std::vector<float> l(8, 0.0f);
      out.push_back(s.sample(l.data(), {}));
    }
    return out;
  };
  EXPECT_EQ(draw(42), draw(42));
  EXPECT_NE(draw(42), draw(43));
}

TEST(Sampler, TopKRestrictsAndDistributionFollowsSoftmax) {
  SamplingConfig c;
  c.temperature = 1.0f;
  c.top_k = 2;
  c.top_p = 1.0f;
  c.min_p = 0.0f;
  c.seed = 7;
  Sampler s(c, 4);
  std::map<int, int> counts;
  const int N = 20000;
  for (int i = 0; i < N; ++i) {
    std::vector<float> l = {0.0f, std::log(3.0f), -5.0f, -0.5f};
    counts[s.sample(l.data(), {})]++;
  }
  EXPECT_EQ(counts.count(2) + counts.count(3), 0u);  // outside the top 2
  // Among {0, 1} with weights 1:3 -> P(1) = 0.75; 5 sigma of a binomial is ~0.015.
  EXPECT_NEAR(double(counts[1]) / N, 0.75, 0.015);
}

TEST(Sampler, TopPAndMinPCut) {
  SamplingConfig c;
  c.temperature = 1.0f;
  c.top_k = 0;
  c.top_p = 0.5f;  // the first token alone has p = 0.6 > 0.5
  c.min_p = 0.0f;
  Sampler s(c, 3);
  for (int i = 0; i < 200; ++i) {
    std::vector<float> l = {std::log(0.6f), std::log(0.3f), std::log(0.1f)};
    ASSERT_EQ(s.sample(l.data(), {}), 0);
  }
  c.top_p = 1.0f;
  c.min_p = 0.4f;  // cut = 0.24: keeps 0 and 1, never 2
  Sampler m(c, 3);
  for (int i = 0; i < 500; ++i) {
    std::vector<float> l = {std::log(0.6f), std::log(0.3f), std::log(0.1f)};
    ASSERT_NE(m.sample(l.data(), {}), 2);
  }
}

}  // namespace
}  // namespace pllm
