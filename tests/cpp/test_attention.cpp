// KernelTable::attn_head_f32 / attn_head_f16 on every runnable ISA table against an
// f64 softmax-attention reference computed here.
//
// Setup: a cache of n_pos positions with two kv-heads ([pos][2 * head_dim]); the
// kernel reads kv-head 1 (offset head_dim, kv_stride 2 * head_dim), so the stride and
// the head offset are exercised. q, k, v ~ N(0, 1); scale is chosen so that the largest
// |logit| is 30 (logits span about +-30: the softmax weights range over e^60, and the
// "rising"/"falling" patterns make the running maximum change in every chunk or never).
// For the f16 cache the reference uses the same half-rounded k/v (pllm::fp32_to_fp16),
// so conversion is not an error source.
//
// Tolerance (per output element d), first-order error analysis with u = 2^-24:
//  * logits: s_t = scale * q.k_t. SIMD kernels sum each dot with >= 16 independent
//    partial sums (AVX2 2x8 lanes, AVX-512 2x16, NEON 4x4) and reduce them in <= 5
//    levels, then multiply by scale: |err| <= (hd/16 + 6) u scale sum_d |q_d k_td|.
//    Subtracting the running maximum m adds u |s_t - m|. Call the sum delta_t; an
//    absolute logit error delta_t is a relative error ~delta_t on p_t = exp(s_t - m).
//  * exp: the vectorised exp (Cephes reduction + degree-7 polynomial) was checked
//    exhaustively over every float in [-87, 0] against f64 exp: max relative error
//    1.99 u (AVX2 build; AVX-512/NEON evaluate the same FMA sequence). We use 3 u.
//    Inputs below -87 give 0 instead of < 1.7e-38 (negligible against l >= 1). The
//    once-per-chunk rescale exp(m_old - m_new) multiplies acc and l alike, so only its
//    two roundings per chunk remain: 2 u per chunk.
//  * accumulation: acc_d = sum p_t v_td and l = sum p_t are f32 sums in which a term
//    passes through at most n_pos + 3 * n_chunks + 16 roundings (sequential lane
//    chains, per-chunk rescales, final combinations): gamma = that count * u.
//  * output: out = acc / l: with eta_t = delta_t + 3u + gamma,
//      |err_d| <= sum_t w_t |v_td| eta_t + |out_d| sum_t w_t eta_t + 3 u |out_d|,
//    w_t = p_t / l the reference weights. We allow 1.25x that (second-order terms).
//  * pattern "exact": q, k small integers and scale a power of two, so every logit and
//    s_t - m is exact in f32 (delta_t = 0) and the bound is only exp + accumulation
//    (~30-100 u for n_pos <= 65): this is what catches errors in the exp polynomial,
//    which the dot-product term of the general bound would hide.
//  The scalar twins compute in double and round once: error ~u |out_d|, inside the bound.
// The bound can fail on real bugs: a missing rescale, a dropped/duplicated position or
// a wrong exp coefficient change out by >> tol (checked by sabotage while writing it).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "kernels/kernels.h"
#include "isa_fixture.h"

namespace pllm {

void PrintTo(Isa isa, std::ostream* os) { *os << isa_name(isa); }

namespace {

constexpr double kU = FLT_EPSILON / 2.0;
constexpr int kChunk = 64;  // the kernels' chunk (only used to count rescales in the bound)

enum class Pattern { random, rising, falling, exact };

struct Case {
  int hd = 64;
  int n_pos = 1;
  Pattern pat = Pattern::random;
  bool f16 = false;
};

struct Data {
  std::vector<float> q, k, v;  // k, v: [n_pos][2 * hd], already half-rounded for f16
  std::vector<uint16_t> kh, vh;
  float scale = 1.0f;
};

Data make_data(const Case& c, std::mt19937& rng) {
  const int hd = c.hd, n = c.n_pos;
  const int64_t stride = 2 * hd;
  Data D;
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> ni(-4, 4);
  const bool exact = c.pat == Pattern::exact;
  D.q.resize(size_t(hd));
  for (auto& x : D.q) x = exact ? float(ni(rng)) : nd(rng);
  D.k.resize(size_t(n * stride));
  D.v.resize(size_t(n * stride));
  for (int t = 0; t < n; ++t) {
    // rising: later keys have larger norms, so the running max tends to grow each chunk;
    // falling: the reverse (the first chunk holds the max).
    float g = 1.0f;
    if (c.pat == Pattern::rising) g = 0.2f + 1.8f * float(t + 1) / float(n);
    if (c.pat == Pattern::falling) g = 2.0f - 1.8f * float(t + 1) / float(n);
    for (int64_t i = 0; i < stride; ++i) {
      D.k[size_t(t * stride + i)] = exact ? float(ni(rng)) : g * nd(rng);
      D.v[size_t(t * stride + i)] = nd(rng);
    }
  }
  if (c.f16) {
    D.kh.resize(D.k.size());
    D.vh.resize(D.v.size());
    for (size_t i = 0; i < D.k.size(); ++i) {
      D.kh[i] = fp32_to_fp16(D.k[i]);
      D.vh[i] = fp32_to_fp16(D.v[i]);
      D.k[i] = fp16_to_fp32(D.kh[i]);
      D.v[i] = fp16_to_fp32(D.vh[i]);
    }
  }
  // scale so that max_t |q.k_t| maps to 30
  double mx = 0.0;
  for (int t = 0; t < n; ++t) {
    double s = 0.0;
    for (int d = 0; d < hd; ++d) s += double(D.q[size_t(d)]) * D.k[size_t(t * stride + hd + d)];
    mx = std::max(mx, std::fabs(s));
  }
  D.scale = mx > 0 ? float(30.0 / mx) : 1.0f;
  if (exact) D.scale = std::exp2(std::floor(std::log2(D.scale)));  // power of 2: logits exact
  return D;
}

// Reference output and the per-element tolerance described at the top.
void reference(const Case& c, const Data& D, std::vector<double>& out, std::vector<double>& tol) {
  const int hd = c.hd, n = c.n_pos;
  const int64_t stride = 2 * hd;
  std::vector<double> s(static_cast<size_t>(n)), S(static_cast<size_t>(n));
  double m = -INFINITY;
  for (int t = 0; t < n; ++t) {
    double dot = 0.0, abs = 0.0;
    for (int d = 0; d < hd; ++d) {
      const double pr = double(D.q[size_t(d)]) * D.k[size_t(t * stride + hd + d)];
      dot += pr;
      abs += std::fabs(pr);
    }
    s[size_t(t)] = dot * D.scale;
    S[size_t(t)] = abs * D.scale;
    m = std::max(m, s[size_t(t)]);
  }
  const int n_chunks = (n + kChunk - 1) / kChunk;
  const double gamma = (n + 3.0 * n_chunks + 16.0) * kU + 2.0 * n_chunks * kU;
  std::vector<double> w(static_cast<size_t>(n)), eta(static_cast<size_t>(n));
  double l = 0.0;
  for (int t = 0; t < n; ++t) {
    w[size_t(t)] = std::exp(s[size_t(t)] - m);
    l += w[size_t(t)];
    // exact pattern: integer q, k and a power-of-2 scale make every dot, scaled logit and
    // s - m exact in f32, so only the exp and the accumulation contribute.
    const double delta = c.pat == Pattern::exact
                             ? 0.0
                             : (hd / 16.0 + 6.0) * kU * S[size_t(t)] + kU * std::fabs(s[size_t(t)] - m);
    eta[size_t(t)] = delta + 3.0 * kU + gamma;
  }
  double weta = 0.0;
  for (int t = 0; t < n; ++t) {
    w[size_t(t)] /= l;
    weta += w[size_t(t)] * eta[size_t(t)];
  }
  out.assign(size_t(hd), 0.0);
  tol.assign(size_t(hd), 0.0);
  for (int d = 0; d < hd; ++d) {
    double o = 0.0, e = 0.0;
    for (int t = 0; t < n; ++t) {
      const double vv = D.v[size_t(t * stride + hd + d)];
      o += w[size_t(t)] * vv;
      e += w[size_t(t)] * std::fabs(vv) * eta[size_t(t)];
    }
    out[size_t(d)] = o;
    tol[size_t(d)] = 1.25 * (e + std::fabs(o) * weta + 3.0 * kU * std::fabs(o));
  }
}

// Runs the kernel; returns max |err| / tol over the elements (fails the test if > 1).
double check(const KernelTable& kt, const Case& c, std::mt19937& rng) {
  const Data D = make_data(c, rng);
  std::vector<double> ref, tol;
  reference(c, D, ref, tol);
  const int hd = c.hd;
  const int64_t stride = 2 * hd;
  std::vector<float> out(size_t(hd) + 16, 12345.0f);  // guard elements after out
  if (c.f16) {
    kt.attn_head_f16(D.q.data(), D.kh.data() + hd, D.vh.data() + hd, stride, c.n_pos, hd, D.scale, out.data());
  } else {
    kt.attn_head_f32(D.q.data(), D.k.data() + hd, D.v.data() + hd, stride, c.n_pos, hd, D.scale, out.data());
  }
  double worst = 0.0;
  int bad = 0;
  for (int d = 0; d < hd; ++d) {
    const double err = std::fabs(double(out[size_t(d)]) - ref[size_t(d)]);
    worst = std::max(worst, err / tol[size_t(d)]);
    if (!(err <= tol[size_t(d)]) && bad++ < 3) {
      ADD_FAILURE() << (c.f16 ? "f16" : "f32") << " hd=" << hd << " n_pos=" << c.n_pos
                    << " pattern=" << int(c.pat) << " d=" << d << ": got " << out[size_t(d)] << " want "
                    << ref[size_t(d)] << " |err| " << err << " > tol " << tol[size_t(d)];
    }
  }
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[size_t(hd + i)], 12345.0f) << "wrote past out[head_dim]";
  return worst;
}

class AttnIsa : public testing_isa::IsaFixture {};

TEST_P(AttnIsa, EntriesPresent) {
  ASSERT_NE(table_->attn_head_f32, nullptr);
  ASSERT_NE(table_->attn_head_f16, nullptr);
}

void sweep(const KernelTable& kt, bool f16, Isa isa) {
  std::mt19937 rng(777 + 10 * static_cast<int>(isa) + (f16 ? 1 : 0));
  double worst = 0.0, worst_exact = 0.0;
  for (int hd : {64, 128})
    for (int n : {1, 7, 64, 65, 300, 1000})
      for (Pattern p : {Pattern::random, Pattern::rising, Pattern::falling, Pattern::exact}) {
        const double r = check(kt, Case{hd, n, p, f16}, rng);
        (p == Pattern::exact ? worst_exact : worst) = std::max(p == Pattern::exact ? worst_exact : worst, r);
      }
  std::printf("[ %s %s ] max |err|/tol: float logits %.3g, exact logits %.3g\n", isa_name(isa),
              f16 ? "f16" : "f32", worst, worst_exact);
}

TEST_P(AttnIsa, F32MatchesF64Reference) { sweep(*table_, false, GetParam()); }
TEST_P(AttnIsa, F16MatchesF64Reference) { sweep(*table_, true, GetParam()); }

// Other head sizes: hd % 32 == 16 and hd % 64 != 0 take the kernels' tail paths.
TEST_P(AttnIsa, OtherHeadDims) {
  std::mt19937 rng(99);
  for (bool f16 : {false, true})
    for (int hd : {16, 48, 80, 96, 256})
      for (int n : {3, 130}) check(*table_, Case{hd, n, Pattern::random, f16}, rng);
}

// The softmax weight itself, through the kernel: two positions with logits 0 and x
// (exact: q = e_0, k_0 = 0, k_1 = x e_0, scale 1) and v_0 = 0, v_1 = e_0 give
// out[0] = e^x / (1 + e^x). The kernel computes p = exp(x) (<= 2 u measured, see top),
// l = 1 + p (u), 1 / l and the product (2 u): |out - ref| <= 6 u ref, plus 1.7e-38
// absolute for x < -87 where the kernel's exp flushes to 0. A polynomial coefficient
// off by ~1e-5 or a sloppy range reduction breaks this.
TEST_P(AttnIsa, SoftmaxWeightIsAccurate) {
  const int hd = 16;
  std::vector<float> q(hd, 0.0f), k(2 * hd, 0.0f), v(2 * hd, 0.0f), out(hd);
  std::vector<uint16_t> kh(2 * hd), vh(2 * hd);
  q[0] = 1.0f;
  v[size_t(hd)] = 1.0f;  // v_1 = e_0: out[0] is the weight of position 1, out[1..] = 0
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> ux(-90.0f, 0.0f);
  double worst = 0.0;
  for (int i = 0; i < 20000; ++i) {
    float x = i < 100 ? -0.01f * float(i) * float(i) : ux(rng);  // dense near 0, then uniform
    for (bool f16 : {false, true}) {
      if (f16) x = fp16_to_fp32(fp32_to_fp16(x));
      k[size_t(hd)] = x;
      if (f16) {
        for (size_t j = 0; j < k.size(); ++j) {
          kh[j] = fp32_to_fp16(k[j]);
          vh[j] = fp32_to_fp16(v[j]);
        }
        table_->attn_head_f16(q.data(), kh.data(), vh.data(), hd, 2, hd, 1.0f, out.data());
      } else {
        table_->attn_head_f32(q.data(), k.data(), v.data(), hd, 2, hd, 1.0f, out.data());
      }
      const double e = std::exp(double(x)), ref = e / (1.0 + e);
      const double err = std::fabs(double(out[0]) - ref), tol = 6.0 * kU * ref + 1.7e-38;
      if (ref > 1e-30) worst = std::max(worst, err / (kU * ref));
      ASSERT_LE(err, tol) << "x=" << x << (f16 ? " f16" : " f32") << " got " << out[0] << " want " << ref;
      ASSERT_EQ(out[1], 0.0f);
    }
  }
  std::printf("[ %s ] softmax weight max rel err %.2f u (tol 6 u)\n", isa_name(GetParam()), worst);
}

TEST_P(AttnIsa, UniformWeightsGiveMeanAndZeroPositionsGiveZeros) {
  // q = 0: every logit is 0, out = mean of v (exactly representable check within 1e-6).
  const int hd = 64, n = 100;
  std::vector<float> q(hd, 0.0f), k(size_t(n * hd), 1.0f), v(size_t(n * hd)), out(hd);
  for (int t = 0; t < n; ++t)
    for (int d = 0; d < hd; ++d) v[size_t(t * hd + d)] = float(t % 10) + 0.5f * float(d);
  table_->attn_head_f32(q.data(), k.data(), v.data(), hd, n, hd, 0.125f, out.data());
  for (int d = 0; d < hd; ++d) EXPECT_NEAR(out[size_t(d)], 4.5f + 0.5f * float(d), 1e-5f) << d;
  std::vector<float> z(hd, 7.0f);
  table_->attn_head_f32(q.data(), k.data(), v.data(), hd, 0, hd, 0.125f, z.data());
  for (int d = 0; d < hd; ++d) EXPECT_EQ(z[size_t(d)], 0.0f);
}

INSTANTIATE_TEST_SUITE_P(AllIsas, AttnIsa,
                         ::testing::Values(Isa::scalar, Isa::avx2, Isa::avx512, Isa::neon, Isa::neon_dotprod,
                                           Isa::neon_i8mm),
                         [](const ::testing::TestParamInfo<Isa>& info) { return std::string(isa_name(info.param)); });

}  // namespace
}  // namespace pllm
