// CostModel (runtime/cost_model.h): learning step costs from measured steps.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "runtime/cost_model.h"
#include "scheduler_sim.h"

namespace pllm {
namespace {

CostModel make_model(const CostModelParams& p = {}) {
  auto m = CostModel::create(p);
  EXPECT_TRUE(m.ok());
  return std::move(m).value();
}

TEST(CostModel, RejectsBadInput) {
  CostModelParams p;
  p.prior_row_ms = -1;
  EXPECT_FALSE(CostModel::create(p).ok());
  p = {};
  p.forget = 0;
  EXPECT_FALSE(CostModel::create(p).ok());
  p = {};
  p.min_margin = NAN;
  EXPECT_FALSE(CostModel::create(p).ok());
  CostModel m = make_model();
  EXPECT_FALSE(m.observe(0, 0, 1).ok());   // an empty step
  EXPECT_FALSE(m.observe(-1, 5, 1).ok());
  EXPECT_FALSE(m.observe(1, 0, -2).ok());
  EXPECT_FALSE(m.observe(1, 0, INFINITY).ok());
  EXPECT_EQ(m.observations(), 0);
}

TEST(CostModel, LearnsExactLinearCosts) {
  const sim::TrueCost truth{1.5, 0.4, 0.02};
  CostModel m = make_model();
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> rows(0, 8), tokens(0, 256);
  for (int i = 0; i < 200; ++i) {
    int r = rows(rng), t = tokens(rng);
    if (r + t == 0) r = 1;
    ASSERT_TRUE(m.observe(r, t, truth(r, t)).ok());
  }
  for (auto [r, t] : {std::pair{1, 0}, {4, 0}, {8, 0}, {0, 64}, {3, 200}, {5, 17}}) {
    EXPECT_NEAR(m.fit_ms(r, t), truth(r, t), 1e-4) << r << " rows, " << t << " tokens";
    EXPECT_TRUE(m.trusted(r, t));
  }
  // Exact measurements leave only the minimum margin.
  EXPECT_NEAR(m.margin(), CostModelParams{}.min_margin, 1e-3);
  EXPECT_NEAR(m.predict_ms(2, 32), truth(2, 32) * (1 + CostModelParams{}.min_margin), 1e-3);
}

// Only small steps measured: a bigger one is not extrapolated from them but bounded from
// above (never below the truth), so growing steps cannot overrun on exact costs.
TEST(CostModel, UnmeasuredSizesArePredictedFromAbove) {
  const sim::TrueCost truth{1.0, 0.6, 0.03};
  CostModel m = make_model();
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(m.observe(1, 0, truth(1, 0)).ok());
    ASSERT_TRUE(m.observe(2, 0, truth(2, 0)).ok());
  }
  EXPECT_TRUE(m.trusted(2, 0));
  for (auto [r, t] : {std::pair{6, 0}, {8, 0}, {1, 64}, {2, 300}}) {
    EXPECT_FALSE(m.trusted(r, t)) << r << " rows, " << t << " tokens";
    EXPECT_GE(m.predict_ms(r, t), truth(r, t)) << r << " rows, " << t << " tokens";
  }
  // Rows scale from the measured 2-row step: at most 4x its cost for 8 rows.
  EXPECT_LE(m.predict_ms(8, 0), 4 * truth(2, 0) * (1 + m.margin()) + 1e-9);
}

// Uniform noise of +-20 % has a relative deviation of 0.2 / sqrt(3) = 0.115; with the default
// 2 sigmas the margin should settle near 0.23 (the fit's own error adds a little).
TEST(CostModel, MarginFollowsMeasurementNoise) {
  const sim::TrueCost truth;
  CostModel m = make_model();
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> noise(-0.2, 0.2);
  std::uniform_int_distribution<int> rows(1, 6), tokens(0, 128);
  for (int i = 0; i < 2000; ++i) {
    const int r = rows(rng), t = tokens(rng);
    ASSERT_TRUE(m.observe(r, t, truth(r, t) * (1 + noise(rng))).ok());
  }
  EXPECT_GT(m.margin(), 0.18);
  EXPECT_LT(m.margin(), 0.32);
  EXPECT_NEAR(m.fit_ms(3, 64), truth(3, 64), 0.1 * truth(3, 64));
}

// A machine that gets hot and twice as slow: the forgetting factor lets the fit follow.
TEST(CostModel, FollowsASlowdown) {
  const sim::TrueCost cool{1.0, 0.5, 0.02}, hot{2.0, 1.0, 0.04};
  CostModel m = make_model();
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> rows(1, 6), tokens(0, 128);
  for (int i = 0; i < 300; ++i) {
    const int r = rows(rng), t = tokens(rng);
    ASSERT_TRUE(m.observe(r, t, cool(r, t)).ok());
  }
  for (int i = 0; i < 300; ++i) {
    const int r = rows(rng), t = tokens(rng);
    ASSERT_TRUE(m.observe(r, t, hot(r, t)).ok());
  }
  EXPECT_NEAR(m.fit_ms(4, 64), hot(4, 64), 0.02 * hot(4, 64));
  EXPECT_GE(m.predict_ms(4, 64), hot(4, 64));
}

}  // namespace
}  // namespace pllm
