// TypeKernels::gemm_q8 (prefill integer GEMM) on every runnable ISA table, against
// looping the scalar vec_dot over (token, row).
//
// Tolerance. Let u = FLT_EPSILON / 2 and, for one (row, token) pair,
//   S = sum_i (|w_i| + 2 off_b(i)) |a_i|
// where w_i is dequantize_row's weight, a_i the dequantised activation and off_b the
// magnitude of block b's additive offset (Q4_1, Q5_1: |m|; Q4_K: |dmin| * 63; else 0). Since
// |d q| <= |d q + m| + |m|, S bounds sum |scale part| |a| + |offset part| |a| (the
// quantity the float rounding errors scale with). The integer block sums are exact in
// every kernel; per block the float work is the product of the two scales (1 rounding),
// the fma into the accumulator (1), the Q4_1 min term's fma (1), and the accumulation
// chain over nb blocks; the vec_dot-loop fallbacks add <= 4 levels of horizontal sum
// and 2 final combinations. So a term sees <= 2 nb + 8 roundings and
//   |gemm - scalar| <= (2 nb + 16) u S
// (the scalar reference accumulates in double: its own error ~u|result| is covered).
// A wrong, missing or duplicated element moves a result by ~S/n, far above this bound
// at every size tested (e.g. n = 1280, Q4_0: tol = 96 u S = 5.7e-6 S, one element
// ~ 7.8e-4 S), so the check can fail on real bugs. Every cell outside the tile must
// keep its sentinel bit pattern.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "isa_fixture.h"
#include "lowbit_blocks.h"
#include "kernels/kernels.h"
#include "quant/panel.h"
#include "quant/blocks.h"
#include "quant/reference.h"

namespace pllm {

void PrintTo(Isa isa, std::ostream* os) { *os << isa_name(isa); }

namespace {

constexpr double kU = FLT_EPSILON / 2.0;
const TensorType kTypes[] = {TensorType::Q4_0, TensorType::Q8_0,   TensorType::Q4_1,  TensorType::Q5_0,
                             TensorType::Q5_1, TensorType::Q4_K,   TensorType::Q6_K,  TensorType::Q2_K,
                             TensorType::Q3_K, TensorType::Q5_K,   TensorType::IQ4_NL, TensorType::IQ4_XS};

int block_of(TensorType t) { return static_cast<int>(type_traits(static_cast<uint32_t>(t))->block_elems); }
size_t block_bytes(TensorType t) { return type_traits(static_cast<uint32_t>(t))->block_bytes; }

float h16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return fp16_to_fp32(v);
}

// One weight row: reference-quantised Gaussian data, or raw random bytes with sane
// fp16 scales (every quant bit pattern: nibbles 0..15, int8 -128, 6-bit scales 63, ...).
std::vector<uint8_t> make_row(TensorType t, int64_t n, std::mt19937& rng, bool raw) {
  std::vector<uint8_t> w(*row_bytes(static_cast<uint32_t>(t), n));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng) * 0.7f;
  if (lowbit_test::is_lowbit(t)) {  // no quantiser: random blocks either way
    std::uniform_real_distribution<float> e(-10.0f, -2.0f);
    lowbit_test::fill_blocks(t, w.data(), w.size(), rng, [&](std::mt19937& g) {
      return fp32_to_fp16(std::exp2(e(g)) * ((g() & 1) ? 1.0f : -1.0f));
    });
    return w;
  }
  if (raw) {
    std::uniform_real_distribution<float> e(-10.0f, -2.0f);
    auto scale = [&] { return fp32_to_fp16(std::exp2(e(rng)) * ((rng() & 1) ? 1.0f : -1.0f)); };
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    const size_t bb = block_bytes(t);
    for (size_t off = 0; off < w.size(); off += bb) {
      const uint16_t h[2] = {scale(), scale()};
      if (t == TensorType::Q6_K) std::memcpy(&w[off + 208], h, 2);
      else std::memcpy(&w[off], h, (t == TensorType::Q4_1 || t == TensorType::Q5_1 || t == TensorType::Q4_K) ? 4 : 2);
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

// Magnitude of the additive offset of the block holding element i (see the tolerance note).
double offset_mag(TensorType t, const uint8_t* row, int64_t i) {
  if (t == TensorType::Q4_1) return std::fabs(h16(row + 20 * (i / 32) + 2));
  if (t == TensorType::Q5_1) return std::fabs(h16(row + 24 * (i / 32) + 2));
  if (t == TensorType::Q4_K) return std::fabs(h16(row + 144 * (i / 256) + 2)) * 63.0;
  if (lowbit_test::is_lowbit(t)) {
    double scale, offset;
    lowbit_test::decode_element(t, row, i, scale, offset);
    return std::fabs(offset);
  }
  return 0.0;
}

std::vector<double> decode_act(TensorType act, const uint8_t* p, int64_t n) {
  std::vector<double> a(n);
  for (int64_t i = 0; i < n; ++i) {
    if (act == TensorType::Q8_0) {
      const auto* b = reinterpret_cast<const block_q8_0*>(p) + i / 32;
      a[i] = static_cast<double>(fp16_to_fp32(b->d)) * b->qs[i % 32];
    } else if (act == TensorType::Q8_1) {
      const auto* b = reinterpret_cast<const block_q8_1*>(p) + i / 32;
      a[i] = static_cast<double>(b->d) * b->qs[i % 32];
    } else {
      const auto* b = reinterpret_cast<const block_q8_K*>(p) + i / 256;
      a[i] = static_cast<double>(b->d) * b->qs[i % 256];
    }
  }
  return a;
}

constexpr uint32_t kSentinel = 0x7fc0dead;  // a NaN pattern no kernel produces

struct Case {
  int64_t n;
  int n_rows, n_x;
};

void run_case(const KernelTable& kt, TensorType t, const Case& c, bool raw, std::mt19937& rng) {
  const KernelTable& st = *kernels_for(Isa::scalar);
  const TypeKernels& k = kt.for_type(t);
  const TypeKernels& sk = st.for_type(t);
  ASSERT_TRUE(k.available);
  ASSERT_NE(k.gemm_q8, nullptr) << "gemm_q8 missing";
  const int64_t n = c.n;
  const int64_t nb = n / block_of(t);
  // Strides with padding, to catch kernels that assume packed rows.
  const size_t rb = *row_bytes(static_cast<uint32_t>(t), n);
  const size_t w_stride = rb + 24;
  const size_t xq_stride = sk.act_bytes(n) + 40;
  const int64_t out_stride = c.n_rows + 3;

  std::vector<uint8_t> w(w_stride * c.n_rows, 0xA5);
  for (int r = 0; r < c.n_rows; ++r) {
    const std::vector<uint8_t> row = make_row(t, n, rng, raw);
    std::memcpy(&w[r * w_stride], row.data(), rb);
  }
  std::vector<uint8_t> xq(xq_stride * c.n_x, 0x5A);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n);
  for (int j = 0; j < c.n_x; ++j) {
    const float mag = (j % 3 == 2) ? 1e-3f : 1.0f;
    for (auto& v : x) v = nd(rng) * mag;
    sk.quantize_act(x.data(), &xq[j * xq_stride], n);
  }

  // Output with a guard region before and after the tile and in the stride gaps.
  const int64_t guard = 64;
  std::vector<float> outbuf(guard + c.n_x * out_stride + guard);
  for (auto& v : outbuf) std::memcpy(&v, &kSentinel, 4);
  float* out = outbuf.data() + guard;
  k.gemm_q8(n, w.data(), w_stride, c.n_rows, xq.data(), xq_stride, c.n_x, out, out_stride);

  std::vector<float> deq(n);
  for (int r = 0; r < c.n_rows; ++r) {
    const uint8_t* row = &w[r * w_stride];
    sk.dequantize_row(row, deq.data(), n);
    for (int j = 0; j < c.n_x; ++j) {
      const std::vector<double> a = decode_act(sk.act_type, &xq[j * xq_stride], n);
      double S = 0.0;
      for (int64_t i = 0; i < n; ++i) S += (std::fabs(double(deq[i])) + 2.0 * offset_mag(t, row, i)) * std::fabs(a[i]);
      const double want = sk.vec_dot(n, row, &xq[j * xq_stride]);
      const double got = out[j * out_stride + r];
      const double tol = (2.0 * nb + 16.0) * kU * S;
      ASSERT_TRUE(std::isfinite(got)) << "row " << r << " token " << j;
      ASSERT_LE(std::fabs(got - want), tol) << "row " << r << " token " << j << " got " << got << " want " << want;
    }
  }
  for (size_t i = 0; i < outbuf.size(); ++i) {
    const int64_t off = int64_t(i) - guard;
    const bool inside = off >= 0 && off < c.n_x * out_stride && off % out_stride < c.n_rows;
    if (inside) continue;
    uint32_t bits;
    std::memcpy(&bits, &outbuf[i], 4);
    ASSERT_EQ(bits, kSentinel) << "write outside the tile at offset " << off;
  }
}

class GemmIsa : public ::testing::TestWithParam<Isa> {
 protected:
  const KernelTable* kt = nullptr;
  void SetUp() override {
    kt = kernels_for(GetParam());
    if (!kt) GTEST_SKIP() << isa_name(GetParam()) << " not runnable here";
  }
};

std::vector<Case> cases_for(TensorType t) {
  const int blk = block_of(t);
  // One block; several; and (32-element blocks) past the kernels' 32-block K chunk.
  std::vector<int64_t> ns = {blk, 3 * blk};
  if (blk == 32) ns.push_back(40 * blk);
  std::vector<Case> cs;
  for (int64_t n : ns)
    for (int r : {1, 3, 4, 5, 16})
      for (int nx : {1, 2, 4, 7, 9}) cs.push_back({n, r, nx});
  // Across the 16-row panel, the 64-row packing group and the 64-token super-tile.
  cs.push_back({ns.back(), 17, 9});
  cs.push_back({ns.back(), 70, 3});
  cs.push_back({ns[1], 33, 70});
  return cs;
}

TEST_P(GemmIsa, MatchesScalarVecDotLoop) {
  for (TensorType t : kTypes) {
    for (bool raw : {false, true}) {
      std::mt19937 rng(1234 + static_cast<int>(t) * 7 + raw);
      for (const Case& c : cases_for(t)) {
        SCOPED_TRACE(testing::Message() << type_traits(static_cast<uint32_t>(t))->name << (raw ? " raw" : " ref")
                                        << " n=" << c.n << " rows=" << c.n_rows << " n_x=" << c.n_x);
        run_case(*kt, t, c, raw, rng);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Every type with an int8 activation format has a gemm_q8; float types have none.
TEST_P(GemmIsa, TableEntries) {
  for (const TypeKernels& k : kt->types) {
    if (!k.available) continue;
    EXPECT_EQ(k.gemm_q8 != nullptr, k.act_type != TensorType::F32);
  }
}

// gemm_q8_panels (prefill over load-time repacked panels) must give exactly gemm_q8's
// results on the same rows in the file's layout: it feeds the same micro-kernel with the
// same unpacked quants and scales, so the results are bit-identical (a stronger check than
// the tolerance above).
TEST_P(GemmIsa, PanelsEqualFileLayout) {
  std::mt19937 rng(99);
  for (TensorType t : {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q8_0}) {
    const TypeKernels& k = kt->for_type(t);
    if (!k.gemm_q8_panels) continue;
    const TypeKernels& sk = kernels_for(Isa::scalar)->for_type(t);
    for (int64_t n : {int64_t(32), int64_t(96), int64_t(1280)})
      for (int n_rows : {16, 48, 80})
        for (int n_x : {1, 7, 9, 70}) {
          SCOPED_TRACE(testing::Message() << type_traits(static_cast<uint32_t>(t))->name << " n=" << n
                                          << " rows=" << n_rows << " n_x=" << n_x);
          const size_t rb = *row_bytes(static_cast<uint32_t>(t), n);
          std::vector<uint8_t> w(rb * n_rows), packed(rb * n_rows);
          for (int r = 0; r < n_rows; ++r) {
            const std::vector<uint8_t> row = make_row(t, n, rng, r % 2 == 1);
            std::memcpy(&w[r * rb], row.data(), rb);
          }
          for (int p = 0; p < n_rows / kPanelRows; ++p)
            pack_panel(t, &w[p * kPanelRows * rb], rb, n, &packed[p * kPanelRows * rb]);
          const size_t xs = sk.act_bytes(n);
          std::vector<uint8_t> xq(xs * n_x);
          std::normal_distribution<float> nd(0.0f, 1.0f);
          std::vector<float> x(n);
          for (int j = 0; j < n_x; ++j) {
            for (auto& v : x) v = nd(rng);
            sk.quantize_act(x.data(), &xq[j * xs], n);
          }
          std::vector<float> a(size_t(n_x) * n_rows), b(a.size());
          k.gemm_q8(n, w.data(), rb, n_rows, xq.data(), xs, n_x, a.data(), n_rows);
          k.gemm_q8_panels(n, packed.data(), rb, n_rows, xq.data(), xs, n_x, b.data(), n_rows);
          ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
        }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, GemmIsa,
                         ::testing::ValuesIn(testing_isa::kAllIsas), testing_isa::IsaParamName());

}  // namespace
}  // namespace pllm
