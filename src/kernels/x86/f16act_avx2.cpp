// W4A16 on AVX2 + FMA + F16C: fp16 activations, weights decoded in registers, f32 FMA.
// Compiled with -mavx2 -mfma -mf16c (see avx2.cpp on namespaces). The decoders are exact
// mode's (decode_avx2.h), the loop is drivers/fused_dot.h with fp16 activation loads.
//
// The activation row is stored as IEEE halves (f32_to_f16_row, round to nearest even) and
// widened with vcvtph2ps (exact) as it is loaded. Weights are decoded exactly as in the
// exact-mode kernels (avx2.cpp: the floats dequantize_row gives), so a product differs from
// the scalar twin (f16act_scalar.cpp) only by f32 accumulation: each activation row gets A
// independent 8-lane accumulators (A = 4, 2, 1 for NX <= 2, <= 4, <= 8), i.e. <= n/8 lane
// additions + 5 reduction levels, the same bound as vec_dot_f32 (tests/cpp/test_f16act.cpp).
//
// The avx512 table uses these kernels too. A 512-bit variant (two __m512 per block, vcvtph2ps
// zmm) measured slower on Zen 4: one core, Q4_0 576 x 1536, 4 tokens per decoded block
// (vec_dot_f16act_multi): 165 us vs 120 us here (exact mode's 512-bit kernel: 95 us); one token:
// 75 vs 65 us. Widening the activations is the extra cost of this format on x86: one
// vcvtph2ps per FMA, where exact mode loads f32 for free.
#include <immintrin.h>

#include <cstdint>

#include "kernels/drivers/fused_dot.h"
#include "kernels/internal.h"
#include "kernels/x86/decode_avx2.h"

namespace pllm::kern {

namespace {

void f32_to_f16_row(const float* x, uint16_t* y, int64_t n) {
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), kRound));
  for (; i < n; ++i) y[i] = _cvtss_sh(x[i], kRound);
}

}  // namespace

void fill_f16act_avx2(KernelTable& t) {
  auto at = [&t](TensorType type) -> TypeKernels& { return t.types[static_cast<uint32_t>(type) & 31]; };
  t.f32_to_f16_row = f32_to_f16_row;
  drivers::set_f16act<avx2::F32x8, avx2::DecQ4_0>(at(TensorType::Q4_0));
  drivers::set_f16act<avx2::F32x8, avx2::DecQ4_1>(at(TensorType::Q4_1));
  drivers::set_f16act<avx2::F32x8, avx2::DecQ8_0>(at(TensorType::Q8_0));
}

}  // namespace pllm::kern
