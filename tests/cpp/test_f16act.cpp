// W4A16 kernels (KernelTable::f32_to_f16_row, TypeKernels::vec_dot_f16act / _multi) on
// every ISA table this machine can run, against the scalar twins and exact f64 arithmetic.
//
// Activation format: the f32 row rounded once to IEEE half. f32_to_f16_row must be
// bit-identical on every ISA (checked on rounding ties, subnormals, overflow, infinities).
//
// Dot products. The reference is the f64 dot of dequantize_row's weights w_i with the
// half activations h_i (exact in f64 up to ~n 2^-53). Let u = 2^-24 (f32 unit roundoff),
// u_h = 2^-11 (fp16 unit roundoff) and S = sum_i (|scale part of w_i| + |offset part|) |h_i|
// (offset part: Q4_1's m; 0 for Q4_0 / Q8_0). Tolerances by kind of kernel:
//   * scalar twin (double accumulation): its only error is the final rounding: 2 u S.
//   * f32 accumulation (x86 F16C kernels, ARM baseline): weights decoded exactly, >= 8 f32
//     lanes fed by FMA: <= n/8 lane roundings + 5 reduction levels: (n/8 + 16) u S, the
//     vec_dot_f32 bound of test_kernels.cpp.
//   * fp16 FMLA (ARM with FP16 arithmetic): per 32-element block and fp16 lane, 4 products
//     are summed in fp16 (one mul + 3 FMLA: 4 roundings, each <= u_h of a partial sum
//     <= the sum of |products|), so a block term is off by <= 4 u_h (1 + u_h)^4 of its share
//     of S; Q4_1's m * sum(x) sums 4 halves per lane (3 roundings). A partial sum in the fp16
//     subnormal range is rounded with absolute error <= 2^-25, times the block scale:
//     <= 32 * 2^-25 * (|scale_b| + |m_b|) per block (8 lanes x 4 roundings). The widened
//     block terms are then accumulated in f32 as above. So
//       tol = 4.01 u_h S + 2^-20 sum_b (|scale_b| + |m_b|) + (n/8 + 16) u S.
//     That worst case (~2e-3 S) exceeds the effect of one wrong element (~S/n) for n >~ 500,
//     so bugs are caught by the small sizes (n = 32..96, one element ~ S/n >= 1e-2 S) and by
//     a statistical check on the large ones: random rounding errors average out, and the RMS
//     of (got - ref) / S over the rows with n >= 1024 must stay below u_h / 4 = 1.2e-4 for
//     activations in the normal fp16 range (estimate ~5e-4 / sqrt(n) <= 1.7e-5 for Gaussian
//     data; measured 1e-5..3e-5 under qemu, the raw-byte rows with scales spread over 2^8 being
//     dominated by few blocks; one wrong element at n = 1024 gives ~1e-3, at n = 4096 ~2.4e-4).
// Overflow: an fp16 partial sum that overflows makes the fp16 kernels recompute the row with
// f32 accumulation; the Overflow test forces that (|x| = 4000) and expects the f32 bound.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

#include "base/fp16.h"
#include "kernels/internal.h"
#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/reference.h"
#include "isa_fixture.h"

namespace pllm {

void PrintTo(Isa isa, std::ostream* os) { *os << isa_name(isa); }

namespace {

constexpr double kU = FLT_EPSILON / 2.0;
constexpr double kUh = 1.0 / 2048.0;
constexpr double kSubBlock = 1.0 / (1 << 20);  // 32 * 2^-25

const TensorType kF16Types[] = {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q8_0};

enum class Acc { f64, f32, fp16 };

// How the table's W4A16 dots accumulate (see the header comment).
Acc acc_of(Isa isa) {
  if (isa == Isa::scalar) return Acc::f64;
#if defined(__aarch64__) && defined(__linux__)
  if (getauxval(AT_HWCAP) & (1 << 10)) return Acc::fp16;  // HWCAP_ASIMDHP: f16act_neon_fp16.cpp
#endif
  return Acc::f32;
}

float h16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return fp16_to_fp32(v);
}

uint16_t random_scale16(std::mt19937& rng) {
  std::uniform_real_distribution<float> e(-10.0f, -2.0f);
  return fp32_to_fp16(std::exp2(e(rng)) * ((rng() & 1) ? 1.0f : -1.0f));
}

// Reference-quantised Gaussian rows, or raw random bytes with sane fp16 scales.
std::vector<uint8_t> make_weights(TensorType t, int64_t n, std::mt19937& rng, bool raw) {
  std::vector<uint8_t> w(*row_bytes(static_cast<uint32_t>(t), n));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  if (raw) {
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    const size_t bb = type_traits(static_cast<uint32_t>(t))->block_bytes;
    for (size_t off = 0; off < w.size(); off += bb) {
      const uint16_t h[2] = {random_scale16(rng), random_scale16(rng)};
      std::memcpy(&w[off], h, t == TensorType::Q4_1 ? 4 : 2);
    }
    return w;
  }
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng) * 0.7f;
  switch (t) {
    case TensorType::Q4_0: ref::quantize_row_q4_0(x.data(), reinterpret_cast<block_q4_0*>(w.data()), n); break;
    case TensorType::Q4_1: ref::quantize_row_q4_1(x.data(), reinterpret_cast<block_q4_1*>(w.data()), n); break;
    default: ref::quantize_row_q8_0(x.data(), reinterpret_cast<block_q8_0*>(w.data()), n); break;
  }
  return w;
}

size_t block_bytes(TensorType t) { return type_traits(static_cast<uint32_t>(t))->block_bytes; }
// Block b's scale (as the fp16 kernels apply it) and offset magnitudes.
double scale_mag(TensorType t, const uint8_t* w, int64_t b) {
  const double d = std::fabs(h16(w + b * block_bytes(t)));
  return t == TensorType::Q8_0 ? 16.0 * d : d;
}
double offset_mag(TensorType t, const uint8_t* w, int64_t b) {
  return t == TensorType::Q4_1 ? std::fabs(h16(w + b * block_bytes(t) + 2)) : 0.0;
}

// Gaussian activations at several magnitudes; pattern 3 reaches the fp16 subnormal range.
constexpr float kActMag[] = {1.0f, 30.0f, 1e-3f, 2e-5f};
std::vector<float> make_act(std::mt19937& rng, int64_t n, int pattern) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng) * kActMag[pattern];
  return x;
}

struct Expect {
  double exact, S, tol;
};

Expect expect_for(TensorType t, Acc acc, const uint8_t* w, const uint16_t* xh, int64_t n) {
  const TypeKernels& sk = kernels_for(Isa::scalar)->for_type(t);
  std::vector<float> deq(n);
  sk.dequantize_row(w, deq.data(), n);
  Expect e{0.0, 0.0, 0.0};
  double blocks = 0.0;
  for (int64_t b = 0; b < n / 32; ++b) {
    const double m = t == TensorType::Q4_1 ? h16(w + b * block_bytes(t) + 2) : 0.0;
    for (int64_t i = 32 * b; i < 32 * b + 32; ++i) {
      const double h = fp16_to_fp32(xh[i]);
      e.exact += static_cast<double>(deq[i]) * h;
      e.S += (std::fabs(deq[i] - m) + std::fabs(m)) * std::fabs(h);
    }
    blocks += scale_mag(t, w, b) + offset_mag(t, w, b);
  }
  switch (acc) {
    case Acc::f64: e.tol = 2.0 * kU * e.S; break;
    case Acc::f32: e.tol = (n / 8.0 + 16.0) * kU * e.S; break;
    case Acc::fp16: e.tol = 4.01 * kUh * e.S + kSubBlock * blocks + (n / 8.0 + 16.0) * kU * e.S; break;
  }
  e.tol += 1e-30;
  return e;
}

// Every check of one table whose dots accumulate as `acc`.
void check_table(const KernelTable& kt, Acc acc, uint32_t seed) {
  const KernelTable& st = *kernels_for(Isa::scalar);
  std::mt19937 rng(seed);
  double sq[4] = {};  // per activation pattern of row 0 (make_act)
  int n_sq[4] = {};
  for (TensorType t : kF16Types) {
    const TypeKernels& k = kt.for_type(t);
    const TypeKernels& sk = st.for_type(t);
    ASSERT_TRUE(k.vec_dot_f16act && k.vec_dot_f16act_multi);
    for (int64_t n : {32, 64, 96, 1024, 4096}) {
      for (int variant = 0; variant < 8; ++variant) {
        SCOPED_TRACE(::testing::Message() << isa_name(kt.isa) << " " << type_traits(uint32_t(t))->name << " n=" << n
                                          << " variant=" << variant);
        const std::vector<uint8_t> w = make_weights(t, n, rng, variant % 2 == 1);
        constexpr int kRows = 11;
        const int64_t xs = n + 5;  // unaligned rows
        std::vector<uint16_t> xh(xs * kRows, 0x7e00), xh_s(xs * kRows, 0x7e00);
        for (int j = 0; j < kRows; ++j) {
          const std::vector<float> x = make_act(rng, n, (variant / 2 + j) % 4);
          kt.f32_to_f16_row(x.data(), &xh[j * xs], n);
          st.f32_to_f16_row(x.data(), &xh_s[j * xs], n);
        }
        ASSERT_EQ(0, std::memcmp(xh.data(), xh_s.data(), xh.size() * 2)) << "f32_to_f16_row differs from the twin";
        std::vector<Expect> ex(kRows);
        for (int j = 0; j < kRows; ++j) ex[j] = expect_for(t, acc, w.data(), &xh[j * xs], n);

        const float got = k.vec_dot_f16act(n, w.data(), xh.data());
        const float want = sk.vec_dot_f16act(n, w.data(), xh.data());
        EXPECT_NEAR(want, ex[0].exact, 2.0 * kU * ex[0].S + 1e-30) << "scalar twin vs f64";
        EXPECT_NEAR(got, ex[0].exact, ex[0].tol) << "S=" << ex[0].S;
        EXPECT_NEAR(got, want, ex[0].tol + 2.0 * kU * ex[0].S) << "vs scalar twin";
        if (n >= 1024 && ex[0].S > 0) {
          sq[variant / 2] += std::pow((got - ex[0].exact) / ex[0].S, 2);
          ++n_sq[variant / 2];
        }
        for (int nx : {1, 2, 3, 4, 5, 8, kRows}) {
          SCOPED_TRACE(::testing::Message() << "n_x=" << nx);
          const int64_t os = 3;  // strided output; the gaps must stay untouched
          std::vector<float> out(os * kRows, -7.0f);
          k.vec_dot_f16act_multi(n, w.data(), xh.data(), xs, nx, out.data(), os);
          for (int j = 0; j < kRows; ++j) {
            if (j >= nx) {
              EXPECT_EQ(out[j * os], -7.0f) << "row " << j << " written beyond n_x";
              continue;
            }
            EXPECT_NEAR(out[j * os], ex[j].exact, ex[j].tol) << "row " << j << " S=" << ex[j].S;
          }
          for (size_t i = 0; i < out.size(); ++i) {
            if (i % os != 0) {
              EXPECT_EQ(out[i], -7.0f) << "output gap " << i << " written";
            }
          }
        }
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
  for (int pat = 0; pat < 4; ++pat) {
    const double rms = std::sqrt(sq[pat] / n_sq[pat]);
    std::printf("[ %s ] |x| ~ %g: RMS (got - ref) / S over %d products with n >= 1024: %.3g\n", isa_name(kt.isa),
                double(kActMag[pat]), n_sq[pat], rms);
    // Not for the pattern in the fp16 subnormal range, where products lose relative precision.
    if (pat < 3) {
      EXPECT_LT(rms, kUh / 4) << "|x| ~ " << kActMag[pat];
    }
  }
}

class F16ActIsa : public testing_isa::IsaFixture {};

TEST_P(F16ActIsa, TableEntries) {
  ASSERT_NE(table_->f32_to_f16_row, nullptr);
  for (uint32_t id = 0; id < 32; ++id) {
    const TypeKernels& k = table_->types[id];
    const bool want = id == uint32_t(TensorType::Q4_0) || id == uint32_t(TensorType::Q4_1) ||
                      id == uint32_t(TensorType::Q8_0);
    EXPECT_EQ(k.vec_dot_f16act != nullptr, want) << "type id " << id;
    EXPECT_EQ(k.vec_dot_f16act_multi != nullptr, want) << "type id " << id;
  }
}

TEST_P(F16ActIsa, ConvertIsBitIdenticalToTwin) {
  const KernelTable& st = *kernels_for(Isa::scalar);
  // Known roundings first (scalar twin = base/fp16.h).
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);                   // rounds to inf
  EXPECT_EQ(fp32_to_fp16(65519.0f), 0x7bff);                   // largest finite
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);      // tie -> even (zero)
  EXPECT_EQ(fp32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);      // tie -> even
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(3.0f, -11)), 0x3c02);
  std::vector<float> x = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.0f, 65520.0f, -65520.0f, 1e6f, -1e30f,
                          INFINITY, -INFINITY, std::ldexp(1.0f, -14), std::ldexp(1.0f, -24), std::ldexp(1.0f, -25),
                          std::ldexp(3.0f, -25), std::ldexp(5.0f, -26), 1e-8f, -1e-8f, 1.0f + std::ldexp(1.0f, -11),
                          1.0f + std::ldexp(3.0f, -11), 2049.0f, 2051.0f, -3.14159f};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> e(-30.0f, 18.0f);
  for (int i = 0; i < 2000; ++i) x.push_back(std::exp2(e(rng)) * ((rng() & 1) ? 1.0f : -1.0f));
  for (int64_t off : {0, 1, 3}) {
    for (int64_t n : {int64_t(1), int64_t(7), int64_t(8), int64_t(9), int64_t(33), int64_t(x.size()) - off}) {
      std::vector<uint16_t> got(n + 2, 0xAAAA), want(n + 2, 0xAAAA);
      table_->f32_to_f16_row(x.data() + off, got.data(), n);
      st.f32_to_f16_row(x.data() + off, want.data(), n);
      for (int64_t i = 0; i < n + 2; ++i) ASSERT_EQ(got[i], want[i]) << "n=" << n << " off=" << off << " i=" << i;
    }
  }
}

TEST_P(F16ActIsa, DotsMatchTwinAndF64) { check_table(*table_, acc_of(GetParam()), 4321 + int(GetParam())); }

// |x| = 4000 overflows any fp16 partial sum of 4 products (>= 4 * 8 * 4000 > 65504): the
// fp16 kernels must notice and recompute with f32 accumulation.
TEST_P(F16ActIsa, OverflowFallsBackToF32) {
  const int64_t n = 64;
  for (TensorType t : kF16Types) {
    SCOPED_TRACE(type_traits(uint32_t(t))->name);
    std::vector<uint8_t> w(*row_bytes(uint32_t(t), n));
    const uint16_t d = fp32_to_fp16(std::ldexp(1.0f, -10));
    for (size_t off = 0; off < w.size(); off += block_bytes(t)) {
      std::memcpy(&w[off], &d, 2);
      if (t == TensorType::Q4_1) std::memcpy(&w[off + 2], &d, 2);
      const size_t q0 = off + (t == TensorType::Q4_1 ? 4 : 2);
      const size_t nq = block_bytes(t) - (q0 - off);
      std::memset(&w[q0], t == TensorType::Q4_0 ? 0x00 : t == TensorType::Q4_1 ? 0xFF : 0x7F, nq);
    }
    std::vector<float> x(n * 2, 4000.0f);
    std::vector<uint16_t> xh(n * 2);
    table_->f32_to_f16_row(x.data(), xh.data(), n * 2);
    const Expect ex = expect_for(t, Acc::f32, w.data(), xh.data(), n);
    const float got = table_->for_type(t).vec_dot_f16act(n, w.data(), xh.data());
    ASSERT_TRUE(std::isfinite(got)) << got;
    EXPECT_NEAR(got, ex.exact, ex.tol);
    float out[2] = {0, 0};
    table_->for_type(t).vec_dot_f16act_multi(n, w.data(), xh.data(), n, 2, out, 1);
    EXPECT_NEAR(out[0], ex.exact, ex.tol);
    EXPECT_NEAR(out[1], ex.exact, ex.tol);
  }
}

TEST_P(F16ActIsa, ZerosGiveZero) {
  for (TensorType t : kF16Types) {
    const int64_t n = 512;
    std::vector<uint8_t> w(*row_bytes(uint32_t(t), n), 0);
    std::vector<uint16_t> xh(n, 0);
    EXPECT_EQ(table_->for_type(t).vec_dot_f16act(n, w.data(), xh.data()), 0.0f) << type_traits(uint32_t(t))->name;
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, F16ActIsa,
                         ::testing::ValuesIn(testing_isa::kAllIsas), testing_isa::IsaParamName());

#if defined(__aarch64__)
// The baseline NEON kernels (f32 accumulation) are what a CPU without FP16 arithmetic runs
// (e.g. Cortex-A53) and the fp16 kernels' overflow fallback: test them on any AArch64 CPU.
TEST(F16ActNeon, BaselineKernelsWithoutFp16Arith) {
  const KernelTable* neon = kernels_for(Isa::neon);
  ASSERT_NE(neon, nullptr);
  KernelTable t = *neon;
  kern::fill_f16act_neon(t);
  check_table(t, Acc::f32, 99);
  // Dispatch installs the fp16 kernels exactly where the CPU has FP16 arithmetic.
  for (Isa isa : {Isa::neon, Isa::neon_dotprod, Isa::neon_i8mm}) {
    const KernelTable* kt = kernels_for(isa);
    if (!kt) continue;
    const bool fp16 = kt->for_type(TensorType::Q4_0).vec_dot_f16act != t.for_type(TensorType::Q4_0).vec_dot_f16act;
    EXPECT_EQ(fp16, acc_of(isa) == Acc::fp16) << isa_name(isa);
    std::printf("[ f16act ] %s: %s\n", isa_name(isa), fp16 ? "fp16 FMLA" : "f32 FMA (no FP16 arithmetic)");
  }
}
#endif

}  // namespace
}  // namespace pllm
