// KV-cache segment kernels (KernelTable::attn_seg_f32/f16/q8/q4) on every runnable ISA
// table against an f64 reference computed on the DEQUANTISED cache (what the store-side
// quantisers of kv_format.h wrote), plus the quantisers' own round-trip bounds.
//
// Setup: a cache of n tokens with two kv-heads; the kernels read head 1, so strides and
// head offsets are exercised. Every check runs with n_q = 1, 3 and 7 query heads per call
// (grouped-query attention: the heads share the kv head): each head's result against its
// own f64 reference, against the same kernel called for that head alone, and against the
// scalar twin. q, k, v ~ N(0, 1) (pattern "outlier": every 13th key
// channel x8, as real keys have); scale maps max |q.k_t| to 30. For q8 the reference
// query is q quantised by kv_quantize_q8 (the kernels must quantise it identically:
// one differing code moves a score by ~|q|/127 |k_c|, far above the tolerance).
// q4 keys are quantised in full groups of 32 (the cache pads the last one here with
// extra tokens the kernel is never asked to read), values per token.
//
// Tolerance (per output element d), first-order error analysis with u = 2^-24:
//  * logits: every kernel sums a score in f32 chains of at most hd/8 terms (AVX-512 one
//    16-lane accumulator per token, AVX2 8 lanes, NEON 2-4 x 4 lanes) plus <= 4 reduction
//    levels, q' = q k_scale and bias for q4, the q8 group combination (hd/64 terms) and
//    the final * scale: |err| <= (hd/8 + 8) u B_t, where B_t = scale sum_c |q_c| K_tc and
//    K_tc bounds every partial term: |k_tc| (f32, f16, q8 with the quantised query), and
//    |k_min_c| + k_scale_c code_tc for q4 (the kernels expand k into min + scale * code).
//    Subtracting the running maximum adds u |s_t - m|. Call the sum delta_t.
//  * exp: the vectorised exp is the one of the attention kernels (<= 2 u measured); 3 u.
//    The once-per-chunk rescale exp(m_old - m_new): 2 u per chunk (a chunk is <= 64
//    tokens of one call; q4 calls cover <= 32 tokens, so one chunk each).
//  * accumulation: a term of acc_d = sum p_t v_td or l passes through at most
//    n + 4 * chunks + 20 roundings (lane chains, per-chunk rescale / store / q4 bias add,
//    p_t * value scale for q8/q4): gamma = that count * u. For q4 values |v_td| is again
//    replaced by |v_min| + v_scale * code (the kernels add p * min and p * scale * code
//    separately).
//  * out = acc / l with eta_t = delta_t + 3u + gamma:
//      |err_d| <= sum_t w_t V_td eta_t + |out_d| sum_t w_t eta_t + 3 u |out_d|, x1.25.
//  The scalar twins compute in double inside a call (f32 state between calls): inside it.
// Two results that each satisfy the bound differ by at most twice it: that is the
// tolerance for "several segments == one call" and "SIMD == its scalar twin".
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
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
constexpr int kG = kKvQ4GroupTokens;

enum class Fmt { f32, f16, q8, q4 };
const char* fmt_name(Fmt f) { return f == Fmt::f32 ? "f32" : f == Fmt::f16 ? "f16" : f == Fmt::q8 ? "q8" : "q4"; }
enum class Pat { random, outlier, exact, zero, equal, ties };

// The cache of one format, two kv-heads, plus head 1 dequantised and the magnitudes.
struct Cache {
  Fmt fmt;
  int hd = 0, n = 0, ng = 0;
  std::vector<float> kf, vf;  // f32: [n][2 hd]
  std::vector<uint16_t> kh, vh;
  std::vector<int8_t> k8, v8;  // q8: [n][2 hd] codes, [n][2 hd / 64] scales
  std::vector<float> ks8, vs8;
  std::vector<uint16_t> k4s, k4m, v4s, v4m;  // q4: [ng][2][hd], [ng][32][2][hd / 32]
  std::vector<uint8_t> k4c, v4c;             // [ng][32][2][hd / 2]
  std::vector<double> kd, vd, kmag, vmag;    // head 1: [n][hd]

  KvQ4GroupView view(int g) const {
    const size_t hd2 = size_t(hd) / 2, nb = size_t(hd) / 32;
    return {k4s.data() + (size_t(g) * 2 + 1) * size_t(hd), k4m.data() + (size_t(g) * 2 + 1) * size_t(hd),
            k4c.data() + size_t(g) * kG * hd + hd2,          v4s.data() + size_t(g) * kG * 2 * nb + nb,
            v4m.data() + size_t(g) * kG * 2 * nb + nb,       v4c.data() + size_t(g) * kG * hd + hd2,
            int64_t(hd),                                      int64_t(2 * nb)};
  }
};

// raw: [n_pad][2 hd] keys and values (n_pad = n rounded up to whole q4 groups).
Cache build(Fmt fmt, int hd, int n, const std::vector<float>& rk, const std::vector<float>& rv) {
  Cache C;
  C.fmt = fmt, C.hd = hd, C.n = n, C.ng = (n + kG - 1) / kG;
  const size_t row = 2 * size_t(hd), N = size_t(n) * row;
  C.kd.resize(size_t(n) * hd), C.vd.resize(C.kd.size()), C.kmag.resize(C.kd.size()), C.vmag.resize(C.kd.size());
  std::vector<float> y(static_cast<size_t>(hd));
  auto set_head1 = [&](std::vector<double>& dst, std::vector<double>& mag, int t, const float* src) {
    for (int c = 0; c < hd; ++c) dst[size_t(t) * hd + c] = src[c], mag[size_t(t) * hd + c] = std::fabs(src[c]);
  };
  if (fmt == Fmt::f32) {
    C.kf.assign(rk.begin(), rk.begin() + long(N)), C.vf.assign(rv.begin(), rv.begin() + long(N));
    for (int t = 0; t < n; ++t) set_head1(C.kd, C.kmag, t, &C.kf[t * row + hd]), set_head1(C.vd, C.vmag, t, &C.vf[t * row + hd]);
  } else if (fmt == Fmt::f16) {
    C.kh.resize(N), C.vh.resize(N);
    for (size_t i = 0; i < N; ++i) C.kh[i] = fp32_to_fp16(rk[i]), C.vh[i] = fp32_to_fp16(rv[i]);
    for (int t = 0; t < n; ++t) {
      for (int c = 0; c < hd; ++c) y[size_t(c)] = fp16_to_fp32(C.kh[t * row + hd + c]);
      set_head1(C.kd, C.kmag, t, y.data());
      for (int c = 0; c < hd; ++c) y[size_t(c)] = fp16_to_fp32(C.vh[t * row + hd + c]);
      set_head1(C.vd, C.vmag, t, y.data());
    }
  } else if (fmt == Fmt::q8) {
    const size_t srow = row / kKvQ8Group;
    C.k8.resize(N), C.v8.resize(N), C.ks8.resize(size_t(n) * srow), C.vs8.resize(size_t(n) * srow);
    for (int t = 0; t < n; ++t) {
      kv_quantize_q8(&rk[t * row], int(row), &C.k8[t * row], &C.ks8[t * srow]);
      kv_quantize_q8(&rv[t * row], int(row), &C.v8[t * row], &C.vs8[t * srow]);
      kv_dequantize_q8(&C.k8[t * row + hd], &C.ks8[t * srow + srow / 2], hd, y.data());
      set_head1(C.kd, C.kmag, t, y.data());
      kv_dequantize_q8(&C.v8[t * row + hd], &C.vs8[t * srow + srow / 2], hd, y.data());
      set_head1(C.vd, C.vmag, t, y.data());
    }
  } else {
    const size_t nb = size_t(hd) / 32;
    C.k4s.resize(size_t(C.ng) * row), C.k4m.resize(C.k4s.size());
    C.k4c.resize(size_t(C.ng) * kG * size_t(hd)), C.v4c.resize(C.k4c.size());
    C.v4s.resize(size_t(C.ng) * kG * 2 * nb), C.v4m.resize(C.v4s.size());
    std::vector<uint16_t> x16(kG * row);
    for (int g = 0; g < C.ng; ++g) {
      for (size_t i = 0; i < x16.size(); ++i) x16[i] = fp32_to_fp16(rk[size_t(g) * kG * row + i]);
      for (int h = 0; h < 2; ++h) {
        kv_quantize_q4_keys(x16.data() + h * hd, int64_t(row), hd, &C.k4c[size_t(g) * kG * hd + h * hd / 2], hd,
                            &C.k4s[(size_t(g) * 2 + h) * hd], &C.k4m[(size_t(g) * 2 + h) * hd]);
        for (int t = 0; t < kG; ++t) {
          const size_t tt = size_t(g) * kG + t;
          kv_quantize_q4_values(&rv[tt * row + h * hd], hd, &C.v4c[tt * hd + h * hd / 2], &C.v4s[(tt * 2 + h) * nb],
                                &C.v4m[(tt * 2 + h) * nb]);
        }
      }
      const KvQ4GroupView V = C.view(g);
      for (int t = 0; t < kG && g * kG + t < n; ++t) {
        const int tt = g * kG + t;
        kv_dequantize_q4_key(V.k_codes, V.code_stride, V.k_scale, V.k_min, t, hd, y.data());
        set_head1(C.kd, C.kmag, tt, y.data());
        kv_dequantize_q4_values(V.v_codes + t * V.code_stride, V.v_scale + t * V.vs_stride, V.v_min + t * V.vs_stride,
                                hd, y.data());
        set_head1(C.vd, C.vmag, tt, y.data());
        for (int c = 0; c < hd; ++c) {  // the kernels' expansion min + scale * code
          const int kc = (V.k_codes[t * V.code_stride + 16 * (c / 32) + c % 16] >> (c % 32 < 16 ? 0 : 4)) & 15;
          const int vc = (V.v_codes[t * V.code_stride + 16 * (c / 32) + c % 16] >> (c % 32 < 16 ? 0 : 4)) & 15;
          C.kmag[size_t(tt) * hd + c] = std::fabs(fp16_to_fp32(V.k_min[c])) + fp16_to_fp32(V.k_scale[c]) * kc;
          C.vmag[size_t(tt) * hd + c] = std::fabs(fp16_to_fp32(V.v_min[t * V.vs_stride + c / 32])) +
                                        fp16_to_fp32(V.v_scale[t * V.vs_stride + c / 32]) * vc;
        }
      }
    }
  }
  return C;
}

// Folds tokens [s0, s1) of head 1 into a[0..n_q) (query j at q + j * hd); returns the
// number of online-softmax chunks.
int run_seg(const KernelTable& T, const Cache& C, const float* q, int n_q, AttnScore scale, int s0, int s1,
            AttnAccum* a) {
  const int hd = C.hd;
  const size_t row = 2 * size_t(hd), off = size_t(s0) * row + hd;
  const size_t srow = row / kKvQ8Group;
  switch (C.fmt) {
    case Fmt::f32: T.attn_seg_f32(q, n_q, &C.kf[off], &C.vf[off], int64_t(row), s1 - s0, hd, scale, a); break;
    case Fmt::f16: T.attn_seg_f16(q, n_q, &C.kh[off], &C.vh[off], int64_t(row), s1 - s0, hd, scale, a); break;
    case Fmt::q8:
      T.attn_seg_q8(q, n_q, &C.k8[off], &C.ks8[size_t(s0) * srow + srow / 2], &C.v8[off], &C.vs8[size_t(s0) * srow + srow / 2],
                    int64_t(row), int64_t(srow), s1 - s0, hd, scale, a);
      break;
    case Fmt::q4: {
      int calls = 0;
      for (int t = s0; t < s1; ++calls) {  // a call covers part of one group
        const int g = t / kG, e = std::min(s1, (g + 1) * kG);
        T.attn_seg_q4(q, n_q, C.view(g), t - g * kG, e - g * kG, hd, scale, a);
        t = e;
      }
      return calls;
    }
  }
  return (s1 - s0 + kChunk - 1) / kChunk;
}

// Runs the segments [cuts[i], cuts[i+1]) into n_q states; out = finish, head j at j * hd.
std::vector<float> run(const KernelTable& T, const Cache& C, const float* q, int n_q, AttnScore scale,
                       const std::vector<int>& cuts, int* chunks) {
  std::vector<AttnAccum> a(static_cast<size_t>(n_q));
  for (AttnAccum& x : a) attn_accum_init(x, C.hd);
  *chunks = 0;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) *chunks += run_seg(T, C, q, n_q, scale, cuts[i], cuts[i + 1], a.data());
  std::vector<float> out(size_t(n_q) * size_t(C.hd));
  for (int j = 0; j < n_q; ++j) attn_accum_finish(a[size_t(j)], C.hd, &out[size_t(j) * size_t(C.hd)]);
  return out;
}

// Reference on the dequantised cache (qr: the query the kernel effectively uses) and the
// tolerance described at the top.
void reference(const Cache& C, const std::vector<double>& qr, float scale, bool exact, int chunks,
               std::vector<double>& out, std::vector<double>& tol) {
  const int hd = C.hd, n = C.n;
  std::vector<double> s(static_cast<size_t>(n)), B(static_cast<size_t>(n)), w(static_cast<size_t>(n)), eta(static_cast<size_t>(n));
  double m = -INFINITY;
  for (int t = 0; t < n; ++t) {
    double dot = 0.0, mag = 0.0;
    for (int c = 0; c < hd; ++c) {
      dot += qr[size_t(c)] * C.kd[size_t(t) * hd + c];
      mag += std::fabs(qr[size_t(c)]) * C.kmag[size_t(t) * hd + c];
    }
    s[size_t(t)] = dot * scale, B[size_t(t)] = mag * std::fabs(scale);
    m = std::max(m, s[size_t(t)]);
  }
  const double gamma = (n + 4.0 * chunks + 20.0) * kU + 2.0 * chunks * kU;
  double l = 0.0, weta = 0.0;
  for (int t = 0; t < n; ++t) {
    w[size_t(t)] = std::exp(s[size_t(t)] - m), l += w[size_t(t)];
    const double delta = exact ? 0.0 : (hd / 8.0 + 8.0) * kU * B[size_t(t)] + kU * std::fabs(s[size_t(t)] - m);
    eta[size_t(t)] = delta + 3.0 * kU + gamma;
  }
  for (int t = 0; t < n; ++t) w[size_t(t)] /= l, weta += w[size_t(t)] * eta[size_t(t)];
  out.assign(size_t(hd), 0.0), tol.assign(size_t(hd), 0.0);
  for (int c = 0; c < hd; ++c) {
    double o = 0.0, e = 0.0;
    for (int t = 0; t < n; ++t) {
      o += w[size_t(t)] * C.vd[size_t(t) * hd + c];
      e += w[size_t(t)] * C.vmag[size_t(t) * hd + c] * eta[size_t(t)];
    }
    out[size_t(c)] = o, tol[size_t(c)] = 1.25 * (e + std::fabs(o) * weta + 3.0 * kU * std::fabs(o));
  }
}

constexpr int kMaxQ = 7;  // query heads in the tests

struct Data {
  std::vector<float> q, k, v;  // q: kMaxQ heads of hd
  float scale = 1.0f;
};

Data make_raw(int hd, int n, Pat pat, std::mt19937& rng) {
  Data D;
  const int n_pad = (n + kG - 1) / kG * kG;
  const size_t row = 2 * size_t(hd);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> ni(-4, 4);
  auto gen = [&](int c, bool key) {
    if (pat == Pat::zero) return 0.0f;
    if (pat == Pat::equal) return 0.71875f;
    if (pat == Pat::exact) return float(ni(rng));
    return (key && pat == Pat::outlier && c % 13 == 0 ? 8.0f : 1.0f) * nd(rng);
  };
  D.q.resize(size_t(kMaxQ) * hd);
  for (int j = 0; j < kMaxQ; ++j)
    for (int c = 0; c < hd; ++c) {
      float& x = D.q[size_t(j) * hd + c];
      x = pat == Pat::equal ? 0.5f + 0.25f * float(j) : gen(c, false);
      if (pat == Pat::ties)  // q8: query scale exactly 1 and codes at x.5: round-half-even decides
        x = c % 64 == 0 ? 127.0f : float(((c + 3 * j) * 5) % 23 - 11) + 0.5f;
    }
  D.k.resize(size_t(n_pad) * row), D.v.resize(D.k.size());
  for (size_t i = 0; i < D.k.size(); ++i) D.k[i] = gen(int(i % size_t(hd)), true), D.v[i] = gen(0, false);
  if (pat == Pat::zero)  // zero keys, but values that are not: the mean of the values
    for (size_t i = 0; i < D.v.size(); ++i) D.v[i] = nd(rng);
  return D;
}

double check_case(const KernelTable& T, const KernelTable& S, Fmt fmt, int hd, int n, Pat pat, std::mt19937& rng,
                  const std::vector<int>& extra_cuts, int n_q) {
  Data D = make_raw(hd, n, pat, rng);
  const Cache C = build(fmt, hd, n, D.k, D.v);
  std::vector<std::vector<double>> qr(static_cast<size_t>(n_q));  // the queries the kernels effectively use
  double mx = 0.0;
  for (int j = 0; j < n_q; ++j) {
    const float* qj = &D.q[size_t(j) * hd];
    qr[size_t(j)].assign(qj, qj + hd);
    if (fmt == Fmt::q8) {
      std::vector<int8_t> qi(static_cast<size_t>(hd));
      std::vector<float> qs(size_t(hd) / kKvQ8Group), y(static_cast<size_t>(hd));
      kv_quantize_q8(qj, hd, qi.data(), qs.data());
      kv_dequantize_q8(qi.data(), qs.data(), hd, y.data());
      qr[size_t(j)].assign(y.begin(), y.end());
    }
    for (int t = 0; t < n; ++t) {
      double s = 0.0;
      for (int c = 0; c < hd; ++c) s += qr[size_t(j)][size_t(c)] * C.kd[size_t(t) * hd + c];
      mx = std::max(mx, std::fabs(s));
    }
  }
  float scale = mx > 0 ? float(30.0 / mx) : 0.125f;
  const bool exact = pat == Pat::exact && (fmt == Fmt::f32 || fmt == Fmt::f16);
  if (exact) scale = std::exp2(std::floor(std::log2(scale)));  // integer q.k, power-of-2 scale: exact logits

  std::vector<int> cuts{0};
  for (int c : extra_cuts)
    if (c > cuts.back() && c < n) cuts.push_back(c);
  cuts.push_back(n);
  int chunks = 0, chunks1 = 0, chunks_s = 0;
  const float* q = D.q.data();
  const std::vector<float> out = run(T, C, q, n_q, scale, cuts, &chunks);
  const std::vector<float> one = run(T, C, q, n_q, scale, {0, n}, &chunks1);
  const std::vector<float> twin = run(S, C, q, n_q, scale, cuts, &chunks_s);
  double worst = 0.0;
  int bad = 0;
  for (int j = 0; j < n_q; ++j) {
    auto fail = [&](const char* what, int c, double got, double want, double err, double t) {
      if (bad++ < 3)
        ADD_FAILURE() << isa_name(T.isa) << " " << fmt_name(fmt) << " hd=" << hd << " n=" << n << " pat=" << int(pat)
                      << " segments=" << cuts.size() - 1 << " n_q=" << n_q << " head " << j << " " << what
                      << " d=" << c << ": got " << got << " want " << want << " |err| " << err << " > tol " << t;
    };
    std::vector<double> ref, tol, tol1;
    reference(C, qr[size_t(j)], scale, exact, chunks, ref, tol);
    reference(C, qr[size_t(j)], scale, exact, chunks1, ref, tol1);
    // The same kernel with this head alone (n_q = 1 is the case itself).
    const std::vector<float> alone = n_q == 1 ? out : run(T, C, q + size_t(j) * hd, 1, scale, cuts, &chunks_s);
    const size_t o = size_t(j) * size_t(hd);
    for (int c = 0; c < hd; ++c) {
      const size_t i = size_t(c);
      const double got = out[o + i], e = std::fabs(got - ref[i]), e1 = std::fabs(one[o + i] - ref[i]);
      worst = std::max({worst, e / tol[i], e1 / tol1[i]});
      if (!(e <= tol[i])) fail("segments vs f64 reference", c, got, ref[i], e, tol[i]);
      if (!(e1 <= tol1[i])) fail("one call vs f64 reference", c, one[o + i], ref[i], e1, tol1[i]);
      const double es = std::fabs(got - one[o + i]);
      if (!(es <= tol[i] + tol1[i])) fail("segments vs one call", c, got, one[o + i], es, tol[i] + tol1[i]);
      const double et = std::fabs(got - twin[o + i]);
      if (!(et <= 2.0 * tol[i])) fail("vs scalar twin", c, got, twin[o + i], et, 2.0 * tol[i]);
      const double ea = std::fabs(got - alone[i]);
      if (!(ea <= 2.0 * tol[i])) fail("vs this head alone", c, got, alone[i], ea, 2.0 * tol[i]);
    }
  }
  return worst;
}

class KvIsa : public testing_isa::IsaFixture {};

TEST_P(KvIsa, EntriesPresent) {
  EXPECT_NE(table_->attn_seg_f32, nullptr);
  EXPECT_NE(table_->attn_seg_f16, nullptr);
  EXPECT_NE(table_->attn_seg_q8, nullptr);
  EXPECT_NE(table_->attn_seg_q4, nullptr);
}

void sweep(const KernelTable& T, const KernelTable& S, Fmt fmt) {
  std::mt19937 rng(1234 + 10 * int(T.isa) + int(fmt));
  for (int n_q : {1, 3, 7}) {
    double worst = 0.0;
    for (int hd : {64, 128, 256, 512})  // 512: Gemma 4's full-attention heads (kMaxHeadDim)
      for (int n : {1, 2, 31, 32, 33, 100, 600})
        for (Pat p : {Pat::random, Pat::outlier, Pat::exact}) {
          worst = std::max(worst, check_case(T, S, fmt, hd, n, p, rng, {5, 40}, n_q));
          if (n >= 100)
            worst = std::max(worst, check_case(T, S, fmt, hd, n, p, rng, {1, 63, 64, 65, 97, 131, 400}, n_q));
        }
    std::printf("[ %s %s n_q=%d ] max |err|/tol %.3g\n", isa_name(T.isa), fmt_name(fmt), n_q, worst);
  }
}

// Gemma 2's soft-capping (AttnScore::softcap): each format against the scalar twin, the f32
// format against an f64 reference of the capped softmax, and the cap must matter here.
TEST_P(KvIsa, SoftcapMatchesScalarTwinAndReference) {
  std::mt19937 rng(77 + int(table_->isa));
  const int hd = 128, n_q = 3;
  const AttnScore capped(0.25f, 3.0f);  // scaled scores ~N(0, 2.8): deep in tanh's bend
  for (Fmt fmt : {Fmt::f32, Fmt::f16, Fmt::q8, Fmt::q4})
    for (int n : {1, 33, 200}) {
      Data D = make_raw(hd, n, Pat::random, rng);
      const Cache C = build(fmt, hd, n, D.k, D.v);
      int ch = 0;
      const std::vector<int> cuts{0, n / 3, n};
      const std::vector<float> got = run(*table_, C, D.q.data(), n_q, capped, cuts, &ch);
      const std::vector<float> twin = run(*scalar_, C, D.q.data(), n_q, capped, cuts, &ch);
      const std::vector<float> plain = run(*scalar_, C, D.q.data(), n_q, 0.25f, cuts, &ch);
      double rms = 0.0, diff_plain = 0.0;
      for (size_t i = 0; i < twin.size(); ++i) rms += double(twin[i]) * twin[i];
      rms = std::sqrt(rms / double(twin.size()));
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], twin[i], 2e-5 * (rms + std::fabs(twin[i])))
            << isa_name(table_->isa) << " " << fmt_name(fmt) << " n=" << n << " i=" << i;
        diff_plain = std::max(diff_plain, std::fabs(double(twin[i]) - plain[i]));
      }
      if (n > 1) EXPECT_GT(diff_plain, 0.05 * rms) << fmt_name(fmt) << " n=" << n << ": the cap changed nothing";
      if (fmt != Fmt::f32) continue;
      for (int j = 0; j < n_q; ++j) {  // f64: s = 3 tanh(0.25 q.k / 3) over head 1's keys, softmax, values
        std::vector<double> s(static_cast<size_t>(n));
        double m = -INFINITY, l = 0.0;
        for (int t = 0; t < n; ++t) {
          double dot = 0.0;
          for (int c = 0; c < hd; ++c) dot += double(D.q[size_t(j) * hd + c]) * C.kd[size_t(t) * hd + c];
          s[size_t(t)] = 3.0 * std::tanh(0.25 * dot / 3.0);
          m = std::max(m, s[size_t(t)]);
        }
        for (int t = 0; t < n; ++t) l += std::exp(s[size_t(t)] - m);
        for (int c = 0; c < hd; ++c) {
          double o = 0.0;
          for (int t = 0; t < n; ++t) o += std::exp(s[size_t(t)] - m) / l * C.vd[size_t(t) * hd + c];
          ASSERT_NEAR(twin[size_t(j) * hd + c], o, 1e-5 * (rms + std::fabs(o))) << "n=" << n << " head " << j;
        }
      }
    }
}

TEST_P(KvIsa, F32) { sweep(*table_, *scalar_, Fmt::f32); }
TEST_P(KvIsa, F16) { sweep(*table_, *scalar_, Fmt::f16); }
TEST_P(KvIsa, Q8) { sweep(*table_, *scalar_, Fmt::q8); }
TEST_P(KvIsa, Q4) { sweep(*table_, *scalar_, Fmt::q4); }

// f32/f16 head dims that are not a multiple of 64 (16 * odd: the SIMD kernels' value
// accumulation ends in a partial block), e.g. hd 32 of the tiny test models.
TEST_P(KvIsa, HeadDimsNotMultipleOf64) {
  std::mt19937 rng(99);
  for (Fmt f : {Fmt::f32, Fmt::f16})
    for (int hd : {16, 32, 48, 80, 112, 208})
      for (int n : {1, 33, 100})
        for (int n_q : {1, 3, 7}) check_case(*table_, *scalar_, f, hd, n, Pat::outlier, rng, {5, 40, 70}, n_q);
}

// All-zero keys (every score 0: out = mean of the values), all-zero query (q8: a zero
// query scale), all-equal keys/values/query (q4: max == min -> scale 0 in every group),
// and a query whose q8 codes are all ties (x.5) that only round-half-even gets right.
TEST_P(KvIsa, ZeroAndEqualInputs) {
  std::mt19937 rng(42);
  for (Fmt f : {Fmt::f32, Fmt::f16, Fmt::q8, Fmt::q4})
    for (Pat p : {Pat::zero, Pat::equal, Pat::ties})
      for (int n : {1, 33, 100})
        for (int n_q : {1, 3, 7}) check_case(*table_, *scalar_, f, 64, n, p, rng, {5, 40}, n_q);
}

// n <= 0 (and an empty q4 range) leaves the state untouched, bit for bit.
TEST_P(KvIsa, EmptySegmentLeavesStateUnchanged) {
  std::mt19937 rng(7);
  const int hd = 128, n = 40;
  Data D = make_raw(hd, n, Pat::random, rng);
  for (Fmt f : {Fmt::f32, Fmt::f16, Fmt::q8, Fmt::q4})
    for (int n_q : {1, 3, 7}) {
      const Cache C = build(f, hd, n, D.k, D.v);
      AttnAccum a[kMaxQ + 1];  // a[n_q] is a sentinel the kernels must not touch either
      for (AttnAccum& x : a) attn_accum_init(x, hd);
      run_seg(*table_, C, D.q.data(), n_q, 0.1f, 0, 20, a);
      AttnAccum b[kMaxQ + 1];
      std::memcpy(b, a, sizeof(a));
      run_seg(*table_, C, D.q.data(), n_q, 0.1f, 20, 20, a);
      if (f == Fmt::q4) table_->attn_seg_q4(D.q.data(), n_q, C.view(0), 7, 7, hd, 0.1f, a);
      if (f == Fmt::f32) table_->attn_seg_f32(D.q.data(), n_q, C.kf.data(), C.vf.data(), 2 * hd, -3, hd, 0.1f, a);
      for (int j = 0; j <= n_q; ++j) {
        EXPECT_EQ(std::memcmp(&a[j].m, &b[j].m, sizeof(float)), 0) << fmt_name(f) << " n_q " << n_q << " head " << j;
        EXPECT_EQ(std::memcmp(&a[j].l, &b[j].l, sizeof(float)), 0) << fmt_name(f) << " n_q " << n_q << " head " << j;
        EXPECT_EQ(std::memcmp(a[j].acc, b[j].acc, sizeof(a[j].acc)), 0) << fmt_name(f) << " n_q " << n_q << " head " << j;
      }
      if (n_q < kMaxQ) {  // the sentinel after the last head was not written by the non-empty call either
        AttnAccum z;
        attn_accum_init(z, hd);
        EXPECT_EQ(std::memcmp(&a[n_q].l, &z.l, sizeof(float)), 0) << fmt_name(f) << " n_q " << n_q;
      }
    }
}

// The softmax weight itself (the exp and the online-softmax driver every format of an
// ISA shares): two tokens with exact logits 0 and x (q = e_0, k_0 = 0, k_1 = x e_0,
// scale 1), v_0 = 0, v_1 = e_0 give out[0] = e^x / (1 + e^x);
// |out - ref| <= 6 u ref (+1.7e-38 where exp flushes to 0). Each token in its own
// segment too, so the carried state is exercised; and with three identical query heads in
// one call. A polynomial coefficient off by ~1e-4 passes the sweeps above but not this.
TEST_P(KvIsa, SoftmaxWeightIsAccurate) {
  const int hd = 64, nq3 = 3;
  std::vector<float> q(nq3 * hd, 0.0f), k(2 * hd, 0.0f), v(2 * hd, 0.0f), out(hd);
  std::vector<uint16_t> kh(2 * hd), vh(2 * hd);
  for (int j = 0; j < nq3; ++j) q[size_t(j * hd)] = 1.0f;
  v[size_t(hd)] = 1.0f;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> ux(-90.0f, 0.0f);
  double worst = 0.0;
  for (int i = 0; i < 5000; ++i) {
    float x = i < 100 ? -0.01f * float(i) * float(i) : ux(rng);
    for (int mode = 0; mode < 8; ++mode) {  // f32 / f16 x one call / two segments x one / three heads
      const bool f16 = mode & 1, split = mode & 2;
      const int n_q = mode & 4 ? nq3 : 1;
      if (f16) x = fp16_to_fp32(fp32_to_fp16(x));
      k[size_t(hd)] = x;
      for (size_t j = 0; j < k.size(); ++j) kh[j] = fp32_to_fp16(k[j]), vh[j] = fp32_to_fp16(v[j]);
      AttnAccum a[nq3];
      for (AttnAccum& y : a) attn_accum_init(y, hd);
      for (int s = 0; s < (split ? 2 : 1); ++s) {
        const int t0 = split ? s : 0, nt = split ? 1 : 2;
        if (f16)
          table_->attn_seg_f16(q.data(), n_q, &kh[size_t(t0 * hd)], &vh[size_t(t0 * hd)], hd, nt, hd, 1.0f, a);
        else
          table_->attn_seg_f32(q.data(), n_q, &k[size_t(t0 * hd)], &v[size_t(t0 * hd)], hd, nt, hd, 1.0f, a);
      }
      for (int j = 0; j < n_q; ++j) {
        attn_accum_finish(a[j], hd, out.data());
        const double e = std::exp(double(x)), ref = e / (1.0 + e);
        const double err = std::fabs(double(out[0]) - ref), tol = 6.0 * kU * ref + 1.7e-38;
        if (ref > 1e-30) worst = std::max(worst, err / (kU * ref));
        ASSERT_LE(err, tol) << "x=" << x << " mode " << mode << " head " << j << " got " << out[0] << " want " << ref;
        ASSERT_EQ(out[1], 0.0f);
      }
    }
  }
  std::printf("[ %s ] softmax weight max rel err %.2f u (tol 6 u)\n", isa_name(GetParam()), worst);
}

INSTANTIATE_TEST_SUITE_P(AllIsas, KvIsa,
                         ::testing::ValuesIn(testing_isa::kAllIsas), testing_isa::IsaParamName());

// ---- store side ----

TEST(KvQuant, Q8RoundTripWithinHalfStep) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  const int n = 256;
  std::vector<float> x(n), y(n), s(n / kKvQ8Group);
  std::vector<int8_t> c(n);
  for (int rep = 0; rep < 200; ++rep) {
    for (int i = 0; i < n; ++i) x[size_t(i)] = (rep % 4 == 3 && i < 64) ? 0.0f : nd(rng) * float(1 + rep % 7);
    kv_quantize_q8(x.data(), n, c.data(), s.data());
    kv_dequantize_q8(c.data(), s.data(), n, y.data());
    for (int g = 0; g < n / kKvQ8Group; ++g) {
      float amax = 0.0f;
      for (int i = 0; i < kKvQ8Group; ++i) amax = std::max(amax, std::fabs(x[size_t(g * kKvQ8Group + i)]));
      ASSERT_EQ(s[size_t(g)], amax / 127.0f);
    }
    for (int i = 0; i < n; ++i) {
      const double sc = s[size_t(i / kKvQ8Group)];
      ASSERT_GE(c[size_t(i)], -127);
      // half a step, plus the roundings of x / scale (u relative) and code * scale.
      ASSERT_LE(std::fabs(double(x[size_t(i)]) - y[size_t(i)]), sc / 2.0 * (1.0 + 1e-6) + kU * std::fabs(x[size_t(i)]))
          << i;
    }
  }
}

// |x - x^| <= s_h / 2 + |min - min_h| + 15 |s - s_h| (+ f32 roundings): half a step
// inside the range; the clamps at 0 and 15 only see the fp16 rounding of min and scale.
double q4_bound(float mn, float mx, uint16_t sh, uint16_t mh) {
  const double s = double(mx - mn) / 15.0;
  return fp16_to_fp32(sh) / 2.0 + std::fabs(double(mn) - fp16_to_fp32(mh)) + 15.0 * std::fabs(s - fp16_to_fp32(sh)) +
         4.0 * kU * (std::fabs(mn) + std::fabs(mx));
}

TEST(KvQuant, Q4ValuesRoundTrip) {
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0.5f, 3.0f);
  const int n = 128;
  std::vector<float> x(n), y(n);
  std::vector<uint8_t> c(n / 2);
  std::vector<uint16_t> sc(n / 32), mn(n / 32);
  for (int rep = 0; rep < 300; ++rep) {
    for (int i = 0; i < n; ++i) x[size_t(i)] = rep % 5 == 4 && i < 32 ? -1.25f : nd(rng);  // one constant block
    kv_quantize_q4_values(x.data(), n, c.data(), sc.data(), mn.data());
    kv_dequantize_q4_values(c.data(), sc.data(), mn.data(), n, y.data());
    for (int b = 0; b < n / 32; ++b) {
      const float lo = *std::min_element(&x[size_t(b) * 32], &x[size_t(b) * 32 + 32]);
      const float hi = *std::max_element(&x[size_t(b) * 32], &x[size_t(b) * 32 + 32]);
      EXPECT_EQ(sc[size_t(b)], lo == hi ? 0 : fp32_to_fp16((hi - lo) / 15.0f));
      EXPECT_EQ(mn[size_t(b)], fp32_to_fp16(lo));
      const double bound = q4_bound(lo, hi, sc[size_t(b)], mn[size_t(b)]);
      for (int i = b * 32; i < b * 32 + 32; ++i)
        ASSERT_LE(std::fabs(double(x[size_t(i)]) - y[size_t(i)]), bound) << rep << " " << i;
    }
  }
}

TEST(KvQuant, Q4KeysRoundTripPerChannel) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int n = 64, xs = 2 * n;  // row stride of two heads; quantise head 1
  const int64_t cs = n;          // code rows padded to a stride larger than n / 2
  std::vector<uint16_t> x(size_t(kG) * xs), ks(n), km(n);
  std::vector<uint8_t> codes(size_t(kG) * cs, 0xAA);
  std::vector<float> y(n);
  for (int rep = 0; rep < 50; ++rep) {
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = fp32_to_fp16(int(i % xs) == n + 5 ? 3.0f : nd(rng) * float(1 + int(i % 13 == 0) * 20));
    kv_quantize_q4_keys(x.data() + n, xs, n, codes.data(), cs, ks.data(), km.data());
    EXPECT_EQ(ks[5], 0);  // channel 5 is constant across the group
    for (int t = 0; t < kG; ++t) {
      kv_dequantize_q4_key(codes.data(), cs, ks.data(), km.data(), t, n, y.data());
      for (int c = 0; c < n; ++c) {
        float lo = INFINITY, hi = -INFINITY;
        for (int u = 0; u < kG; ++u) {
          lo = std::min(lo, fp16_to_fp32(x[size_t(u) * xs + n + c]));
          hi = std::max(hi, fp16_to_fp32(x[size_t(u) * xs + n + c]));
        }
        ASSERT_LE(std::fabs(double(fp16_to_fp32(x[size_t(t) * xs + n + c])) - y[size_t(c)]),
                  q4_bound(lo, hi, ks[size_t(c)], km[size_t(c)]))
            << t << " " << c;
      }
    }
    for (int t = 0; t < kG; ++t)  // the padding after each code row is not touched
      for (int64_t i = n / 2; i < cs; ++i) ASSERT_EQ(codes[size_t(t * cs + i)], 0xAA);
  }
}

// The nibble order of kv_format.h, checked on raw bytes: channel c of a row is in byte
// 16 * (c / 32) + c % 16, low nibble for c % 32 < 16. Values 0..15 (min 0, max 15) give
// scale 1 and code = value.
TEST(KvQuant, Q4NibbleOrder) {
  const int n = 64;
  std::vector<float> x(n);
  for (int c = 0; c < n; ++c) x[size_t(c)] = float((c * 7 + c / 32) % 16);
  std::vector<uint8_t> codes(n / 2);
  std::vector<uint16_t> sc(n / 32), mn(n / 32);
  kv_quantize_q4_values(x.data(), n, codes.data(), sc.data(), mn.data());
  for (int b = 0; b < n / 32; ++b) {
    EXPECT_EQ(fp16_to_fp32(sc[size_t(b)]), 1.0f);
    EXPECT_EQ(fp16_to_fp32(mn[size_t(b)]), 0.0f);
  }
  for (int c = 0; c < n; ++c) {
    const int byte = codes[size_t(16 * (c / 32) + c % 16)];
    EXPECT_EQ(c % 32 < 16 ? (byte & 15) : (byte >> 4), int(x[size_t(c)])) << c;
  }
}

}  // namespace
}  // namespace pllm
