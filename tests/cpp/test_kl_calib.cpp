// Static activation calibration (src/quantizer/kl_calib.*): the |x| histogram's exact
// re-binning, TensorRT's KL threshold against a second, plainer implementation written
// here, and the properties the method must have (uniform data keeps its max, rare huge
// outliers are clipped, a scale is never 0).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "quantizer/kl_calib.h"

namespace pllm {
namespace {

std::vector<float> gaussian(std::mt19937& rng, int n, float sigma) {
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// KL search written the obvious way: for each i build P and Q as whole arrays, each bin
// asking which group it is in; no suffix sums, no shared buffers.
KlChoice kl_second_opinion(const std::vector<uint64_t>& hist, double w, int levels) {
  int used = 0;
  for (size_t b = 0; b < hist.size(); ++b)
    if (hist[b]) used = int(b) + 1;
  if (used <= levels) return {used, (used + 0.5) * w, 0.0};
  KlChoice best{-1, 0, std::numeric_limits<double>::infinity()};
  for (int i = levels; i <= used; ++i) {
    std::vector<double> P(hist.begin(), hist.begin() + i);
    for (int b = i; b < int(hist.size()); ++b) P[size_t(i - 1)] += double(hist[size_t(b)]);
    const int per = i / levels;
    auto group = [&](int b) { return std::min(b / per, levels - 1); };
    std::vector<double> mass(size_t(levels), 0.0), nz(size_t(levels), 0.0);
    for (int b = 0; b < i; ++b) {
      mass[size_t(group(b))] += double(hist[size_t(b)]);  // the slice, outliers not folded in
      if (P[size_t(b)] > 0) nz[size_t(group(b))] += 1;
    }
    std::vector<double> Q(size_t(i), 0.0);
    for (int b = 0; b < i; ++b)
      if (P[size_t(b)] > 0) Q[size_t(b)] = mass[size_t(group(b))] / nz[size_t(group(b))];
    if (P[size_t(i - 1)] > 0 && Q[size_t(i - 1)] == 0) Q[size_t(i - 1)] = 0.1;
    double sp = 0, sq = 0;
    for (int b = 0; b < i; ++b) sp += P[size_t(b)], sq += Q[size_t(b)];
    double kl = 0;
    for (int b = 0; b < i; ++b)
      if (P[size_t(b)] > 0) kl += P[size_t(b)] / sp * std::log((P[size_t(b)] / sp) / (Q[size_t(b)] / sq));
    if (kl < best.kl) best = {i, (i + 0.5) * w, kl};
  }
  return best;
}

TEST(AbsHistogram, RebinningEqualsBinningWithTheFinalRange) {
  std::mt19937 rng(7);
  AbsHistogram grown(2048);
  std::vector<std::vector<float>> batches;
  for (float sigma : {0.5f, 0.4f, 3.0f, 1.0f, 40.0f, 2.0f}) batches.push_back(gaussian(rng, 5000, sigma));
  batches[2][17] = std::numeric_limits<float>::quiet_NaN();
  batches[3][5] = std::numeric_limits<float>::infinity();
  batches[1][0] = 0.0f;
  double max_abs = 0;
  uint64_t finite = 0;
  for (const auto& b : batches) {
    grown.add(b.data(), int64_t(b.size()));
    for (float x : b)
      if (std::isfinite(x)) max_abs = std::max(max_abs, double(std::fabs(x))), ++finite;
  }
  EXPECT_EQ(grown.max_abs(), max_abs);
  EXPECT_EQ(grown.total(), finite);
  EXPECT_EQ(grown.non_finite(), 2u);
  EXPECT_GE(grown.range(), max_abs);
  EXPECT_LT(grown.range(), 2 * max_abs);  // doubled only as far as needed

  // Direct: the final range set first by one value equal to it, taken out again after.
  AbsHistogram direct(2048);
  const float r = float(grown.range());
  ASSERT_EQ(double(r), grown.range());
  direct.add(&r, 1);
  for (const auto& b : batches) direct.add(b.data(), int64_t(b.size()));
  std::vector<uint64_t> want = direct.counts();
  want.back() -= 1;
  EXPECT_EQ(grown.counts(), want);
  uint64_t sum = 0;
  for (uint64_t c : grown.counts()) sum += c;
  EXPECT_EQ(sum, finite);
}

TEST(AbsHistogram, BinsAreHalfOpenFromBelow) {
  AbsHistogram h(8);
  const float xs[] = {8.0f, 0.0f, 1.0f, 1.0001f, -8.0f, 0.5f};  // range 8, width 1
  h.add(xs, 6);
  EXPECT_EQ(h.range(), 8.0);
  const std::vector<uint64_t> want = {3, 1, 0, 0, 0, 0, 0, 2};  // (0,1] with the zero; (1,2]; (7,8]
  EXPECT_EQ(h.counts(), want);
}

TEST(KlThreshold, MatchesASecondImplementation) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 6; ++trial) {
    AbsHistogram h(trial < 3 ? 2048 : 512);
    std::vector<float> x = gaussian(rng, 40000, 1.0f);
    // mixtures: heavier tails, a few outliers, a laplacian-ish part
    std::exponential_distribution<float> e(1.0f + float(trial));
    for (int i = 0; i < 4000; ++i) x.push_back(e(rng) * 6.0f);
    for (int i = 0; i < trial * 3; ++i) x.push_back(50.0f + 10.0f * float(i));
    h.add(x.data(), int64_t(x.size()));
    for (int levels : {128, 64}) {
      auto got = kl_threshold(h.counts(), h.bin_width(), levels);
      ASSERT_TRUE(got.ok()) << got.error().message;
      const KlChoice want = kl_second_opinion(h.counts(), h.bin_width(), levels);
      EXPECT_EQ(got->bins, want.bins) << "trial " << trial << " levels " << levels;
      EXPECT_NEAR(got->kl, want.kl, 1e-12 + 1e-9 * want.kl);
      EXPECT_DOUBLE_EQ(got->threshold, want.threshold);
    }
  }
}

TEST(KlThreshold, UniformDataKeepsItsMax) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-5.0f, 5.0f);
  std::vector<float> x(200000);
  for (float& v : x) v = u(rng);
  AbsHistogram h;
  h.add(x.data(), int64_t(x.size()));
  auto t = act_threshold(h, ActCalibMethod::kl);
  ASSERT_TRUE(t.ok());
  EXPECT_GE(*t, 0.95 * h.max_abs());
  EXPECT_LE(*t, h.max_abs());
}

TEST(KlThreshold, RareHugeOutliersAreClipped) {
  std::mt19937 rng(5);
  std::vector<float> x = gaussian(rng, 500000, 1.0f);
  for (int i = 0; i < 10; ++i) x[size_t(i) * 1000] = (i % 2 ? -1.0f : 1.0f) * (60.0f + float(i));
  AbsHistogram h;
  h.add(x.data(), int64_t(x.size()));
  auto t = act_threshold(h, ActCalibMethod::kl);
  ASSERT_TRUE(t.ok());
  EXPECT_LT(*t, 0.2 * h.max_abs());
  EXPECT_GT(*t, 3.0);  // still covers the bulk (3 sigma)
  // minmax keeps the outlier; a 99.99% percentile lands in the bulk too
  EXPECT_EQ(act_threshold(h, ActCalibMethod::minmax).value(), h.max_abs());
  EXPECT_LT(act_threshold(h, ActCalibMethod::percentile).value(), 0.2 * h.max_abs());
}

TEST(KlThreshold, PercentileIsTheUpperEdgeOfTheQuantilesBin) {
  std::mt19937 rng(9);
  std::vector<float> x = gaussian(rng, 100000, 2.0f);
  AbsHistogram h(1024);
  h.add(x.data(), int64_t(x.size()));
  std::vector<double> a;
  for (float v : x) a.push_back(std::fabs(double(v)));
  std::sort(a.begin(), a.end());
  for (double f : {0.5, 0.99, 0.9999, 1.0}) {
    auto t = percentile_threshold(h.counts(), h.bin_width(), f);
    ASSERT_TRUE(t.ok());
    // at least fraction f of the values are <= t, and t is within one bin of that quantile
    const double q = a[size_t(std::ceil(f * double(a.size()))) - 1];
    EXPECT_GE(*t, q) << f;
    EXPECT_LT(*t, q + h.bin_width() + 1e-12) << f;
  }
}

TEST(KlThreshold, ScaleIsNeverZeroAndStaysInFp16) {
  AbsHistogram zeros;
  const std::vector<float> z(100, 0.0f);
  zeros.add(z.data(), int64_t(z.size()));
  for (auto m : {ActCalibMethod::minmax, ActCalibMethod::kl, ActCalibMethod::percentile}) {
    auto t = act_threshold(zeros, m);
    ASSERT_TRUE(t.ok());
    EXPECT_GT(act_scale_for_threshold(*t), 0.0f);
  }
  EXPECT_EQ(act_scale_for_threshold(0.0), kMinActScale);
  EXPECT_EQ(act_scale_for_threshold(std::nan("")), kMinActScale);
  EXPECT_EQ(act_scale_for_threshold(1e30), kMaxActScale);
  EXPECT_FLOAT_EQ(act_scale_for_threshold(12.7), 0.1f);
}

TEST(KlThreshold, BadInputIsAnError) {
  const std::vector<uint64_t> empty(256, 0);
  EXPECT_FALSE(kl_threshold(empty, 1.0).ok());
  const std::vector<uint64_t> one = {1, 2, 3};
  EXPECT_FALSE(kl_threshold(one, 0.0).ok());
  EXPECT_FALSE(kl_threshold(one, 1.0, 0).ok());
  EXPECT_FALSE(percentile_threshold(one, 1.0, 0.0).ok());
  EXPECT_FALSE(percentile_threshold(one, 1.0, 1.5).ok());
  AbsHistogram nothing;
  EXPECT_FALSE(act_threshold(nothing, ActCalibMethod::kl).ok());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  nothing.add(&nan, 1);
  EXPECT_FALSE(act_threshold(nothing, ActCalibMethod::minmax).ok());
  EXPECT_FALSE(parse_act_calib_method("entropy").ok());
  EXPECT_EQ(parse_act_calib_method("kl").value(), ActCalibMethod::kl);
  // fewer occupied bins than levels: keep everything
  auto few = kl_threshold(one, 0.5, 128);
  ASSERT_TRUE(few.ok());
  EXPECT_EQ(few->bins, 3);
}

}  // namespace
}  // namespace pllm
