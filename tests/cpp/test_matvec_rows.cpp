// Decode matvec kernels (TypeKernels::vec_dot_rows / vec_dot_f32_rows / *_multi) on every ISA
// table this machine can run, against the scalar twin's one-row kernels in a loop.
//
// Tolerances (derivation as in test_kernels.cpp; u = FLT_EPSILON / 2):
//   * int8 activations: the rows kernels do the vec_dot arithmetic (integer block sums
//     exact; per block a few f32 products, <= 2 accumulations per block, a horizontal sum
//     of <= 4 levels, a final combination). With S = sum_i |w_i| |a_i| over the
//     dequantised weight (|scale part| + |offset part| for Q4_1 / Q4_K) and activation:
//     tol = (2 nb + 16) u S, plus u |ref| for the scalar twin's final rounding.
//   * f32 activations (exact path): weights decoded exactly as dequantize_row, >= 8 f32
//     lanes per row fed by FMA: tol = (n/8 + 16) u S with S = sum |w_deq_i| |x_i|, plus
//     2 u S for the scalar twin (double accumulation).
// A wrong or missing element moves a result by ~S/n, well above these bounds for the
// sizes tested, and a swapped row moves it by ~S.
// Writes are checked with guard values on both sides of out[0 .. n_rows-1].
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
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

constexpr double kU = FLT_EPSILON / 2.0;
constexpr int kGuard = 8;
constexpr uint32_t kGuardBits = 0x7fc0dead;  // a quiet NaN no kernel produces

const TensorType kTypes[] = {TensorType::F32,  TensorType::F16,  TensorType::BF16, TensorType::Q4_0,
                             TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0,
                             TensorType::Q4_K, TensorType::Q6_K, TensorType::Q2_K, TensorType::Q3_K,
                             TensorType::Q5_K, TensorType::IQ4_NL, TensorType::IQ4_XS};
const int kRowCounts[] = {1, 2, 3, 4, 5, 8, 13};

int block_of(TensorType t) { return static_cast<int>(type_traits(static_cast<uint32_t>(t))->block_elems); }
bool is_float(TensorType t) { return t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16; }

// 1 block, 18 blocks (576) and 48 blocks (1536) for 32-element blocks; the K-quants
// (256-element blocks) use 1, 6 and 18 blocks; the float types 1, 576, 1536 elements.
std::vector<int64_t> sizes_for(TensorType t) {
  if (is_float(t)) return {1, 576, 1536};
  if (block_of(t) == 32) return {32, 576, 1536};
  return {256, 1536, 4608};
}

std::vector<float> random_floats(std::mt19937& rng, int64_t n, float scale) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng) * scale;
  return v;
}

uint16_t random_scale16(std::mt19937& rng) {
  std::uniform_real_distribution<float> e(-10.0f, -2.0f);
  return fp32_to_fp16(std::exp2(e(rng)) * ((rng() & 1) ? 1.0f : -1.0f));
}

// One weight row: the reference quantiser on Gaussian data, or (raw) random bytes with
// sane fp16 scales, reaching every quant bit pattern.
void fill_row(TensorType t, int64_t n, std::mt19937& rng, bool raw, uint8_t* w) {
  const size_t bytes = *row_bytes(static_cast<uint32_t>(t), n);
  const std::vector<float> x = random_floats(rng, n, raw ? 3.0f : 0.7f);
  switch (t) {
    case TensorType::F32: std::memcpy(w, x.data(), bytes); return;
    case TensorType::F16: ref::quantize_row_f16(x.data(), reinterpret_cast<uint16_t*>(w), n); return;
    case TensorType::BF16: ref::quantize_row_bf16(x.data(), reinterpret_cast<uint16_t*>(w), n); return;
    default: break;
  }
  if (lowbit_test::is_lowbit(t)) {  // no quantiser: random blocks either way
    lowbit_test::fill_blocks(t, w, bytes, rng, random_scale16);
    return;
  }
  if (raw) {
    for (size_t i = 0; i < bytes; ++i) w[i] = static_cast<uint8_t>(rng());
    const size_t bb = type_traits(static_cast<uint32_t>(t))->block_bytes;
    for (size_t off = 0; off < bytes; off += bb) {
      const uint16_t h[2] = {random_scale16(rng), random_scale16(rng)};
      if (t == TensorType::Q6_K) {
        std::memcpy(w + off + 208, h, 2);
      } else {
        std::memcpy(w + off, h, (t == TensorType::Q4_1 || t == TensorType::Q5_1 || t == TensorType::Q4_K) ? 4 : 2);
      }
    }
    return;
  }
  switch (t) {
    case TensorType::Q4_0: ref::quantize_row_q4_0(x.data(), reinterpret_cast<block_q4_0*>(w), n); break;
    case TensorType::Q4_1: ref::quantize_row_q4_1(x.data(), reinterpret_cast<block_q4_1*>(w), n); break;
    case TensorType::Q5_0: ref::quantize_row_q5_0(x.data(), reinterpret_cast<block_q5_0*>(w), n); break;
    case TensorType::Q5_1: ref::quantize_row_q5_1(x.data(), reinterpret_cast<block_q5_1*>(w), n); break;
    case TensorType::Q8_0: ref::quantize_row_q8_0(x.data(), reinterpret_cast<block_q8_0*>(w), n); break;
    case TensorType::Q4_K: ref::quantize_row_q4_K(x.data(), reinterpret_cast<block_q4_K*>(w), n); break;
    case TensorType::Q6_K: ref::quantize_row_q6_K(x.data(), reinterpret_cast<block_q6_K*>(w), n); break;
    default: ADD_FAILURE() << "no quantiser";
  }
}

// |offset part| of every weight element (Q4_1, Q5_1: |m|, Q4_K: |dmin * m_j|), else 0.
std::vector<double> offsets(TensorType t, const uint8_t* w, int64_t n) {
  std::vector<double> o(n, 0.0);
  auto h = [](const uint8_t* at) { uint16_t v; std::memcpy(&v, at, 2); return static_cast<double>(fp16_to_fp32(v)); };
  if (t == TensorType::Q4_1) {
    for (int64_t i = 0; i < n; ++i) o[i] = std::fabs(h(w + 20 * (i / 32) + 2));
  } else if (t == TensorType::Q5_1) {
    for (int64_t i = 0; i < n; ++i) o[i] = std::fabs(h(w + 24 * (i / 32) + 2));
  } else if (t == TensorType::Q4_K) {
    for (int64_t i = 0; i < n; ++i) {
      const auto* b = reinterpret_cast<const block_q4_K*>(w) + i / 256;
      uint8_t sc, m;
      ref::get_scale_min_k4(static_cast<int>(i % 256) / 32, b->scales, &sc, &m);
      o[i] = std::fabs(static_cast<double>(fp16_to_fp32(b->dmin)) * m);
    }
  } else if (lowbit_test::is_lowbit(t)) {
    for (int64_t i = 0; i < n; ++i) {
      double scale;
      lowbit_test::decode_element(t, w, i, scale, o[i]);
      o[i] = std::fabs(o[i]);
    }
  }
  return o;
}

// The activation row as floats, from its activation format.
std::vector<double> act_values(TensorType act, const void* xq, const float* x, int64_t n) {
  std::vector<double> a(n);
  for (int64_t i = 0; i < n; ++i) {
    switch (act) {
      case TensorType::F32: a[i] = x[i]; break;
      case TensorType::Q8_0: {
        const auto& b = static_cast<const block_q8_0*>(xq)[i / 32];
        a[i] = static_cast<double>(fp16_to_fp32(b.d)) * b.qs[i % 32];
        break;
      }
      case TensorType::Q8_1: {
        const auto& b = static_cast<const block_q8_1*>(xq)[i / 32];
        a[i] = static_cast<double>(b.d) * b.qs[i % 32];
        break;
      }
      case TensorType::Q8_K: {
        const auto& b = static_cast<const block_q8_K*>(xq)[i / 256];
        a[i] = static_cast<double>(b.d) * b.qs[i % 256];
        break;
      }
      default: ADD_FAILURE() << "unknown activation format";
    }
  }
  return a;
}

class MatvecRows : public testing_isa::IsaFixture {};

TEST_P(MatvecRows, EntriesSetForEveryAvailableType) {
  for (uint32_t id = 0; id < 32; ++id) {
    const TypeKernels& k = table_->types[id];
    if (!k.available) continue;
    EXPECT_NE(k.vec_dot_rows, nullptr) << "type id " << id;
    EXPECT_NE(k.vec_dot_f32_rows, nullptr) << "type id " << id;
    EXPECT_NE(k.vec_dot_f32_rows_multi, nullptr) << "type id " << id;
  }
}

// Runs fn(out) on a buffer with guards and checks the guards are untouched.
template <class Fn>
std::vector<float> guarded(int n_rows, Fn fn, const char* what) {
  std::vector<float> buf(n_rows + 2 * kGuard);
  float guard;
  std::memcpy(&guard, &kGuardBits, 4);
  for (auto& v : buf) v = guard;
  fn(buf.data() + kGuard);
  for (int i = 0; i < int(buf.size()); ++i) {
    if (i >= kGuard && i < kGuard + n_rows) continue;
    uint32_t bits;
    std::memcpy(&bits, &buf[i], 4);
    EXPECT_EQ(bits, kGuardBits) << what << ": write outside out[0.." << n_rows - 1 << "] at offset " << i - kGuard;
  }
  return std::vector<float>(buf.begin() + kGuard, buf.begin() + kGuard + n_rows);
}

TEST_P(MatvecRows, MatchesScalarRowLoop) {
  std::mt19937 rng(777 + static_cast<int>(GetParam()));
  for (TensorType t : kTypes) {
    const TypeKernels& k = table_->for_type(t);
    const TypeKernels& ks = scalar_->for_type(t);
    ASSERT_TRUE(k.available && ks.available);
    const char* tname = type_traits(static_cast<uint32_t>(t))->name;
    for (int64_t n : sizes_for(t)) {
      const size_t rb = *row_bytes(static_cast<uint32_t>(t), n);
      const int64_t nb = n / block_of(t);
      for (int n_rows : kRowCounts) {
        for (int variant = 0; variant < 2; ++variant) {  // 0: quantised data, packed; 1: raw bytes, padded stride
          const bool raw = variant == 1 && !is_float(t);
          const size_t stride = variant == 0 ? rb : rb + 64;
          std::vector<uint8_t> w(stride * n_rows + 64);
          for (int r = 0; r < n_rows; ++r) fill_row(t, n, rng, raw, w.data() + r * stride);
          const std::vector<float> x = random_floats(rng, n, 1.0f);
          std::vector<uint8_t> xq(k.act_bytes(n) + 64);
          k.quantize_act(x.data(), xq.data(), n);  // same activation bytes for both sides

          const std::vector<double> a = act_values(k.act_type, xq.data(), x.data(), n);
          const std::vector<float> out_q = guarded(n_rows, [&](float* o) { k.vec_dot_rows(n, w.data(), stride, n_rows, xq.data(), o); }, "vec_dot_rows");
          const std::vector<float> out_f = guarded(n_rows, [&](float* o) { k.vec_dot_f32_rows(n, w.data(), stride, n_rows, x.data(), o); }, "vec_dot_f32_rows");
          std::vector<float> deq(n);
          for (int r = 0; r < n_rows; ++r) {
            const uint8_t* wr = w.data() + r * stride;
            ks.dequantize_row(wr, deq.data(), n);
            const std::vector<double> off = offsets(t, wr, n);
            double s_q = 0.0, s_f = 0.0;
            for (int64_t i = 0; i < n; ++i) {
              s_q += (std::fabs(double(deq[i])) + 2.0 * off[i]) * std::fabs(a[i]);  // >= |scale| + |offset|
              s_f += std::fabs(double(deq[i])) * std::fabs(double(x[i]));
            }
            const double ref_q = ks.vec_dot(n, wr, xq.data());
            const double ref_f = ks.vec_dot_f32(n, wr, x.data());
            const double tol_q = (2.0 * nb + 16.0) * kU * s_q + kU * std::fabs(ref_q) + 1e-30;
            const double tol_f = (double(n) / 8.0 + 16.0 + 2.0) * kU * s_f + 1e-30;
            EXPECT_NEAR(out_q[r], ref_q, tol_q) << tname << " n=" << n << " rows=" << n_rows << " row " << r
                                                << " variant " << variant << " (int8 path)";
            EXPECT_NEAR(out_f[r], ref_f, tol_f) << tname << " n=" << n << " rows=" << n_rows << " row " << r
                                                << " variant " << variant << " (f32 path)";
          }
        }
      }
    }
  }
}

// Load-time panels (quant/panel.h): pack_panel then unpack_panel_row gives the file's
// bytes back exactly, and vec_dot_panels (on every table that has it, the scalar twin
// included) equals the scalar one-row vec_dot on the file's layout within the int8
// bound above. Raw random bytes reach every nibble / byte pattern; 3 panels per call. 1040
// blocks: past the 1024 blocks whose per-call activation terms the SIMD kernels keep on the stack.
TEST_P(MatvecRows, PanelsMatchFileLayout) {
  std::mt19937 rng(4242 + static_cast<int>(GetParam()));
  for (TensorType t : {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q8_0}) {
    const TypeKernels& k = table_->for_type(t);
    const TypeKernels& ks = scalar_->for_type(t);
    ASSERT_NE(ks.vec_dot_panels, nullptr) << "the scalar twin must exist";
    const char* tname = type_traits(static_cast<uint32_t>(t))->name;
    for (int64_t n : {int64_t(32), int64_t(576), int64_t(1536), int64_t(32 * 1040)}) {
      const size_t rb = *row_bytes(static_cast<uint32_t>(t), n);
      const int64_t nb = n / 32;
      constexpr int kPanels = 3, kRows = kPanels * kPanelRows;
      for (int variant = 0; variant < 2; ++variant) {
        std::vector<uint8_t> w(rb * kRows);
        for (int r = 0; r < kRows; ++r) fill_row(t, n, rng, variant == 1, w.data() + r * rb);
        std::vector<uint8_t> packed(w.size());
        const size_t panel_bytes = panel_block_bytes(t) * size_t(nb);
        ASSERT_EQ(panel_bytes, rb * kPanelRows);
        for (int p = 0; p < kPanels; ++p) pack_panel(t, w.data() + p * kPanelRows * rb, rb, n, packed.data() + p * panel_bytes);
        std::vector<uint8_t> back(rb);
        for (int r = 0; r < kRows; ++r) {
          unpack_panel_row(t, packed.data() + (r / kPanelRows) * panel_bytes, n, r % kPanelRows, back.data());
          ASSERT_EQ(0, std::memcmp(back.data(), w.data() + r * rb, rb)) << tname << " n=" << n << " row " << r;
        }
        if (!k.vec_dot_panels) continue;  // this ISA keeps the file's layout
        const std::vector<float> x = random_floats(rng, n, 1.0f);
        std::vector<uint8_t> xq(k.act_bytes(n) + 64);
        k.quantize_act(x.data(), xq.data(), n);
        const std::vector<double> a = act_values(k.act_type, xq.data(), x.data(), n);
        const std::vector<float> out = guarded(kRows, [&](float* o) { k.vec_dot_panels(n, packed.data(), kPanels, xq.data(), o); }, "vec_dot_panels");
        std::vector<float> deq(n);
        for (int r = 0; r < kRows; ++r) {
          const uint8_t* wr = w.data() + r * rb;
          ks.dequantize_row(wr, deq.data(), n);
          const std::vector<double> off = offsets(t, wr, n);
          double s_q = 0.0;
          for (int64_t i = 0; i < n; ++i) s_q += (std::fabs(double(deq[i])) + 2.0 * off[i]) * std::fabs(a[i]);
          const double ref = ks.vec_dot(n, wr, xq.data());
          const double tol = (2.0 * nb + 16.0) * kU * s_q + kU * std::fabs(ref) + 1e-30;
          EXPECT_NEAR(out[r], ref, tol) << tname << " n=" << n << " row " << r << " variant " << variant;
        }
      }
    }
  }
}

// IQ4_NL (Q4_0's panel layout), IQ4_XS, Q2_K and Q3_K panels (super-blocks of 16 rows x 256 elements) give
// the file's bytes back exactly: raw random bytes, rows of 1, 3 and 35 blocks of the type, 3
// panels. The panel is as large as its rows.
TEST(PanelLayout, Iq4Q2KAndQ3KRoundTripExactly) {
  std::mt19937 rng(7);
  for (TensorType t : {TensorType::IQ4_NL, TensorType::IQ4_XS, TensorType::Q2_K, TensorType::Q3_K}) {
    ASSERT_TRUE(panel_supported(t));
    const int64_t be = type_traits(static_cast<uint32_t>(t))->block_elems;
    for (int64_t k : {1, 3, 35}) {
      const int64_t n = be * k;
      const size_t rb = *row_bytes(static_cast<uint32_t>(t), n);
      constexpr int kPanels = 3, kRows = kPanels * kPanelRows;
      std::vector<uint8_t> w(rb * kRows);
      for (uint8_t& b : w) b = uint8_t(rng());
      const size_t panel_bytes = panel_block_bytes(t) * size_t(n / 32);
      ASSERT_EQ(panel_bytes, rb * kPanelRows);
      std::vector<uint8_t> packed(w.size()), back(rb);
      for (int p = 0; p < kPanels; ++p) pack_panel(t, w.data() + p * kPanelRows * rb, rb, n, packed.data() + p * panel_bytes);
      for (int r = 0; r < kRows; ++r) {
        unpack_panel_row(t, packed.data() + (r / kPanelRows) * panel_bytes, n, r % kPanelRows, back.data());
        ASSERT_EQ(0, std::memcmp(back.data(), w.data() + r * rb, rb)) << type_traits(uint32_t(t))->name << " n=" << n << " row " << r;
      }
    }
  }
}

// Q4_K and Q5_K panels (super-blocks of 16 rows x 256 elements, quant/panel.h) give the file's
// bytes back exactly: raw random bytes (every scale, min, code, fifth bit and fp16 pattern), rows
// of 1, 2, 3, 6 and 35 super-blocks, 3 panels. The panel is as large as its rows.
TEST(PanelLayout, Q4KAndQ5KRoundTripExactly) {
  std::mt19937 rng(99);
  for (TensorType t : {TensorType::Q4_K, TensorType::Q5_K}) {
    ASSERT_TRUE(panel_supported(t));
    for (int64_t k : {1, 2, 3, 6, 35}) {
      const int64_t n = 256 * k;
      const size_t rb = *row_bytes(static_cast<uint32_t>(t), n);
      constexpr int kPanels = 3, kRows = kPanels * kPanelRows;
      const size_t panel_bytes = panel_block_bytes(t) * size_t(n / 32);
      ASSERT_EQ(panel_bytes, rb * kPanelRows);
      std::vector<uint8_t> w(rb * kRows), packed(w.size(), 0xA5), back(rb);
      for (uint8_t& b : w) b = uint8_t(rng());
      for (int p = 0; p < kPanels; ++p) pack_panel(t, w.data() + p * kPanelRows * rb, rb, n, packed.data() + p * panel_bytes);
      for (int r = 0; r < kRows; ++r) {
        unpack_panel_row(t, packed.data() + (r / kPanelRows) * panel_bytes, n, r % kPanelRows, back.data());
        ASSERT_EQ(0, std::memcmp(back.data(), w.data() + r * rb, rb)) << "n=" << n << " row " << r;
      }
      // Spot-check the layout itself: row i's d, dmin and scale byte 5 in the header.
      for (int i = 0; i < kPanelRows; ++i) {
        const auto* blk = reinterpret_cast<const block_q4_K*>(w.data() + i * rb);  // Q5_K: the same header
        uint16_t d, dmin;
        std::memcpy(&d, packed.data() + 2 * i, 2);
        std::memcpy(&dmin, packed.data() + 32 + 2 * i, 2);
        EXPECT_EQ(d, blk->d);
        EXPECT_EQ(dmin, blk->dmin);
        EXPECT_EQ(packed[64 + 5 * kPanelRows + i], blk->scales[5]);
      }
    }
  }
}

// Q6_K panels (super-blocks of 16 rows x 256 elements, quant/panel.h) give the file's bytes back
// exactly: raw random bytes (every scale, 6-bit code and fp16 pattern), rows of 1, 2, 3, 6 and
// 35 super-blocks, 3 panels. The panel is as large as its rows.
TEST(PanelLayout, Q6KRoundTripsExactly) {
  std::mt19937 rng(98);
  const TensorType t = TensorType::Q6_K;
  ASSERT_TRUE(panel_supported(t));
  for (int64_t k : {1, 2, 3, 6, 35}) {
    const int64_t n = 256 * k;
    const size_t rb = *row_bytes(static_cast<uint32_t>(t), n);
    constexpr int kPanels = 3, kRows = kPanels * kPanelRows;
    const size_t panel_bytes = panel_block_bytes(t) * size_t(n / 32);
    ASSERT_EQ(panel_bytes, rb * kPanelRows);
    std::vector<uint8_t> w(rb * kRows), packed(w.size(), 0xA5), back(rb, 0x5A);
    for (uint8_t& b : w) b = uint8_t(rng());
    for (int p = 0; p < kPanels; ++p) pack_panel(t, w.data() + p * kPanelRows * rb, rb, n, packed.data() + p * panel_bytes);
    for (int r = 0; r < kRows; ++r) {
      unpack_panel_row(t, packed.data() + (r / kPanelRows) * panel_bytes, n, r % kPanelRows, back.data());
      ASSERT_EQ(0, std::memcmp(back.data(), w.data() + r * rb, rb)) << "n=" << n << " row " << r;
    }
    // Spot-check the layout itself: row i's d and scale 5 in the header, and element l = 4g + j,
    // g = 6, j = 2, of unit 5 (h = 1, k = 1: low bits in ql[96 + l]'s low nibble, high bits in
    // qh[32 + l]'s bits 2-3) in the unit's Q4 vector 2 (high nibble: group 2 + 4) and high-bit
    // vector 1, field 2 (group 2 * 1 + 0 + 4).
    for (int i = 0; i < kPanelRows; ++i) {
      const auto* blk = reinterpret_cast<const block_q6_K*>(w.data() + i * rb);
      uint16_t d;
      std::memcpy(&d, packed.data() + 2 * i, 2);
      EXPECT_EQ(d, blk->d);
      EXPECT_EQ(int8_t(packed[32 + 5 * kPanelRows + i]), blk->scales[5]);
      const uint8_t* unit = packed.data() + 288 + 384 * 5;
      const int l = 4 * 6 + 2;
      EXPECT_EQ(unit[64 * 2 + 4 * i + 2] >> 4, blk->ql[96 + l] & 0x0F);
      EXPECT_EQ((unit[256 + 64 * 1 + 4 * i + 2] >> 4) & 3, (blk->qh[32 + l] >> 2) & 3);
    }
  }
}

// Which tables read load-time panels in int8 mode (the model repacks for RepackMode::all only
// where vec_dot_panels is set): AVX-512 VNNI and the ARM SDOT levels (dotprod, i8mm) have the
// decode and the prefill kernel for Q4_0, Q4_1 and Q8_0; AVX2 and baseline NEON (no int8 dot
// instruction) neither; the scalar table only the decode twins. Keeps the panel tests above
// from passing by skipping a table whose kernels went missing.
TEST_P(MatvecRows, PanelKernelsWhereExpected) {
  const Isa isa = GetParam();
  const bool own = isa == Isa::avx512 || isa == Isa::neon_dotprod || isa == Isa::neon_i8mm;
  for (TensorType t : {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q8_0}) {
    const TypeKernels& k = table_->for_type(t);
    EXPECT_EQ(k.vec_dot_panels != nullptr, own || isa == Isa::scalar) << type_traits(static_cast<uint32_t>(t))->name;
    EXPECT_EQ(k.gemm_q8_panels != nullptr, own) << type_traits(static_cast<uint32_t>(t))->name;
  }
}

// vec_dot_rows_multi (a batched decode step): n_x activation rows against n_rows weight rows,
// out[x * os + r] within the int8 bound above of the scalar one-row vec_dot of that pair, on
// every type with an int8 activation format. os leaves a gap after each output row: the gap
// and both ends are guarded. Activation rows sit act_bytes + 64 apart (a padded stride).
TEST_P(MatvecRows, MultiRowsMatchScalarPairs) {
  std::mt19937 rng(9090 + static_cast<int>(GetParam()));
  for (TensorType t : kTypes) {
    const TypeKernels& k = table_->for_type(t);
    const TypeKernels& ks = scalar_->for_type(t);
    if (k.act_type == TensorType::F32) continue;
    ASSERT_NE(k.vec_dot_rows_multi, nullptr);
    const char* tname = type_traits(static_cast<uint32_t>(t))->name;
    for (int64_t n : sizes_for(t)) {
      const size_t rb = *row_bytes(static_cast<uint32_t>(t), n);
      const int64_t nb = n / block_of(t);
      const size_t xs = k.act_bytes(n) + 64;
      for (int n_rows : {1, 3, 4, 5, 13}) {
        for (int n_x : {1, 2, 3, 5, 8, 11}) {
          const bool raw = (n_rows + n_x) % 2 == 1;
          std::vector<uint8_t> w(rb * n_rows);
          for (int r = 0; r < n_rows; ++r) fill_row(t, n, rng, raw, w.data() + r * rb);
          std::vector<uint8_t> xq(xs * n_x);
          std::vector<std::vector<double>> a(n_x);
          for (int x = 0; x < n_x; ++x) {
            const std::vector<float> xf = random_floats(rng, n, x % 2 ? 3.0f : 0.5f);
            k.quantize_act(xf.data(), xq.data() + x * xs, n);
            a[x] = act_values(k.act_type, xq.data() + x * xs, xf.data(), n);
          }
          const int os = n_rows + 3;
          const std::vector<float> out = guarded(os * n_x, [&](float* o) {
            for (int x = 0; x < n_x; ++x)  // the gaps between output rows hold guard values too
              for (int g = n_rows; g < os; ++g) std::memcpy(&o[x * os + g], &kGuardBits, 4);
            k.vec_dot_rows_multi(n, w.data(), rb, n_rows, xq.data(), xs, n_x, o, os);
          }, "vec_dot_rows_multi");
          std::vector<float> deq(n);
          for (int r = 0; r < n_rows; ++r) {
            const uint8_t* wr = w.data() + r * rb;
            ks.dequantize_row(wr, deq.data(), n);
            const std::vector<double> off = offsets(t, wr, n);
            for (int x = 0; x < n_x; ++x) {
              double s_q = 0.0;
              for (int64_t i = 0; i < n; ++i) s_q += (std::fabs(double(deq[i])) + 2.0 * off[i]) * std::fabs(a[x][i]);
              const double ref = ks.vec_dot(n, wr, xq.data() + x * xs);
              const double tol = (2.0 * nb + 16.0) * kU * s_q + kU * std::fabs(ref) + 1e-30;
              EXPECT_NEAR(out[x * os + r], ref, tol) << tname << " n=" << n << " rows=" << n_rows << " n_x=" << n_x
                                                     << " row " << r << " act " << x;
            }
            for (int x = 0; x < n_x; ++x)
              for (int g = n_rows; g < os; ++g) {
                uint32_t bits;
                std::memcpy(&bits, &out[x * os + g], 4);
                EXPECT_EQ(bits, kGuardBits) << tname << ": write into the gap after output row " << x;
              }
          }
        }
      }
    }
  }
}

// n_rows weight rows (stride bytes apart) and n_x f32 activation rows (xs floats apart; odd
// rows 6x the scale of even ones) for the multi-row tests.
void rows_and_acts(TensorType t, int64_t n, size_t stride, int n_rows, int64_t xs, int n_x, bool raw,
                   std::mt19937& rng, std::vector<uint8_t>& w, std::vector<float>& x) {
  w.assign(stride * n_rows, 0);
  for (int r = 0; r < n_rows; ++r) fill_row(t, n, rng, raw, w.data() + r * stride);
  x.assign(size_t(xs) * n_x, 0.0f);
  for (int j = 0; j < n_x; ++j) {
    const std::vector<float> xf = random_floats(rng, n, j % 2 ? 3.0f : 0.5f);
    std::copy(xf.begin(), xf.end(), x.begin() + j * xs);
  }
}

// vec_dot_f32_rows_multi (a batched decode step, exact path): n_x f32 activation rows against
// n_rows weight rows, out[x * os + r] within the f32 bound above of the scalar one-row
// vec_dot_f32 of that pair, on every type. Row counts cover whole register tiles and every
// remainder, n_x every tile shape and more than one group of 8; activation rows sit n + 5
// floats apart (unaligned), weight rows a padded stride apart; gaps and ends guarded. Every
// weight row must also give the same result whatever its place in the call (first row of a
// call vs inside a tile or a remainder tile): the matmul's chunking varies with the threads.
TEST_P(MatvecRows, ExactMultiRowsMatchScalarPairs) {
  std::mt19937 rng(5151 + static_cast<int>(GetParam()));
  for (TensorType t : kTypes) {
    const TypeKernels& k = table_->for_type(t);
    const TypeKernels& ks = scalar_->for_type(t);
    ASSERT_NE(k.vec_dot_f32_rows_multi, nullptr);
    const char* tname = type_traits(static_cast<uint32_t>(t))->name;
    for (int64_t n : sizes_for(t)) {
      const size_t rb = *row_bytes(static_cast<uint32_t>(t), n), stride = rb + 32;
      const int64_t xs = n + 5;
      for (int n_rows : {1, 2, 3, 4, 5, 7, 13}) {
        for (int n_x : {1, 2, 3, 4, 5, 7, 8, 11}) {
          const bool raw = (n_rows + n_x) % 2 == 1 && !is_float(t);
          std::vector<uint8_t> w;
          std::vector<float> x;
          rows_and_acts(t, n, stride, n_rows, xs, n_x, raw, rng, w, x);
          const int os = n_rows + 3;
          auto call = [&](const uint8_t* wr, int rows, float* o) {
            for (int j = 0; j < n_x; ++j)  // the gaps between output rows hold guard values too
              for (int g = rows; g < os; ++g) std::memcpy(&o[j * os + g], &kGuardBits, 4);
            k.vec_dot_f32_rows_multi(n, wr, stride, rows, x.data(), xs, n_x, o, os);
          };
          const std::vector<float> out = guarded(os * n_x, [&](float* o) { call(w.data(), n_rows, o); },
                                                 "vec_dot_f32_rows_multi");
          std::vector<float> deq(n);
          for (int r = 0; r < n_rows; ++r) {
            const uint8_t* wr = w.data() + r * stride;
            ks.dequantize_row(wr, deq.data(), n);
            // the same row alone (a one-row remainder tile): bit-identical
            const std::vector<float> alone = guarded(os * n_x, [&](float* o) { call(wr, 1, o); }, "one row");
            for (int j = 0; j < n_x; ++j) {
              const float* xj = x.data() + j * xs;
              double s_f = 0.0;
              for (int64_t i = 0; i < n; ++i) s_f += std::fabs(double(deq[i])) * std::fabs(double(xj[i]));
              const double ref = ks.vec_dot_f32(n, wr, xj);
              const double tol = (double(n) / 8.0 + 16.0 + 2.0) * kU * s_f + 1e-30;
              EXPECT_NEAR(out[j * os + r], ref, tol) << tname << " n=" << n << " rows=" << n_rows << " n_x=" << n_x
                                                     << " row " << r << " act " << j;
              EXPECT_EQ(out[j * os + r], alone[j * os]) << tname << " n=" << n << " rows=" << n_rows << " n_x="
                                                        << n_x << " row " << r << " act " << j << " vs alone";
              for (int g = n_rows; g < os; ++g) {
                uint32_t bits;
                std::memcpy(&bits, &out[j * os + g], 4);
                EXPECT_EQ(bits, kGuardBits) << tname << ": write into the gap after output row " << j;
              }
            }
          }
        }
      }
    }
  }
}

// gemm_f32 (exact prefill): bit for bit what vec_dot_f32_rows_multi gives for the same call
// (the test above holds that one to the scalar twin), on every type. n = 576 (1536 for the
// K-quants) ends in a short chunk of units; n_x covers the short last groups of 1-2 rows
// that go to the multi-row kernel, remainder tiles and more than one pass of 64 rows; n_rows
// whole 12- and 16-row decode blocks and remainders; gaps between output rows guarded.
TEST_P(MatvecRows, ExactGemmEqualsMultiRows) {
  std::mt19937 rng(6161 + static_cast<int>(GetParam()));
  for (TensorType t : kTypes) {
    const TypeKernels& k = table_->for_type(t);
    ASSERT_NE(k.gemm_f32, nullptr);
    if (k.gemm_f32 == k.vec_dot_f32_rows_multi) continue;  // the scalar table's (and any type without its own)
    const char* tname = type_traits(static_cast<uint32_t>(t))->name;
    {
      const int64_t n = sizes_for(t)[1];
      const size_t rb = *row_bytes(static_cast<uint32_t>(t), n), stride = rb + 32;
      const int64_t xs = n + 5;
      for (int n_rows : {1, 5, 16, 29}) {
        for (int n_x : {1, 3, 10, 67, 130}) {
          const bool raw = (n_rows + n_x) % 2 == 1 && !is_float(t);
          std::vector<uint8_t> w;
          std::vector<float> x;
          rows_and_acts(t, n, stride, n_rows, xs, n_x, raw, rng, w, x);
          const int os = n_rows + 3;
          auto run = [&](auto fn, const char* what) {
            return guarded(os * n_x, [&](float* o) {
              for (int j = 0; j < n_x; ++j)
                for (int g = n_rows; g < os; ++g) std::memcpy(&o[j * os + g], &kGuardBits, 4);
              fn(n, w.data(), stride, n_rows, x.data(), xs, n_x, o, os);
            }, what);
          };
          const std::vector<float> want = run(k.vec_dot_f32_rows_multi, "vec_dot_f32_rows_multi");
          const std::vector<float> got = run(k.gemm_f32, "gemm_f32");
          for (int j = 0; j < n_x; ++j)
            for (int g = 0; g < os; ++g) {
              uint32_t a, b;
              std::memcpy(&a, &got[j * os + g], 4);
              std::memcpy(&b, &want[j * os + g], 4);
              ASSERT_EQ(a, b) << tname << " n=" << n << " rows=" << n_rows << " n_x=" << n_x << " out row " << j
                              << " col " << g << (g >= n_rows ? " (a guarded gap)" : "");
            }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, MatvecRows,
                         ::testing::ValuesIn(testing_isa::kAllIsas), testing_isa::IsaParamName());

}  // namespace
}  // namespace pllm
