// KernelTable::swiglu_f32, geglu_f32 and delta_rule_step on every ISA table this machine runs, against the
// scalar twin (expf). The SIMD versions use a polynomial exp (x86/act_avx2.cpp): the relative error of
// exp(-g) is a few ulp (Cody-Waite reduction ~1 ulp, degree-6 Taylor truncation < 1.2e-7,
// rounding of the Horner steps ~2 ulp), and 1 + e, the product and the division add a
// rounding each, so |simd - scalar| <= 8 eps |scalar| holds with margin; a wrong
// constant or polynomial coefficient gives errors of 1e-4 or more.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "isa_fixture.h"
#include "kernels/kernels.h"

namespace pllm {
namespace {

class ActIsa : public ::testing::TestWithParam<Isa> {};

TEST_P(ActIsa, SwigluMatchesScalarTwin) {
  const KernelTable* kt = kernels_for(GetParam());
  if (!kt) GTEST_SKIP() << isa_name(GetParam()) << " not runnable here";
  const KernelTable& sk = *kernels_for(Isa::scalar);
  ASSERT_NE(kt->swiglu_f32, nullptr);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> wide(-100.0f, 100.0f);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> g, u;
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 88.0f, 89.0f, 120.0f, -87.0f, -88.0f, -90.0f, -1e4f, 1e4f}) {
    g.push_back(v);
    u.push_back(1.5f);
  }
  for (int i = 0; i < 4000; ++i) {
    g.push_back(i % 4 == 0 ? wide(rng) : nd(rng));
    u.push_back(nd(rng));
  }
  for (size_t n : {g.size(), size_t(7), size_t(1)}) {
    std::vector<float> got(n), want(n);
    kt->swiglu_f32(g.data(), u.data(), got.data(), int64_t(n));
    sk.swiglu_f32(g.data(), u.data(), want.data(), int64_t(n));
    for (size_t i = 0; i < n; ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << "g=" << g[i];
      // Below g = -87 exp(-g) is clamped (2^n must stay normal): both results then lie in
      // [0, |g u| e^-87] (< 1e-35 |g u|), which bounds their difference.
      const double floor_abs = g[i] < -87.0f ? std::fabs(double(g[i]) * u[i]) * std::exp(-87.0) : 0.0;
      EXPECT_NEAR(got[i], want[i], 8 * FLT_EPSILON * std::fabs(want[i]) + floor_abs) << "g=" << g[i] << " u=" << u[i];
    }
  }
  // In place (out aliases g), as the forward pass calls it.
  std::vector<float> inplace(g.begin(), g.begin() + 100), want(100);
  sk.swiglu_f32(g.data(), u.data(), want.data(), 100);
  kt->swiglu_f32(inplace.data(), u.data(), inplace.data(), 100);
  for (int i = 0; i < 100; ++i)
    EXPECT_NEAR(inplace[i], want[i], 8 * FLT_EPSILON * std::fabs(want[i]) + (g[i] < -87.0f ? 1e-30 : 0.0));
}

// GeGLU: the scalar twin (logistic form, expf) against the same in long double (which equals
// GELU's tanh form: 0.5 (1 + tanh y) = 1 / (1 + e^-2y), without its cancellation for g < 0),
// then each table against the twin. The argument -2y is formed in f32 with <= 5 roundings,
// an error that exp turns into a relative one of up to 5 eps |2y|; exp, 1 + e, the product and
// the division add <= 8 eps. So twin vs exact: (8 + 6 |2y|) eps; a SIMD table (another rounding
// of the argument, the polynomial exp) vs the twin: twice that. Past -2y = 87 the clamp
// leaves both results below e^-87 |g u|. A wrong constant moves results by ~1e-4 relative.
TEST_P(ActIsa, GegluMatchesTanhFormAndScalarTwin) {
  const KernelTable* kt = kernels_for(GetParam());
  if (!kt) GTEST_SKIP() << isa_name(GetParam()) << " not runnable here";
  const KernelTable& sk = *kernels_for(Isa::scalar);
  ASSERT_NE(kt->geglu_f32, nullptr);
  std::mt19937 rng(6);
  std::normal_distribution<float> nd(0.0f, 2.5f);
  std::vector<float> g, u;
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 3.0f, -3.0f, -5.0f, -9.0f, -9.5f, -10.0f, -30.0f, 30.0f, 1e4f, -1e4f}) {
    g.push_back(v);
    u.push_back(-1.25f);
  }
  for (int i = 0; i < 4000; ++i) {
    g.push_back(nd(rng));
    u.push_back(nd(rng));
  }
  const size_t n = g.size();
  std::vector<float> got(n), want(n);
  sk.geglu_f32(g.data(), u.data(), want.data(), int64_t(n));
  kt->geglu_f32(g.data(), u.data(), got.data(), int64_t(n));
  for (size_t i = 0; i < n; ++i) {
    const long double x = g[i], y2 = -1.5957691216057307117597842L * (x + 0.044715L * x * x * x);
    const long double ref = x * u[i] / (1.0L + std::exp(y2));
    const double a = std::fabs(double(y2)), floor_abs = y2 > 87.0L ? std::fabs(double(g[i]) * u[i]) * std::exp(-87.0) : 0.0;
    ASSERT_TRUE(std::isfinite(got[i])) << "g=" << g[i];
    EXPECT_NEAR(double(want[i]), double(ref), (8 + 6 * a) * FLT_EPSILON * std::fabs(double(ref)) + floor_abs + 1e-37)
        << "twin, g=" << g[i] << " u=" << u[i];
    EXPECT_NEAR(got[i], want[i], (16 + 12 * a) * FLT_EPSILON * std::fabs(want[i]) + floor_abs + 1e-37)
        << "g=" << g[i] << " u=" << u[i];
  }
  // Out aliases g, as the forward pass calls it: the same as into another buffer.
  std::vector<float> inplace(g.begin(), g.begin() + 100), apart(100);
  kt->geglu_f32(g.data(), u.data(), apart.data(), 100);
  kt->geglu_f32(inplace.data(), u.data(), inplace.data(), 100);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(inplace[i], apart[i]) << i;
}

// The delta rule (qwen35's DeltaNet heads): the sums' order is fixed (drivers/delta_rule.h), so
// every table must give the scalar twin's state and output bit for bit, step after step: with
// random values any other order or a non-fused product changes some bits. Sizes below, at and
// around the 32 partial sums (the tail), and Qwen3.5's 128. The twin itself is checked against
// a float64 transcription of the rule in test_delta_net.cpp.
TEST_P(ActIsa, DeltaRuleIsTheScalarTwinBitForBit) {
  const KernelTable* kt = kernels_for(GetParam());
  if (!kt) GTEST_SKIP() << isa_name(GetParam()) << " not runnable here";
  const KernelTable& sk = *kernels_for(Isa::scalar);
  ASSERT_NE(kt->delta_rule_step, nullptr);
  for (int n : {1, 7, 31, 32, 33, 64, 100, 128}) {
    std::mt19937 rng(uint32_t(n) + 40);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_real_distribution<float> ud(0.3f, 0.99f);
    const size_t N = size_t(n);
    std::vector<float> S(N * N), q(N), k(N), v(N);
    for (float& x : S) x = 0.3f * nd(rng);
    std::vector<float> S2 = S, out(N), out2(N);
    for (int step = 0; step < 12; ++step) {
      for (size_t i = 0; i < N; ++i) {
        q[i] = nd(rng);
        k[i] = nd(rng) / std::sqrt(float(n));
        v[i] = nd(rng);
      }
      const float decay = ud(rng), beta = ud(rng), scale = 1.0f / std::sqrt(float(n));
      kt->delta_rule_step(S.data(), q.data(), k.data(), v.data(), decay, beta, scale, n, out.data());
      sk.delta_rule_step(S2.data(), q.data(), k.data(), v.data(), decay, beta, scale, n, out2.data());
      ASSERT_EQ(0, std::memcmp(out.data(), out2.data(), N * sizeof(float))) << "n=" << n << " step " << step;
      ASSERT_EQ(0, std::memcmp(S.data(), S2.data(), N * N * sizeof(float))) << "n=" << n << " step " << step;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, ActIsa,
                         ::testing::ValuesIn(testing_isa::kAllIsas), testing_isa::IsaParamName());

}  // namespace
}  // namespace pllm
