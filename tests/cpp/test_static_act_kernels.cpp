// The static activation quantisers (TypeKernels::quantize_act_static): every ISA
// bit-identical to the scalar twin, and the twin against its definition (one step for
// every block, round to nearest, clip at +-127, the sums the dot kernels use).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/reference.h"
#include "quant/types.h"
#include "act_decode.h"
#include "isa_fixture.h"

namespace pllm {
namespace {

const TensorType kQuantTypes[] = {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1,
                                  TensorType::Q8_0, TensorType::Q4_K, TensorType::Q6_K};

using testing_act::activations;
using testing_act::decode;
using testing_act::DecodedAct;

class StaticActIsa : public testing_isa::IsaFixture {};

TEST_P(StaticActIsa, SetExactlyForInt8Formats) {
  for (uint32_t id = 0; id < 32; ++id) {
    const TypeKernels& k = table_->types[id];
    if (!k.available) continue;
    EXPECT_EQ(k.quantize_act_static != nullptr, k.act_type != TensorType::F32) << "type id " << id;
  }
}

TEST_P(StaticActIsa, BitIdenticalToScalarTwin) {
  std::mt19937 rng(99 + int(GetParam()));
  const int64_t n = 3 * 256;
  for (TensorType t : kQuantTypes) {
    const TypeKernels& k = table_->for_type(t);
    const TypeKernels& ks = scalar_->for_type(t);
    for (float d : {0.001f, 0.0137f, 0.05f, 1.0f / 3.0f, 7.0f}) {
      SCOPED_TRACE(::testing::Message() << isa_name(GetParam()) << " " << type_traits(uint32_t(t))->name << " d=" << d);
      std::vector<float> x = activations(rng, n, 1.0f);
      x[3] = 0.0f;
      x[40] = 1e9f;  // clipped
      x[41] = -1e9f;
      x[300] = std::numeric_limits<float>::infinity();
      x[301] = -std::numeric_limits<float>::infinity();
      x[302] = std::numeric_limits<float>::quiet_NaN();
      x[500] = 127.5f * d;  // a rounding tie at the clip edge
      std::vector<uint8_t> got(k.act_bytes(n)), want(ks.act_bytes(n));
      k.quantize_act_static(x.data(), got.data(), n, d);
      ks.quantize_act_static(x.data(), want.data(), n, d);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size()));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, StaticActIsa,
                         ::testing::ValuesIn(testing_isa::kAllIsas), testing_isa::IsaParamName());

// The scalar twin against its definition, element by element in double.
TEST(StaticActTwin, RoundsToTheStepAndClips) {
  std::mt19937 rng(5);
  const int64_t n = 2 * 256;
  const KernelTable& s = *kernels_for(Isa::scalar);
  for (TensorType t : kQuantTypes) {
    const TypeKernels& k = s.for_type(t);
    for (float d : {0.002f, 0.02f, 0.3f}) {
      SCOPED_TRACE(::testing::Message() << type_traits(uint32_t(t))->name << " d=" << d);
      const std::vector<float> x = activations(rng, n, 1.0f);
      std::vector<uint8_t> xq(k.act_bytes(n));
      k.quantize_act_static(x.data(), xq.data(), n, d);
      // Q8_0 blocks hold the step as fp16; the others as f32
      const double step = k.act_type == TensorType::Q8_0 ? double(fp16_to_fp32(fp32_to_fp16(d))) : double(d);
      const DecodedAct a = decode(k.act_type, xq, n);
      int clipped = 0;
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(a.d[size_t(i)], step) << i;  // every block's step is the static one
        const double q = a.q[size_t(i)];
        ASSERT_LE(std::fabs(q), 127.0) << i;
        const double exact = double(x[size_t(i)]) / step;
        if (std::fabs(exact) > 127.5) {
          EXPECT_EQ(q, exact > 0 ? 127.0 : -127.0) << i;
          ++clipped;
        } else {
          EXPECT_LE(std::fabs(q - exact), 0.5 + 1e-5) << i;
        }
      }
      if (d == 0.002f) {
        EXPECT_GT(clipped, 0);  // sigma 1 reaches past 127 * 0.002
      }
      // the sums the dot kernels use for Q4_1 / K-quants
      if (k.act_type == TensorType::Q8_1) {
        const auto* b = reinterpret_cast<const block_q8_1*>(xq.data());
        for (int64_t j = 0; j < n / 32; ++j) {
          int sum = 0;
          for (int e = 0; e < 32; ++e) sum += b[j].qs[e];
          EXPECT_EQ(b[j].d, d);
          EXPECT_FLOAT_EQ(b[j].s, d * float(sum));
        }
      }
      if (k.act_type == TensorType::Q8_K) {
        const auto* b = reinterpret_cast<const block_q8_K*>(xq.data());
        for (int64_t j = 0; j < n / 256; ++j)
          for (int g = 0; g < 16; ++g) {
            int sum = 0;
            for (int e = 0; e < 16; ++e) sum += b[j].qs[16 * g + e];
            EXPECT_EQ(b[j].bsums[g], sum);
          }
      }
    }
  }
}

}  // namespace
}  // namespace pllm
