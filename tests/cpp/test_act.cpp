// KernelTable::swiglu_f32 on every ISA table this machine runs, against the scalar twin
// (expf). The SIMD versions use a polynomial exp (x86/act_avx2.cpp): the relative error of
// exp(-g) is a few ulp (Cody-Waite reduction ~1 ulp, degree-6 Taylor truncation < 1.2e-7,
// rounding of the Horner steps ~2 ulp), and 1 + e, the product and the division add a
// rounding each, so |simd - scalar| <= 8 eps |scalar| holds with margin; a wrong
// constant or polynomial coefficient gives errors of 1e-4 or more.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <random>
#include <vector>

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

INSTANTIATE_TEST_SUITE_P(AllIsas, ActIsa,
                         ::testing::Values(Isa::scalar, Isa::avx2, Isa::avx512, Isa::neon, Isa::neon_dotprod,
                                           Isa::neon_i8mm),
                         [](const testing::TestParamInfo<Isa>& i) { return std::string(isa_name(i.param)); });

}  // namespace
}  // namespace pllm
