// Compensated pruning (quantizer/prune_compensate.h) and the sensitivity allocation
// (quantizer/prune_plan.h) on constructed data whose right answers are known: channels that
// are exact combinations of others, constant channels, the residual the fit reports against
// the one measured on the data, the Gram sums against direct ones, the greedy allocation
// against brute force. The numpy re-derivation on a model is tests/py/test_prune_compensate.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "model/weights.h"
#include "quantizer/prune_compensate.h"
#include "quantizer/prune_plan.h"

using namespace pllm;

namespace {

struct Data {
  int n = 0, T = 0, rows = 0;
  std::vector<double> X;  // [T][n]
  std::vector<double> W;  // [rows][n]
};

Data make_data(int n, int T, int rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> N(0.0, 1.0);
  Data d{n, T, rows, std::vector<double>(size_t(T) * n), std::vector<double>(size_t(rows) * n)};
  for (auto& v : d.X) v = N(rng) + 0.3;  // a non-zero mean, as SwiGLU outputs have
  for (auto& v : d.W) v = N(rng);
  return d;
}

GramMatrix gram_of(const Data& d) {
  GramMatrix G;
  G.n = d.n;
  G.count = uint64_t(d.T);
  const int m = d.n + 1;
  G.g.assign(size_t(m) * m, 0.0);
  for (int t = 0; t < d.T; ++t)
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < m; ++j) {
        const double xi = i < d.n ? d.X[size_t(t) * d.n + i] : 1.0, xj = j < d.n ? d.X[size_t(t) * d.n + j] : 1.0;
        G.g[size_t(i) * m + j] += xi * xj;
      }
  return G;
}

// Mean squared output error per token of the pruned layer against the original.
double output_error(const Data& d, const CompensateResult& r, int width, const std::vector<double>& bias0) {
  const size_t kept = r.keep.size() * size_t(width);
  double e = 0.0;
  for (int t = 0; t < d.T; ++t)
    for (int o = 0; o < d.rows; ++o) {
      double y = bias0.empty() ? 0.0 : bias0[size_t(o)], y2 = r.bias.empty() ? y : r.bias[size_t(o)];
      for (int j = 0; j < d.n; ++j) y += d.W[size_t(o) * d.n + j] * d.X[size_t(t) * d.n + j];
      size_t c = 0;
      for (int g : r.keep)
        for (int j = g * width; j < (g + 1) * width; ++j) y2 += r.w[size_t(o) * kept + c++] * d.X[size_t(t) * d.n + j];
      e += (y - y2) * (y - y2);
    }
  return e / d.T;
}

// Shrinkage off unless asked for: most tests check the plain least-squares fit's exact answers.
CompensateSpec spec(Compensate mode, int n_remove, double ridge, int width = 1, double shrink = 0.0) {
  CompensateSpec s;
  s.mode = mode;
  s.n_remove = n_remove;
  s.ridge = ridge;
  s.width = width;
  s.shrink = shrink;
  return s;
}

// Activations as a layer sees them: a few shared factors plus each channel's own noise, at
// scales spread over two decades (SwiGLU outputs are far from equal in power), a mean too.
Data make_correlated(int n, int T, int rows, int factors, uint32_t seed, const std::vector<double>* W = nullptr) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> N(0.0, 1.0);
  std::mt19937 shape_rng(1234);  // the distribution's shape: the same for every sample drawn
  std::normal_distribution<double> S(0.0, 1.0);
  std::uniform_real_distribution<double> U(-1.0, 1.0);
  std::vector<double> A(size_t(n) * size_t(factors)), scale(static_cast<size_t>(n));
  for (auto& v : A) v = S(shape_rng);
  for (auto& v : scale) v = std::pow(10.0, U(shape_rng));
  Data d{n, T, rows, std::vector<double>(size_t(T) * n), W ? *W : std::vector<double>(size_t(rows) * n)};
  if (!W)
    for (auto& v : d.W) v = S(shape_rng);
  std::vector<double> z(static_cast<size_t>(factors));
  for (int t = 0; t < T; ++t) {
    for (auto& v : z) v = N(rng);
    for (int j = 0; j < n; ++j) {
      double x = 0.3 + 0.5 * N(rng);
      for (int f = 0; f < factors; ++f) x += A[size_t(j) * factors + f] * z[size_t(f)];
      d.X[size_t(t) * n + j] = scale[size_t(j)] * x;
    }
  }
  return d;
}

}  // namespace

TEST(PruneCompensate, ReportedErrorIsTheMeasuredResidual) {
  // ridge 0 and more tokens than channels: the fit is plain least squares, and the error it
  // reports after its last removal is exactly the output error on the data.
  const Data d = make_data(24, 200, 6, 1);
  const GramMatrix G = gram_of(d);
  for (Compensate mode : {Compensate::lsq, Compensate::lsq_bias, Compensate::bias}) {
    auto r = compensate_prune(d.W, d.rows, {}, G, spec(mode, 9, 0.0));
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_EQ(r->keep.size(), 15u);
    ASSERT_EQ(r->error.size(), 10u);
    for (size_t k = 1; k < r->error.size(); ++k) EXPECT_GE(r->error[k], r->error[k - 1] - 1e-12);
    EXPECT_NEAR(r->error.back(), output_error(d, *r, 1, {}), 1e-9 * (1.0 + r->error.back())) << compensate_name(mode);
    EXPECT_EQ(r->bias.empty(), mode == Compensate::lsq);
  }
}

TEST(PruneCompensate, LeastSquaresBeatsBiasBeatsDropping) {
  const Data d = make_data(32, 300, 8, 2);
  const GramMatrix G = gram_of(d);
  auto lsq = compensate_prune(d.W, d.rows, {}, G, spec(Compensate::lsq_bias, 12, 0.0));
  auto bias = compensate_prune(d.W, d.rows, {}, G, spec(Compensate::bias, 12, 0.0));
  ASSERT_TRUE(lsq.ok() && bias.ok());
  // Dropping bias's channels without moving anything.
  CompensateResult dropped = *bias;
  dropped.bias.clear();
  for (size_t o = 0; o < size_t(d.rows); ++o)
    for (size_t i = 0; i < dropped.keep.size(); ++i) dropped.w[o * dropped.keep.size() + i] = d.W[o * d.n + size_t(dropped.keep[i])];
  EXPECT_LT(output_error(d, *lsq, 1, {}), output_error(d, *bias, 1, {}));
  EXPECT_LT(output_error(d, *bias, 1, {}), output_error(d, dropped, 1, {}));
}

TEST(PruneCompensate, RedundantChannelsGoFirstAtNoCost) {
  // Channels 3 and 7 are affine combinations of others; lsq-bias removes them first and the
  // output does not change; lsq without the intercept cannot rebuild the constant part.
  Data d = make_data(16, 120, 5, 3);
  for (int t = 0; t < d.T; ++t) {
    double* x = &d.X[size_t(t) * d.n];
    x[3] = 2.0 * x[0] - x[5] + 0.75;
    x[7] = 0.5 * x[1] + 1.25;
  }
  const GramMatrix G = gram_of(d);
  auto r = compensate_prune(d.W, d.rows, {}, G, spec(Compensate::lsq_bias, 2, 1e-10));
  ASSERT_TRUE(r.ok()) << r.error().message;
  // One of {0, 3, 5} and one of {1, 7} go (each is the combination of the rest of its set).
  auto kept = [&](int j) { return std::count(r->keep.begin(), r->keep.end(), j); };
  EXPECT_EQ(kept(0) + kept(3) + kept(5), 2);
  EXPECT_EQ(kept(1) + kept(7), 1);
  EXPECT_LT(output_error(d, *r, 1, {}), 1e-8);
  auto no_intercept = compensate_prune(d.W, d.rows, {}, G, spec(Compensate::lsq, 2, 1e-10));
  ASSERT_TRUE(no_intercept.ok());
  EXPECT_GT(output_error(d, *no_intercept, 1, {}), 1e-3);
}

TEST(PruneCompensate, ConstantChannelMovesIntoTheBias) {
  Data d = make_data(12, 80, 4, 4);
  for (int t = 0; t < d.T; ++t) d.X[size_t(t) * d.n + 5] = 3.0;  // no fluctuation at all
  const std::vector<double> bias0 = {0.5, -1.0, 0.0, 2.0};
  auto r = compensate_prune(d.W, d.rows, bias0, gram_of(d), spec(Compensate::bias, 1, 0.0));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(std::count(r->keep.begin(), r->keep.end(), 5), 0);
  for (int o = 0; o < d.rows; ++o) EXPECT_NEAR(r->bias[size_t(o)], bias0[size_t(o)] + 3.0 * d.W[size_t(o) * d.n + 5], 1e-12);
  EXPECT_LT(output_error(d, *r, 1, bias0), 1e-20);
  EXPECT_NEAR(r->error.back(), 0.0, 1e-12);
}

TEST(PruneCompensate, GroupsGoWhole) {
  // width 4 (a KV group's columns): group 2 is a copy of group 0, so it goes at no cost.
  Data d = make_data(16, 150, 6, 5);
  for (int t = 0; t < d.T; ++t)
    for (int i = 0; i < 4; ++i) d.X[size_t(t) * d.n + 8 + i] = d.X[size_t(t) * d.n + i];
  auto r = compensate_prune(d.W, d.rows, {}, gram_of(d), spec(Compensate::lsq, 1, 1e-10, 4));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->keep, (std::vector<int>{0, 1, 3}));
  EXPECT_LT(output_error(d, *r, 4, {}), 1e-8);
}

TEST(PruneCompensate, SingularWithoutRidgeIsAClearError) {
  const Data d = make_data(16, 6, 3, 6);  // 6 tokens cannot pin down 16 channels
  auto r = compensate_prune(d.W, d.rows, {}, gram_of(d), spec(Compensate::lsq, 4, 0.0));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("singular"), std::string::npos) << r.error().message;
  auto ridged = compensate_prune(d.W, d.rows, {}, gram_of(d), spec(Compensate::lsq, 4, 0.01));
  EXPECT_TRUE(ridged.ok());
  GramMatrix zero = gram_of(d);
  std::fill(zero.g.begin(), zero.g.end() - 1, 0.0);
  auto z = compensate_prune(d.W, d.rows, {}, zero, spec(Compensate::lsq, 4, 0.01));
  ASSERT_FALSE(z.ok());
  EXPECT_NE(z.error().message.find("zero"), std::string::npos) << z.error().message;
}

TEST(PruneCompensate, ShrinkageHoldsOnTokensTheFitDidNotSee) {
  // Fewer calibration tokens than channels: the fit without shrinkage (only the ridge keeps
  // it solvable; ridge 0.01 was the default before shrinkage) matches the calibration tokens
  // and misses on new ones; the shrinkage, with that ridge and with the default one, must
  // stay finite and do clearly better there. With 40
  // tokens per channel it must cost next to nothing against the plain fit (a ridge too small
  // to matter in both: 0.01 of the mean power would overcharge removing the quiet channels).
  const int n = 48, rows = 6, n_remove = 16;
  const Data test = make_correlated(n, 20000, rows, 6, 100);
  for (int T : {40, 40 * n}) {
    const Data train = make_correlated(n, T, rows, 6, uint32_t(T), &test.W);
    const GramMatrix G = gram_of(train);
    const double ridge = T < n ? 0.01 : kDefaultRidge;
    auto plain = compensate_prune(train.W, rows, {}, G, spec(Compensate::lsq_bias, n_remove, ridge, 1, 0.0));
    auto shrunk = compensate_prune(train.W, rows, {}, G, spec(Compensate::lsq_bias, n_remove, ridge, 1,
                                                                kDefaultShrink));
    auto defaults = compensate_prune(train.W, rows, {}, G, spec(Compensate::lsq_bias, n_remove, kDefaultRidge, 1,
                                                                  kDefaultShrink));
    ASSERT_TRUE(defaults.ok() && plain.ok() && shrunk.ok());
    if (T < n) {
      EXPECT_LT(output_error(test, *defaults, 1, {}), 0.8 * output_error(test, *plain, 1, {}));
    }
    for (double v : shrunk->w) ASSERT_TRUE(std::isfinite(v));
    const double e_plain = output_error(test, *plain, 1, {}), e_shrunk = output_error(test, *shrunk, 1, {});
    std::printf("T %d: held-out error plain %.4g, shrunk %.4g\n", T, e_plain, e_shrunk);
    if (T < n)
      EXPECT_LT(e_shrunk, 0.8 * e_plain);
    else
      EXPECT_LT(e_shrunk, 1.02 * e_plain);
  }
  // Shrinkage out of range is a clear error.
  const Data d = make_correlated(n, 100, rows, 6, 3);
  auto bad = compensate_prune(d.W, rows, {}, gram_of(d), spec(Compensate::lsq, 4, 0.01, 1, -1.0));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("--shrink"), std::string::npos);
}

TEST(GramStats, ShortCalibrationNamesTheWorstLayer) {
  Matrix a, b;
  a.name = "a";
  a.rows = b.rows = 2;
  a.cols = 4;
  b.name = "b";
  b.cols = 8;
  GramStats gs({"a", "b"});
  const int T = kShortCalibTokensPerChannel * 8 - 1;  // short for b's 8 channels, not for a's 4
  std::vector<float> X(size_t(T) * 8, 1.0f);
  gs.observe(a, X.data(), T);
  gs.observe(b, X.data(), T);
  gs.finish();
  uint64_t tokens = 0;
  int channels = 0;
  ASSERT_TRUE(gs.short_calibration(tokens, channels));
  EXPECT_EQ(tokens, uint64_t(T));
  EXPECT_EQ(channels, 8);
  gs.observe(b, X.data(), 1);  // now exactly the threshold
  gs.finish();
  EXPECT_FALSE(gs.short_calibration(tokens, channels));
}

TEST(GramStats, SumsEqualDirectOnesAcrossFlushes) {
  const int n = 7, T = 2500;  // past two flushes of the float accumulator
  std::mt19937 rng(7);
  std::normal_distribution<float> N(0.0f, 1.0f);
  std::vector<float> X(size_t(T) * n);
  for (auto& v : X) v = N(rng);
  Matrix W;
  W.name = "blk.0.ffn_down.weight";
  W.rows = 3;
  W.cols = n;
  Matrix other = W;
  other.name = "blk.0.ffn_up.weight";
  GramStats gs({"blk.0.ffn_down.weight"});
  for (int t = 0; t < T;) {
    const int b = std::min(T - t, 37 + t % 23);
    gs.observe(W, X.data() + size_t(t) * n, b);
    gs.observe(other, X.data() + size_t(t) * n, b);  // not asked for: ignored
    t += b;
  }
  EXPECT_EQ(gs.find("blk.0.ffn_down.weight"), nullptr);  // not finished yet
  gs.finish();
  const GramMatrix* G = gs.find("blk.0.ffn_down.weight");
  ASSERT_NE(G, nullptr);
  EXPECT_EQ(gs.find("blk.0.ffn_up.weight"), nullptr);
  EXPECT_EQ(G->count, uint64_t(T));
  for (int i = 0; i <= n; ++i)
    for (int j = 0; j <= n; ++j) {
      double want = 0.0;
      for (int t = 0; t < T; ++t)
        want += (i < n ? double(X[size_t(t) * n + i]) : 1.0) * (j < n ? double(X[size_t(t) * n + j]) : 1.0);
      EXPECT_NEAR(G->at(i, j), want, 1e-4 * (1.0 + std::fabs(want))) << i << "," << j;
    }
}

TEST(PruneCompensate, ParseNames) {
  for (Compensate c : {Compensate::none, Compensate::bias, Compensate::lsq, Compensate::lsq_bias}) {
    auto p = parse_compensate(compensate_name(c));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(*p, c);
  }
  EXPECT_FALSE(parse_compensate("lsq_bias").ok());
}

TEST(AllocateBlocks, MatchesBruteForceOnConvexCosts) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> U(0.01, 1.0);
  for (int trial = 0; trial < 20; ++trial) {
    const int layers = 3, steps = 5;
    std::vector<std::vector<double>> costs(layers);
    for (auto& c : costs) {  // convex: increasing increments
      std::vector<double> inc(steps);
      for (auto& v : inc) v = U(rng);
      std::sort(inc.begin(), inc.end());
      c.push_back(0.0);
      for (double v : inc) c.push_back(c.back() + v);
    }
    const int blocks = 1 + trial % 10;
    const std::vector<int> got = allocate_blocks(costs, blocks);
    int sum = 0;
    double total = 0.0;
    for (int l = 0; l < layers; ++l) sum += got[size_t(l)], total += costs[size_t(l)][size_t(got[size_t(l)])];
    EXPECT_EQ(sum, blocks);
    double best = 1e300;
    for (int a = 0; a <= steps; ++a)
      for (int b = 0; b <= steps; ++b) {
        const int c = blocks - a - b;
        if (c < 0 || c > steps) continue;
        best = std::min(best, costs[0][size_t(a)] + costs[1][size_t(b)] + costs[2][size_t(c)]);
      }
    EXPECT_NEAR(total, best, 1e-12);
  }
  // Every layer full: fewer blocks than asked.
  EXPECT_EQ(allocate_blocks({{0.0, 1.0}, {0.0}}, 5), (std::vector<int>{1, 0}));
}
