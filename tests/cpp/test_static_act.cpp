// Static activation scales in matmul_group (ActMode::int8_static): each product uses its
// Matrix::act_scale, 0 stays dynamic. The kernels themselves: test_static_act_kernels.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backends/cpu/matmul.h"
#include "base/aligned_buffer.h"
#include "base/fp16.h"
#include "base/thread_pool.h"
#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/reference.h"
#include "quant/types.h"
#include "act_decode.h"

namespace pllm {
namespace {

using testing_act::activations;
using testing_act::decode;
using testing_act::DecodedAct;

// ---------------------------------------------------------------- matmul_group
struct TestMatrix {
  std::vector<uint8_t> bytes;
  Matrix m;
  std::vector<float> deq;  // [rows][cols]
};

TestMatrix make_matrix(TensorType t, int64_t rows, int64_t cols, std::mt19937& rng) {
  TestMatrix tm;
  const size_t rb = *row_bytes(uint32_t(t), uint64_t(cols));
  tm.bytes.resize(rb * size_t(rows));
  tm.deq.resize(size_t(rows * cols));
  const TypeKernels& k = kernels_for(Isa::scalar)->for_type(t);
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> w = activations(rng, cols, 0.5f);
    uint8_t* dst = tm.bytes.data() + size_t(r) * rb;
    switch (t) {
      case TensorType::Q4_0: ref::quantize_row_q4_0(w.data(), reinterpret_cast<block_q4_0*>(dst), cols); break;
      case TensorType::Q4_1: ref::quantize_row_q4_1(w.data(), reinterpret_cast<block_q4_1*>(dst), cols); break;
      case TensorType::Q4_K: ref::quantize_row_q4_K(w.data(), reinterpret_cast<block_q4_K*>(dst), cols); break;
      default: ADD_FAILURE();
    }
    k.dequantize_row(dst, tm.deq.data() + r * cols, cols);
  }
  tm.m.data = tm.bytes.data();
  tm.m.type = t;
  tm.m.rows = rows;
  tm.m.cols = cols;
  tm.m.row_bytes = rb;
  return tm;
}

struct Scratch {
  AlignedBuffer<uint8_t> buf;
  MatmulScratch mm{};
  Scratch(int64_t cols, int n_batch) {
    mm.act_row_stride = max_act_row_bytes(cols);
    buf.resize(size_t(kMaxActFormats) * size_t(n_batch) * mm.act_row_stride);
    mm.act_q = buf.data();
    mm.n_batch = n_batch;
  }
};

// Y[t][r] in double from the weights as decoded and X rounded by the static twin, and
// S = sum |w| |x| per output (the scale of f32 accumulation error).
struct Expected {
  std::vector<double> y, S;
};
Expected expected_static(const TestMatrix& tm, const std::vector<float>& X, int n_tok, float d) {
  const TypeKernels& k = kernels_for(Isa::scalar)->for_type(tm.m.type);
  const int64_t cols = tm.m.cols, rows = tm.m.rows;
  Expected e{std::vector<double>(size_t(n_tok * rows)), std::vector<double>(size_t(n_tok * rows))};
  for (int t = 0; t < n_tok; ++t) {
    std::vector<uint8_t> xq(k.act_bytes(cols));
    k.quantize_act_static(X.data() + t * cols, xq.data(), cols, d);
    const DecodedAct a = decode(k.act_type, xq, cols);
    for (int64_t r = 0; r < rows; ++r) {
      double acc = 0, mag = 0;
      for (int64_t c = 0; c < cols; ++c) {
        acc += double(tm.deq[size_t(r * cols + c)]) * a.value(size_t(c));
        mag += std::fabs(double(tm.deq[size_t(r * cols + c)]) * a.value(size_t(c)));
      }
      e.y[size_t(t * rows + r)] = acc;
      e.S[size_t(t * rows + r)] = mag;
    }
  }
  return e;
}

TEST(StaticActMatmul, EachProductUsesItsScaleAndZeroStaysDynamic) {
  std::mt19937 rng(17);
  const int64_t cols = 512;
  ThreadPool pool(2);
  for (int n_tok : {1, 5}) {  // decode (row kernels) and prefill (GEMM)
    SCOPED_TRACE(::testing::Message() << "n_tok=" << n_tok);
    TestMatrix a = make_matrix(TensorType::Q4_0, 40, cols, rng);
    TestMatrix b = make_matrix(TensorType::Q4_K, 24, cols, rng);
    TestMatrix c = make_matrix(TensorType::Q4_1, 32, cols, rng);
    TestMatrix e = make_matrix(TensorType::Q4_0, 16, cols, rng);  // same format as a, no scale
    a.m.act_scale = 0.004f;  // clips some of the sigma-1 inputs
    b.m.act_scale = 0.03f;
    c.m.act_scale = 0.011f;
    const std::vector<float> X = activations(rng, n_tok * cols, 1.0f);
    std::vector<float> ya(size_t(n_tok * 40)), yb(size_t(n_tok * 24)), yc(size_t(n_tok * 32)), ye(size_t(n_tok * 16));
    Scratch s(cols, n_tok);
    const MatmulTarget group[] = {{&a.m, ya.data()}, {&b.m, yb.data()}, {&c.m, yc.data()}, {&e.m, ye.data()}};
    matmul_group(group, X.data(), n_tok, ActMode::int8_static, s.mm, pool);

    for (auto [tm, y] : {std::pair{&a, &ya}, std::pair{&b, &yb}, std::pair{&c, &yc}}) {
      const Expected want = expected_static(*tm, X, n_tok, tm->m.act_scale);
      // f32 accumulation over cols / 32 block terms (as test_kernels.cpp bounds vec_dot)
      const double u = std::numeric_limits<float>::epsilon() / 2;
      for (size_t i = 0; i < want.y.size(); ++i)
        ASSERT_NEAR((*y)[i], want.y[i], (2.0 * double(cols) / 32 + 16) * u * want.S[i])
            << type_traits(uint32_t(tm->m.type))->name << " " << i;
    }
    // No scale: exactly what dynamic int8 mode gives.
    std::vector<float> ye_dyn(ye.size());
    matmul(e.m, X.data(), n_tok, ye_dyn.data(), ActMode::int8, s.mm, pool);
    EXPECT_EQ(0, std::memcmp(ye.data(), ye_dyn.data(), ye.size() * sizeof(float)));
    // And dynamic mode ignores the scales: a's result equals a copy without one.
    Matrix a0 = a.m;
    a0.act_scale = 0.0f;
    std::vector<float> y1(ya.size()), y2(ya.size());
    matmul(a.m, X.data(), n_tok, y1.data(), ActMode::int8, s.mm, pool);
    matmul(a0, X.data(), n_tok, y2.data(), ActMode::int8, s.mm, pool);
    EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)));
    EXPECT_NE(0, std::memcmp(y1.data(), ya.data(), y1.size() * sizeof(float)));  // static really differs
  }
}

}  // namespace
}  // namespace pllm
