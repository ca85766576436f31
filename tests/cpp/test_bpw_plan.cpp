// The --target-bpw planner as a pure function: the budget is respected, a larger budget
// never predicts a larger KL, the most sensitive tensors are upgraded first, the plan
// starts at each tensor's cheapest candidate (an equally sized, more accurate type is
// taken at no cost; a cheaper one than the base frees bits), and bad input is an error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
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

// A tensor at 4.5 bpw whose candidates include types as cheap as and cheaper than the base:
// q4_k (4.5 bpw), a hypothetical 2-bit type (q2 here stands in as BF16 with 2-bit bytes:
// the planner only sees bytes and KL), and the usual upgrades.
PlanItem wide_item(const std::string& name, uint64_t n, double kl, double q4k_factor, double cheap_factor) {
  PlanItem it = item(name, n, kl);
  it.candidates.push_back({TensorType::Q4_K, n / 256 * 144, kl * q4k_factor});
  it.candidates.push_back({TensorType::BF16, n / 4, kl * cheap_factor});
  return it;
}

TEST(BpwPlan, EquallySizedMoreAccurateTypeIsTakenWithoutSlack) {
  // q4_k has exactly q4_0's bytes: at a budget of exactly 4.5 bpw it replaces q4_0 where
  // it is predicted better, and only there.
  PlanItem better = item("better", 8192, 0.2);
  better.candidates.push_back({TensorType::Q4_K, 8192 / 256 * 144, 0.05});
  PlanItem worse = item("worse", 8192, 0.2);
  worse.candidates.push_back({TensorType::Q4_K, 8192 / 256 * 144, 0.3});
  PlanItem only = item("only", 8192, 0.2);  // rows that do not fit q4_k: no such candidate
  const std::vector<PlanItem> items = {better, worse, only};
  auto p = plan_target_bpw(items, 4.5);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p.value().choice[0], 4u);
  EXPECT_EQ(p.value().choice[1], 0u);
  EXPECT_EQ(p.value().choice[2], 0u);
  EXPECT_EQ(p.value().bytes, 3u * 8192 / 32 * 18);
  EXPECT_DOUBLE_EQ(p.value().bpw(), 4.5);
  EXPECT_NEAR(p.value().predicted_kl, 0.05 + 0.2 + 0.2, 1e-12);
  // Upgrades from there continue from q4_k (its own hull), not from the base.
  auto q = plan_target_bpw(items, 16.0);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q.value().choice[0], 3u);  // f16 predicts the least for every tensor
}

TEST(BpwPlan, StartsAtTheCheapestCandidate) {
  // Candidates cheaper than the base: the plan starts there, and the bits it frees pay for
  // upgrades elsewhere. Here: "robust" has a cheap type costing little KL, "fragile" gains
  // much from q8_0. At 4.5 bpw q4_0 for both is the naive plan; the planner does better.
  PlanItem robust = wide_item("robust", 8192, 0.01, 2.0, 1.5);
  PlanItem fragile = wide_item("fragile", 8192, 0.5, 2.0, 40.0);
  const std::vector<PlanItem> items = {robust, fragile};
  auto cheapest = plan_target_bpw(items, 2.0);  // exactly both at the cheap type (2 bpw)
  ASSERT_TRUE(cheapest.ok()) << cheapest.error().message;
  EXPECT_EQ(cheapest.value().choice[0], 5u);
  EXPECT_EQ(cheapest.value().choice[1], 5u);
  EXPECT_EQ(cheapest.value().bytes, 2u * 8192 / 4);
  auto p = plan_target_bpw(items, 4.5);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.value().choice[0], 5u);  // robust stays cheap ...
  EXPECT_NE(p.value().choice[1], 0u);  // ... and fragile gets more than q4_0
  EXPECT_NE(p.value().choice[1], 5u);
  EXPECT_LT(p.value().predicted_kl, 0.01 + 0.5);  // better than both at the base
  EXPECT_LE(p.value().bpw(), 4.5);
  // The cheap start also wins ties in bytes by the lower KL, whatever the order.
  PlanItem tie = item("tie", 4096, 0.2);
  tie.candidates.push_back({TensorType::Q4_K, 4096 / 32 * 18, 0.2});  // same bytes, same KL: the first stays
  tie.candidates.push_back({TensorType::Q4_1, 4096 / 32 * 18, 0.1});  // same bytes, lower KL: replaces it
  auto t = plan_target_bpw({tie}, 4.5);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t.value().choice[0], 5u);
}

TEST(BpwPlan, MonotoneWithLateralAndCheaperCandidates) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> factor(0.05, 3.0);
  std::uniform_int_distribution<int> size(1, 64);
  std::lognormal_distribution<double> kl(-4.0, 2.0);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<PlanItem> items;
    for (int i = 0; i < 30; ++i) {
      PlanItem it = wide_item("t" + std::to_string(i), uint64_t(size(rng)) * 4096, kl(rng), factor(rng),
                              factor(rng) * 20);
      std::shuffle(it.candidates.begin() + 1, it.candidates.end(), rng);  // order must not matter
      items.push_back(std::move(it));
    }
    double last_kl = 1e300;
    uint64_t last_bytes = 0;
    for (double b = 2.0; b <= 16.5; b += 0.0625) {
      auto p = plan_target_bpw(items, b);
      ASSERT_TRUE(p.ok()) << p.error().message;
      EXPECT_LE(p.value().bpw(), b) << "budget " << b;
      EXPECT_LE(p.value().predicted_kl, last_kl * (1 + 1e-12)) << "budget " << b;
      EXPECT_GE(p.value().bytes, last_bytes) << "budget " << b;
      last_kl = p.value().predicted_kl;
      last_bytes = p.value().bytes;
      uint64_t bytes = 0;
      for (size_t i = 0; i < items.size(); ++i) bytes += items[i].candidates[p.value().choice[i]].bytes;
      EXPECT_EQ(p.value().bytes, bytes);
    }
    // Below the cheapest plan (2 bpw) nothing fits.
    EXPECT_FALSE(plan_target_bpw(items, 1.99).ok());
  }
}

TEST(BpwPlan, BudgetIsExactInIntegers) {
  // floor(B * n) without rounding: 4.5 * 3 elements = 13 bits; 0.1 is not exact in binary
  // (0.1000000000000000055...), so 0.1 * 10 is just above 1 and floors to 1.
  EXPECT_EQ(budget_bits(4.5, 3), 13u);
  EXPECT_EQ(budget_bits(0.1, 10), 1u);
  EXPECT_EQ(budget_bits(0.1, 30), 3u);  // 3.00000000000000016...
  EXPECT_EQ(budget_bits(4.75, uint64_t(1) << 58), uint64_t(19) << 56);
  // (1 - 2^-53) * (2^63 + 1) = 2^63 - 1023 - 2^-53: an 80-bit long double product rounds
  // it up to 2^63 - 1023; the floor is 2^63 - 1024.
  EXPECT_EQ(budget_bits(1.0 - std::ldexp(1.0, -53), (uint64_t(1) << 63) + 1), (uint64_t(1) << 63) - 1024);
  EXPECT_EQ(budget_bits(32.0, uint64_t(1) << 62), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(budget_bits(0.0, 100), 0u);
  // A budget of one bit less than the plan needs is refused; exactly enough is not.
  PlanItem a{"a", 64, {{TensorType::Q4_0, 36, 0.1}}};  // 288 bits = 4.5 * 64
  EXPECT_TRUE(plan_target_bpw({a}, 4.5).ok());
  EXPECT_FALSE(plan_target_bpw({a}, std::nextafter(4.5, 0.0)).ok());
}

TEST(BpwPlan, BadInputIsAnError) {
  const auto items = std::vector<PlanItem>{item("a", 4096, 0.1)};
  auto below = plan_target_bpw(items, 4.0);
  ASSERT_FALSE(below.ok());
  EXPECT_NE(below.error().message.find("below the cheapest plan, 4.500 bits per weight"), std::string::npos)
      << below.error().message;
  // The cheapest plan counts the cheapest candidates, not the base.
  auto cheap = plan_target_bpw({wide_item("c", 4096, 0.1, 1.0, 2.0)}, 1.5);
  ASSERT_FALSE(cheap.ok());
  EXPECT_NE(cheap.error().message.find("2.000 bits per weight"), std::string::npos) << cheap.error().message;
  EXPECT_TRUE(plan_target_bpw({wide_item("c", 4096, 0.1, 1.0, 2.0)}, 2.0).ok());
  PlanItem huge{"h", 1, {{TensorType::F32, std::numeric_limits<uint64_t>::max() / 4, 0.1}}};
  EXPECT_FALSE(plan_target_bpw({huge}, 8.0).ok());
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
