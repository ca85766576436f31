// AArch64 dotprod decode matvec over load-time repacked 16-row panels (vec_dot_panels; layout
// in quant/panel.h), the twin of x86/panel_avx512.cpp. Compiled with -march=armv8.2-a+dotprod;
// installed in the dotprod and i8mm tables only (dispatch.cpp), so a CPU without SDOT keeps
// the file's layout. Anonymous namespace only (see avx2.cpp).
//
// A 64-byte panel vector is 4 int8x16 registers k = rows 4k .. 4k+3, 4 bytes (4 consecutive
// elements) per row, so int32 lane i of register k belongs to row 4k + i for the whole block:
//   acc[k] = vdotq_laneq_s32(acc[k], W[g][k], a[g / 4], g % 4)    for the 8 element groups g
// (a: the activation block's 32 bytes in two registers, lane j = its 4 bytes 4j .. 4j+3) gives
// the 16 rows' exact integer block sums with no shuffles and no horizontal sums; then per
// register one cvt and one FMA with the 4 fp16 row scales times the activation scale.
// SDOT multiplies signed by signed, so the stored codes are used as follows:
//   Q4: the nibbles 0..15 are valid int8 as they are. Q4_0's -8 is taken out of the sum
//       exactly by starting the accumulators at -8 * sum(a), once per activation block and
//       call (cheaper than subtracting 8 from every code: 32 SUB per 16-row block).
//   Q8_0: panels hold q + 128 as an unsigned byte; read as int8 that is q - 128 or q + 128
//       depending on q's sign, which no sum(a) term undoes, so every byte is flipped back
//       (EOR 0x80 gives q). (USDOT could take the unsigned byte with -128 * sum(a), but it is
//       an i8mm instruction and this kernel serves the dotprod table.)
// Two accumulator chains per register (even / odd groups) keep the dependent SDOT chains at 4
// per block. Blocks stream linearly: one sequential stream per thread for the prefetcher.
#include <arm_neon.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "kernels/arm/int8_neon.h"
#include "kernels/internal.h"
#include "quant/blocks.h"
#include "quant/panel.h"

namespace pllm::kern {

namespace {

#define PLLM_AI inline __attribute__((always_inline))

constexpr int kR = kPanelRows;

// The weight types (arm/int8_neon.h) need only the half-to-float conversion from the level.
struct Level {
  static float h2f(uint16_t h) { return static_cast<float>(std::bit_cast<__fp16>(h)); }
};
using I8 = neon_int8::Blocks<Level>;

// Q4_0 read as its raw nibbles (0..15); the -8 is the accumulators' start (kOffset).
struct Q40 : I8::Q4_0 {
  static constexpr int32_t kOffset = 8;
  static PLLM_AI int8x16_t panel_group(const uint8_t* qs, int g, int k) {
    return vreinterpretq_s8_u8(I8::panel_nibbles(qs, g, k));
  }
};
struct Q41 : I8::Q4_1 {
  static constexpr int32_t kOffset = 0;
};
struct Q80 : I8::Q8_0 {
  static constexpr int32_t kOffset = 0;
};

PLLM_AI int32_t sum32(const int8_t* q) { return vaddlvq_s8(vld1q_s8(q)) + vaddlvq_s8(vld1q_s8(q + 16)); }

// The start -kOffset * sum(a) of every activation block: the same for every panel of a call,
// so computed once, on the stack (rows of up to kMaxNb blocks, every repacked matrix: see
// kMaxPanelRowBytes) or in gemm_scratch, so that the block loop has no branch.
constexpr int64_t kMaxNb = 1024;
template <class T>
struct Starts {
  int32_t local[T::kOffset != 0 ? kMaxNb : 1];
  int32_t* v;
  Starts(const typename T::A* a, int64_t nb) : v(local) {
    if constexpr (T::kOffset != 0) {
      if (nb > kMaxNb) v = static_cast<int32_t*>(gemm_scratch(size_t(nb) * sizeof(int32_t)));
      for (int64_t b = 0; b < nb; ++b) v[b] = -T::kOffset * sum32(a[b].qs);
    }
  }
  PLLM_AI int32_t at(int64_t b) const { return T::kOffset != 0 ? v[b] : 0; }
};

// Group G (0..7) of rows 4k .. 4k+3 of a panel block into chain G % 2.
template <class T, int G>
PLLM_AI void group(const uint8_t* qs, int k, const int8x16_t a[2], int32x4_t acc[2]) {
  acc[G % 2] = vdotq_laneq_s32(acc[G % 2], T::panel_group(qs, G, k), a[G / 4], G % 4);
}

// The exact integer block sums of the 16 rows (s[k]: rows 4k .. 4k+3) of the panel block
// whose quants start at qs, with the activation bytes act, plus start. Row register by row
// register, so that only one register's weights need be live at a time (fewer spills).
template <class T>
PLLM_AI void block_sums(const uint8_t* qs, const int8_t* act, int32_t start, int32x4_t s[4]) {
  const int8x16_t a[2] = {vld1q_s8(act), vld1q_s8(act + 16)};
  for (int k = 0; k < 4; ++k) {
    int32x4_t acc[2] = {vdupq_n_s32(start), vdupq_n_s32(0)};
    [&]<int... G>(std::integer_sequence<int, G...>) { (group<T, G>(qs, k, a, acc), ...); }(
        std::make_integer_sequence<int, 8>{});
    s[k] = vaddq_s32(acc[0], acc[1]);
  }
}

// out[16 p + i] = sum over blocks of d_i * d_a * isum_i (+ m_i * s_a where T has a min).
template <class T>
void panels(int64_t n, const void* w, int n_panels, const void* xq, float* out) {
  const int64_t nb = n / 32;
  const auto* a = static_cast<const typename T::A*>(xq);
  const uint8_t* p = static_cast<const uint8_t*>(w);
  constexpr size_t kBB = kR * sizeof(typename T::W);
  const Starts<T> start(a, nb);
  for (int pn = 0; pn < n_panels; ++pn) {
    float32x4_t acc[4], accm[4];
    for (int k = 0; k < 4; ++k) acc[k] = accm[k] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; ++b, p += kBB) {
      int32x4_t s[4];
      block_sums<T>(p + T::kPanelQs, a[b].qs, start.at(b), s);
      const float da = I8::act_d(a[b]);
      for (int k = 0; k < 4; ++k) acc[k] = vfmaq_f32(acc[k], vcvtq_f32_s32(s[k]), vmulq_n_f32(I8::panel_f16x4(p, k), da));
      if constexpr (T::kMin)
        for (int k = 0; k < 4; ++k) accm[k] = vfmaq_n_f32(accm[k], I8::panel_f16x4(p + 32, k), a[b].s);
    }
    for (int k = 0; k < 4; ++k) vst1q_f32(out + pn * kR + 4 * k, T::kMin ? vaddq_f32(acc[k], accm[k]) : acc[k]);
  }
}

}  // namespace

void fill_panel_neon_dotprod(KernelTable& t) {
  t.types[int(TensorType::Q4_0)].vec_dot_panels = panels<Q40>;
  t.types[int(TensorType::Q4_1)].vec_dot_panels = panels<Q41>;
  t.types[int(TensorType::Q8_0)].vec_dot_panels = panels<Q80>;
}

}  // namespace pllm::kern
