// KvCache (model/kv_cache.*): every stored type, with and without a sliding window and
// sinks, batches of several sizes so the ring wraps at every offset; each query's output
// is compared with a brute-force float64 attention over exactly the positions StreamingLLM
// says it sees, with the sinks' keys rotated to sit right before the window (computed
// here by rotating the keys, independently of the cache, which rotates the query).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <tuple>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "kernels/kernels.h"
#include "kernels/kv_format.h"
#include "model/kv_cache.h"
#include "kv_test_model.h"

namespace pllm {
namespace {

using namespace kvtest;

constexpr int G = kKvQ4GroupTokens;

// Independent rotation (double) of one head by `pos`: adjacent pairs or halves.
void rotate(std::vector<double>& x, const std::vector<float>& inv_freq, double pos, bool neox) {
  const int half = kHd / 2;
  for (int i = 0; i < half; ++i) {
    const double th = pos * double(inv_freq[size_t(i)]);
    const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
    const double x0 = x[size_t(a)], x1 = x[size_t(b)];
    x[size_t(a)] = x0 * std::cos(th) - x1 * std::sin(th);
    x[size_t(b)] = x0 * std::sin(th) + x1 * std::cos(th);
  }
}

// What the cache gives back for position j's key/value row to a query at position p: for
// q4, j is read from its quantised group only if that group is complete at p (else f16),
// whatever else the batch stored.
struct Emulator {
  KvType type;
  int sinks, window;
  const std::vector<std::vector<float>>& K;
  const std::vector<std::vector<float>>& V;

  // Rows already emulated for the current batch (the state only changes between batches).
  mutable std::map<std::tuple<int, bool, bool>, std::vector<double>> memo;
  mutable int memo_end = -1;

  // end: the batch's end (values may change between batches after a truncation).
  const std::vector<double>& row(int j, int p, int end, bool key) const {
    if (end != memo_end) {
      memo.clear();
      memo_end = end;
    }
    const int S = sinks;
    const int tail_start = p + 1 <= S ? S : S + (p + 1 - S) / G * G;
    const bool grouped = type == KvType::q4 && j >= S && j < tail_start;
    auto it = memo.find({j, key, grouped});
    if (it == memo.end()) it = memo.emplace(std::make_tuple(j, key, grouped), compute(j, grouped, key)).first;
    return it->second;
  }

  std::vector<double> compute(int j, bool grouped, bool key) const {
    const std::vector<float>& src = key ? K[size_t(j)] : V[size_t(j)];
    std::vector<double> out(kDim);
    auto f16 = [](float x) { return double(fp16_to_fp32(fp32_to_fp16(x))); };
    switch (type) {
      case KvType::f32:
        for (int i = 0; i < kDim; ++i) out[size_t(i)] = src[size_t(i)];
        return out;
      case KvType::f16:
        for (int i = 0; i < kDim; ++i) out[size_t(i)] = f16(src[size_t(i)]);
        return out;
      case KvType::q8: {
        std::vector<int8_t> c(kDim);
        std::vector<float> s(kDim / kKvQ8Group), y(kDim);
        kv_quantize_q8(src.data(), kDim, c.data(), s.data());
        kv_dequantize_q8(c.data(), s.data(), kDim, y.data());
        for (int i = 0; i < kDim; ++i) out[size_t(i)] = y[size_t(i)];
        return out;
      }
      case KvType::q4: break;
    }
    const int S = sinks;
    if (!grouped) {
      for (int i = 0; i < kDim; ++i) out[size_t(i)] = f16(src[size_t(i)]);
      return out;
    }
    const int g0 = S + (j - S) / G * G;
    std::vector<float> y(kDim);
    if (key) {
      std::vector<uint16_t> rows(size_t(G) * kDim);
      for (int t = 0; t < G; ++t)
        for (int i = 0; i < kDim; ++i) rows[size_t(t) * kDim + size_t(i)] = fp32_to_fp16(K[size_t(g0 + t)][size_t(i)]);
      std::vector<uint8_t> codes(size_t(G) * kDim / 2);
      std::vector<uint16_t> sc(kDim), mn(kDim);
      kv_quantize_q4_keys(rows.data(), kDim, kDim, codes.data(), kDim / 2, sc.data(), mn.data());
      kv_dequantize_q4_key(codes.data(), kDim / 2, sc.data(), mn.data(), j - g0, kDim, y.data());
    } else {
      std::vector<float> x(kDim);
      for (int i = 0; i < kDim; ++i) x[size_t(i)] = float(f16(src[size_t(i)]));
      std::vector<uint8_t> codes(kDim / 2);
      std::vector<uint16_t> sc(kDim / kKvQ4ValueBlock), mn(kDim / kKvQ4ValueBlock);
      kv_quantize_q4_values(x.data(), kDim, codes.data(), sc.data(), mn.data());
      kv_dequantize_q4_values(codes.data(), sc.data(), mn.data(), kDim, y.data());
    }
    for (int i = 0; i < kDim; ++i) out[size_t(i)] = y[size_t(i)];
    return out;
  }
};

// q as the q8 kernels see it: int8 per 64 with scale amax / 127.
std::vector<double> q8_round(const std::vector<double>& q) {
  std::vector<double> out(q.size());
  for (size_t g = 0; g < q.size(); g += kKvQ8Group) {
    double amax = 0;
    for (size_t i = g; i < g + kKvQ8Group; ++i) amax = std::max(amax, std::fabs(q[i]));
    const float d = float(amax / 127.0);
    for (size_t i = g; i < g + kKvQ8Group; ++i)
      out[i] = d == 0.0f ? 0.0 : double(std::nearbyint(float(q[i]) / d)) * double(d);
  }
  return out;
}

// One query head over everything position pos sees: attend_part as a single slice.
void attend_whole(const KvCache& kv, int l, int pos, int kv_head, const float* q, const RopeSpec& rope, float* out) {
  AttnAccum a;
  attn_accum_init(a, kHd);
  kv.attend_part(l, pos, kv_head, 1, q, 0.125f, rope, 0, 1, &a);
  attn_accum_finish(a, kHd, out);
}

struct Scenario {
  KvType type;
  int window, sinks, batch;
  bool neox;
};

std::string name(const Scenario& s) {
  return std::string(kv_type_name(s.type)) + " W" + std::to_string(s.window) + " S" + std::to_string(s.sinks) +
         " B" + std::to_string(s.batch) + (s.neox ? " neox" : "");
}

double tolerance(KvType t) { return t == KvType::q8 ? 2e-3 : 2e-5; }

// Writes n_pos positions in batches, checks every query; `truncations`: after the
// position given, truncate to the second value and continue with fresh values.
void run_scenario(const Scenario& sc, int n_pos, const std::vector<std::pair<int, int>>& truncations = {}) {
  SCOPED_TRACE(name(sc));
  const ModelConfig c = tiny_config(2);
  KvOptions o;
  o.type = sc.type;
  o.window = sc.window;
  o.sinks = sc.sinks;
  ASSERT_TRUE(KvCache::validate(c, o).ok());
  const int n_ctx = sc.window ? 16 : n_pos;
  KvCache kv(c, o, n_ctx, sc.batch, {});
  EXPECT_EQ(kv.unbounded(), sc.window > 0);
  const int S = sc.window ? sc.sinks : 0;

  std::mt19937 rng(1234u + unsigned(sc.window * 7 + sc.sinks * 3 + sc.batch));
  std::normal_distribution<float> nd;
  const std::vector<float> inv_freq = rope_inv_freq();
  const RopeSpec rope{inv_freq.data(), kHd, sc.neox};
  std::vector<std::vector<float>> K[2], V[2];  // per layer, per position
  for (auto& k : K) k.resize(size_t(n_pos));
  for (auto& v : V) v.resize(size_t(n_pos));
  auto fresh = [&](int layer, int p) {
    K[layer][size_t(p)].resize(kDim);
    V[layer][size_t(p)].resize(kDim);
    for (int i = 0; i < kDim; ++i) {
      K[layer][size_t(p)][size_t(i)] = nd(rng);
      V[layer][size_t(p)][size_t(i)] = nd(rng);
    }
  };
  size_t next_trunc = 0;
  int checked = 0;
  for (int pos0 = 0; pos0 < n_pos;) {
    const int n = std::min(sc.batch, n_pos - pos0);
    ASSERT_EQ(kv.end(), pos0);
    ASSERT_TRUE(kv.begin_batch(pos0, n).ok());
    for (int layer = 0; layer < 2; ++layer)
      for (int p = pos0; p < pos0 + n; ++p) {
        fresh(layer, p);
        kv.store(layer, p, K[layer][size_t(p)].data(), V[layer][size_t(p)].data());
      }
    const int end = pos0 + n;
    for (int layer = 0; layer < 2; ++layer) {
      const Emulator em{sc.type, S, sc.window, K[layer], V[layer]};
      for (int p = pos0; p < end; ++p) {
        for (int h = 0; h < kKvHeads; ++h) {
          std::vector<float> q(kHd), got(kHd);
          for (float& x : q) x = nd(rng) * 0.3f;
          attend_whole(kv, layer, p, h, q.data(), rope, got.data());
          // Reference: visible positions and their (possibly re-placed) keys.
          const int lo = sc.window ? std::max(S, p - (sc.window - S) + 1) : 0;
          std::vector<int> vis;
          for (int j = 0; j < std::min(S, p + 1); ++j) vis.push_back(j);
          for (int j = std::max(lo, S); j <= p; ++j) vis.push_back(j);
          std::vector<double> qd(q.begin(), q.end());
          std::vector<double> qq = sc.type == KvType::q8 ? q8_round(qd) : qd;
          std::vector<double> s(vis.size());
          double mx = -1e300;
          for (size_t t = 0; t < vis.size(); ++t) {
            const int j = vis[t];
            const std::vector<double>& krow = em.row(j, p, end, true);
            std::vector<double> k(krow.begin() + h * kHd, krow.begin() + (h + 1) * kHd);
            std::vector<double> qj = qq;
            if (j < S && lo > S) {
              if (sc.type == KvType::q8) {
                qj = qd;  // the q8 kernel quantises the rotated query
                rotate(qj, inv_freq, -double(lo - S), sc.neox);
                qj = q8_round(qj);
              } else {
                rotate(k, inv_freq, double(lo - S), sc.neox);
              }
            }
            double dot = 0;
            for (int d = 0; d < kHd; ++d) dot += qj[size_t(d)] * k[size_t(d)];
            s[t] = 0.125 * dot;
            mx = std::max(mx, s[t]);
          }
          std::vector<double> want(kHd, 0.0);
          double l = 0;
          for (size_t t = 0; t < vis.size(); ++t) {
            const double w = std::exp(s[t] - mx);
            l += w;
            const std::vector<double>& vrow = em.row(vis[t], p, end, false);
            for (int d = 0; d < kHd; ++d) want[size_t(d)] += w * vrow[size_t(h * kHd + d)];
          }
          for (int d = 0; d < kHd; ++d) {
            ASSERT_NEAR(got[size_t(d)], want[size_t(d)] / l, tolerance(sc.type))
                << "layer " << layer << " pos " << p << " head " << h << " dim " << d;
          }
          ++checked;
        }
      }
    }
    pos0 = end;
    if (next_trunc < truncations.size() && pos0 >= truncations[next_trunc].first) {
      const int want_m = truncations[next_trunc++].second;
      const int m = kv.truncate(want_m);
      EXPECT_LE(m, want_m);
      if (sc.type != KvType::q4 && sc.window == 0) EXPECT_EQ(m, want_m);
      pos0 = m;
    }
  }
  EXPECT_GT(checked, 0);
}

TEST(KvCache, NoWindowEveryType) {
  for (KvType t : {KvType::f32, KvType::f16, KvType::q8, KvType::q4})
    for (int b : {1, 7, 64}) run_scenario({t, 0, 0, b, false}, 100);
}

TEST(KvCache, WindowWithSinksWrapsAtEveryOffset) {
  for (KvType t : {KvType::f32, KvType::f16, KvType::q8})
    for (int w : {8, 9})
      for (int s : {0, 1, 4})
        for (int b : {1, 3, 8})
          for (bool neox : {false, true}) run_scenario({t, w, s, b, neox}, 70);
}

TEST(KvCache, Q4WindowAcrossGroupsAndTail) {
  for (int w : {40, 70})
    for (int s : {0, 4})
      for (int b : {1, 5, 33}) run_scenario({KvType::q4, w, s, b, false}, 230);
}

TEST(KvCache, TruncateResumesExactly) {
  // No window: any prefix; window: only while the window behind it is still stored.
  run_scenario({KvType::f16, 0, 0, 4, false}, 60, {{20, 13}, {40, 39}});
  run_scenario({KvType::q8, 12, 2, 3, false}, 60, {{30, 28}, {45, 20}});
  run_scenario({KvType::q4, 0, 0, 8, false}, 120, {{80, 70}, {100, 99}});
  run_scenario({KvType::q4, 40, 4, 5, false}, 200, {{150, 140}, {170, 60}});
  // Back across KV blocks (their memory is released, then committed again by the refill).
  run_scenario({KvType::f32, 0, 0, 16, false}, 200, {{160, 30}, {192, 64}});
  run_scenario({KvType::q8, 0, 0, 7, false}, 210, {{203, 63}, {140, 65}});
  run_scenario({KvType::q4, 0, 0, 8, false}, 240, {{200, 32}, {232, 96}});
  run_scenario({KvType::q8, 40, 4, 5, false}, 230, {{150, 140}, {170, 40}});
}

TEST(KvCache, TruncateRules) {
  const ModelConfig c = tiny_config(1);
  std::vector<float> k(kDim, 0.5f), v(kDim, 0.25f);
  auto fill = [&](KvCache& kv, int n) {
    for (int p = kv.end(); p < n; ++p) {
      ASSERT_TRUE(kv.begin_batch(p, 1).ok());
      kv.store(0, p, k.data(), v.data());
    }
  };
  {  // window 10, sinks 2, batch 1: ring of 8 slots + sinks; after 40 positions only the
     // last ~8 are stored, so resuming at 35 (needs 28..34) is impossible: back to the sinks.
    KvCache kv(c, {KvType::f16, 10, 2}, 16, 1, {});
    fill(kv, 40);
    EXPECT_EQ(kv.truncate(39), 39);
    fill(kv, 40);
    EXPECT_EQ(kv.truncate(35), 2);
    EXPECT_EQ(kv.end(), 2);
  }
  {  // q4 without a window: resuming inside a quantised group needs its f16 rows, which
     // the last G + batch positions keep (40 with batch 8); older groups resume at their start.
    KvCache kv(c, {KvType::q4, 0, 4}, 256, 8, {});
    fill(kv, 3 * G + 5);
    EXPECT_EQ(kv.truncate(3 * G + 3), 3 * G + 3);  // in the incomplete group
    EXPECT_EQ(kv.truncate(2 * G + 7), 2 * G + 7);  // quantised, but its f16 rows are still kept
    fill(kv, 3 * G + 5);
    EXPECT_EQ(kv.truncate(G + 7), G);              // too old: back to the group's start
    EXPECT_EQ(kv.truncate(0), 0);
  }
}

// A hybrid model's cache (lfm2): layers 0 and 2 are convolutions of 3 taps, layer 1 attention.
TEST(KvCache, ConvolutionStateRollsBackAndSnapshotsWithinItsHistory) {
  ModelConfig c = tiny_config(3);
  c.recurrent_layer = {1, 0, 1};
  c.conv_taps = 3;
  const int E = c.n_embd, H = c.conv_taps - 1 + KvCache::kConvRollback;
  auto value = [](int l, int p, int j) { return float(l * 100000 + p * 10 + j % 7); };
  std::vector<float> k(kDim, 0.5f), v(kDim, 0.25f), conv_in(static_cast<size_t>(E));
  auto fill = [&](KvCache& kv, int n) {  // batches of 8, as the forward pass writes them
    while (kv.end() < n) {
      const int p0 = kv.end(), b = std::min(8, n - p0);
      ASSERT_TRUE(kv.begin_batch(p0, b).ok());
      for (int p = p0; p < p0 + b; ++p) {
        kv.store(1, p, k.data(), v.data());
        for (int l : {0, 2}) {
          for (int j = 0; j < E; ++j) conv_in[size_t(j)] = value(l, p, j);
          std::memcpy(kv.conv_row(l, p), conv_in.data(), conv_in.size() * sizeof(float));
        }
      }
    }
  };
  auto rows_hold = [&](const KvCache& kv, int lo, int hi) {
    for (int l : {0, 2})
      for (int p = lo; p < hi; ++p)
        for (int j = 0; j < E; ++j)
          if (kv.conv_row(l, p)[j] != value(l, p, j)) return false;
    return true;
  };
  KvCache kv(c, {KvType::f16, 0, 4}, 512, 8, {});
  fill(kv, 200);
  EXPECT_EQ(kv.conv_kept(), 200 - H);
  EXPECT_TRUE(rows_hold(kv, 200 - H, 200));
  EXPECT_EQ(kv.truncate(200 - KvCache::kConvRollback), 200 - KvCache::kConvRollback);  // rows 134, 135 held
  EXPECT_TRUE(rows_hold(kv, kv.end() - 2, kv.end()));
  fill(kv, 200);
  EXPECT_EQ(kv.truncate(200 - KvCache::kConvRollback - 1), 0);  // row 133 is gone: only 0 is exact
  EXPECT_EQ(kv.conv_kept(), 0);

  fill(kv, 150);
  auto bytes = kv.prefix_bytes(150);
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  EXPECT_EQ(*bytes, size_t(150) * kDim * 2 * 2 + size_t(2) * 2 * E * 4);  // layer 1's K and V; 2 rows per conv layer
  EXPECT_FALSE(kv.prefix_bytes(20).ok());  // its rows 18, 19 were overwritten
  EXPECT_TRUE(kv.prefix_bytes(150 - KvCache::kConvRollback).ok());
  std::vector<uint8_t> snap(*bytes);
  ASSERT_TRUE(kv.export_prefix(150, snap.data()).ok());
  KvCache other(c, {KvType::f16, 0, 4}, 512, 8, {});
  fill(other, 3);
  ASSERT_TRUE(other.import_prefix(150, snap.data(), snap.size()).ok());
  EXPECT_EQ(other.end(), 150);
  EXPECT_TRUE(rows_hold(other, 148, 150));
  EXPECT_EQ(other.conv_kept(), 148);
  EXPECT_EQ(other.truncate(149), 0);  // the snapshot held only the state at 150
  EXPECT_FALSE(other.import_prefix(150, snap.data(), snap.size() - 1).ok());
  // Snapshots at the ring's wrap: rows 127 and 128 sit in the ring's last and first slots.
  KvCache wrap(c, {KvType::f16, 0, 4}, 512, 8, {});
  fill(wrap, 129);
  auto bytes2 = wrap.prefix_bytes(129);
  ASSERT_TRUE(bytes2.ok());
  std::vector<uint8_t> snap2(*bytes2);
  ASSERT_TRUE(wrap.export_prefix(129, snap2.data()).ok());
  KvCache back(c, {KvType::f16, 0, 4}, 512, 8, {});
  ASSERT_TRUE(back.import_prefix(129, snap2.data(), snap2.size()).ok());
  EXPECT_TRUE(rows_hold(back, 127, 129));
}

TEST(KvCache, ValidateRejectsBadOptions) {
  const ModelConfig c = tiny_config(1);
  EXPECT_FALSE(KvCache::validate(c, {KvType::f16, 4, 4}).ok());   // window not above sinks
  EXPECT_FALSE(KvCache::validate(c, {KvType::f16, 3, 4}).ok());
  EXPECT_FALSE(KvCache::validate(c, {KvType::f16, -1, 0}).ok());
  EXPECT_TRUE(KvCache::validate(c, {KvType::f16, 5, 4}).ok());
  ModelConfig odd = c;
  odd.head_dim = 32;
  EXPECT_FALSE(KvCache::validate(odd, {KvType::q8, 0, 4}).ok());  // q8 groups of 64
  EXPECT_TRUE(KvCache::validate(odd, {KvType::f16, 0, 4}).ok());
  EXPECT_FALSE(parse_kv_type("q5").ok());
  EXPECT_EQ(parse_kv_type("q4").value(), KvType::q4);
}

TEST(KvCache, WindowMemoryIndependentOfPositions) {
  const ModelConfig c = tiny_config(2);
  KvCache small(c, {KvType::q8, 64, 4}, 128, 16, {});
  KvCache big(c, {KvType::q8, 64, 4}, 100000, 16, {});
  EXPECT_EQ(small.bytes(), big.bytes());  // a window's cache does not grow with n_ctx
  KvCache full(c, {KvType::q8, 0, 4}, 4096, 16, {});
  KvCache f16(c, {KvType::f16, 0, 4}, 4096, 16, {});
  EXPECT_LT(full.bytes() * 10, f16.bytes() * 6);  // int8 + a scale per 64: ~53% of f16
  EXPECT_LT(small.bytes() * 20, full.bytes());
}

TEST(KvCache, LayerWindowsForLocalLayers) {
  // Gemma-style: layer 0 local (window 8, no sinks), layer 1 global; bounded by n_ctx.
  const ModelConfig c = tiny_config(2);
  KvCache kv(c, {KvType::f32, 0, 4}, 64, 4, {8, 0});
  EXPECT_FALSE(kv.unbounded());
  EXPECT_TRUE(kv.fits(60, 4));
  EXPECT_FALSE(kv.fits(61, 4));
}

}  // namespace
}  // namespace pllm

namespace pllm {
namespace {

// Decode splits the visible positions into slices and merges their softmax states; two
// query heads share the kv head. Must equal one head in one slice, head by head, for every slice count,
// across sinks, a wrapped ring and (q4) groups plus tail.
TEST(KvCache, SlicedGroupedAttentionEqualsWhole) {
  const ModelConfig c = tiny_config(1);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  const std::vector<float> inv_freq = rope_inv_freq();
  const RopeSpec rope{inv_freq.data(), kHd, false};
  for (KvType t : {KvType::f16, KvType::q8, KvType::q4})
    for (int window : {0, 50}) {
      SCOPED_TRACE(std::string(kv_type_name(t)) + " window " + std::to_string(window));
      KvCache kv(c, {t, window, 4}, 300, 1, {});
      std::vector<float> k(kDim), v(kDim), q(2 * kHd);
      for (int p = 0; p < 211; ++p) {
        for (int i = 0; i < kDim; ++i) k[size_t(i)] = nd(rng), v[size_t(i)] = nd(rng);
        ASSERT_TRUE(kv.begin_batch(p, 1).ok());
        kv.store(0, p, k.data(), v.data());
      }
      const int pos = 210;
      for (float& x : q) x = nd(rng) * 0.3f;
      float whole[2][kHd];
      for (int j = 0; j < 2; ++j) attend_whole(kv, 0, pos, 1, q.data() + j * kHd, rope, whole[j]);
      for (int parts = 1; parts <= 8; ++parts) {
        std::vector<AttnAccum> a(size_t(parts) * 2);
        for (auto& x : a) attn_accum_init(x, kHd);
        for (int p = 0; p < parts; ++p) kv.attend_part(0, pos, 1, 2, q.data(), 0.125f, rope, p, parts, &a[size_t(p) * 2]);
        for (int j = 0; j < 2; ++j) {
          for (int p = 1; p < parts; ++p) merge_accum(a[size_t(j)], a[size_t(p) * 2 + size_t(j)], kHd);
          float out[kHd];
          attn_accum_finish(a[size_t(j)], kHd, out);
          for (int d = 0; d < kHd; ++d) ASSERT_NEAR(out[d], whole[j][d], 1e-5) << parts << " parts, head " << j;
        }
      }
      EXPECT_EQ(kv.n_visible(0, pos), window ? window : pos + 1);
    }
}

// attend_rows (a prompt's consecutive rows sharing the keys and values they all see) equals
// attend_part row by row, bit for bit: every stored type (q8 and q4 take the fallback), with and
// without a window and sinks, tiles that start before, at and after a chunk boundary of the
// second segment, and 1 to 5 rows of 3 heads (up to kMaxGroup query heads).
TEST(KvCache, RowTilesEqualRowByRowBitForBit) {
  const ModelConfig c = tiny_config(1);
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  const std::vector<float> inv_freq = rope_inv_freq();
  const RopeSpec rope{inv_freq.data(), kHd, false};
  constexpr int kGroup = 3;
  int checked = 0;
  for (KvType t : {KvType::f32, KvType::f16, KvType::q8, KvType::q4})
    for (auto [window, sinks] : {std::pair{0, 0}, {0, 4}, {50, 4}}) {
      KvCache kv(c, {t, window, sinks}, 300, 1, {});
      std::vector<float> k(kDim), v(kDim);
      for (int p = 0; p < 200; ++p) {
        for (int i = 0; i < kDim; ++i) k[size_t(i)] = nd(rng), v[size_t(i)] = nd(rng);
        ASSERT_TRUE(kv.begin_batch(p, 1).ok());
        kv.store(0, p, k.data(), v.data());
      }
      for (int pos0 : {0, 2, 3, 60, 63, 64, 66, 67, 68, 130, 194})
        for (int rows = 1; rows <= 5; ++rows) {
          if (pos0 + rows > 200) continue;
          SCOPED_TRACE(::testing::Message() << kv_type_name(t) << " window " << window << " sinks " << sinks
                                            << " pos0 " << pos0 << " rows " << rows);
          std::vector<float> q(size_t(rows) * kGroup * kHd);
          for (float& x : q) x = nd(rng) * 0.3f;
          std::vector<AttnAccum> tiled(size_t(rows) * kGroup), solo(size_t(rows) * kGroup);
          for (auto& x : tiled) attn_accum_init(x, kHd);
          for (auto& x : solo) attn_accum_init(x, kHd);
          kv.attend_rows(0, pos0, rows, 1, kGroup, q.data(), 0.125f, rope, tiled.data());
          for (int r = 0; r < rows; ++r)
            kv.attend_part(0, pos0 + r, 1, kGroup, q.data() + size_t(r) * kGroup * kHd, 0.125f, rope, 0, 1,
                           solo.data() + size_t(r) * kGroup);
          for (size_t h = 0; h < solo.size(); ++h) {
            float a[kHd], b[kHd];
            attn_accum_finish(tiled[h], kHd, a);
            attn_accum_finish(solo[h], kHd, b);
            ASSERT_EQ(0, std::memcmp(a, b, sizeof a)) << "head " << h;
          }
          ++checked;
        }
    }
  EXPECT_GT(checked, 100);
}

}  // namespace
}  // namespace pllm
