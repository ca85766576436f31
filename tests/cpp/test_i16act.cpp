// int16-activation kernels (KernelTable::quantize_row_q16, TypeKernels::vec_dot_i16act_tile) on
// every ISA table this machine can run, against the scalar twins (generic/i16act_scalar.cpp)
// and exact f64 arithmetic.
//
// quantize_row_q16 must be bit-identical to the twin on every ISA (random rows, zeros, ties,
// huge / tiny / subnormal blocks, inf, NaN, random bit patterns).
//
// Tiles. exact = the f64 dot of dequantize_row's weights w_i with the activations d_a * qs_i;
// the twin accumulates exactly that in double, so |twin - exact| <= u |exact| (u = 2^-24).
// SIMD kernels sum each 32-element unit's integer products exactly, convert them (4 or 8
// lanes, each rounded once: u), multiply by the scale d_w * d_a (rounded once: u) and
// accumulate the units in f32 (one rounding per unit and lane, each <= u times the sum of the
// |terms| so far), then reduce the lanes (<= 3 levels), and add mins as min * (d_a * sum(qs))
// (2 roundings). Their weights are scale * q + min exactly where dequantize_row rounds once
// (<= u |w_i|). With S = sum_i (|w_i| + 2 |min_i|) |d_a qs_i| (|scale * q_i| <= |w_i| + |min_i|;
// min_i: Q4_1 / Q5_1 m, Q4_K dmin * m_j, else 0) every such error is at most u S, so
//   |got - exact| <= (n / 32 + 16) u S.
// At n = 2048 that is 80 u S ~ 5e-6 S, while one wrong weight or activation is ~ S / n ~ 5e-4 S
// and a wrong scale far more: the bound catches bugs at every size tested (32 .. 2048).
// Each (weight row, activation row) result must also not depend on the tile shape (n_rows,
// n_x, so on matmul's chunking and thread count): bit-identical across all shapes tested.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "isa_fixture.h"
#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/reference.h"

namespace pllm {

void PrintTo(Isa isa, std::ostream* os) { *os << isa_name(isa); }

namespace {

constexpr double kU = FLT_EPSILON / 2.0;
const TensorType kTypes[] = {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1,
                             TensorType::Q8_0, TensorType::Q4_K, TensorType::Q6_K};
constexpr int kMaxRows = 17, kMaxX = 9;
constexpr float kSentinel = -12345.5f;

const char* name(TensorType t) { return type_traits(uint32_t(t))->name; }
size_t block_bytes(TensorType t) { return type_traits(uint32_t(t))->block_bytes; }
int64_t block_elems(TensorType t) { return type_traits(uint32_t(t))->block_elems; }
size_t wbytes(TensorType t, int64_t n) { return *row_bytes(uint32_t(t), n); }
size_t qbytes(int64_t n) { return sizeof(block_q16) * size_t(n / 32); }

float h16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return fp16_to_fp32(v);
}
void put16(uint8_t* p, float f) {
  const uint16_t h = fp32_to_fp16(f);
  std::memcpy(p, &h, 2);
}
float random_scale(std::mt19937& rng) {
  std::uniform_real_distribution<float> e(-10.0f, -2.0f);
  return std::exp2(e(rng)) * ((rng() & 1) ? 1.0f : -1.0f);
}

// One weight row: reference-quantised Gaussian values, or raw random bytes with sane fp16 scales.
void make_row(TensorType t, int64_t n, std::mt19937& rng, bool raw, uint8_t* w) {
  if (raw) {
    for (size_t i = 0; i < wbytes(t, n); ++i) w[i] = uint8_t(rng());
    for (size_t off = 0; off < wbytes(t, n); off += block_bytes(t)) {
      if (t == TensorType::Q6_K) {
        put16(w + off + 208, random_scale(rng));
      } else {
        put16(w + off, random_scale(rng));
        if (t == TensorType::Q4_1 || t == TensorType::Q5_1 || t == TensorType::Q4_K) put16(w + off + 2, random_scale(rng));
      }
    }
    return;
  }
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng) * 0.7f + (t == TensorType::Q4_1 || t == TensorType::Q5_1 ? 0.3f : 0.0f);
  switch (t) {
    case TensorType::Q4_0: ref::quantize_row_q4_0(x.data(), reinterpret_cast<block_q4_0*>(w), n); break;
    case TensorType::Q4_1: ref::quantize_row_q4_1(x.data(), reinterpret_cast<block_q4_1*>(w), n); break;
    case TensorType::Q5_0: ref::quantize_row_q5_0(x.data(), reinterpret_cast<block_q5_0*>(w), n); break;
    case TensorType::Q5_1: ref::quantize_row_q5_1(x.data(), reinterpret_cast<block_q5_1*>(w), n); break;
    case TensorType::Q8_0: ref::quantize_row_q8_0(x.data(), reinterpret_cast<block_q8_0*>(w), n); break;
    case TensorType::Q4_K: ref::quantize_row_q4_K(x.data(), reinterpret_cast<block_q4_K*>(w), n); break;
    default: ref::quantize_row_q6_K(x.data(), reinterpret_cast<block_q6_K*>(w), n); break;
  }
}

// |min part| of each dequantised weight of a row (see the header comment).
std::vector<double> mins(TensorType t, const uint8_t* w, int64_t n) {
  std::vector<double> m(n, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* blk = w + (i / block_elems(t)) * block_bytes(t);
    if (t == TensorType::Q4_1 || t == TensorType::Q5_1) {
      m[i] = std::fabs(h16(blk + 2));
    } else if (t == TensorType::Q4_K) {
      uint8_t sc, mn;
      ref::get_scale_min_k4(int(i % 256) / 32, blk + 4, &sc, &mn);
      m[i] = std::fabs(double(h16(blk + 2)) * mn);
    }
  }
  return m;
}

// Activation rows of several kinds: Gaussian at three magnitudes, with outliers, with zero blocks.
std::vector<float> make_act(std::mt19937& rng, int64_t n, int kind) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n);
  const float mag = kind % 3 == 0 ? 1.0f : kind % 3 == 1 ? 30.0f : 1e-3f;
  for (auto& v : x) v = nd(rng) * mag;
  if (kind % 4 == 1)
    for (int64_t i = rng() % 41; i < n; i += 41) x[i] *= 300.0f;
  if (kind % 5 == 2)
    for (int64_t i = 32 * (rng() % (n / 32)); i < n; i += 96) std::fill(x.begin() + i, x.begin() + i + 32, 0.0f);
  return x;
}

// Weights (kMaxRows rows, ws bytes apart) and activations (kMaxX rows of block_q16, xs bytes apart)
// with the exact products and the bound's S of every pair, and the twin's tile.
struct Case {
  TensorType t;
  int64_t n;
  size_t ws, xs;
  std::vector<uint8_t> w, xq;
  double exact[kMaxX][kMaxRows], S[kMaxX][kMaxRows];
  float twin[kMaxX][kMaxRows];
};

void build(Case& c, TensorType t, int64_t n, uint32_t seed) {
  const KernelTable& st = *kernels_for(Isa::scalar);
  std::mt19937 rng(seed);
  c.t = t;
  c.n = n;
  c.ws = wbytes(t, n) + 6;    // rows not at a multiple of the block size (2-byte aligned, as blocks need)
  c.xs = qbytes(n) + 8;       // 4-byte aligned (block_q16), not at a multiple of 16 or 72
  c.w.assign(c.ws * kMaxRows, 0xA5);
  c.xq.assign(c.xs * kMaxX, 0x5A);
  std::vector<float> deq[kMaxRows];
  std::vector<double> mn[kMaxRows];
  for (int r = 0; r < kMaxRows; ++r) {
    make_row(t, n, rng, r % 2 == 1, &c.w[r * c.ws]);
    deq[r].resize(n);
    st.for_type(t).dequantize_row(&c.w[r * c.ws], deq[r].data(), n);
    mn[r] = mins(t, &c.w[r * c.ws], n);
  }
  for (int x = 0; x < kMaxX; ++x) {
    const std::vector<float> a = make_act(rng, n, x);
    st.quantize_row_q16(a.data(), &c.xq[x * c.xs], n);
    const auto* q = reinterpret_cast<const block_q16*>(&c.xq[x * c.xs]);
    for (int r = 0; r < kMaxRows; ++r) {
      double e = 0.0, s = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        const double ai = double(q[i / 32].d) * q[i / 32].qs[i % 32];
        e += double(deq[r][i]) * ai;
        s += (std::fabs(deq[r][i]) + 2.0 * mn[r][i]) * std::fabs(ai);
      }
      c.exact[x][r] = e;
      c.S[x][r] = s;
    }
  }
  st.for_type(t).vec_dot_i16act_tile(n, c.w.data(), c.ws, kMaxRows, c.xq.data(), c.xs, kMaxX, &c.twin[0][0], kMaxRows);
}

double tol(const Case& c, int x, int r) { return (double(c.n) / 32.0 + 16.0) * kU * c.S[x][r] + 1e-30; }

std::vector<int64_t> sizes(TensorType t) {
  if (block_elems(t) == 256) return {256, 512, 1536, 2048};
  return {32, 64, 96, 576, 1536, 2048};
}

class I16ActIsa : public testing_isa::IsaFixture {};

TEST_P(I16ActIsa, TableEntries) {
  ASSERT_NE(table_->quantize_row_q16, nullptr);
  std::string have;
  for (uint32_t id = 0; id < 32; ++id) {
    const bool listed = std::find(std::begin(kTypes), std::end(kTypes), TensorType(id)) != std::end(kTypes);
    const bool set = table_->types[id].vec_dot_i16act_tile != nullptr;
    if (!listed) {
      EXPECT_FALSE(set) << "type id " << id << " has an int16 tile";
    }
    if (set) have += std::string(" ") + name(TensorType(id));
    // The scalar table has every twin; the NEON kernels cover every type on every ARM level.
    const bool must = listed && (GetParam() == Isa::scalar || GetParam() == Isa::neon ||
                                 GetParam() == Isa::neon_dotprod || GetParam() == Isa::neon_i8mm);
    if (must) {
      EXPECT_TRUE(set) << isa_name(GetParam()) << " lacks the int16 tile of " << name(TensorType(id));
    }
  }
  std::printf("[ i16act ] %s tiles:%s\n", isa_name(GetParam()), have.empty() ? " none (exact path)" : have.c_str());
}

TEST_P(I16ActIsa, QuantizeIsBitIdenticalToTwin) {
  const KernelTable& st = *kernels_for(Isa::scalar);
  // Known codes of the twin first (d = 1 exactly: amax 32767): ties to even, clamps, NaN / inf.
  {
    std::vector<float> x(32, 0.0f);
    const float v[] = {32767.0f, 2.5f, 3.5f, -2.5f, -3.5f, 0.5f, -0.5f, 1.5f, 32766.5f, -32766.5f, -0.0f, 7.25f};
    std::copy(std::begin(v), std::end(v), x.begin());
    block_q16 b;
    st.quantize_row_q16(x.data(), &b, 32);
    EXPECT_EQ(b.d, 1.0f);
    const int16_t want[] = {32767, 2, 4, -2, -4, 0, 0, 2, 32766, -32766, 0, 7};
    for (int i = 0; i < 12; ++i) EXPECT_EQ(b.qs[i], want[i]) << "element " << i;
    x[20] = NAN;
    st.quantize_row_q16(x.data(), &b, 32);
    EXPECT_EQ(b.d, 1.0f) << "NaN must not enter amax";
    EXPECT_EQ(b.qs[20], -32767) << "NaN -> INT32_MIN -> clamped";
    x[21] = INFINITY;  // amax = inf, d = inf, 1/d = 0: every finite element 0, inf * 0 = NaN -> -32767
    st.quantize_row_q16(x.data(), &b, 32);
    EXPECT_EQ(b.qs[0], 0);
    EXPECT_EQ(b.qs[21], -32767);
  }
  std::mt19937 rng(77);
  std::vector<std::vector<float>> rows;
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> e(-60.0f, 60.0f);
  for (int64_t n : {32, 64, 256, 4096}) {  // Gaussian blocks at random magnitudes 2^-60 .. 2^60
    std::vector<float> x(n);
    for (int64_t b = 0; b < n / 32; ++b) {
      const float s = std::exp2(e(rng));
      for (int l = 0; l < 32; ++l) x[32 * b + l] = nd(rng) * s;
    }
    rows.push_back(x);
  }
  const float specials[] = {0.0f, -0.0f, FLT_MAX, -FLT_MAX, FLT_MIN, 1e-40f, -1e-40f, 1e-45f, 1e-38f, 1e-33f,
                            INFINITY, -INFINITY, NAN, -NAN, 1.0f, -1.0f, 65504.0f, 2147483648.0f};
  for (float s : specials) {  // each special once per block among Gaussian values, and a block of it alone
    std::vector<float> x(64);
    for (auto& v : x) v = nd(rng) * 1e-3f;
    x[rng() % 32] = s;
    std::fill(x.begin() + 32, x.end(), s);
    rows.push_back(x);
  }
  for (float amax : {32767.0f, 32767.0f * 0x1p-10f, 32767.0f * 0x1p20f}) {  // exact ties: d a power of two
    std::vector<float> x(32);
    const float d = amax / 32767.0f;
    x[0] = -amax;
    for (int l = 1; l < 32; ++l) x[l] = (float(int(rng() % 65534) - 32767) + 0.5f) * d;
    rows.push_back(x);
  }
  for (int k = 0; k < 50; ++k) {  // tiny blocks: d subnormal or zero, 1 / d finite, huge or inf
    std::vector<float> x(32);
    const float s = std::exp2(-float(120 + rng() % 35));
    for (auto& v : x) v = nd(rng) * s;
    rows.push_back(x);
  }
  {  // random bit patterns: subnormals, infinities, NaNs, everything
    std::vector<float> x(32 * 200);
    for (auto& v : x) {
      const uint32_t bits = uint32_t(rng());
      std::memcpy(&v, &bits, 4);
    }
    rows.push_back(x);
  }
  for (const auto& x : rows) {
    const int64_t n = int64_t(x.size());
    std::vector<uint8_t> got(qbytes(n) + 8, 0xEE), want(qbytes(n) + 8, 0xEE);
    table_->quantize_row_q16(x.data(), got.data(), n);
    st.quantize_row_q16(x.data(), want.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
      block_q16 g, w;
      std::memcpy(&g, &got[b * sizeof(block_q16)], sizeof g);
      std::memcpy(&w, &want[b * sizeof(block_q16)], sizeof w);
      ASSERT_EQ(0, std::memcmp(&g, &w, sizeof g))
          << "n=" << n << " block " << b << ": d " << g.d << " / " << w.d << ", sum " << g.sum << " / " << w.sum
          << ", x[0]=" << x[32 * b];
      int32_t sum = 0;
      for (int l = 0; l < 32; ++l) {
        ASSERT_LE(std::abs(int(w.qs[l])), 32767);
        sum += w.qs[l];
      }
      ASSERT_EQ(sum, w.sum);
    }
    ASSERT_EQ(0, std::memcmp(got.data() + qbytes(n), want.data() + qbytes(n), 8)) << "written past the row";
  }
}

// Every shape (n_rows x n_x) against the f64 products and the twin; nothing outside the tile
// written; every pair's result the same whatever the shape.
TEST_P(I16ActIsa, TileMatchesTwinAndF64) {
  const bool scalar = GetParam() == Isa::scalar;
  // The twin is slow: the scalar table is checked on a few shapes (it is the reference of the others).
  const std::vector<int> row_counts = scalar ? std::vector<int>{1, 3, 17} : std::vector<int>{1, 2, 3, 5, 16, 17};
  const std::vector<int> x_counts = scalar ? std::vector<int>{1, 2, 9} : std::vector<int>{1, 2, 3, 4, 5, 7, 8, 9};
  for (TensorType t : kTypes) {
    const auto tile = table_->for_type(t).vec_dot_i16act_tile;
    if (!tile) {
      std::printf("[ i16act ] %s %s: no tile (exact path), skipped\n", isa_name(GetParam()), name(t));
      continue;
    }
    for (int64_t n : sizes(t)) {
      SCOPED_TRACE(::testing::Message() << isa_name(GetParam()) << " " << name(t) << " n=" << n);
      Case c;
      build(c, t, n, 1000u * uint32_t(t) + uint32_t(n));
      for (int x = 0; x < kMaxX; ++x)
        for (int r = 0; r < kMaxRows; ++r)
          ASSERT_NEAR(c.twin[x][r], c.exact[x][r], kU * std::fabs(c.exact[x][r]) + double(n) * DBL_EPSILON * c.S[x][r] + 1e-30)
              << "twin vs f64, x=" << x << " r=" << r;
      float first[kMaxX][kMaxRows];
      bool seen[kMaxX][kMaxRows] = {};
      for (int nr : row_counts) {
        for (int nx : x_counts) {
          SCOPED_TRACE(::testing::Message() << "n_rows=" << nr << " n_x=" << nx);
          const int64_t os = nr + (nr % 2 ? 2 : 3);  // odd
          constexpr int kLead = 5;
          std::vector<float> buf(kLead + (nx + 1) * os, kSentinel);
          float* out = buf.data() + kLead;
          tile(n, c.w.data(), c.ws, nr, c.xq.data(), c.xs, nx, out, os);
          for (size_t i = 0; i < buf.size(); ++i) {
            const int64_t j = int64_t(i) - kLead;
            const bool inside = j >= 0 && j / os < nx && j % os < nr;
            if (!inside) {
              ASSERT_EQ(buf[i], kSentinel) << "written outside the tile at offset " << j;
            }
          }
          for (int x = 0; x < nx; ++x) {
            for (int r = 0; r < nr; ++r) {
              const float got = out[x * os + r];
              ASSERT_NEAR(got, c.exact[x][r], tol(c, x, r)) << "x=" << x << " r=" << r << " S=" << c.S[x][r];
              ASSERT_NEAR(got, c.twin[x][r], tol(c, x, r) + kU * std::fabs(c.twin[x][r])) << "vs twin x=" << x << " r=" << r;
              if (!seen[x][r]) {
                first[x][r] = got;
                seen[x][r] = true;
              } else {
                ASSERT_EQ(got, first[x][r]) << "x=" << x << " r=" << r << ": result depends on the tile shape";
              }
            }
          }
        }
      }
    }
  }
}

// The largest codes: every weight at its extreme (Q4_0 -8, Q4_1 15, Q5_0 -16, Q5_1 31, Q8_0 -128,
// Q4_K 15 * scale 63, Q6_K -32 * scale -128) against activations all +-32767: integer sums
// overflowing int32 anywhere would be far off.
TEST_P(I16ActIsa, ExtremeCodesDoNotOverflow) {
  const KernelTable& st = *kernels_for(Isa::scalar);
  for (TensorType t : kTypes) {
    const auto tile = table_->for_type(t).vec_dot_i16act_tile;
    if (!tile) continue;
    SCOPED_TRACE(name(t));
    const int64_t n = 512;
    std::vector<uint8_t> w(wbytes(t, n));
    for (size_t off = 0; off < w.size(); off += block_bytes(t)) {
      uint8_t* b = &w[off];
      switch (t) {
        case TensorType::Q4_0: put16(b, 0.01f); std::memset(b + 2, 0x00, 16); break;
        case TensorType::Q4_1: put16(b, 0.01f); put16(b + 2, 0.5f); std::memset(b + 4, 0xFF, 16); break;
        case TensorType::Q5_0: put16(b, 0.01f); std::memset(b + 2, 0x00, 20); break;
        case TensorType::Q5_1: put16(b, 0.01f); put16(b + 2, 0.5f); std::memset(b + 4, 0xFF, 20); break;
        case TensorType::Q8_0: put16(b, 0.01f); std::memset(b + 2, 0x80, 32); break;
        case TensorType::Q4_K: put16(b, 0.01f); put16(b + 2, 0.5f); std::memset(b + 4, 0xFF, 140); break;
        default: std::memset(b, 0x00, 192); std::memset(b + 192, 0x80, 16); put16(b + 208, 0.01f); break;
      }
    }
    std::vector<float> deq(n);
    st.for_type(t).dequantize_row(w.data(), deq.data(), n);
    const std::vector<double> mn = mins(t, w.data(), n);
    for (float sign : {1.0f, -1.0f}) {
      std::vector<float> x(n, sign);
      std::vector<uint8_t> xq(qbytes(n));
      st.quantize_row_q16(x.data(), xq.data(), n);
      const auto* q = reinterpret_cast<const block_q16*>(xq.data());
      ASSERT_EQ(q[0].qs[0], int16_t(sign * 32767));
      double exact = 0.0, S = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        const double a = double(q[i / 32].d) * q[i / 32].qs[i % 32];
        exact += double(deq[i]) * a;
        S += (std::fabs(deq[i]) + 2.0 * mn[i]) * std::fabs(a);
      }
      float out = 0.0f;
      tile(n, w.data(), 0, 1, xq.data(), 0, 1, &out, 1);
      EXPECT_NEAR(out, exact, (n / 32.0 + 16.0) * kU * S) << "sign " << sign;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, I16ActIsa,
                         ::testing::Values(Isa::scalar, Isa::avx2, Isa::avx512, Isa::neon, Isa::neon_dotprod,
                                           Isa::neon_i8mm),
                         [](const ::testing::TestParamInfo<Isa>& info) { return std::string(isa_name(info.param)); });

}  // namespace
}  // namespace pllm
