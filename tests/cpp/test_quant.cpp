// Type traits, fp16/bf16 conversions, and the reference quantisers/dequantisers:
// hand-built blocks with hand-computed values, and round-trip error bounds.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "quant/blocks.h"
#include "quant/reference.h"
#include "quant/types.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace pllm {
namespace {

constexpr double kU = FLT_EPSILON / 2.0;

// ------------------------------------------------------------------ traits
TEST(TypeTraits, GgmlBlockSizes) {
  struct Want { uint32_t id; const char* name; uint32_t elems, bytes; bool supported; };
  const Want want[] = {
      {0, "F32", 1, 4, true},        {1, "F16", 1, 2, true},        {30, "BF16", 1, 2, true},
      {2, "Q4_0", 32, 18, true},     {3, "Q4_1", 32, 20, true},     {6, "Q5_0", 32, 22, true},
      {7, "Q5_1", 32, 24, true},    {8, "Q8_0", 32, 34, true},     {9, "Q8_1", 32, 36, false},
      {10, "Q2_K", 256, 84, true},   {11, "Q3_K", 256, 110, true},  {12, "Q4_K", 256, 144, true},
      {13, "Q5_K", 256, 176, true},  {14, "Q6_K", 256, 210, true},  {15, "Q8_K", 256, 292, false},
      {20, "IQ4_NL", 32, 18, true},  {23, "IQ4_XS", 256, 136, true},
  };
  for (const Want& w : want) {
    const auto t = type_traits(w.id);
    ASSERT_TRUE(t.has_value()) << w.name;
    EXPECT_STREQ(t->name, w.name);
    EXPECT_EQ(t->block_elems, w.elems) << w.name;
    EXPECT_EQ(t->block_bytes, w.bytes) << w.name;
    EXPECT_EQ(t->supported, w.supported) << w.name;
  }
  for (uint32_t id : {4u, 5u, 16u, 17u, 29u, 31u, 32u, 1000u, 0xFFFFFFFFu}) {
    EXPECT_FALSE(type_traits(id).has_value()) << id;
  }
  EXPECT_EQ(sizeof(block_q4_0), 18u);
  EXPECT_EQ(sizeof(block_q4_K), 144u);
  EXPECT_EQ(sizeof(block_q6_K), 210u);
  EXPECT_EQ(sizeof(block_q2_K), 84u);
  EXPECT_EQ(sizeof(block_q3_K), 110u);
  EXPECT_EQ(sizeof(block_q5_K), 176u);
  EXPECT_EQ(sizeof(block_iq4_nl), 18u);
  EXPECT_EQ(sizeof(block_iq4_xs), 136u);
}

TEST(TypeTraits, RowBytes) {
  EXPECT_EQ(row_bytes(0, 10), 40u);
  EXPECT_EQ(row_bytes(1, 3), 6u);
  EXPECT_EQ(row_bytes(2, 64), 36u);
  EXPECT_EQ(row_bytes(12, 4096), 16u * 144u);
  EXPECT_EQ(row_bytes(14, 256), 210u);
  EXPECT_EQ(row_bytes(8, 0), 0u);
  // not a multiple of the block size
  EXPECT_FALSE(row_bytes(2, 33).has_value());
  EXPECT_FALSE(row_bytes(12, 128).has_value());
  // unknown type
  EXPECT_FALSE(row_bytes(5, 32).has_value());
  EXPECT_FALSE(row_bytes(99, 1).has_value());
  // overflow of blocks * bytes
  EXPECT_FALSE(row_bytes(0, uint64_t{1} << 62).has_value());
  EXPECT_EQ(row_bytes(0, (uint64_t{1} << 62) - 1), UINT64_MAX - 3);
  const uint64_t max32 = UINT64_MAX / 32 * 32;
  EXPECT_FALSE(row_bytes(8, max32).has_value());          // 34 bytes per 32 elements
  EXPECT_EQ(row_bytes(2, max32), max32 / 32 * 18);         // 18 bytes per 32: fits
  EXPECT_FALSE(row_bytes(15, UINT64_MAX / 256 * 256).has_value());
  EXPECT_EQ(row_bytes(8, 32 * (UINT64_MAX / 34)), UINT64_MAX / 34 * 34);
}

// ------------------------------------------------------------------ fp16 / bf16
TEST(Fp16, EdgeCases) {
  EXPECT_EQ(fp16_to_fp32(0x0000), 0.0f);
  EXPECT_TRUE(std::signbit(fp16_to_fp32(0x8000)));
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));         // smallest subnormal
  EXPECT_EQ(fp16_to_fp32(0x03ff), std::ldexp(1023.0f, -24));      // largest subnormal
  EXPECT_EQ(fp16_to_fp32(0x0400), std::ldexp(1.0f, -14));         // smallest normal
  EXPECT_EQ(fp16_to_fp32(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_fp32(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_fp32(0x7c00), INFINITY);
  EXPECT_EQ(fp16_to_fp32(0xfc00), -INFINITY);
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7e00)));
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7c01)));

  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65519.99f), 0x7bff);  // below the halfway point to 65536
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);   // tie between 65504 (odd) and inf: even -> inf
  EXPECT_EQ(fp32_to_fp16(1e9f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-INFINITY), 0xfc00);
  const uint16_t nan = fp32_to_fp16(NAN);
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  // ties to even in the normal range: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
  // subnormals and underflow
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);          // tie -> even (0)
  EXPECT_EQ(fp32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);          // 1.5 ulp tie -> 2
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25) * 1.0001f), 0x0001);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-std::ldexp(1.0f, -30)), 0x8000);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1023.0f, -24)), 0x03ff);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(2047.0f, -25)), 0x0400);       // rounds up into normal
}

TEST(Fp16, ExhaustiveRoundTrip) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(f)))) << h;
      continue;
    }
    ASSERT_EQ(fp32_to_fp16(f), h) << std::hex << h;
  }
}

#if defined(__x86_64__)
__attribute__((target("f16c"))) uint16_t hw_to_half(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }
__attribute__((target("f16c"))) float hw_to_float(uint16_t h) { return _cvtsh_ss(h); }

TEST(Fp16, MatchesF16cHardware) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no F16C";
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float a = fp16_to_fp32(uint16_t(h)), b = hw_to_float(uint16_t(h));
    if (std::isnan(a) || std::isnan(b)) {
      ASSERT_TRUE(std::isnan(a) && std::isnan(b)) << h;
      continue;
    }
    ASSERT_EQ(fp32_to_bits(a), fp32_to_bits(b)) << h;
  }
  std::mt19937 rng(5);
  for (int i = 0; i < 2000000; ++i) {
    // random bit patterns concentrated on the half range (exponents 100..150)
    uint32_t bits = rng();
    bits = (bits & 0x807fffffu) | ((100u + (bits >> 23) % 51u) << 23);
    const float f = fp32_from_bits(bits);
    ASSERT_EQ(fp32_to_fp16(f), hw_to_half(f)) << std::hex << bits;
  }
}
#endif

TEST(Bf16, EdgeCases) {
  EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_fp32(0x0001), fp32_from_bits(0x00010000));  // subnormal
  EXPECT_EQ(bf16_to_fp32(0x7f80), INFINITY);
  EXPECT_TRUE(std::isnan(bf16_to_fp32(0x7fc0)));
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);   // tie -> even
  EXPECT_EQ(fp32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(fp32_to_bf16(fp32_from_bits(0x3f808001)), 0x3f81);   // just above the tie
  EXPECT_EQ(fp32_to_bf16(fp32_from_bits(0x7f7fffff)), 0x7f80);   // FLT_MAX rounds to inf
  EXPECT_EQ(fp32_to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ(fp32_to_bf16(-INFINITY), 0xff80);
  EXPECT_EQ(fp32_to_bf16(fp32_from_bits(0x00008000)), 0x0000);   // subnormal tie -> even
  EXPECT_EQ(fp32_to_bf16(fp32_from_bits(0x00018000)), 0x0002);
  const uint16_t nan = fp32_to_bf16(fp32_from_bits(0x7f800001));  // sNaN must stay NaN
  EXPECT_TRUE(std::isnan(bf16_to_fp32(nan)));
  const uint16_t nnan = fp32_to_bf16(fp32_from_bits(0xffc00000));
  EXPECT_TRUE(std::isnan(bf16_to_fp32(nnan)));
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_fp32(uint16_t(h));
    if (!std::isnan(f)) {
      ASSERT_EQ(fp32_to_bf16(f), h) << h;
    }
  }
}

// ------------------------------------------------------------------ hand-built blocks
TEST(Reference, HandBuiltQ4_0Q4_1Q8_0) {
  block_q4_0 b0;
  b0.d = 0x3800;  // 0.5
  for (int j = 0; j < 16; ++j) b0.qs[j] = uint8_t(j | ((15 - j) << 4));
  float y[32];
  ref::dequantize_row_q4_0(&b0, y, 32);
  EXPECT_EQ(y[0], -4.0f);
  EXPECT_EQ(y[9], 0.5f);
  EXPECT_EQ(y[15], 3.5f);
  EXPECT_EQ(y[16], 3.5f);   // high nibble of qs[0] = 15 -> 0.5 * 7
  EXPECT_EQ(y[31], -4.0f);  // high nibble of qs[15] = 0
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * (j - 8));
    EXPECT_EQ(y[j + 16], 0.5f * (7 - j));
  }

  block_q4_1 b1;
  b1.d = 0x3400;  // 0.25
  b1.m = 0xbc00;  // -1
  for (int j = 0; j < 16; ++j) b1.qs[j] = uint8_t(j | ((15 - j) << 4));
  ref::dequantize_row_q4_1(&b1, y, 32);
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[15], 2.75f);
  EXPECT_EQ(y[16], 2.75f);
  EXPECT_EQ(y[20], 1.75f);  // q = 15 - 4 = 11

  block_q8_0 b8;
  b8.d = 0x3000;  // 0.125
  for (int j = 0; j < 32; ++j) b8.qs[j] = int8_t(j * 8 - 128);
  ref::dequantize_row_q8_0(&b8, y, 32);
  EXPECT_EQ(y[0], -16.0f);
  EXPECT_EQ(y[16], 0.0f);
  EXPECT_EQ(y[31], 15.0f);
}

TEST(Reference, HandBuiltQ5_0Q5_1) {
  // Element j: low 4 bits from the nibble (as Q4_0), fifth bit = bit j of the LE word qh.
  block_q5_0 b0;
  b0.d = 0x3800;  // 0.5
  for (int j = 0; j < 16; ++j) b0.qs[j] = uint8_t(j | ((15 - j) << 4));
  const uint32_t hw = 0x80010003u;  // elements 0, 1, 16 and 31 have the fifth bit
  std::memcpy(b0.qh, &hw, 4);
  float y[32];
  ref::dequantize_row_q5_0(&b0, y, 32);
  EXPECT_EQ(y[0], 0.0f);    // q = 16 -> 0
  EXPECT_EQ(y[1], 0.5f);    // q = 17
  EXPECT_EQ(y[2], -7.0f);   // q = 2 -> -14 * 0.5
  EXPECT_EQ(y[16], 7.5f);   // high nibble of qs[0] = 15, + 16 -> 31 - 16 = 15
  EXPECT_EQ(y[17], -1.0f);  // high nibble 14, no fifth bit -> -2
  EXPECT_EQ(y[31], 0.0f);   // high nibble 0, + 16
  for (int j = 0; j < 32; ++j) {
    const int lo = j < 16 ? j : 31 - j;
    const int q = lo + (((hw >> j) & 1) ? 16 : 0);
    EXPECT_EQ(y[j], 0.5f * float(q - 16)) << j;
  }

  block_q5_1 b1;
  b1.d = 0x3400;  // 0.25
  b1.m = 0xbc00;  // -1
  std::memcpy(b1.qs, b0.qs, 16);
  std::memcpy(b1.qh, &hw, 4);
  ref::dequantize_row_q5_1(&b1, y, 32);
  EXPECT_EQ(y[0], 3.0f);    // 16 * 0.25 - 1
  EXPECT_EQ(y[2], -0.5f);   // 2 * 0.25 - 1
  EXPECT_EQ(y[16], 6.75f);  // 31 * 0.25 - 1

  // quantisers: ggml's rounding (Q5_0: d = max / -16, q = min(31, trunc(x / d + 16.5));
  // Q5_1: d = (max - min) / 31, q = trunc((x - min) / d + 0.5))
  float x[32] = {-16.0f, 15.0f, 0.5f, 16.0f * 0.99f, -0.49f};
  ref::quantize_row_q5_0(x, &b0, 32);
  ref::dequantize_row_q5_0(&b0, y, 32);
  EXPECT_EQ(fp16_to_fp32(b0.d), 1.0f);
  EXPECT_EQ(y[0], -16.0f);
  EXPECT_EQ(y[1], 15.0f);
  EXPECT_EQ(y[2], 1.0f);   // 0.5 + 16.5 = 17: the tie rounds up
  EXPECT_EQ(y[3], 15.0f);  // clamped at 31
  EXPECT_EQ(y[4], 0.0f);
  float x1[32];
  for (int j = 0; j < 32; ++j) x1[j] = -1.0f + 0.5f * float(j);  // min -1, max 14.5
  ref::quantize_row_q5_1(x1, &b1, 32);
  EXPECT_EQ(fp16_to_fp32(b1.d), 0.5f);
  EXPECT_EQ(fp16_to_fp32(b1.m), -1.0f);
  ref::dequantize_row_q5_1(&b1, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], x1[j]) << j;
}

TEST(Reference, GgmlRoundingChoices) {
  // Q8_0: d = amax / 127, q = round-half-away(x / d)
  float x[32] = {127.0f, 2.5f, -2.5f, 0.49f, -126.5f};
  block_q8_0 b8;
  ref::quantize_row_q8_0(x, &b8, 32);
  EXPECT_EQ(fp16_to_fp32(b8.d), 1.0f);
  EXPECT_EQ(b8.qs[0], 127);
  EXPECT_EQ(b8.qs[1], 3);
  EXPECT_EQ(b8.qs[2], -3);
  EXPECT_EQ(b8.qs[3], 0);
  EXPECT_EQ(b8.qs[4], -127);
  // Q4_0: d = max / -8 (signed max by magnitude), q = min(15, trunc(x / d + 8.5))
  float x4[32] = {-8.0f, 7.0f, 0.5f, 8.0f * 0.99f, -0.49f};
  block_q4_0 b4;
  ref::quantize_row_q4_0(x4, &b4, 32);
  EXPECT_EQ(fp16_to_fp32(b4.d), 1.0f);
  EXPECT_EQ(b4.qs[0] & 15, 0);
  EXPECT_EQ(b4.qs[1] & 15, 15);
  EXPECT_EQ(b4.qs[2] & 15, 9);   // 0.5 + 8.5 = 9: rounds the tie up
  EXPECT_EQ(b4.qs[3] & 15, 15);  // 7.92 + 8.5 = 16.42 -> clamped to 15
  EXPECT_EQ(b4.qs[4] & 15, 8);
  EXPECT_EQ(b4.qs[0] >> 4, 8);   // x[16] = 0
  // Q4_1: d = (max - min) / 15, m = min, q = min(15, trunc((x - min) / d + 0.5))
  float x1[32];
  for (int j = 0; j < 32; ++j) x1[j] = -1.0f + 0.5f * float(j % 31);  // min -1, max 14
  block_q4_1 b1;
  ref::quantize_row_q4_1(x1, &b1, 32);
  EXPECT_EQ(fp16_to_fp32(b1.d), 1.0f);
  EXPECT_EQ(fp16_to_fp32(b1.m), -1.0f);
  EXPECT_EQ(b1.qs[0] & 15, 0);
  EXPECT_EQ(b1.qs[1] & 15, 1);   // 0.5 + 0.5 = 1.0 -> 1 (tie rounds up)
  EXPECT_EQ(b1.qs[3] & 15, 2);   // 1.5 + 0.5 -> 2
  EXPECT_EQ(b1.qs[14] >> 4, 15);  // x[30] = 14 -> 15
}

TEST(Reference, HandBuiltQ4_K) {
  // d = 0.5, dmin = 0.25; sub-block scales/mins chosen to exercise the 6-bit packing.
  const uint8_t sc[8] = {1, 2, 3, 4, 33, 40, 63, 17};
  const uint8_t mn[8] = {0, 5, 10, 63, 1, 2, 48, 31};
  // packed by hand: bytes 0-3 = sc[j] | top2(sc[j+4]) << 6; 4-7 = m[j] | top2(m[j+4]) << 6;
  // 8-11 = low4(sc[j+4]) | low4(m[j+4]) << 4
  const uint8_t packed[12] = {0x81, 0x82, 0xC3, 0x44, 0x00, 0x05, 0xCA, 0x7F, 0x11, 0x28, 0x0F, 0xF1};
  uint8_t mine[12];
  ref::pack_scale_min_k4(sc, mn, mine);
  EXPECT_EQ(0, std::memcmp(mine, packed, 12));
  for (int j = 0; j < 8; ++j) {
    uint8_t s, m;
    ref::get_scale_min_k4(j, packed, &s, &m);
    EXPECT_EQ(s, sc[j]) << j;
    EXPECT_EQ(m, mn[j]) << j;
  }
  block_q4_K b;
  b.d = 0x3800;
  b.dmin = 0x3400;
  std::memcpy(b.scales, packed, 12);
  for (int i = 0; i < 128; ++i) b.qs[i] = uint8_t(i * 7);
  float y[256];
  ref::dequantize_row_q4_K(&b, y, 256);
  EXPECT_EQ(y[0], 0.0f);       // sub 0, q = 0, m = 0
  EXPECT_EQ(y[33], -1.25f);    // sub 1: qs[1] = 7 -> high nibble 0; -0.25 * 5
  EXPECT_EQ(y[130], 230.75f);  // sub 4: qs[66] = 0xCE -> low 14; 0.5*33*14 - 0.25*1
  EXPECT_EQ(y[200], 240.0f);   // sub 6: qs[104] = 0xD8 -> low 8; 0.5*63*8 - 0.25*48
  EXPECT_EQ(y[255], 51.75f);   // sub 7: qs[127] = 0x79 -> high 7; 0.5*17*7 - 0.25*31
  for (int e = 0; e < 256; ++e) {
    const int sub = e / 32;
    const uint8_t byte = b.qs[32 * (e / 64) + e % 32];
    const int q = (sub % 2 == 0) ? (byte & 15) : (byte >> 4);
    EXPECT_EQ(y[e], 0.5f * sc[sub] * q - 0.25f * mn[sub]) << e;
  }
}

TEST(Reference, HandBuiltQ6_K) {
  block_q6_K b{};
  b.d = 0x4000;  // 2.0
  for (int i = 0; i < 16; ++i) b.scales[i] = int8_t(i - 8);
  // everything q = 0 - 32 except four hand-placed elements:
  b.ql[5] = 0x0A; b.qh[5] = 0x02;              // e = 5: q = 10 + 32 - 32 = 10, scale -8
  b.ql[64 + 35] = 0xF0; b.qh[32 + 3] = 0xC0;   // e = 227: high nibble 15, bits 6-7 = 3 -> 31, scale 6
  b.ql[20] = 0x10; b.qh[20] = 0x10;            // e = 84: high nibble 1, bits 4-5 = 1 -> -15, scale -3
  b.ql[39] = 0x03; b.qh[7] = 0x0C;             // e = 39: low nibble 3, bits 2-3 = 3 -> 19, scale -6
  float y[256];
  ref::dequantize_row_q6_K(&b, y, 256);
  EXPECT_EQ(y[5], -160.0f);
  EXPECT_EQ(y[227], 372.0f);
  EXPECT_EQ(y[84], 90.0f);
  EXPECT_EQ(y[39], -228.0f);
  for (int e = 0; e < 256; ++e) {
    if (e == 5 || e == 227 || e == 84 || e == 39) continue;
    EXPECT_EQ(y[e], 2.0f * (e / 16 - 8) * -32.0f) << e;
  }
}

// ------------------------------------------------------------------ round trips
// Test data: Gaussian blocks at several magnitudes plus awkward blocks (all equal,
// all positive, zeros, one outlier).
std::vector<float> test_data(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t blk = i / 256;
    const float scale = std::pow(10.0f, float(blk % 5) - 2.0f);
    switch (blk % 7) {
      case 4: x[i] = 0.75f; break;                          // constant
      case 5: x[i] = std::fabs(nd(rng)) + 3.0f; break;       // all positive
      case 6: x[i] = (i % 256 == 17) ? 50.0f : nd(rng) * 0.01f; break;  // outlier
      default: x[i] = nd(rng) * scale;
    }
  }
  for (int64_t i = 256 * 3; i < 256 * 3 + 40 && i < n; ++i) x[i] = 0.0f;  // zeros
  return x;
}

double rel_rms_error(const std::vector<float>& x, const std::vector<float>& y, int64_t from, int64_t to) {
  double e = 0, s = 0;
  for (int64_t i = from; i < to; ++i) {
    e += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    s += double(x[i]) * x[i];
  }
  return s > 0 ? std::sqrt(e / s) : 0.0;
}

float amax_of(const float* x, int count) {
  float m = 0;
  for (int j = 0; j < count; ++j) m = std::fmax(m, std::fabs(x[j]));
  return m;
}

constexpr int64_t kN = 256 * 14;

// Per-element bounds, from the quantiser definitions (h = 2^-11 relative error of
// storing a scale in fp16, u = f32 rounding of the dequantisation arithmetic):
//   Q8_0: |x - x^| <= d/2 + 127 d h (scale stored in fp16), d = amax/127.
//   Q4_0: |x - x^| <= |d| (the value opposite the signed max can clamp at 15, one
//         full step) + 8 |d| h, |d| = amax/8.
//   Q4_1: |x - x^| <= d/2 + 15 d h + |min| h, d = (max - min)/15.
// Relative RMS error on the Gaussian blocks: for a uniform rounding error it is
// step/sqrt(12); step ~ amax/127 (Q8_0), amax/8 (Q4_0), range/15 (Q4_1) with
// amax ~ 2.5 sigma and range ~ 4.5 sigma for 32 samples, giving about 0.006, 0.09,
// 0.087; the asserted limits add about 50% margin.
TEST(RoundTrip, Q8_0Q4_0Q4_1) {
  const std::vector<float> x = test_data(kN, 1);
  const double h = std::ldexp(1.0, -11);
  std::vector<float> y(kN);
  {
    std::vector<block_q8_0> q(kN / 32);
    ref::quantize_row_q8_0(x.data(), q.data(), kN);
    ref::dequantize_row_q8_0(q.data(), y.data(), kN);
    for (int64_t i = 0; i < kN; ++i) {
      const double d = amax_of(&x[i / 32 * 32], 32) / 127.0;
      ASSERT_LE(std::fabs(x[i] - y[i]), d * (0.5 + 127 * h) + 4 * kU * std::fabs(x[i])) << i;
    }
    EXPECT_LT(rel_rms_error(x, y, 0, 256 * 4), 0.01);
  }
  {
    std::vector<block_q4_0> q(kN / 32);
    ref::quantize_row_q4_0(x.data(), q.data(), kN);
    ref::dequantize_row_q4_0(q.data(), y.data(), kN);
    for (int64_t i = 0; i < kN; ++i) {
      const double d = amax_of(&x[i / 32 * 32], 32) / 8.0;
      ASSERT_LE(std::fabs(x[i] - y[i]), d * (1.0 + 8 * h) + 4 * kU * std::fabs(x[i])) << i;
    }
    EXPECT_LT(rel_rms_error(x, y, 0, 256 * 4), 0.14);
  }
  {
    std::vector<block_q4_1> q(kN / 32);
    ref::quantize_row_q4_1(x.data(), q.data(), kN);
    ref::dequantize_row_q4_1(q.data(), y.data(), kN);
    for (int64_t i = 0; i < kN; ++i) {
      float mn = INFINITY, mx = -INFINITY;
      for (int j = 0; j < 32; ++j) {
        mn = std::fmin(mn, x[i / 32 * 32 + j]);
        mx = std::fmax(mx, x[i / 32 * 32 + j]);
      }
      const double d = (double(mx) - mn) / 15.0;
      const double bound = d * (0.5 + 15 * h) + std::fabs(mn) * h + 4 * kU * (std::fabs(mn) + std::fabs(mx));
      ASSERT_LE(std::fabs(x[i] - y[i]), bound) << i;
    }
    EXPECT_LT(rel_rms_error(x, y, 0, 256 * 4), 0.13);
  }
}

// Q5_0 / Q5_1: as Q4_0 / Q4_1 with 32 levels: Q5_0 |x - x^| <= |d| + 16 |d| h with
// |d| = amax/16 (clamping at 31 costs one step); Q5_1 |x - x^| <= d/2 + 31 d h + |min| h,
// d = (max - min)/31. RMS about half of Q4's: ~0.045 and ~0.042; limits 0.07.
TEST(RoundTrip, Q5_0Q5_1) {
  const std::vector<float> x = test_data(kN, 3);
  const double h = std::ldexp(1.0, -11);
  std::vector<float> y(kN);
  {
    std::vector<block_q5_0> q(kN / 32);
    ref::quantize_row_q5_0(x.data(), q.data(), kN);
    ref::dequantize_row_q5_0(q.data(), y.data(), kN);
    for (int64_t i = 0; i < kN; ++i) {
      const double d = amax_of(&x[i / 32 * 32], 32) / 16.0;
      ASSERT_LE(std::fabs(x[i] - y[i]), d * (1.0 + 16 * h) + 4 * kU * std::fabs(x[i])) << i;
    }
    EXPECT_LT(rel_rms_error(x, y, 0, 256 * 4), 0.07);
  }
  {
    std::vector<block_q5_1> q(kN / 32);
    ref::quantize_row_q5_1(x.data(), q.data(), kN);
    ref::dequantize_row_q5_1(q.data(), y.data(), kN);
    for (int64_t i = 0; i < kN; ++i) {
      float mn = INFINITY, mx = -INFINITY;
      for (int j = 0; j < 32; ++j) {
        mn = std::fmin(mn, x[i / 32 * 32 + j]);
        mx = std::fmax(mx, x[i / 32 * 32 + j]);
      }
      const double d = (double(mx) - mn) / 31.0;
      const double bound = d * (0.5 + 31 * h) + std::fabs(mn) * h + 4 * kU * (std::fabs(mn) + std::fabs(mx));
      ASSERT_LE(std::fabs(x[i] - y[i]), bound) << i;
    }
    EXPECT_LT(rel_rms_error(x, y, 0, 256 * 4), 0.07);
  }
}

// Q4_K (see quantize_row_q4_K): per sub-block, true step s = range/15 where range =
// max - min(0, min); the stored step d*sc is within 0.53 d of s and the stored
// offset dmin*m within 0.53 dmin of -min(0, min). Unclamped elements err by at most
// half a stored step; clamping at 15 costs at most 15 * 0.53 d + 0.53 dmin, at 0
// at most 0.53 dmin. So |x - x^| <= s/2 + 8.5 d + 1.1 dmin (+ f32 rounding).
// RMS: step ~ 4.5 sigma / 15 -> ~0.087 sigma, plus scale rounding; limit 0.13.
TEST(RoundTrip, Q4_K) {
  const std::vector<float> x = test_data(kN, 2);
  std::vector<block_q4_K> q(kN / 256);
  std::vector<float> y(kN);
  ref::quantize_row_q4_K(x.data(), q.data(), kN);
  ref::dequantize_row_q4_K(q.data(), y.data(), kN);
  for (int64_t i = 0; i < kN; ++i) {
    const block_q4_K& b = q[i / 256];
    const float* sub = &x[i / 32 * 32];
    float lo = 0.0f, hi = -INFINITY;
    for (int j = 0; j < 32; ++j) {
      lo = std::fmin(lo, sub[j]);
      hi = std::fmax(hi, sub[j]);
    }
    const double s = (double(hi) - lo) / 15.0;
    const double bound = s / 2 + 8.5 * fp16_to_fp32(b.d) + 1.1 * fp16_to_fp32(b.dmin) +
                         8 * kU * amax_of(&x[i / 256 * 256], 256);
    ASSERT_LE(std::fabs(x[i] - y[i]), bound) << i;
  }
  EXPECT_LT(rel_rms_error(x, y, 0, 256 * 3), 0.13);
}

// Q6_K: per group of 16 the true step |scale| = amax_g/32; the stored step d*sc is
// within 0.57 d of it. Unclamped: half a stored step; the clamp at -32/31 costs at
// most one stored step plus 32 * 0.57 d. So |x - x^| <= |d sc| + 18.5 d.
// RMS: step ~ 2 sigma / 32 -> ~0.018 sigma; limit 0.03.
TEST(RoundTrip, Q6_K) {
  const std::vector<float> x = test_data(kN, 3);
  std::vector<block_q6_K> q(kN / 256);
  std::vector<float> y(kN);
  ref::quantize_row_q6_K(x.data(), q.data(), kN);
  ref::dequantize_row_q6_K(q.data(), y.data(), kN);
  for (int64_t i = 0; i < kN; ++i) {
    const block_q6_K& b = q[i / 256];
    const double d = fp16_to_fp32(b.d);
    const double bound = std::fabs(d * b.scales[(i % 256) / 16]) + 18.5 * d + 8 * kU * amax_of(&x[i / 256 * 256], 256);
    ASSERT_LE(std::fabs(x[i] - y[i]), bound) << i;
  }
  EXPECT_LT(rel_rms_error(x, y, 0, 256 * 3), 0.03);
}

// F16/BF16: round to nearest, so the relative error of each (normal-range) element
// is at most 2^-11 / 2^-8.
TEST(RoundTrip, F16BF16) {
  const std::vector<float> x = test_data(kN, 4);
  std::vector<uint16_t> q(kN);
  std::vector<float> y(kN);
  ref::quantize_row_f16(x.data(), q.data(), kN);
  ref::dequantize_row_f16(q.data(), y.data(), kN);
  for (int64_t i = 0; i < kN; ++i) {
    if (std::fabs(x[i]) >= std::ldexp(1.0f, -14)) {
      ASSERT_LE(std::fabs(x[i] - y[i]), std::ldexp(std::fabs(x[i]), -11)) << i;
    } else {
      ASSERT_LE(std::fabs(x[i] - y[i]), std::ldexp(1.0f, -25)) << i;  // half a subnormal ulp
    }
  }
  ref::quantize_row_bf16(x.data(), q.data(), kN);
  ref::dequantize_row_bf16(q.data(), y.data(), kN);
  for (int64_t i = 0; i < kN; ++i) ASSERT_LE(std::fabs(x[i] - y[i]), std::ldexp(std::fabs(x[i]), -8)) << i;
}

// The activation quantisers: |q| <= 127, bsums / s consistent, error <= d/2.
TEST(RoundTrip, ActivationFormats) {
  const std::vector<float> x = test_data(kN, 5);
  std::vector<block_q8_K> k(kN / 256);
  ref::quantize_row_q8_K(x.data(), k.data(), kN);
  std::vector<float> y(kN);
  ref::dequantize_row_q8_K(k.data(), y.data(), kN);
  for (int64_t i = 0; i < kN; ++i) {
    const double d = k[i / 256].d;
    ASSERT_LE(std::fabs(x[i] - y[i]), d * 0.5 * (1 + 1e-6) + 2 * kU * std::fabs(x[i])) << i;
    ASSERT_GE(k[i / 256].qs[i % 256], -127);
  }
  for (const auto& b : k) {
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int j = 0; j < 16; ++j) s += b.qs[16 * g + j];
      EXPECT_EQ(b.bsums[g], s);
    }
  }
  std::vector<block_q8_1> q1(kN / 32);
  ref::quantize_row_q8_1(x.data(), q1.data(), kN);
  ref::dequantize_row_q8_1(q1.data(), y.data(), kN);
  for (int64_t i = 0; i < kN; ++i) {
    ASSERT_LE(std::fabs(x[i] - y[i]), q1[i / 32].d * 0.5 * (1 + 1e-6) + 2 * kU * std::fabs(x[i])) << i;
  }
  for (const auto& b : q1) {
    int s = 0;
    for (int j = 0; j < 32; ++j) s += b.qs[j];
    EXPECT_EQ(b.s, b.d * float(s));
  }
}

}  // namespace
}  // namespace pllm
