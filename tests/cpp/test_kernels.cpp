// Every ISA table this machine can run, checked against the scalar twins and
// against exact f64 arithmetic.
//
// Tolerance rationale (vec_dot). Let u = FLT_EPSILON / 2 and S = sum_i |w_i| |a_i|
// over the dequantised weight w and dequantised activation a, where for formats
// with an additive offset (Q4_1's m, Q4_K's dmin*m) |w_i| is taken as
// |scale part| + |offset part|. Every kernel computes the integer part of each
// block exactly; the float work is: a few products per block term (each adds <= u
// relative error) and the accumulation of the terms. In a chain of k roundings a
// term picks up at most ~k*u relative error, so |result - exact| <= (k + 3) u S.
//   * quantised types: a term goes through at most (2 * blocks) accumulations
//     plus a horizontal sum (<= 4 levels) and a final combination (2):
//     k <= 2 * nb + 8  ->  tol = (2 * nb + 16) * u * S.
//   * f32/f16/bf16: SIMD kernels use >= 8 independent lane accumulators, so a term
//     goes through <= n/8 lane additions + 4 reduction levels + <= 7 tail additions:
//     tol = (n/8 + 16) * u * S.
// The scalar twins accumulate in double, so their error is ~u*|result| (covered).
//
// Exact mode (vec_dot_f32 / vec_dot_f32_multi: weights decoded in registers, f32
// activations). Every kernel decodes exactly the floats dequantize_row produces
// (checked bit-for-bit against the scalar twin there), so the reference is the f64
// dot of dequantize_row's output with x, and S = sum |w_deq_i| |x_i|. SIMD kernels
// give each activation row >= 8 independent f32 lane accumulators fed by FMA, so a
// product sees <= n/8 lane roundings (the last partial chunk of a float-type row is
// zero-padded into the same lanes), plus <= 2 levels combining accumulators, 3
// levels of horizontal sum: tol = (n/8 + 16) u S, the bound used for the float
// types above. The scalar twins decode with the reference dequantiser and
// accumulate in double, so they are within u|result| + n 2^-53 S: tol 2 u S.
// A single wrong element moves a result by ~S/n; at n = 4096 tol = 528 u S =
// 3.1e-5 S vs 2.4e-4 S, so the check can fail on real bugs.
// A missing or wrong element moves the result by ~S/n, which is larger than these
// bounds for every size tested (e.g. n = 4096 Q4_0: tol = 272 u S = 1.6e-5 S,
// one element ~ 2.4e-4 S), so the tests can fail on real bugs.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/reference.h"
#include "isa_fixture.h"
#include "lowbit_blocks.h"

namespace pllm {

// Readable parameter names in gtest / ctest output.
void PrintTo(Isa isa, std::ostream* os) { *os << isa_name(isa); }

namespace {

constexpr double kU = FLT_EPSILON / 2.0;

const TensorType kTypes[] = {TensorType::F32,  TensorType::F16,  TensorType::BF16, TensorType::Q4_0,
                             TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0,
                             TensorType::Q4_K, TensorType::Q6_K, TensorType::Q2_K, TensorType::Q3_K,
                             TensorType::Q5_K, TensorType::IQ4_NL, TensorType::IQ4_XS};

int block_of(TensorType t) { return static_cast<int>(type_traits(static_cast<uint32_t>(t))->block_elems); }
bool is_float(TensorType t) { return t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16; }

std::vector<int64_t> sizes_for(TensorType t) {
  if (is_float(t)) return {1, 7, 8, 33, 256, 1000, 4096};
  if (block_of(t) == 32) return {32, 64, 96, 1024, 4096};
  return {256, 512, 2048, 4096};
}

std::vector<float> random_floats(std::mt19937& rng, int64_t n, float scale) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng) * scale;
  return v;
}

// A finite fp16 with magnitude in [2^-10, 2^-2] times a random sign.
uint16_t random_scale16(std::mt19937& rng) {
  std::uniform_real_distribution<float> e(-10.0f, -2.0f);
  const float v = std::exp2(e(rng)) * ((rng() & 1) ? 1.0f : -1.0f);
  return fp32_to_fp16(v);
}

// Weight row bytes: either the reference quantiser applied to Gaussian data
// (realistic) or raw random bytes with sane fp16 scales (reaches every bit pattern
// of the quants: nibbles 0..15, int8 -128, 6-bit scales up to 63, ...).
std::vector<uint8_t> make_weights(TensorType t, int64_t n, std::mt19937& rng, bool raw) {
  const size_t bytes = *row_bytes(static_cast<uint32_t>(t), n);
  std::vector<uint8_t> w(bytes);
  const std::vector<float> x = random_floats(rng, n, raw ? 3.0f : 0.7f);
  switch (t) {
    case TensorType::F32: std::memcpy(w.data(), x.data(), bytes); return w;
    case TensorType::F16: ref::quantize_row_f16(x.data(), reinterpret_cast<uint16_t*>(w.data()), n); return w;
    case TensorType::BF16: ref::quantize_row_bf16(x.data(), reinterpret_cast<uint16_t*>(w.data()), n); return w;
    default: break;
  }
  if (lowbit_test::is_lowbit(t)) {  // no quantiser: random blocks in both variants
    lowbit_test::fill_blocks(t, w.data(), bytes, rng, random_scale16);
    return w;
  }
  if (raw) {
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    const size_t bb = type_traits(static_cast<uint32_t>(t))->block_bytes;
    for (size_t off = 0; off < bytes; off += bb) {
      uint16_t h[2] = {random_scale16(rng), random_scale16(rng)};
      if (t == TensorType::Q6_K) {
        std::memcpy(&w[off + 208], h, 2);
      } else {
        const int count = (t == TensorType::Q4_1 || t == TensorType::Q5_1 || t == TensorType::Q4_K) ? 2 : 1;
        std::memcpy(&w[off], h, 2 * count);
      }
    }
    return w;
  }
  switch (t) {
    case TensorType::Q4_0: ref::quantize_row_q4_0(x.data(), reinterpret_cast<block_q4_0*>(w.data()), n); break;
    case TensorType::Q4_1: ref::quantize_row_q4_1(x.data(), reinterpret_cast<block_q4_1*>(w.data()), n); break;
    case TensorType::Q5_0: ref::quantize_row_q5_0(x.data(), reinterpret_cast<block_q5_0*>(w.data()), n); break;
    case TensorType::Q5_1: ref::quantize_row_q5_1(x.data(), reinterpret_cast<block_q5_1*>(w.data()), n); break;
    case TensorType::Q8_0: ref::quantize_row_q8_0(x.data(), reinterpret_cast<block_q8_0*>(w.data()), n); break;
    case TensorType::Q4_K: ref::quantize_row_q4_K(x.data(), reinterpret_cast<block_q4_K*>(w.data()), n); break;
    case TensorType::Q6_K: ref::quantize_row_q6_K(x.data(), reinterpret_cast<block_q6_K*>(w.data()), n); break;
    default: ADD_FAILURE() << "no quantiser";
  }
  return w;
}

// Independent decoder (written from the format description, element by element):
// weight i = scale[i] + offset[i], exactly, in double.
struct Decoded {
  std::vector<double> scale, offset;
};

Decoded decode_weights(TensorType t, const uint8_t* p, int64_t n) {
  Decoded r{std::vector<double>(n), std::vector<double>(n, 0.0)};
  auto h = [](const uint8_t* at) { uint16_t v; std::memcpy(&v, at, 2); return static_cast<double>(fp16_to_fp32(v)); };
  for (int64_t i = 0; i < n; ++i) {
    switch (t) {
      case TensorType::F32: { float f; std::memcpy(&f, p + 4 * i, 4); r.scale[i] = f; break; }
      case TensorType::F16: r.scale[i] = h(p + 2 * i); break;
      case TensorType::BF16: { uint16_t v; std::memcpy(&v, p + 2 * i, 2); r.scale[i] = bf16_to_fp32(v); break; }
      case TensorType::Q4_0: {
        const uint8_t* b = p + 18 * (i / 32);
        const int j = i % 32;
        const int q = j < 16 ? (b[2 + j] & 15) : (b[2 + j - 16] >> 4);
        r.scale[i] = h(b) * (q - 8);
        break;
      }
      case TensorType::Q4_1: {
        const uint8_t* b = p + 20 * (i / 32);
        const int j = i % 32;
        const int q = j < 16 ? (b[4 + j] & 15) : (b[4 + j - 16] >> 4);
        r.scale[i] = h(b) * q;
        r.offset[i] = h(b + 2);
        break;
      }
      case TensorType::Q5_0:
      case TensorType::Q5_1: {
        // [d][m (Q5_1)][qh: 4 bytes, bit j = fifth bit of element j][qs: 16 nibble pairs]
        const bool has_m = t == TensorType::Q5_1;
        const uint8_t* b = p + (has_m ? 24 : 22) * (i / 32);
        const uint8_t* qh = b + (has_m ? 4 : 2);
        const int j = i % 32;
        const int lo = j < 16 ? (qh[4 + j] & 15) : (qh[4 + j - 16] >> 4);
        const uint32_t word = qh[0] | (uint32_t(qh[1]) << 8) | (uint32_t(qh[2]) << 16) | (uint32_t(qh[3]) << 24);
        const int q = lo + 16 * int((word >> j) & 1);
        r.scale[i] = h(b) * (has_m ? q : q - 16);
        if (has_m) r.offset[i] = h(b + 2);
        break;
      }
      case TensorType::Q8_0: {
        const uint8_t* b = p + 34 * (i / 32);
        r.scale[i] = h(b) * static_cast<int8_t>(b[2 + i % 32]);
        break;
      }
      case TensorType::Q4_K: {
        const uint8_t* b = p + 144 * (i / 256);
        const int e = i % 256, sub = e / 32;
        const uint8_t* s = b + 4;
        // 6-bit fields: sub-blocks 0-3 in the low 6 bits of bytes 0-3 (scales) and 4-7
        // (mins); sub-blocks 4-7 take 4 low bits from byte 8+k (scale low nibble, min
        // high nibble) and their top 2 bits from the top bits of bytes k and 4+k.
        int sc, m;
        if (sub < 4) {
          sc = s[sub] % 64;
          m = s[4 + sub] % 64;
        } else {
          const int k = sub - 4;
          sc = (s[8 + k] % 16) + 16 * (s[k] / 64);
          m = (s[8 + k] / 16) + 16 * (s[4 + k] / 64);
        }
        const uint8_t byte = b[16 + 32 * (e / 64) + e % 32];
        const int q = (e % 64) < 32 ? byte % 16 : byte / 16;
        r.scale[i] = h(b) * sc * q;
        r.offset[i] = -h(b + 2) * m;
        break;
      }
      case TensorType::Q6_K: {
        const uint8_t* b = p + 210 * (i / 256);
        const int e = i % 256, half = e / 128, k = (e % 128) / 32, l = e % 32;
        const uint8_t lo_byte = b[64 * half + l + 32 * (k % 2)];
        const int lo = k < 2 ? lo_byte % 16 : lo_byte / 16;
        const int hi = (b[128 + 32 * half + l] >> (2 * k)) & 3;
        r.scale[i] = h(b + 208) * static_cast<int8_t>(b[192 + e / 16]) * (lo + 16 * hi - 32);
        break;
      }
      default:
        if (!lowbit_test::is_lowbit(t)) ADD_FAILURE();
        lowbit_test::decode_element(t, p, i, r.scale[i], r.offset[i]);
    }
  }
  return r;
}

std::vector<double> decode_act(TensorType act, const uint8_t* p, int64_t n) {
  std::vector<double> a(n);
  for (int64_t i = 0; i < n; ++i) {
    switch (act) {
      case TensorType::F32: { float f; std::memcpy(&f, p + 4 * i, 4); a[i] = f; break; }
      case TensorType::Q8_0: {
        const auto* b = reinterpret_cast<const block_q8_0*>(p) + i / 32;
        a[i] = static_cast<double>(fp16_to_fp32(b->d)) * b->qs[i % 32];
        break;
      }
      case TensorType::Q8_1: {
        const auto* b = reinterpret_cast<const block_q8_1*>(p) + i / 32;
        a[i] = static_cast<double>(b->d) * b->qs[i % 32];
        break;
      }
      case TensorType::Q8_K: {
        const auto* b = reinterpret_cast<const block_q8_K*>(p) + i / 256;
        a[i] = static_cast<double>(b->d) * b->qs[i % 256];
        break;
      }
      default: ADD_FAILURE();
    }
  }
  return a;
}

// Activation patterns: Gaussian at several magnitudes, plus one full of exact
// rounding ties (amax = 127 per block -> d = 1, so x * id = k + 0.5 exactly).
std::vector<float> make_act(std::mt19937& rng, int64_t n, int pattern) {
  if (pattern == 2) {
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = (i % 32 == 0) ? 127.0f : static_cast<float>(i % 61) - 30.5f;
    return x;
  }
  return random_floats(rng, n, pattern == 0 ? 1.0f : 1e-3f);
}

// int8 quants from two kernels agree, except by one at an exact rounding tie of x*id.
void expect_q_match(const int8_t* got, const int8_t* want, const float* x, int count, float d, const char* what) {
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < count; ++j) {
    if (got[j] == want[j]) continue;
    const float v = x[j] * id;
    const bool tie = std::fabs(v - std::trunc(v)) == 0.5f;
    EXPECT_TRUE(tie && std::abs(got[j] - want[j]) == 1)
        << what << " q[" << j << "] " << int(got[j]) << " vs " << int(want[j]) << " x*id=" << v;
  }
}

float block_amax(const float* x, int count) {
  float m = 0.0f;
  for (int j = 0; j < count; ++j) m = std::fmax(m, std::fabs(x[j]));
  return m;
}

void check_act(TensorType act, const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
               const std::vector<float>& x, int64_t n) {
  switch (act) {
    case TensorType::F32: EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size())); break;
    case TensorType::Q8_0:
      for (int64_t b = 0; b < n / 32; ++b) {
        const auto& g = reinterpret_cast<const block_q8_0*>(got.data())[b];
        const auto& w = reinterpret_cast<const block_q8_0*>(want.data())[b];
        ASSERT_EQ(g.d, w.d) << "block " << b;
        expect_q_match(g.qs, w.qs, &x[32 * b], 32, block_amax(&x[32 * b], 32) / 127.0f, "q8_0");
      }
      break;
    case TensorType::Q8_1:
      for (int64_t b = 0; b < n / 32; ++b) {
        const auto& g = reinterpret_cast<const block_q8_1*>(got.data())[b];
        const auto& w = reinterpret_cast<const block_q8_1*>(want.data())[b];
        ASSERT_EQ(g.d, w.d) << "block " << b;
        expect_q_match(g.qs, w.qs, &x[32 * b], 32, g.d, "q8_1");
        int sum = 0;
        for (int j = 0; j < 32; ++j) sum += g.qs[j];
        EXPECT_EQ(g.s, g.d * static_cast<float>(sum)) << "block " << b;
      }
      break;
    case TensorType::Q8_K:
      for (int64_t b = 0; b < n / 256; ++b) {
        const auto& g = reinterpret_cast<const block_q8_K*>(got.data())[b];
        const auto& w = reinterpret_cast<const block_q8_K*>(want.data())[b];
        ASSERT_EQ(g.d, w.d) << "block " << b;
        expect_q_match(g.qs, w.qs, &x[256 * b], 256, g.d, "q8_K");
        for (int k = 0; k < 16; ++k) {
          int sum = 0;
          for (int j = 0; j < 16; ++j) sum += g.qs[16 * k + j];
          EXPECT_EQ(g.bsums[k], sum) << "block " << b << " bsum " << k;
        }
      }
      break;
    default: ADD_FAILURE();
  }
}

class KernelIsa : public testing_isa::IsaFixture {};

TEST_P(KernelIsa, TableIsComplete) {
  EXPECT_EQ(table_->isa, GetParam());
  for (uint32_t id = 0; id < 32; ++id) {
    const auto tr = type_traits(id);
    const TypeKernels& k = table_->types[id];
    const bool want = tr && tr->supported;
    EXPECT_EQ(k.available, want) << "type id " << id;
    if (!want) continue;
    EXPECT_TRUE(k.act_bytes && k.quantize_act && k.vec_dot && k.dequantize_row) << tr->name;
    EXPECT_TRUE(k.vec_dot_f32 && k.vec_dot_f32_multi) << tr->name;
    EXPECT_EQ(k.act_type, scalar_->types[id].act_type) << tr->name;
  }
  using T = TensorType;
  EXPECT_EQ(table_->for_type(T::Q4_0).act_type, T::Q8_0);
  EXPECT_EQ(table_->for_type(T::Q8_0).act_type, T::Q8_0);
  EXPECT_EQ(table_->for_type(T::Q4_1).act_type, T::Q8_1);
  EXPECT_EQ(table_->for_type(T::Q5_0).act_type, T::Q8_0);
  EXPECT_EQ(table_->for_type(T::Q5_1).act_type, T::Q8_1);
  EXPECT_EQ(table_->for_type(T::Q4_K).act_type, T::Q8_K);
  EXPECT_EQ(table_->for_type(T::Q6_K).act_type, T::Q8_K);
  for (T t : {T::Q2_K, T::Q3_K, T::Q5_K, T::IQ4_XS}) EXPECT_EQ(table_->for_type(t).act_type, T::Q8_K);
  EXPECT_EQ(table_->for_type(T::IQ4_NL).act_type, T::Q8_0);  // as ggml: 32-element blocks
  EXPECT_EQ(table_->for_type(T::F16).act_type, T::F32);
  EXPECT_EQ(table_->for_type(T::Q4_K).act_bytes(512), 2 * sizeof(block_q8_K));
  EXPECT_EQ(table_->for_type(T::Q4_1).act_bytes(64), 2 * sizeof(block_q8_1));
  EXPECT_EQ(table_->for_type(T::Q8_0).act_bytes(64), 2 * sizeof(block_q8_0));
  EXPECT_EQ(table_->for_type(T::F32).act_bytes(5), 20u);
}

TEST_P(KernelIsa, QuantDotDequantMatchScalarAndExact) {
  std::mt19937 rng(1234 + static_cast<int>(GetParam()));
  for (TensorType t : kTypes) {
    const TypeKernels& k = table_->for_type(t);
    const TypeKernels& ks = scalar_->for_type(t);
    for (int64_t n : sizes_for(t)) {
      for (int variant = 0; variant < 6; ++variant) {
        SCOPED_TRACE(::testing::Message() << isa_name(GetParam()) << " " << type_traits(uint32_t(t))->name
                                          << " n=" << n << " variant=" << variant);
        const bool raw = variant % 2 == 1;
        const std::vector<uint8_t> w = make_weights(t, n, rng, raw);
        const std::vector<float> x = make_act(rng, n, variant / 2);

        // quantize_act vs the scalar twin
        std::vector<uint8_t> xq(k.act_bytes(n)), xq_s(ks.act_bytes(n));
        ASSERT_EQ(xq.size(), xq_s.size());
        k.quantize_act(x.data(), xq.data(), n);
        ks.quantize_act(x.data(), xq_s.data(), n);
        check_act(k.act_type, xq, xq_s, x, n);

        // dequantize_row: bit-identical to the scalar twin, and equal (up to the
        // float rounding of scale * q and of the offset) to the independent decoder
        std::vector<float> y(n), y_s(n);
        k.dequantize_row(w.data(), y.data(), n);
        ks.dequantize_row(w.data(), y_s.data(), n);
        ASSERT_EQ(0, std::memcmp(y.data(), y_s.data(), n * sizeof(float)));
        const Decoded dw = decode_weights(t, w.data(), n);
        for (int64_t i = 0; i < n; ++i) {
          const double mag = std::fabs(dw.scale[i]) + std::fabs(dw.offset[i]);
          ASSERT_NEAR(y[i], dw.scale[i] + dw.offset[i], 4 * kU * mag) << "element " << i;
        }

        // vec_dot: against exact f64 of the dequantised operands and against scalar
        const std::vector<double> a = decode_act(k.act_type, xq.data(), n);
        double exact = 0.0, S = 0.0;
        for (int64_t i = 0; i < n; ++i) {
          exact += (dw.scale[i] + dw.offset[i]) * a[i];
          S += (std::fabs(dw.scale[i]) + std::fabs(dw.offset[i])) * std::fabs(a[i]);
        }
        const int64_t nb = n / block_of(t);
        const double tol = (is_float(t) ? (n / 8.0 + 16.0) : (2.0 * nb + 16.0)) * kU * S + 1e-30;
        const float got = k.vec_dot(n, w.data(), xq.data());
        const float want = ks.vec_dot(n, w.data(), xq.data());
        EXPECT_NEAR(got, exact, tol) << "S=" << S;
        EXPECT_NEAR(want, exact, 4 * kU * S + 1e-30) << "scalar twin vs exact, S=" << S;
        EXPECT_NEAR(got, want, tol + 4 * kU * S) << "vs scalar twin";
      }
    }
  }
}

TEST_P(KernelIsa, ExactDotMatchesScalarAndF64) {
  std::mt19937 rng(777 + static_cast<int>(GetParam()));
  const bool is_scalar = GetParam() == Isa::scalar;
  for (TensorType t : kTypes) {
    const TypeKernels& k = table_->for_type(t);
    const TypeKernels& ks = scalar_->for_type(t);
    for (int64_t n : sizes_for(t)) {
      for (int variant = 0; variant < 4; ++variant) {
        SCOPED_TRACE(::testing::Message() << isa_name(GetParam()) << " " << type_traits(uint32_t(t))->name
                                          << " n=" << n << " variant=" << variant);
        const std::vector<uint8_t> w = make_weights(t, n, rng, variant % 2 == 1);
        // 11 activation rows (more than one group of 8), stride n + 5 (unaligned rows)
        constexpr int kRows = 11;
        const int64_t xs = n + 5;
        std::vector<float> x(static_cast<size_t>(xs) * kRows);
        for (int j = 0; j < kRows; ++j) {
          const std::vector<float> r = random_floats(rng, n, variant >= 2 ? 1e-3f : 1.0f + j);
          std::copy(r.begin(), r.end(), x.begin() + j * xs);
        }
        std::vector<float> deq(n);
        ks.dequantize_row(w.data(), deq.data(), n);
        std::vector<double> exact(kRows), S(kRows);
        for (int j = 0; j < kRows; ++j) {
          for (int64_t i = 0; i < n; ++i) {
            exact[j] += static_cast<double>(deq[i]) * x[j * xs + i];
            S[j] += std::fabs(static_cast<double>(deq[i]) * x[j * xs + i]);
          }
        }
        const double c_simd = n / 8.0 + 16.0, c_scalar = 2.0;
        auto tol = [&](int j) { return (is_scalar ? c_scalar : c_simd) * kU * S[j] + 1e-30; };

        const float got = k.vec_dot_f32(n, w.data(), x.data());
        const float want = ks.vec_dot_f32(n, w.data(), x.data());
        EXPECT_NEAR(want, exact[0], c_scalar * kU * S[0] + 1e-30) << "scalar twin vs f64";
        EXPECT_NEAR(got, exact[0], tol(0)) << "vec_dot_f32 vs f64, S=" << S[0];
        EXPECT_NEAR(got, want, tol(0) + c_scalar * kU * S[0]) << "vec_dot_f32 vs scalar twin";

        for (int nx : {1, 3, 8, kRows}) {
          SCOPED_TRACE(::testing::Message() << "n_x=" << nx);
          const int64_t os = 3;  // strided output; the gaps must stay untouched
          std::vector<float> out(os * kRows, -7.0f), out_s(os * kRows, -7.0f);
          k.vec_dot_f32_multi(n, w.data(), x.data(), xs, nx, out.data(), os);
          ks.vec_dot_f32_multi(n, w.data(), x.data(), xs, nx, out_s.data(), os);
          for (int j = 0; j < kRows; ++j) {
            if (j >= nx) {
              EXPECT_EQ(out[j * os], -7.0f) << "row " << j << " written beyond n_x";
              continue;
            }
            EXPECT_NEAR(out_s[j * os], exact[j], c_scalar * kU * S[j] + 1e-30) << "scalar twin row " << j;
            EXPECT_NEAR(out[j * os], exact[j], tol(j)) << "row " << j << " S=" << S[j];
            EXPECT_NEAR(out[j * os], out_s[j * os], tol(j) + c_scalar * kU * S[j]) << "row " << j << " vs twin";
          }
          for (size_t i = 0; i < out.size(); ++i) {
            if (i % os != 0) {
              EXPECT_EQ(out[i], -7.0f) << "output gap " << i << " written";
            }
          }
        }
      }
    }
  }
}

// F32 weights' vec_dot (the activation format is the f32 row itself) at lengths that leave
// every tail of the SIMD loops.
TEST_P(KernelIsa, F32WeightsDotAnyLength) {
  std::mt19937 rng(99);
  const TypeKernels& k = table_->for_type(TensorType::F32);
  for (int64_t n : {1, 3, 8, 15, 16, 31, 64, 100, 1023, 4096}) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    const std::vector<float> a = random_floats(rng, n, 2.0f), b = random_floats(rng, n, 0.5f);
    double exact = 0.0, S = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      exact += static_cast<double>(a[i]) * b[i];
      S += std::fabs(static_cast<double>(a[i]) * b[i]);
    }
    EXPECT_NEAR(k.vec_dot(n, a.data(), b.data()), exact, (n / 8.0 + 16.0) * kU * S);
  }
}

// Exact mode decodes every weight to exactly dequantize_row's float: against a one-hot
// activation row the dot is that single product (all other terms are exact zeros), so it
// must equal the scalar dequantiser's value bit for bit, element by element, through both
// the one-row and the several-rows kernels (vec_dot_f32_multi, vec_dot_f32_rows_multi).
// Catches a wrong fifth bit (Q5_0 / Q5_1) or scale in one lane that the rounding-bound
// tests above could blur at large n.
TEST_P(KernelIsa, ExactDotDecodesEveryWeightExactly) {
  std::mt19937 rng(4242 + static_cast<int>(GetParam()));
  for (TensorType t : kTypes) {
    const TypeKernels& k = table_->for_type(t);
    const int64_t n = 256;  // a multiple of every block size
    const std::vector<uint8_t> w = make_weights(t, n, rng, false);
    std::vector<float> deq(n);
    scalar_->for_type(t).dequantize_row(w.data(), deq.data(), n);
    std::vector<float> x(2 * n, 0.0f);  // two rows: e_i and 2 e_i
    float out[2];
    for (int64_t i = 0; i < n; ++i) {
      x[i] = 1.0f;
      x[n + i] = 2.0f;
      ASSERT_EQ(k.vec_dot_f32(n, w.data(), x.data()), deq[i]) << type_traits(uint32_t(t))->name << " i=" << i;
      k.vec_dot_f32_multi(n, w.data(), x.data(), n, 2, out, 1);
      ASSERT_EQ(out[0], deq[i]) << type_traits(uint32_t(t))->name << " multi i=" << i;
      ASSERT_EQ(out[1], 2.0f * deq[i]) << type_traits(uint32_t(t))->name << " multi row 2 i=" << i;
      out[0] = out[1] = -1.0f;  // the batched-step kernel (one weight row, the same two rows)
      k.vec_dot_f32_rows_multi(n, w.data(), w.size(), 1, x.data(), n, 2, out, 1);
      ASSERT_EQ(out[0], deq[i]) << type_traits(uint32_t(t))->name << " rows_multi i=" << i;
      ASSERT_EQ(out[1], 2.0f * deq[i]) << type_traits(uint32_t(t))->name << " rows_multi row 2 i=" << i;
      x[i] = x[n + i] = 0.0f;
    }
  }
}

// Every SIMD table has its own exact-mode kernel for the 32-element block types (the
// shared fused-dot driver gives one to every ISA with decoders), not the scalar twin.
TEST_P(KernelIsa, ExactModeIsVectorisedForBlockTypes) {
  if (GetParam() == Isa::scalar) GTEST_SKIP() << "the scalar table is the twin";
  for (TensorType t : {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0}) {
    EXPECT_NE(table_->for_type(t).vec_dot_f32, scalar_->for_type(t).vec_dot_f32) << type_traits(uint32_t(t))->name;
    EXPECT_NE(table_->for_type(t).vec_dot_f32_multi, scalar_->for_type(t).vec_dot_f32_multi)
        << type_traits(uint32_t(t))->name;
    EXPECT_NE(table_->for_type(t).vec_dot_f32_rows_multi, scalar_->for_type(t).vec_dot_f32_rows_multi)
        << type_traits(uint32_t(t))->name;
  }
}

// Likewise the int8 path (activation quantiser and vec_dot): every SIMD table has its own for
// the 32-element block types. A table left with the scalar twin (as the NEON ones were for
// Q5_0 / Q5_1) passes every comparison with the twin, so only this catches it.
TEST_P(KernelIsa, IntDotIsVectorisedForBlockTypes) {
  if (GetParam() == Isa::scalar) GTEST_SKIP() << "the scalar table is the twin";
  for (TensorType t : {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0}) {
    EXPECT_NE(table_->for_type(t).quantize_act, scalar_->for_type(t).quantize_act) << type_traits(uint32_t(t))->name;
    EXPECT_NE(table_->for_type(t).vec_dot, scalar_->for_type(t).vec_dot) << type_traits(uint32_t(t))->name;
  }
}

// llama.cpp's low-bit types: every SIMD table has its own exact-mode kernels (x86/lowbit_avx2.cpp,
// arm/lowbit_neon.cpp), activation quantisers and int8 one-row dots (arm/int8_neon.h on ARM).
TEST_P(KernelIsa, LowBitTypesAreVectorised) {
  if (GetParam() == Isa::scalar) GTEST_SKIP() << "the scalar table is the twin";
  for (TensorType t : {TensorType::Q2_K, TensorType::Q3_K, TensorType::Q5_K, TensorType::IQ4_NL, TensorType::IQ4_XS}) {
    const TypeKernels &k = table_->for_type(t), &ks = scalar_->for_type(t);
    const char* nm = type_traits(uint32_t(t))->name;
    EXPECT_NE(k.vec_dot_f32, ks.vec_dot_f32) << nm;
    EXPECT_NE(k.vec_dot_f32_multi, ks.vec_dot_f32_multi) << nm;
    EXPECT_NE(k.vec_dot_f32_rows_multi, ks.vec_dot_f32_rows_multi) << nm;
    EXPECT_NE(k.gemm_f32, ks.gemm_f32) << nm;
    EXPECT_NE(k.quantize_act, ks.quantize_act) << nm;
    EXPECT_NE(k.vec_dot, ks.vec_dot) << nm;
  }
}

// All-zero activations and weights must give exactly zero (d = 0 paths, no NaN).
TEST_P(KernelIsa, ZerosGiveZero) {
  for (TensorType t : kTypes) {
    const TypeKernels& k = table_->for_type(t);
    const int64_t n = 512;
    std::vector<float> x(n, 0.0f);
    std::vector<uint8_t> xq(k.act_bytes(n));
    k.quantize_act(x.data(), xq.data(), n);
    std::vector<uint8_t> w(*row_bytes(uint32_t(t), n), 0);
    EXPECT_EQ(k.vec_dot(n, w.data(), xq.data()), 0.0f) << type_traits(uint32_t(t))->name;
    EXPECT_EQ(k.vec_dot_f32(n, w.data(), x.data()), 0.0f) << type_traits(uint32_t(t))->name;
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, KernelIsa,
                         ::testing::ValuesIn(testing_isa::kAllIsas), testing_isa::IsaParamName());

// The documented ranks (kernels.h): scalar 0; avx2, neon 1; avxvnni, dotprod 2; avx512, i8mm 3.
int rank_of(Isa i) {
  switch (i) {
    case Isa::scalar: return 0;
    case Isa::avx2: case Isa::neon: return 1;
    case Isa::avxvnni: case Isa::neon_dotprod: return 2;
    case Isa::avx512: case Isa::neon_i8mm: return 3;
  }
  return -1;
}

TEST(Dispatch, SelectionRules) {
  bool unknown = true;
  const Isa best = select_isa(nullptr, &unknown);
  EXPECT_FALSE(unknown);
  EXPECT_NE(kernels_for(best), nullptr);
  for (Isa i : testing_isa::kAllIsas) {
    // the best is a strictly higher level than anything else runnable
    if (kernels_for(i) && i != best) {
      EXPECT_LT(rank_of(i), rank_of(best)) << isa_name(i) << " vs " << isa_name(best);
    }
  }
  EXPECT_EQ(select_isa("", &unknown), best);
  EXPECT_EQ(select_isa("scalar", &unknown), Isa::scalar);
  EXPECT_FALSE(unknown);
  EXPECT_EQ(select_isa("bogus", &unknown), best);
  EXPECT_TRUE(unknown);
  // Requests never yield a table that cannot run, and cap at the requested level: the
  // result is the highest runnable level whose rank does not exceed the request's.
  const struct { const char* name; int rank; } kReq[] = {{"avx2", 1},      {"avxvnni", 2}, {"avx512", 3},
                                                          {"neon", 1},      {"dotprod", 2}, {"neon_dotprod", 2},
                                                          {"i8mm", 3},      {"neon_i8mm", 3}};
  for (const auto& r : kReq) {
    const Isa s = select_isa(r.name, &unknown);
    EXPECT_FALSE(unknown) << r.name;
    EXPECT_NE(kernels_for(s), nullptr) << r.name;
    EXPECT_LE(rank_of(s), r.rank) << r.name;
    for (Isa i : testing_isa::kAllIsas) {
      if (kernels_for(i) && rank_of(i) <= r.rank) {
        EXPECT_GE(rank_of(s), rank_of(i)) << r.name << " " << isa_name(i);
      }
    }
  }
  if (kernels_for(Isa::avx2)) {
    EXPECT_EQ(select_isa("avx2", nullptr), Isa::avx2);
  }
  if (kernels_for(Isa::avxvnni)) {
    EXPECT_EQ(select_isa("avxvnni", nullptr), Isa::avxvnni);
    EXPECT_NE(kernels_for(Isa::avx2), nullptr) << "avxvnni is only enabled together with avx2";
  }
  if (kernels_for(Isa::avx512)) {
    EXPECT_EQ(best, Isa::avx512) << "an AVX-512 CPU keeps the avx512 table, AVX-VNNI or not";
  }
  if (kernels_for(Isa::neon)) {
    EXPECT_EQ(select_isa("neon", nullptr), Isa::neon);
  }
  if (kernels_for(Isa::neon_dotprod)) {
    EXPECT_EQ(select_isa("dotprod", nullptr), Isa::neon_dotprod);
  }
  if (kernels_for(Isa::neon_i8mm)) {
    EXPECT_EQ(best, Isa::neon_i8mm);
    EXPECT_EQ(select_isa("i8mm", nullptr), Isa::neon_i8mm);
    EXPECT_NE(kernels_for(Isa::neon_dotprod), nullptr) << "i8mm is only enabled together with dotprod";
  }
  EXPECT_STREQ(isa_name(Isa::neon_i8mm), "i8mm");
  EXPECT_STREQ(isa_name(Isa::avxvnni), "avxvnni");
  EXPECT_EQ(kernels_for(static_cast<Isa>(17)), nullptr);
  EXPECT_EQ(kernels_for(static_cast<Isa>(7)), nullptr);
  // kernels() honours PLLM_ISA as seen by this process
  EXPECT_EQ(kernels().isa, select_isa(std::getenv("PLLM_ISA"), nullptr));
  EXPECT_EQ(&kernels(), kernels_for(kernels().isa));
}

// Which table kernels() picked (scripts/test_arm.sh greps this line under each qemu CPU).
TEST(Dispatch, Selected) {
  std::printf("[ selected ] %s\n", isa_name(kernels().isa));
  EXPECT_EQ(kernels().isa, select_isa(std::getenv("PLLM_ISA"), nullptr));
}

}  // namespace
}  // namespace pllm
