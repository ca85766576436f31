// The quantiser's block quantisers (rtn = the reference ones, mse/act = block_search), for
// every type it writes:
//  - round trip: every element decodes within half the gap between the two representable
//    values around it (half a quantisation step for the linear types; for IQ4_NL / IQ4_XS
//    the gap between neighbouring table values at the block's step), read back from the
//    block's own scales, or, when it lies outside the block's representable range, at that
//    range's nearest end; rtn picks its quants before rounding its scale to fp16, so it gets
//    the rounding's share on top;
//  - the search is never worse than rtn on a block's (weighted) squared error;
//  - weighting by importance lowers the weighted error compared with the unweighted
//    search;
//  - edge blocks (zeros, constants, one outlier, all negative, tiny values) decode sanely.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "quant/blocks.h"
#include "quant/reference.h"
#include "quant/types.h"
#include "quantizer/block_search.h"
#include "quantizer/row_quant.h"

namespace pllm {
namespace {

const TensorType kTypes[] = {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0,   TensorType::Q5_1,
                             TensorType::Q8_0, TensorType::Q4_K, TensorType::Q6_K,   TensorType::Q5_K,
                             TensorType::Q3_K, TensorType::Q2_K, TensorType::IQ4_NL, TensorType::IQ4_XS};

// How element i of a row decodes: y = step * level + offset, level an integer in [qmin,
// qmax] (table null) or one of table[0..15] (ascending).
struct ElemParams {
  float step, offset;
  int qmin, qmax;
  const int8_t* table = nullptr;
};

// The representable values of an element, ascending (in double: the bound is about them,
// not about float rounding).
std::vector<double> levels(const ElemParams& p) {
  std::vector<double> v;
  if (p.table) {
    for (int k = 0; k < 16; ++k) v.push_back(double(p.step) * p.table[k] + p.offset);
  } else {
    for (int q = p.qmin; q <= p.qmax; ++q) v.push_back(double(p.step) * q + p.offset);
  }
  std::sort(v.begin(), v.end());  // a negative step reverses them
  return v;
}

ElemParams elem_params(TensorType t, const uint8_t* row, int64_t i) {
  switch (t) {
    case TensorType::Q4_0: {
      const auto& b = reinterpret_cast<const block_q4_0*>(row)[i / 32];
      return {fp16_to_fp32(b.d), 0.0f, -8, 7};
    }
    case TensorType::Q5_0: {
      const auto& b = reinterpret_cast<const block_q5_0*>(row)[i / 32];
      return {fp16_to_fp32(b.d), 0.0f, -16, 15};
    }
    case TensorType::Q8_0: {
      const auto& b = reinterpret_cast<const block_q8_0*>(row)[i / 32];
      return {fp16_to_fp32(b.d), 0.0f, -127, 127};
    }
    case TensorType::Q4_1: {
      const auto& b = reinterpret_cast<const block_q4_1*>(row)[i / 32];
      return {fp16_to_fp32(b.d), fp16_to_fp32(b.m), 0, 15};
    }
    case TensorType::Q5_1: {
      const auto& b = reinterpret_cast<const block_q5_1*>(row)[i / 32];
      return {fp16_to_fp32(b.d), fp16_to_fp32(b.m), 0, 31};
    }
    case TensorType::Q4_K: {
      const auto& b = reinterpret_cast<const block_q4_K*>(row)[i / 256];
      uint8_t sc, m;
      ref::get_scale_min_k4(int(i % 256) / 32, b.scales, &sc, &m);
      return {fp16_to_fp32(b.d) * float(sc), -(fp16_to_fp32(b.dmin) * float(m)), 0, 15};
    }
    case TensorType::Q6_K: {
      const auto& b = reinterpret_cast<const block_q6_K*>(row)[i / 256];
      return {fp16_to_fp32(b.d) * float(b.scales[(i % 256) / 16]), 0.0f, -32, 31};
    }
    case TensorType::Q5_K: {
      const auto& b = reinterpret_cast<const block_q5_K*>(row)[i / 256];
      uint8_t sc, m;
      ref::get_scale_min_k4(int(i % 256) / 32, b.scales, &sc, &m);
      return {fp16_to_fp32(b.d) * float(sc), -(fp16_to_fp32(b.dmin) * float(m)), 0, 31};
    }
    case TensorType::Q3_K: {
      const auto& b = reinterpret_cast<const block_q3_K*>(row)[i / 256];
      int8_t sc[16];
      ref::q3_K_scales(b.scales, sc);
      return {fp16_to_fp32(b.d) * float(sc[(i % 256) / 16]), 0.0f, -4, 3};
    }
    case TensorType::Q2_K: {
      const auto& b = reinterpret_cast<const block_q2_K*>(row)[i / 256];
      const uint8_t s = b.scales[(i % 256) / 16];
      return {fp16_to_fp32(b.d) * float(s & 0xF), -(fp16_to_fp32(b.dmin) * float(s >> 4)), 0, 3};
    }
    case TensorType::IQ4_NL: {
      const auto& b = reinterpret_cast<const block_iq4_nl*>(row)[i / 32];
      return {fp16_to_fp32(b.d), 0.0f, 0, 0, kIq4nlValues};
    }
    case TensorType::IQ4_XS: {
      const auto& b = reinterpret_cast<const block_iq4_xs*>(row)[i / 256];
      return {fp16_to_fp32(b.d) * float(ref::iq4_xs_scale(b, int(i % 256) / 32) - 32), 0.0f, 0, 0, kIq4nlValues};
    }
    default: return {0, 0, 0, 0};
  }
}

int64_t block_of(TensorType t) { return type_traits(uint32_t(t))->block_elems; }

std::vector<uint8_t> quantize(TensorType t, const std::vector<float>& x, const float* w, bool search) {
  std::vector<uint8_t> out(*row_bytes(uint32_t(t), x.size()));
  quantize_row_to(t, x.data(), w, search, out.data(), int64_t(x.size()));
  return out;
}

std::vector<float> dequantize(TensorType t, const std::vector<uint8_t>& q, size_t n) {
  std::vector<float> y(n);
  EXPECT_TRUE(dequantize_row_any(uint32_t(t), q.data(), y.data(), int64_t(n)));
  return y;
}

// Rows that exercise clipping: Gaussian, heavy-tailed (Student-t like), with outliers,
// and skewed (all positive plus a few negatives).
std::vector<float> make_row(int kind, size_t n, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 0.02f);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    float v = g(rng);
    if (kind == 1) v /= std::sqrt(std::fabs(g(rng)) / 0.02f + 0.05f);
    if (kind == 2 && i % 97 == 5) v *= 12.0f;
    if (kind == 3) v = std::fabs(v) + (i % 17 == 0 ? -0.05f : 0.01f);
    x[i] = v;
  }
  return x;
}

// Every element within half the gap between its two neighbouring representable values
// (plus `slack` of the largest magnitude the scale and offset reach), or at the nearest end
// of the range.
void expect_round_trip(TensorType t, const std::vector<float>& x, const std::vector<uint8_t>& q, double slack,
                       const char* what) {
  const std::vector<float> y = dequantize(t, q, x.size());
  int bad = 0;
  for (size_t i = 0; i < x.size() && bad < 5; ++i) {
    const ElemParams p = elem_params(t, q.data(), int64_t(i));
    const std::vector<double> v = levels(p);
    const double lo = v.front(), hi = v.back();
    double gap = 0;  // of the neighbours around x
    for (size_t k = 0; k + 1 < v.size(); ++k)
      if (v[k] <= x[i] && x[i] <= v[k + 1]) gap = v[k + 1] - v[k];
    const double outside = x[i] < lo ? lo - x[i] : (x[i] > hi ? x[i] - hi : 0.0);
    // The fp16 scale (and min) stored are within 2^-11 (relative) of what rtn computed with.
    const double s = std::fabs(double(p.step));
    const int max_level = p.table ? 127 : std::max(std::abs(p.qmin), std::abs(p.qmax));
    const double rounding = slack * (s * max_level + std::fabs(p.offset));
    const double bound = (outside > 0 ? outside : 0.5 * gap) + rounding + 1e-6 * (s + std::fabs(p.offset)) + 1e-30;
    const double err = std::fabs(double(x[i]) - double(y[i]));
    if (err > bound) {
      ++bad;
      ADD_FAILURE() << what << " " << quant_type_name(t) << " element " << i << ": x " << x[i] << " -> " << y[i]
                    << ", step " << p.step << " offset " << p.offset << ", error " << err << " > " << bound;
    }
  }
}

TEST(BlockSearch, RoundTripWithinHalfAStep) {
  std::mt19937 rng(1);
  for (TensorType t : kTypes) {
    for (int kind = 0; kind < 4; ++kind) {
      const auto x = make_row(kind, 2048, rng);
      std::vector<float> w(x.size());
      std::lognormal_distribution<float> lw(0.0f, 1.5f);
      for (float& v : w) v = lw(rng);
      // The 32-element linear types' rtn quantises with the unrounded scale, then stores it
      // as fp16: 2^-10 covers the scale's and the min's rounding (relative error <= 2^-11
      // each) for the largest quant. The K-quants' and IQ4's rtn pick the quants at the
      // scales stored: no slack.
      const bool at_stored = block_of(t) == QK_K || t == TensorType::IQ4_NL;
      expect_round_trip(t, x, quantize(t, x, nullptr, false), at_stored ? 0.0 : std::ldexp(1.0, -10), "rtn");
      expect_round_trip(t, x, quantize(t, x, nullptr, true), 0.0, "mse");
      expect_round_trip(t, x, quantize(t, x, w.data(), true), 0.0, "act");
    }
  }
}

TEST(BlockSearch, NeverWorseThanRtnPerBlock) {
  std::mt19937 rng(2);
  for (TensorType t : kTypes) {
    const int64_t B = block_of(t);
    for (int kind = 0; kind < 4; ++kind) {
      const auto x = make_row(kind, 4096, rng);
      std::vector<float> w(x.size());
      std::lognormal_distribution<float> lw(0.0f, 1.0f);
      for (float& v : w) v = lw(rng);
      const auto rtn = dequantize(t, quantize(t, x, nullptr, false), x.size());
      const auto mse = dequantize(t, quantize(t, x, nullptr, true), x.size());
      const auto act = dequantize(t, quantize(t, x, w.data(), true), x.size());
      double rtn_total = 0, mse_total = 0;
      for (size_t b = 0; b < x.size(); b += size_t(B)) {
        const double e_rtn = weighted_sse(&x[b], &rtn[b], nullptr, B);
        const double e_mse = weighted_sse(&x[b], &mse[b], nullptr, B);
        EXPECT_LE(e_mse, e_rtn * (1 + 1e-9)) << quant_type_name(t) << " kind " << kind << " block " << b / B;
        const double we_rtn = weighted_sse(&x[b], &rtn[b], &w[b], B);
        const double we_act = weighted_sse(&x[b], &act[b], &w[b], B);
        EXPECT_LE(we_act, we_rtn * (1 + 1e-9)) << quant_type_name(t) << " kind " << kind << " block " << b / B;
        rtn_total += e_rtn;
        mse_total += e_mse;
      }
      // And the search finds something better overall, not just ties.
      EXPECT_LT(mse_total, rtn_total) << quant_type_name(t) << " kind " << kind;
    }
  }
}

TEST(BlockSearch, ImportanceWeightingLowersTheWeightedError) {
  std::mt19937 rng(3);
  for (TensorType t : kTypes) {
    const size_t cols = 1024;
    std::vector<float> imp(cols);  // per column: a few columns see much larger activations
    std::lognormal_distribution<float> lw(0.0f, 2.0f);
    for (float& v : imp) v = lw(rng);
    double w_mse = 0, w_act = 0, u_mse = 0, u_act = 0;
    for (int r = 0; r < 16; ++r) {
      const auto x = make_row(r % 4, cols, rng);
      const auto mse = dequantize(t, quantize(t, x, nullptr, true), cols);
      const auto act = dequantize(t, quantize(t, x, imp.data(), true), cols);
      w_mse += weighted_sse(x.data(), mse.data(), imp.data(), int64_t(cols));
      w_act += weighted_sse(x.data(), act.data(), imp.data(), int64_t(cols));
      u_mse += weighted_sse(x.data(), mse.data(), nullptr, int64_t(cols));
      u_act += weighted_sse(x.data(), act.data(), nullptr, int64_t(cols));
    }
    EXPECT_LT(w_act, w_mse) << quant_type_name(t);
    EXPECT_GE(u_act, u_mse * (1 - 1e-9)) << quant_type_name(t);  // the price: plain error goes up (or stays)
  }
}

TEST(BlockSearch, NearestIq4nlIsTheNearestTableValue) {
  // Every quarter step across and beyond the table (so every midpoint, where the lower
  // value wins), against a plain scan.
  for (int k = -4 * 140; k <= 4 * 140; ++k) {
    const float v = float(k) / 4.0f;
    int best = 0;
    for (int i = 1; i < 16; ++i)
      if (std::fabs(v - kIq4nlValues[i]) < std::fabs(v - kIq4nlValues[best])) best = i;
    EXPECT_EQ(ref::nearest_iq4nl(v), best) << v;
  }
  EXPECT_EQ(ref::nearest_iq4nl(std::nanf("")), 0);
}

TEST(BlockSearch, EdgeBlocks) {
  for (TensorType t : kTypes) {
    const size_t n = size_t(block_of(t)) * 2;
    std::vector<std::vector<float>> rows;
    rows.push_back(std::vector<float>(n, 0.0f));                  // zeros
    rows.push_back(std::vector<float>(n, 0.37f));                 // a constant
    rows.push_back(std::vector<float>(n, -0.25f));                // a negative constant
    std::vector<float> spike(n, 0.001f);
    spike[7] = 5.0f;
    rows.push_back(spike);                                        // one outlier
    std::vector<float> neg(n);
    for (size_t i = 0; i < n; ++i) neg[i] = -0.01f * float(i % 13 + 1);
    rows.push_back(neg);                                          // all negative
    std::vector<float> tiny(n);
    for (size_t i = 0; i < n; ++i) tiny[i] = 1e-7f * float(int(i % 9) - 4);
    rows.push_back(tiny);                                         // below fp16's normal range
    const std::vector<float> zero_w(n, 0.0f);
    for (size_t k = 0; k < rows.size(); ++k) {
      const auto& x = rows[k];
      for (int mode = 0; mode < 3; ++mode) {
        const auto q = quantize(t, x, mode == 2 ? zero_w.data() : nullptr, mode > 0);
        const auto y = dequantize(t, q, n);
        double lo = 0, hi = 0;
        for (float v : x) lo = std::min(lo, double(v)), hi = std::max(hi, double(v));
        for (size_t i = 0; i < n; ++i) {
          ASSERT_TRUE(std::isfinite(y[i])) << quant_type_name(t) << " row " << k << " mode " << mode;
          // Never further off than the span of [min(x, 0), max(x, 0)] plus fp16's smallest
          // subnormal (a scale or min that underflows fp16 is stored at that resolution).
          EXPECT_LE(std::fabs(double(y[i]) - x[i]), hi - lo + std::ldexp(1.0, -24))
              << quant_type_name(t) << " row " << k << " mode " << mode;
        }
        if (k == 0) {
          for (float v : y) EXPECT_EQ(v, 0.0f) << quant_type_name(t);
        }
      }
      if (k == 1 || k == 2) {  // a constant is representable exactly by a searching quantiser
        const auto y = dequantize(t, quantize(t, x, nullptr, true), n);
        for (size_t i = 0; i < n; ++i)
          EXPECT_NEAR(y[i], x[i], std::fabs(x[i]) * 1e-3) << quant_type_name(t) << " row " << k;
      }
    }
  }
}

}  // namespace
}  // namespace pllm
