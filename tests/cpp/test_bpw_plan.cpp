// The --target-bpw planner as a pure function: the budget is respected, a larger budget
// never predicts a larger KL, the most sensitive tensors are upgraded first, and bad input
// is an error.
#include <gtest/gtest.h>

#include <random>

#include "quantizer/bpw_plan.h"

namespace pllm {
namespace {

// A tensor of n elements at 4.5 bpw (q4_0) with q6_k / q8_0 / f16 candidates whose KL
// shrinks with the square of the step size, as the sensitivity analysis predicts.
PlanItem item(const std::string& name, uint64_t n, double kl) {
  PlanItem it;
  it.name = name;
  it.n_elements = n;
  it.candidates = {{TensorType::Q4_0, n / 32 * 18, kl},
                   {TensorType::Q6_K, n / 256 * 210, kl / 16},
                   {TensorType::Q8_0, n / 32 * 34, kl / 256},
                   {TensorType::F16, n * 2, kl / 1e6}};
  return it;
}

std::vector<PlanItem> random_items(std::mt19937& rng, int count) {
  std::vector<PlanItem> items;
  std::uniform_int_distribution<int> size(1, 64);
  std::lognormal_distribution<double> kl(-4.0, 2.0);
  for (int i = 0; i < count; ++i) items.push_back(item("t" + std::to_string(i), uint64_t(size(rng)) * 4096, kl(rng)));
  return items;
}

TEST(BpwPlan, RespectsTheBudgetAndIsMonotone) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const auto items = random_items(rng, 40);
    double last_kl = 1e300;
    for (double b = 4.5; b <= 16.5; b += 0.125) {
      auto p = plan_target_bpw(items, b);
      ASSERT_TRUE(p.ok()) << p.error().message;
      EXPECT_LE(p.value().bpw(), b + 1e-12) << "budget " << b;
      EXPECT_LE(p.value().predicted_kl, last_kl * (1 + 1e-12)) << "budget " << b;
      last_kl = p.value().predicted_kl;
      // The predicted KL is the sum of the chosen candidates' KLs.
      double sum = 0;
      uint64_t bytes = 0;
      for (size_t i = 0; i < items.size(); ++i) {
        sum += items[i].candidates[p.value().choice[i]].kl;
        bytes += items[i].candidates[p.value().choice[i]].bytes;
      }
      EXPECT_NEAR(p.value().predicted_kl, sum, 1e-9 * (1 + sum));
      EXPECT_EQ(p.value().bytes, bytes);
    }
    // Everything at f16 fits 16 bits per weight: nothing left at the base type.
    auto all = plan_target_bpw(items, 16.0);
    ASSERT_TRUE(all.ok());
    for (size_t c : all.value().choice) EXPECT_EQ(c, 3u);
  }
}

TEST(BpwPlan, UpgradesTheMostSensitiveTensorFirst) {
  // Three equal tensors; room for one q8_0 upgrade (4.5 -> 8.5 bpw on a third: 5.83 bpw).
  std::vector<PlanItem> items = {item("low", 8192, 0.01), item("high", 8192, 0.5), item("mid", 8192, 0.1)};
  auto p = plan_target_bpw(items, 4.5 + 4.0 / 3.0 + 1e-9);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.value().choice[0], 0u);
  EXPECT_EQ(p.value().choice[2], 0u);
  EXPECT_NE(p.value().choice[1], 0u);
  // The base plan alone when the budget is exactly the base.
  auto b = plan_target_bpw(items, 4.5);
  ASSERT_TRUE(b.ok());
  for (size_t c : b.value().choice) EXPECT_EQ(c, 0u);
  EXPECT_NEAR(b.value().predicted_kl, 0.61, 1e-12);
}

TEST(BpwPlan, SkipsCandidatesThatDoNotHelp) {
  PlanItem it = item("x", 4096, 0.2);
  it.candidates[1].kl = 0.3;  // q6_k predicted worse than the base: never chosen
  auto p = plan_target_bpw({it}, 7.0);  // q8_0 (8.5) does not fit either
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.value().choice[0], 0u);
  auto q = plan_target_bpw({it}, 8.5);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q.value().choice[0], 2u);
}

TEST(BpwPlan, BadInputIsAnError) {
  const auto items = std::vector<PlanItem>{item("a", 4096, 0.1)};
  auto below = plan_target_bpw(items, 4.0);
  ASSERT_FALSE(below.ok());
  EXPECT_NE(below.error().message.find("below"), std::string::npos) << below.error().message;
  EXPECT_FALSE(plan_target_bpw({}, 5.0).ok());
  EXPECT_FALSE(plan_target_bpw(items, -1.0).ok());
  PlanItem nan = item("n", 4096, 0.1);
  nan.candidates[2].kl = -1;
  EXPECT_FALSE(plan_target_bpw({nan}, 8.0).ok());
  PlanItem empty;
  empty.name = "e";
  EXPECT_FALSE(plan_target_bpw({empty}, 8.0).ok());
}

}  // namespace
}  // namespace pllm
