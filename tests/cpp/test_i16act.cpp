// int16-activation kernels (KernelTable::quantize_row_q16, TypeKernels::vec_dot_i16act_tile) on
// every ISA table this machine can run, against the scalar twins and against an independent
// integer computation; and the avxvnni and avx512 tables' tiles against the avx2 table's, bit
// for bit.
//
// quantize_row_q16 must be bit-identical on every ISA (d, sum and codes; checked on rounding
// ties, zeros, huge and subnormal values, NaN and infinities).
//
// Tile reference: this file's own block decoder gives, per 32-element unit u of a weight row,
// integer codes c_l, a scale s_u and a min m_u with w_l = s_u c_l + m_u exactly (Q6_K: c_l =
// q_l * sc, s_u = d; Q4_0, Q5_0: c_l = q_l >= 0 with m_u = -8 d, -16 d, the offset taken as a
// min term as kernels may compute it, so S below bounds both of their partial sums). Against
// activation codes a_l with step d_u, the exact dot is
//   E = sum_u d_u (s_u sum_l c_l a_l + m_u sum_l a_l)          (long double, exact here)
// Let u = 2^-24 and S = sum_u |d_u| sum_l (|s_u c_l| + |m_u|) |a_l| (the sum of |products|).
//   * Scalar twin (dequantize_row's f32 weights, each within u |w_l| of s_u c_l + m_u, times
//     d_u a_l, accumulated in double, rounded to f32 once): |twin - E| <= 2 u S; we allow 3 u S.
//   * SIMD (unit sums exact in int32; f32 from there on): per unit and lane, the conversion
//     (exact below 2^24; Q6_K's lanes can exceed it: u), scale * d_a or min * sum (u), the
//     FMA that forms the unit term (u): <= 3 u of the lane's share of S; then one f32
//     accumulator chain per lane over the n / 32 units: <= (n / 32) u S, and a horizontal
//     sum: <= 3 u S. So tol = (n / 32 + 6) u S; we allow (n / 32 + 8) u S.
// At n = 2048 that is 72 u S ~ 4e-6 S, while one wrong element moves a dot by ~S / n ~ 5e-4 S
// (Gaussian data), a dropped min or offset term by far more: a broken kernel cannot hide.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "base/fp16.h"
#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/panel.h"
#include "quant/reference.h"
#include "isa_fixture.h"
#include "lowbit_blocks.h"

namespace pllm {

void PrintTo(Isa isa, std::ostream* os) { *os << isa_name(isa); }

namespace {

using ld = long double;
constexpr double kU = FLT_EPSILON / 2.0;

const TensorType kTypes[] = {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1,
                             TensorType::Q8_0, TensorType::Q4_K, TensorType::Q6_K, TensorType::Q2_K,
                             TensorType::Q3_K, TensorType::Q5_K, TensorType::IQ4_NL, TensorType::IQ4_XS};

bool is_k(TensorType t) { return type_traits(uint32_t(t))->block_elems == 256; }
size_t block_bytes(TensorType t) { return type_traits(uint32_t(t))->block_bytes; }
const char* name(TensorType t) { return type_traits(uint32_t(t))->name; }
ld h16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return fp16_to_fp32(v);
}

// Unit u (32 elements) of a weight row: w_l = s * c[l] + m[l], from the block layouts in blocks.h.
struct Unit {
  int c[32];
  ld s, m[32];
};
Unit decode_unit(TensorType t, const uint8_t* row, int64_t u) {
  static const int kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  Unit r{{}, 0, {}};
  const int64_t per = is_k(t) ? 8 : 1;  // units per block
  const uint8_t* b = row + (u / per) * block_bytes(t);
  const int j = int(u % per);
  auto nib = [](const uint8_t* qs, int l) { return l < 16 ? qs[l] & 15 : qs[l - 16] >> 4; };
  auto bit5 = [](const uint8_t* qh, int l) { return ((qh[l / 8] >> (l % 8)) & 1) << 4; };
  for (int l = 0; l < 32; ++l) {
    switch (t) {
      case TensorType::Q4_0: r.c[l] = nib(b + 2, l), r.s = h16(b), r.m[l] = -8 * h16(b); break;
      case TensorType::Q4_1: r.c[l] = nib(b + 4, l), r.s = h16(b), r.m[l] = h16(b + 2); break;
      case TensorType::Q5_0: r.c[l] = nib(b + 6, l) | bit5(b + 2, l), r.s = h16(b), r.m[l] = -16 * h16(b); break;
      case TensorType::Q5_1: r.c[l] = nib(b + 8, l) | bit5(b + 4, l), r.s = h16(b), r.m[l] = h16(b + 2); break;
      case TensorType::Q8_0: r.c[l] = int8_t(b[2 + l]), r.s = h16(b); break;
      case TensorType::Q4_K: {  // 12 bytes of 6-bit scales / mins at b + 4, nibbles at b + 16
        const uint8_t* sc = b + 4;
        const int s = j < 4 ? sc[j] & 63 : (sc[j + 4] & 15) | ((sc[j - 4] >> 6) << 4);
        const int m = j < 4 ? sc[j + 4] & 63 : (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
        const uint8_t q = b[16 + 32 * (j / 2) + l];
        r.c[l] = j % 2 ? q >> 4 : q & 15, r.s = h16(b) * s, r.m[l] = -h16(b + 2) * m;
        break;
      }
      case TensorType::Q2_K: {  // scales[16] (scale | min << 4), qs[64], d, dmin
        const int e = 32 * j + l, sb = b[e / 16];
        r.c[l] = ((b[16 + 32 * (e / 128) + l] >> (2 * (j % 4))) & 3) * (sb & 15), r.s = h16(b + 80);
        r.m[l] = -h16(b + 82) * (sb >> 4);
        break;
      }
      case TensorType::Q3_K: {  // hmask[32], qs[64], scales[12] (6-bit, + 32), d
        const int e = 32 * j + l, s = e / 16;
        const int lo = s < 8 ? b[96 + s] & 15 : b[96 + s - 8] >> 4, hi = (b[104 + s % 4] >> (2 * (s / 4))) & 3;
        const int q = ((b[32 + 32 * (e / 128) + l] >> (2 * (j % 4))) & 3) - ((b[l] >> j) & 1 ? 0 : 4);
        r.c[l] = q * ((lo | hi << 4) - 32), r.s = h16(b + 108);
        break;
      }
      case TensorType::Q5_K: {  // d, dmin, Q4_K's scales at b + 4, qh[32] at b + 16, nibbles at b + 48
        const uint8_t* sc = b + 4;
        const int s = j < 4 ? sc[j] & 63 : (sc[j + 4] & 15) | ((sc[j - 4] >> 6) << 4);
        const int m = j < 4 ? sc[j + 4] & 63 : (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
        const uint8_t q = b[48 + 32 * (j / 2) + l];
        r.c[l] = (j % 2 ? q >> 4 : q & 15) | (((b[16 + l] >> j) & 1) << 4), r.s = h16(b) * s, r.m[l] = -h16(b + 2) * m;
        break;
      }
      case TensorType::IQ4_NL: r.c[l] = kLevels[nib(b + 2, l)], r.s = h16(b); break;
      case TensorType::IQ4_XS: {  // d, scales_h, scales_l[4], 16 bytes of nibbles per unit at b + 8
        const int sh = b[2] | b[3] << 8, ls = ((b[4 + j / 2] >> (4 * (j % 2))) & 15) | (((sh >> (2 * j)) & 3) << 4);
        r.c[l] = kLevels[nib(b + 8 + 16 * j, l)], r.s = h16(b) * (ls - 32);
        break;
      }
      default: {  // Q6_K: ql[128], qh[64], scales[16], d; element e of the 256
        const int e = 32 * j + l, h = e / 128, k = (e % 128) / 32, i = e % 32;
        const int lo = (b[64 * h + 32 * (k & 1) + i] >> (4 * (k >> 1))) & 15;
        const int hi = (b[128 + 32 * h + i] >> (2 * k)) & 3;
        r.c[l] = ((lo | hi << 4) - 32) * int8_t(b[192 + e / 16]), r.s = h16(b + 208);
        break;
      }
    }
  }
  return r;
}

struct Ref {
  ld exact, S;
};
Ref reference(TensorType t, const uint8_t* w, const block_q16* a, int64_t n) {
  Ref r{0, 0};
  for (int64_t u = 0; u < n / 32; ++u) {
    const Unit un = decode_unit(t, w, u);
    ld dot = 0, msum = 0, mag = 0;
    for (int l = 0; l < 32; ++l) {
      dot += ld(un.c[l]) * a[u].qs[l];
      msum += un.m[l] * a[u].qs[l];
      mag += (std::fabs(un.s * un.c[l]) + std::fabs(un.m[l])) * std::abs(a[u].qs[l]);
    }
    r.exact += ld(a[u].d) * (un.s * dot + msum);
    r.S += std::fabs(ld(a[u].d)) * mag;
  }
  return r;
}

uint16_t random_scale16(std::mt19937& rng) {
  std::uniform_real_distribution<float> e(-10.0f, -2.0f);
  return fp32_to_fp16(std::exp2(e(rng)) * ((rng() & 1) ? 1.0f : -1.0f));
}

// One weight row at p: reference-quantised Gaussian data, or raw random bytes (every code,
// Q6_K scale -128, Q4_K 6-bit scales 63) with sane fp16 scales.
void make_row(TensorType t, int64_t n, std::mt19937& rng, bool raw, uint8_t* p) {
  if (lowbit_test::is_lowbit(t)) {  // no quantiser: random blocks either way
    lowbit_test::fill_blocks(t, p, *row_bytes(uint32_t(t), uint64_t(n)), rng, random_scale16);
    return;
  }
  if (raw) {
    const size_t bb = block_bytes(t), bytes = bb * (n / type_traits(uint32_t(t))->block_elems);
    for (size_t i = 0; i < bytes; ++i) p[i] = uint8_t(rng());
    const bool two = t == TensorType::Q4_1 || t == TensorType::Q5_1 || t == TensorType::Q4_K;
    for (size_t off = 0; off < bytes; off += bb) {
      const uint16_t h[2] = {random_scale16(rng), random_scale16(rng)};
      std::memcpy(p + off + (t == TensorType::Q6_K ? 208 : 0), h, two ? 4 : 2);
    }
    return;
  }
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng) * 0.3f + ((t == TensorType::Q4_1 || t == TensorType::Q5_1) ? 0.2f : 0.0f);
  switch (t) {
    case TensorType::Q4_0: ref::quantize_row_q4_0(x.data(), reinterpret_cast<block_q4_0*>(p), n); break;
    case TensorType::Q4_1: ref::quantize_row_q4_1(x.data(), reinterpret_cast<block_q4_1*>(p), n); break;
    case TensorType::Q5_0: ref::quantize_row_q5_0(x.data(), reinterpret_cast<block_q5_0*>(p), n); break;
    case TensorType::Q5_1: ref::quantize_row_q5_1(x.data(), reinterpret_cast<block_q5_1*>(p), n); break;
    case TensorType::Q8_0: ref::quantize_row_q8_0(x.data(), reinterpret_cast<block_q8_0*>(p), n); break;
    case TensorType::Q4_K: ref::quantize_row_q4_K(x.data(), reinterpret_cast<block_q4_K*>(p), n); break;
    default: ref::quantize_row_q6_K(x.data(), reinterpret_cast<block_q6_K*>(p), n); break;
  }
}

// Overwrites the codes of a row's blocks with the largest magnitudes (the scales stay).
void set_extreme_codes(TensorType t, uint8_t* w, size_t bytes) {
  const size_t bb = block_bytes(t);
  for (size_t off = 0; off < bytes; off += bb) {
    uint8_t* b = &w[off];
    switch (t) {
      case TensorType::Q4_0: std::memset(b + 2, 0x00, 16); break;  // q - 8 = -8
      case TensorType::Q4_1: std::memset(b + 4, 0xFF, 16); break;
      case TensorType::Q5_0: std::memset(b + 2, 0x00, 20); break;  // q - 16 = -16
      case TensorType::Q5_1: std::memset(b + 4, 0xFF, 20); break;
      case TensorType::Q8_0: std::memset(b + 2, 0x80, 32); break;  // -128
      case TensorType::Q4_K: std::memset(b + 4, 0xFF, 140); break;  // scales, mins 63; q 15
      case TensorType::Q6_K: std::memset(b, 0x00, 192), std::memset(b + 192, 0x80, 16); break;  // q -32, sc -128
      case TensorType::Q2_K: std::memset(b, 0xFF, 80); break;  // scales, mins 15; q 3
      case TensorType::Q3_K: std::memset(b, 0x00, 108); break;  // q -4, sc -32
      case TensorType::Q5_K: std::memset(b + 4, 0xFF, 172); break;  // scales, mins 63; q 31
      case TensorType::IQ4_NL: std::memset(b + 2, 0x00, 16); break;  // level -127
      case TensorType::IQ4_XS: std::memset(b + 2, 0x00, 134); break;  // ls - 32 = -32, level -127
      default: break;
    }
  }
}

// Activation rows: Gaussian at several magnitudes, some blocks zero or at full scale (+-32767).
std::vector<float> make_act(std::mt19937& rng, int64_t n, int pattern) {
  static const float kMag[] = {1.0f, 1e3f, 1e-3f, 1.0f};
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng) * kMag[pattern % 4];
  if (pattern % 4 == 3)
    for (int64_t b = 0; b < n / 32; ++b) {
      if (b % 3 == 0) std::fill(x.begin() + 32 * b, x.begin() + 32 * b + 32, 0.0f);
      if (b % 3 == 1)
        for (int l = 0; l < 32; ++l) x[32 * b + l] = (rng() & 1) ? 2.5f : -2.5f;
    }
  return x;
}

class I16ActIsa : public testing_isa::IsaFixture {};

TEST_P(I16ActIsa, TableEntries) {
  ASSERT_NE(table_->quantize_row_q16, nullptr);
  const bool all = GetParam() == Isa::scalar || GetParam() == Isa::avx2 || GetParam() == Isa::avxvnni ||
                   GetParam() == Isa::avx512;
  for (uint32_t id = 0; id < 32; ++id) {
    bool listed = false;
    for (TensorType t : kTypes) listed = listed || uint32_t(t) == id;
    const bool has = table_->types[id].vec_dot_i16act_tile != nullptr;
    if (!listed) {
      EXPECT_FALSE(has) << "type id " << id;
    } else if (all) {
      EXPECT_TRUE(has) << "type id " << id;
    }
  }
}

// Compares the table's quantize_row_q16 with the twin over x (whole blocks), byte for byte.
void expect_same_q16(const KernelTable& kt, const std::vector<float>& x, const char* what) {
  const int64_t n = int64_t(x.size()) / 32 * 32;
  std::vector<block_q16> got(n / 32 + 1), want(n / 32 + 1);
  std::memset(got.data(), 0x5A, got.size() * sizeof(block_q16));
  std::memset(want.data(), 0x5A, want.size() * sizeof(block_q16));
  kt.quantize_row_q16(x.data(), got.data(), n);
  kernels_for(Isa::scalar)->quantize_row_q16(x.data(), want.data(), n);
  for (int64_t b = 0; b <= n / 32; ++b)
    ASSERT_EQ(0, std::memcmp(&got[b], &want[b], sizeof(block_q16))) << what << ": block " << b << " of " << n / 32;
}

TEST_P(I16ActIsa, QuantizeIsBitIdenticalToTwin) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float mag : {1.0f, 1e-20f, 1e20f, 3e-39f}) {
    std::vector<float> x(2048 + 1);
    for (auto& v : x) v = nd(rng) * mag;
    expect_same_q16(*table_, x, "gaussian");
    expect_same_q16(*table_, std::vector<float>(x.begin() + 1, x.end()), "unaligned");
  }
  const float inf = INFINITY, nan = NAN, big = FLT_MAX, sub = std::ldexp(1.0f, -140);
  std::vector<std::vector<float>> blocks = {
      std::vector<float>(32, 0.0f), std::vector<float>(32, -0.0f), std::vector<float>(32, nan),
      std::vector<float>(32, big), std::vector<float>(32, -sub), std::vector<float>(32, std::ldexp(1.0f, -149))};
  for (int kind = 0; kind < 8; ++kind) {
    std::vector<float> b(32);
    for (int l = 0; l < 32; ++l) b[l] = nd(rng);
    if (kind == 0) b[5] = nan;
    if (kind == 1) b[31] = inf;
    if (kind == 2) b[0] = -inf, b[7] = nan;
    if (kind == 3) b[9] = big, b[10] = -big;
    if (kind == 4) b[3] = 1e-30f, b[4] = sub;  // the tiny ones round to 0
    if (kind == 5)
      for (int l = 0; l < 32; ++l) b[l] = l == 0 ? 32767.0f : float(l) - 15.5f;  // d = 1: ties at k + 0.5
    if (kind == 6)
      for (int l = 0; l < 32; ++l) b[l] = l == 0 ? -65534.0f : float(2 * l - 31);  // d = 2: odd x are ties
    if (kind == 7)
      for (int l = 0; l < 32; ++l) b[l] = l == 0 ? 32767.0f : 32766.5f - float(l);  // ties near the top
    blocks.push_back(b);
  }
  std::vector<float> all;
  for (const auto& b : blocks) all.insert(all.end(), b.begin(), b.end());
  expect_same_q16(*table_, all, "special blocks");

  // The twin's semantics, on the same blocks (so every ISA is held to them too).
  std::vector<block_q16> q(blocks.size());
  table_->quantize_row_q16(all.data(), q.data(), int64_t(all.size()));
  auto at = [&](size_t b) { return blocks.size() - 8 + b; };
  EXPECT_EQ(q[0].d, 0.0f);
  EXPECT_EQ(q[2].d, 0.0f) << "all NaN: NaN never wins the max";
  EXPECT_EQ(q[2].qs[0], -32767) << "NaN * 0 = NaN -> INT32_MIN -> clamp";
  EXPECT_EQ(q[at(0)].qs[5], -32767) << "NaN -> INT32_MIN -> clamp";
  EXPECT_EQ(q[at(1)].d, inf);
  EXPECT_EQ(q[at(1)].qs[31], -32767) << "inf * (1 / inf) = NaN";
  EXPECT_EQ(q[at(1)].qs[0], 0);
  EXPECT_EQ(q[at(5)].d, 1.0f);
  const int16_t want5[] = {32767, -14, -14, -12, -12, -10, -10};  // -14.5 -> -14, -13.5 -> -14, ...
  for (int l = 0; l < 7; ++l) EXPECT_EQ(q[at(5)].qs[l], want5[l]) << l;
  EXPECT_EQ(q[at(6)].d, 2.0f);
  for (int l = 1; l < 32; ++l) {
    const float v = float(2 * l - 31) / 2.0f, r = std::nearbyint(v);
    EXPECT_EQ(q[at(6)].qs[l], int16_t(r)) << l;
    EXPECT_EQ(std::fmod(r, 2.0f), 0.0f) << "tie " << v << " not to even";
  }
  EXPECT_EQ(q[at(7)].qs[1], 32766);  // 32765.5
  EXPECT_EQ(q[at(7)].qs[2], 32764);  // 32764.5
  for (size_t b = 0; b < q.size(); ++b) {
    int32_t s = 0;
    for (int l = 0; l < 32; ++l) {
      s += q[b].qs[l];
      EXPECT_GE(q[b].qs[l], -32767);
      if (std::isfinite(q[b].d) && std::isfinite(all[32 * b + l]) && q[b].d > 0 && std::isnormal(1.0f / q[b].d)) {
        EXPECT_LE(std::fabs(all[32 * b + l] / q[b].d - q[b].qs[l]), 0.5f + 1e-3f) << b << " " << l;
      }
    }
    EXPECT_EQ(q[b].sum, s) << "block " << b;
  }
}

// Every tile shape of one type and row length against the twin and the integer reference;
// worst |got - exact| / (u S) seen goes to *worst (printed: how close the bound is).
void check_tiles(const KernelTable& kt, TensorType t, int64_t n, bool raw, std::mt19937& rng, double* worst) {
  constexpr int kRows = 17, kX = 9;
  const TypeKernels& k = kt.for_type(t);
  const TypeKernels& sk = kernels_for(Isa::scalar)->for_type(t);
  ASSERT_NE(k.vec_dot_i16act_tile, nullptr);
  const size_t rb = *row_bytes(uint32_t(t), n), ws = rb + 6;  // rows 2-byte aligned only
  const size_t as = n / 32 * sizeof(block_q16) + 44;
  // Gaps and slack are 0xFF: an fp16 NaN, so a kernel reading scales beyond a row poisons it.
  std::vector<uint8_t> w(ws * kRows + 512, 0xFF), a(as * kX, 0xEE);
  for (int r = 0; r < kRows; ++r) make_row(t, n, rng, raw, &w[r * ws]);
  for (int x = 0; x < kX; ++x) {
    const std::vector<float> xf = make_act(rng, n, x + raw);
    kt.quantize_row_q16(xf.data(), &a[x * as], n);
  }
  auto act = [&](int x) { return reinterpret_cast<const block_q16*>(&a[x * as]); };
  Ref ref[kX][kRows];
  std::vector<float> twin(kX * kRows);
  sk.vec_dot_i16act_tile(n, w.data(), ws, kRows, a.data(), as, kX, twin.data(), kRows);
  for (int x = 0; x < kX; ++x)
    for (int r = 0; r < kRows; ++r) {
      ref[x][r] = reference(t, &w[r * ws], act(x), n);
      ASSERT_NEAR(twin[x * kRows + r], ref[x][r].exact, 3 * kU * ref[x][r].S + 1e-30)
          << "scalar twin vs integer reference, x=" << x << " r=" << r;
    }
  const ld tol_k = (n / 32.0 + 8.0) * kU;
  // A pair's result must not depend on the call's shape (drivers/i16_tile.h: the summation
  // order depends on n only), so a token gives the same bits in any batch or chunking.
  std::vector<float> seen(kX * kRows, NAN);
  for (int nr : {1, 2, 3, 5, 16, 17}) {
    for (int nx : {1, 2, 3, 4, 5, 7, 8, 9}) {
      SCOPED_TRACE(::testing::Message() << "n_rows=" << nr << " n_x=" << nx);
      const int64_t os = nr + 3, lead = 5;  // odd output stride; sentinels around the tile
      std::vector<float> out(lead + nx * os + 5, -7.25f);
      k.vec_dot_i16act_tile(n, w.data(), ws, nr, a.data(), as, nx, out.data() + lead, os);
      for (int64_t i = 0; i < int64_t(out.size()); ++i) {
        const int64_t j = i - lead, x = j >= 0 ? j / os : -1, r = j >= 0 ? j % os : -1;
        if (x < 0 || x >= nx || r >= nr) {
          ASSERT_EQ(out[i], -7.25f) << "written outside the tile at offset " << j;
          continue;
        }
        const Ref& e = ref[x][r];
        if (e.S > 0) *worst = std::max(*worst, double(std::fabs(out[i] - e.exact) / (kU * e.S)));
        ASSERT_NEAR(out[i], e.exact, tol_k * e.S + 1e-30) << "x=" << x << " r=" << r << " S=" << double(e.S);
        ASSERT_NEAR(out[i], twin[x * kRows + r], (tol_k + 3 * kU) * e.S + 1e-30) << "vs twin x=" << x << " r=" << r;
        float& first = seen[x * kRows + r];
        if (std::isnan(first)) first = out[i];
        ASSERT_EQ(out[i], first) << "x=" << x << " r=" << r << ": differs from the same pair in another shape";
      }
    }
  }
}

TEST_P(I16ActIsa, TilesMatchTwinAndIntegerReference) {
  std::mt19937 rng(1234 + int(GetParam()));
  for (TensorType t : kTypes) {
    double worst = 0.0;
    if (!table_->for_type(t).vec_dot_i16act_tile) continue;  // exact path on this ISA (TableEntries)
    const std::vector<int64_t> ns = is_k(t) ? std::vector<int64_t>{256, 512, 1536, 2048, 8448}
                                            : std::vector<int64_t>{32, 64, 96, 128, 160, 224, 576, 1536, 2048, 8224};
    for (int64_t n : ns)
      for (bool raw : {false, true}) {
        SCOPED_TRACE(::testing::Message() << isa_name(GetParam()) << " " << name(t) << " n=" << n << " raw=" << raw);
        check_tiles(*table_, t, n, raw, rng, &worst);
        if (HasFatalFailure()) return;
      }
    std::printf("[ %s %s ] worst |got - exact| / (u S) = %.2f (bound n / 32 + 8 >= %.0f)\n", isa_name(GetParam()),
                name(t), worst, double(ns[0] / 32 + 8));
  }
}

// gemm_i16 (drivers/i16_gemm.h where the ISA has one, else the tile itself) gives the tile's
// results bit for bit in every call shape: weight rows off the GEMM's 16 / 32-row tiles,
// activation rows within and beyond one pass of 64, rows whose last group is short, n beyond
// one slice of kI16Slice units, Gaussian and raw rows and extreme codes (Q6_K's and Q8_0's
// halves beyond 2^24), and nothing written outside the output tile.
TEST_P(I16ActIsa, GemmEqualsTileBitForBit) {
  constexpr int kRows = 37, kX = 70;
  std::mt19937 rng(99);
  for (TensorType t : kTypes) {
    const TypeKernels& k = table_->for_type(t);
    if (!k.vec_dot_i16act_tile) continue;
    ASSERT_NE(k.gemm_i16, nullptr) << name(t);
    if (k.gemm_i16 == k.vec_dot_i16act_tile) continue;  // the tile itself (ARM): nothing to compare
    for (int64_t n : is_k(t) ? std::vector<int64_t>{256, 2304, 8448} : std::vector<int64_t>{32, 224, 640, 8224})
      for (int kind = 0; kind < 3; ++kind) {
        SCOPED_TRACE(::testing::Message() << name(t) << " n=" << n << " kind=" << kind);
        const size_t ws = *row_bytes(uint32_t(t), n) + 6, as = n / 32 * sizeof(block_q16) + 8;
        std::vector<uint8_t> w(ws * kRows, 0xFF), a(as * kX);
        for (int r = 0; r < kRows; ++r) {
          make_row(t, n, rng, kind > 0, &w[r * ws]);
          if (kind == 2) set_extreme_codes(t, &w[r * ws], ws - 6);
        }
        for (int x = 0; x < kX; ++x) table_->quantize_row_q16(make_act(rng, n, x + kind).data(), &a[x * as], n);
        std::vector<float> tile(kX * kRows);
        k.vec_dot_i16act_tile(n, w.data(), ws, kRows, a.data(), as, kX, tile.data(), kRows);
        for (auto [nr, nx] : {std::pair{kRows, kX}, {1, 1}, {16, 9}, {33, 64}, {5, 65}, {32, 17}, {17, 3}}) {
          SCOPED_TRACE(::testing::Message() << "n_rows=" << nr << " n_x=" << nx);
          const int64_t os = nr + 3, lead = 5;
          std::vector<float> out(lead + nx * os + 5, -7.25f);
          k.gemm_i16(n, w.data(), ws, nr, a.data(), as, nx, out.data() + lead, os);
          for (int64_t i = 0; i < int64_t(out.size()); ++i) {
            const int64_t j = i - lead, x = j >= 0 ? j / os : -1, r = j >= 0 ? j % os : -1;
            if (x < 0 || x >= nx || r >= nr) {
              ASSERT_EQ(out[i], -7.25f) << "written outside the tile at offset " << j;
              continue;
            }
            const float want = tile[x * kRows + r];
            ASSERT_EQ(0, std::memcmp(&out[i], &want, sizeof(float))) << "x=" << x << " r=" << r << ": " << out[i]
                                                                     << " vs the tile's " << want;
          }
        }
      }
  }
}

// gemm_i16_panels (x86/i16panel_avx512.cpp, where the ISA has it) over the same rows packed into
// 16-row panels (quant/panel.h) gives the tile's results bit for bit: one panel and several,
// every activation-row count from a decode step through register tiles, passes of 32 and
// beyond, n within one slice of kI16Slice units and beyond it, Gaussian and raw rows and
// extreme codes, and nothing written outside the output. Q4_K (super-block panels): rows of
// 1, 2, 6, 35 and 43 super-blocks (the last two slices long; 43: Qwen2.5-3B's ffn_down, 9,030
// bytes a Q6_K row, past the 8 KiB that once kept such rows out of panels), random scale bytes and fp16 d / dmin
// (raw rows) and every scale and min at 63 with the largest codes (extreme), n_x 1-9, 16, 33.
// Q6_K (super-block panels, two int32 halves): the same shapes, random scales and codes (raw),
// codes -32 at scale -128 (extreme: the largest int16 codes), and blocks whose codes are all -32
// or all 31 with scales of -128 or 127 and extreme fp16 d.
TEST_P(I16ActIsa, PanelGemmEqualsTileBitForBit) {
  constexpr int kRows = 48, kX = 70;
  std::mt19937 rng(5);
  int checked = 0;
  using Shapes = std::vector<std::pair<int, int>>;  // (n_panels, n_x)
  const Shapes shapes32 = {{3, kX}, {1, 1}, {2, 2}, {3, 3}, {1, 4}, {3, 5}, {2, 8}, {1, 33}, {3, 64}};
  const Shapes shapes_k = {{3, kX}, {1, 1}, {2, 2}, {3, 3}, {1, 4}, {2, 5}, {3, 6},
                           {1, 7}, {2, 8}, {3, 9}, {1, 16}, {2, 16}, {3, 33}};
  for (TensorType t : {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q8_0, TensorType::Q4_K, TensorType::Q6_K,
                       TensorType::Q5_K, TensorType::IQ4_NL, TensorType::IQ4_XS, TensorType::Q3_K, TensorType::Q2_K}) {
    const TypeKernels& k = table_->for_type(t);
    if (!k.gemm_i16_panels) continue;
    ASSERT_NE(k.vec_dot_i16act_tile, nullptr) << name(t);
    const bool kq = is_k(t);
    for (int64_t n : kq ? std::vector<int64_t>{256, 512, 1536, 8960, 11008} : std::vector<int64_t>{32, 224, 640, 8224})
      for (int kind = 0; kind < (kq ? 4 : 3); ++kind) {
        SCOPED_TRACE(::testing::Message() << name(t) << " n=" << n << " kind=" << kind);
        const size_t ws = *row_bytes(uint32_t(t), n), as = n / 32 * sizeof(block_q16) + 8;
        std::vector<uint8_t> w(ws * kRows), pan(ws * kRows), a(as * kX);
        for (int r = 0; r < kRows; ++r) {
          make_row(t, n, rng, kind > 0, &w[r * ws]);
          if (kind == 2) set_extreme_codes(t, &w[r * ws], ws);
          static constexpr uint16_t kExtreme[] = {0x7BFF, 0xFBFF, 0x0001, 0x8001, 0x0000, 0x8000, 0x3C00, 0x0400};
          if (kind == 3 && (t == TensorType::Q4_K || t == TensorType::Q5_K || t == TensorType::Q2_K))  // extreme fp16 d, dmin
            for (size_t off = 0; off < ws; off += type_traits(uint32_t(t))->block_bytes) {
              const uint16_t h[2] = {kExtreme[rng() % 8], kExtreme[rng() % 8]};
              std::memcpy(&w[r * ws + off + (t == TensorType::Q2_K ? offsetof(block_q2_K, d) : 0)], h, 4);
            }
          if (kind == 3 && t == TensorType::Q6_K)  // codes all -32 or all 31, scales -128 / 127, extreme d
            for (size_t off = 0; off < ws; off += sizeof(block_q6_K)) {
              auto* b = reinterpret_cast<block_q6_K*>(&w[r * ws + off]);
              const uint8_t q = rng() % 2 ? 0xFF : 0x00;
              std::memset(b->ql, q, sizeof(b->ql));
              std::memset(b->qh, q, sizeof(b->qh));
              for (int8_t& sc : b->scales) sc = rng() % 2 ? 127 : -128;
              b->d = kExtreme[rng() % 8];
            }
        }
        for (int p = 0; p < kRows / kPanelRows; ++p)
          pack_panel(t, &w[p * kPanelRows * ws], ws, n, &pan[p * kPanelRows * ws]);
        for (int x = 0; x < kX; ++x) table_->quantize_row_q16(make_act(rng, n, x + kind).data(), &a[x * as], n);
        std::vector<float> tile(kX * kRows);
        k.vec_dot_i16act_tile(n, w.data(), ws, kRows, a.data(), as, kX, tile.data(), kRows);
        for (auto [np, nx] : kq ? shapes_k : shapes32) {
          SCOPED_TRACE(::testing::Message() << "n_panels=" << np << " n_x=" << nx);
          const int nr = np * kPanelRows;
          const int64_t os = nr + 3, lead = 5;
          std::vector<float> out(lead + nx * os + 5, -7.25f);
          k.gemm_i16_panels(n, pan.data(), np, a.data(), as, nx, out.data() + lead, os);
          for (int64_t i = 0; i < int64_t(out.size()); ++i) {
            const int64_t j = i - lead, x = j >= 0 ? j / os : -1, r = j >= 0 ? j % os : -1;
            if (x < 0 || x >= nx || r >= nr) {
              ASSERT_EQ(out[i], -7.25f) << "written outside the output at offset " << j;
              continue;
            }
            const float want = tile[x * kRows + r];
            ASSERT_EQ(0, std::memcmp(&out[i], &want, sizeof(float))) << "x=" << x << " r=" << r << ": " << out[i]
                                                                     << " vs the tile's " << want;
          }
          ++checked;
        }
      }
  }
  if (GetParam() == Isa::avx2 || GetParam() == Isa::avxvnni || GetParam() == Isa::avx512) {
    EXPECT_GT(checked, 0) << "every x86 SIMD table has int16 panel kernels";
    EXPECT_NE(table_->for_type(TensorType::Q4_K).gemm_i16_panels, nullptr) << "Q4_K panels on every x86 SIMD table";
    EXPECT_NE(table_->for_type(TensorType::Q6_K).gemm_i16_panels, nullptr) << "Q6_K panels on every x86 SIMD table";
    EXPECT_NE(table_->for_type(TensorType::Q5_K).gemm_i16_panels, nullptr) << "Q5_K panels on every x86 SIMD table";
    EXPECT_NE(table_->for_type(TensorType::IQ4_NL).gemm_i16_panels, nullptr) << "IQ4_NL panels on every x86 SIMD table";
    EXPECT_NE(table_->for_type(TensorType::IQ4_XS).gemm_i16_panels, nullptr) << "IQ4_XS panels on every x86 SIMD table";
    EXPECT_NE(table_->for_type(TensorType::Q3_K).gemm_i16_panels, nullptr) << "Q3_K panels on every x86 SIMD table";
    EXPECT_NE(table_->for_type(TensorType::Q2_K).gemm_i16_panels, nullptr) << "Q2_K panels on every x86 SIMD table";
  } else if (checked == 0) {
    GTEST_SKIP() << "no int16 panel kernels in this table";
  }
}

// The largest codes against full-scale activations of matching sign: the int32 lane sums
// are at their maximum (no overflow allowed), and the result is still within the bound.
TEST_P(I16ActIsa, ExtremeCodesDoNotOverflow) {
  for (TensorType t : kTypes) {
    if (!table_->for_type(t).vec_dot_i16act_tile) continue;
    SCOPED_TRACE(name(t));
    const int64_t n = 512;
    std::vector<uint8_t> w(*row_bytes(uint32_t(t), n));
    std::mt19937 rng(3);
    make_row(t, n, rng, true, w.data());  // scales from here, codes overwritten
    set_extreme_codes(t, w.data(), w.size());
    const Unit u0 = decode_unit(t, w.data(), 0);
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) {
      const Unit u = decode_unit(t, w.data(), i / 32);
      x[i] = (u.s * u.c[i % 32] >= 0) == (u0.s >= 0) ? 1.0f : -1.0f;
    }
    std::vector<block_q16> a(n / 32);
    table_->quantize_row_q16(x.data(), a.data(), n);
    ASSERT_EQ(std::abs(a[0].qs[0]), 32767);
    float got = 0.0f;
    table_->for_type(t).vec_dot_i16act_tile(n, w.data(), w.size(), 1, a.data(), 0, 1, &got, 1);
    const Ref e = reference(t, w.data(), a.data(), n);
    EXPECT_NEAR(got, e.exact, (n / 32.0 + 8.0) * kU * e.S) << "S=" << double(e.S);
  }
}

// A wider level's tiles give the avx2 table's results bit for bit. avx512 (x86/i16act_avx512.cpp):
// the same f32 part, and per unit the same two 16-product halves converted to f32 and added
// (Q6_K's and Q8_0's halves can exceed 2^24 and round: raw and extreme rows, full-scale blocks).
// avxvnni (x86/i16act_avxvnni.cpp): the avx2 code with vpdpwssd for vpmaddwd + vpaddd.
// ARM (base neon): the dotprod and i8mm tables' SDOT / UDOT tiles (arm/i16act_dotprod.cpp) give
// the SMLAL tiles' results; their activation rows also come as raw codes: uniform over the whole
// int16 range (every high / low byte pair) and the byte split's edge values (+-32767, -32768,
// +-256, 255, -129, 128, -1, 0), so every correction and permutation path meets its extremes.
void expect_tiles_equal(Isa base, Isa isa) {
  const KernelTable* k2 = kernels_for(base);
  const KernelTable* k5 = kernels_for(isa);
  if (!k2 || !k5) GTEST_SKIP() << "needs the " << isa_name(base) << " and " << isa_name(isa) << " tables";
  const bool raw_act = base == Isa::neon;
  constexpr int kRows = 5, kX = 9;
  std::mt19937 rng(77);
  for (TensorType t : kTypes) {
    const auto f2 = k2->for_type(t).vec_dot_i16act_tile, f5 = k5->for_type(t).vec_dot_i16act_tile;
    ASSERT_TRUE(f2 && f5) << name(t);
    for (int64_t n : is_k(t) ? std::vector<int64_t>{256, 2304} : std::vector<int64_t>{32, 224, 640, 2080})
      for (int kind = 0; kind < 3; ++kind) {  // Gaussian rows, raw bytes, extreme codes
        SCOPED_TRACE(::testing::Message() << name(t) << " n=" << n << " kind=" << kind);
        const size_t ws = *row_bytes(uint32_t(t), n), as = n / 32 * sizeof(block_q16);
        std::vector<uint8_t> w(ws * kRows), a(as * kX);
        for (int r = 0; r < kRows; ++r) {
          make_row(t, n, rng, kind > 0, &w[r * ws]);
          if (kind == 2) set_extreme_codes(t, &w[r * ws], ws);
        }
        for (int x = 0; x < kX; ++x) {
          k2->quantize_row_q16(make_act(rng, n, x + kind).data(), &a[x * as], n);
          if (!raw_act || x % 3 == 0) continue;
          static const int16_t kEdge[] = {-32768, -32767, 32767, -256, 256, 255, -129, 128, -1, 0};
          auto* b = reinterpret_cast<block_q16*>(&a[x * as]);
          for (int64_t u = 0; u < n / 32; ++u) {
            int32_t sum = 0;
            for (int l = 0; l < 32; ++l) {
              b[u].qs[l] = x % 3 == 1 ? int16_t(rng()) : kEdge[rng() % 10];
              sum += b[u].qs[l];
            }
            b[u].sum = sum;
            b[u].d = std::ldexp(1.0f + float(rng() % 1000) / 1000.0f, -int(rng() % 20));
          }
        }
        for (int nr = 1; nr <= kRows; nr += raw_act ? 1 : kRows - 1)
          for (int nx = 1; nx <= kX; ++nx) {
            std::vector<float> o2(nx * kRows, -7.25f), o5(nx * kRows, -7.25f);  // rows >= nr: untouched
            f2(n, w.data(), ws, nr, a.data(), as, nx, o2.data(), kRows);
            f5(n, w.data(), ws, nr, a.data(), as, nx, o5.data(), kRows);
            for (int i = 0; i < nx * kRows; ++i)
              ASSERT_EQ(0, std::memcmp(&o2[i], &o5[i], sizeof(float)))
                  << "n_rows=" << nr << " nx=" << nx << " out " << i << ": " << o2[i] << " vs " << o5[i];
          }
      }
  }
}

TEST(I16ActX86, Avx512TilesEqualAvx2) { expect_tiles_equal(Isa::avx2, Isa::avx512); }
TEST(I16ActX86, AvxVnniTilesEqualAvx2) { expect_tiles_equal(Isa::avx2, Isa::avxvnni); }
TEST(I16ActArm, DotprodTilesEqualNeon) { expect_tiles_equal(Isa::neon, Isa::neon_dotprod); }
TEST(I16ActArm, I8mmTilesEqualNeon) { expect_tiles_equal(Isa::neon, Isa::neon_i8mm); }

// The dotprod and i8mm tables run their own int16 tiles for the types of
// arm/i16act_dotprod.cpp, the SMLAL ones (the neon table's) for the rest.
TEST(I16ActArm, DotprodTablesHaveTheirOwnTiles) {
  const KernelTable* kn = kernels_for(Isa::neon);
  if (!kn) GTEST_SKIP() << "needs the neon table";
  for (Isa isa : {Isa::neon_dotprod, Isa::neon_i8mm}) {
    const KernelTable* k = kernels_for(isa);
    if (!k) continue;
    for (TensorType t : kTypes) {
      const bool own = t == TensorType::Q4_0 || t == TensorType::Q4_1 || t == TensorType::Q5_0 ||
                       t == TensorType::Q5_1 || t == TensorType::Q8_0 || t == TensorType::Q4_K ||
                       t == TensorType::Q5_K || t == TensorType::Q6_K;
      const auto mine = k->for_type(t).vec_dot_i16act_tile, neon = kn->for_type(t).vec_dot_i16act_tile;
      if (own) EXPECT_NE(mine, neon) << isa_name(isa) << " " << name(t);
      else EXPECT_EQ(mine, neon) << isa_name(isa) << " " << name(t);
      EXPECT_EQ(k->for_type(t).gemm_i16, mine) << isa_name(isa) << " " << name(t) << ": the tile is its GEMM";
    }
  }
}

// The avxvnni table is the avx2 table but for its int16 kernels: tiles, GEMMs and panel kernels
// of its own (so the I16ActIsa suite above tests VNNI code, not the avx2 table's again), int16
// prompts, and the same panel types as avx2, so a model repacks for it as for avx2.
TEST(I16ActX86, AvxVnniTableIsAvx2WithItsOwnInt16Kernels) {
  const KernelTable* k2 = kernels_for(Isa::avx2);
  const KernelTable* kv = kernels_for(Isa::avxvnni);
  if (!k2 || !kv) GTEST_SKIP() << "needs the avx2 and avxvnni tables";
  EXPECT_TRUE(kv->int16_prompts);
  EXPECT_EQ(kv->quantize_row_q16, k2->quantize_row_q16);
  EXPECT_EQ(kv->swiglu_f32, k2->swiglu_f32);
  EXPECT_EQ(kv->f32_to_f16_row, k2->f32_to_f16_row);
  EXPECT_EQ(kv->attn_seg_q8, k2->attn_seg_q8);
  for (uint32_t id = 0; id < 32; ++id) {
    SCOPED_TRACE(::testing::Message() << "type id " << id);
    const TypeKernels &a = k2->types[id], &v = kv->types[id];
    EXPECT_EQ(v.available, a.available);
    EXPECT_EQ(v.vec_dot, a.vec_dot);
    EXPECT_EQ(v.vec_dot_f32, a.vec_dot_f32);
    EXPECT_EQ(v.gemm_q8, a.gemm_q8);
    EXPECT_EQ(v.vec_dot_rows_multi, a.vec_dot_rows_multi);
    EXPECT_EQ(v.gemm_f32, a.gemm_f32);
    EXPECT_EQ(v.vec_dot_panels, a.vec_dot_panels);
    EXPECT_EQ(v.gemm_q8_panels, a.gemm_q8_panels);
    EXPECT_EQ(v.vec_dot_f16act, a.vec_dot_f16act);
    EXPECT_EQ(v.vec_dot_i16act_tile != nullptr, a.vec_dot_i16act_tile != nullptr);
    EXPECT_EQ(v.gemm_i16_panels != nullptr, a.gemm_i16_panels != nullptr);
    if (v.vec_dot_i16act_tile) {
      EXPECT_NE(v.vec_dot_i16act_tile, a.vec_dot_i16act_tile);
      EXPECT_NE(v.gemm_i16, a.gemm_i16);
    }
    if (v.gemm_i16_panels) {
      EXPECT_NE(v.gemm_i16_panels, a.gemm_i16_panels);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, I16ActIsa,
                         ::testing::ValuesIn(testing_isa::kAllIsas), testing_isa::IsaParamName());

}  // namespace
}  // namespace pllm
