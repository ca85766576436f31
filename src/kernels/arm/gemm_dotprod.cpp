// AArch64 prefill GEMM (TypeKernels::gemm_q8) on SDOT: fill_gemm_neon_dotprod, tiled kernels for
// Q4_0, Q8_0 and Q4_1 in the dotprod table (selected only when getauxval reports ASIMDDP).
// Compiled with -march=armv8.2-a+dotprod. The baseline NEON table and the other types keep
// their vec_dot in a loop (generic/dot_loops.cpp).
//
// Scheme (as x86/gemm_avx512.cpp, read that first): weights repacked per call into
// panels of 8 rows; for every block and group g of 4 elements one 32-byte pair of
// int8x16 vectors holds those 4 quants of rows 0-3 and 4-7 (signed: Q4_0 q - 8, Q8_0 w,
// Q4_1 q). The token's 32 activation bytes sit in two int8x16 registers and
//   vdotq_laneq_s32(acc, W[g], a, g % 4)
// adds group g's 4-byte dot for 4 rows in one instruction: 16 SDOT per (8 rows x 1 token
// x 32 elements), no horizontal sums, no offset corrections (SDOT is signed x signed).
// gemm_q8_panels fills the same panels from load-time 16-row panels (quant/panel.h): each
// 16-byte quarter of a panel vector already is one group of 4 rows, so packing is a copy
// (Q4: nibble split, Q4_0 minus 8; Q8_0: EOR 0x80) and the results equal gemm_q8's bit for bit.
#include <arm_neon.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/arm/int8_neon.h"
#include "kernels/drivers/gemm_panels.h"
#include "kernels/internal.h"
#include "quant/blocks.h"

namespace pllm::kern {

namespace {

constexpr int kPanel = 8;    // rows per panel (two int32x4 accumulators)
constexpr int kPanels = 8;   // panels per packing group
constexpr int kKb = 32;      // blocks per K chunk
constexpr int kSuper = 64;   // tokens per activation-prep super-tile
constexpr int kTile = 4;     // tokens per micro-kernel call

// The weight types (arm/int8_neon.h) need only the half-to-float conversion from the level.
struct Level {
  static float h2f(uint16_t h) { return static_cast<float>(std::bit_cast<__fp16>(h)); }
};
using I8 = neon_int8::Blocks<Level>;
using Q40 = I8::Gemm<I8::Q4_0>;
using Q80 = I8::Gemm<I8::Q8_0>;
using Q41 = I8::Gemm<I8::Q4_1>;

struct Panel {
  alignas(16) int8_t q[kKb][8][kPanel][4];  // [block][group][row][4 signed quants]
  alignas(16) float d[kKb][kPanel];
  alignas(16) float m[kKb][kPanel];
};


template <class T>
void pack_panel(const uint8_t* w, size_t w_stride, int nr, int kb0, int kbn, Panel& P) {
  int8_t q[32];
  for (int r = 0; r < kPanel; ++r) {
    if (r >= nr) {
      for (int kb = 0; kb < kbn; ++kb) {
        for (int g = 0; g < 8; ++g) std::memset(P.q[kb][g][r], 0, 4);
        P.d[kb][r] = 0.0f;
        P.m[kb][r] = 0.0f;
      }
      continue;
    }
    const typename T::W* blk = reinterpret_cast<const typename T::W*>(w + r * w_stride) + kb0;
    // The weights come from DRAM once per call: prefetch two rows ahead (may run past
    // the panel or the matrix; prefetches never fault).
    const uintptr_t ahead = reinterpret_cast<uintptr_t>(blk) + 2 * w_stride;
    for (size_t off = 0; off < kbn * sizeof(typename T::W); off += 64)
      __builtin_prefetch(reinterpret_cast<const void*>(ahead + off));
    for (int kb = 0; kb < kbn; ++kb) {
      T::unpack(blk[kb], q, P.d[kb][r], P.m[kb][r]);
      for (int g = 0; g < 8; ++g) std::memcpy(P.q[kb][g][r], q + 4 * g, 4);
    }
  }
}

// Rows row0 .. row0 + 7 (row0 0 or 8) of the load-time panel at w (drivers/gemm_panels.h).
template <class T>
void pack_repacked(const uint8_t* w, int row0, int kb0, int kbn, Panel& P) {
  I8::panel_half<typename T::W>(w, row0, kb0, kbn, [&](int kb, int h, const uint8_t* b, int k) {
    vst1q_f32(P.d[kb] + 4 * h, I8::panel_f16x4(b, k));
    if constexpr (T::kMin) vst1q_f32(P.m[kb] + 4 * h, I8::panel_f16x4(b + 32, k));
    for (int g = 0; g < 8; ++g) vst1q_s8(P.q[kb][g][4 * h], T::panel_group(b + T::kPanelQs, g, k));
  });
}

using drivers::ActPrep;

template <class T, int NX>
inline void micro(const Panel& P, int kbn, const uint8_t* const* arow, const ActPrep& ap, int t0, float* out,
                  int64_t os, int nr, bool accumulate) {
  constexpr size_t kAb = sizeof(typename T::A);
  constexpr size_t kQs = offsetof(typename T::A, qs);
  float32x4_t f[NX][2];
  for (int t = 0; t < NX; ++t) {
    if (accumulate) {
      float tmp[kPanel] = {};
      std::memcpy(tmp, out + t * os, sizeof(float) * nr);
      f[t][0] = vld1q_f32(tmp);
      f[t][1] = vld1q_f32(tmp + 4);
    } else {
      f[t][0] = f[t][1] = vdupq_n_f32(0.0f);
    }
  }
  for (int kb = 0; kb < kbn; ++kb) {
    int8x16_t a[NX][2];
    int32x4_t acc[NX][2];
    for (int t = 0; t < NX; ++t) {
      const int8_t* qs = reinterpret_cast<const int8_t*>(arow[t] + kb * kAb + kQs);
      a[t][0] = vld1q_s8(qs);
      a[t][1] = vld1q_s8(qs + 16);
      acc[t][0] = acc[t][1] = vdupq_n_s32(0);
    }
#define PLLM_GEMM_GROUP(g)                                                   \
  {                                                                          \
    const int8x16_t w0 = vld1q_s8(P.q[kb][g][0]);                            \
    const int8x16_t w1 = vld1q_s8(P.q[kb][g][4]);                            \
    for (int t = 0; t < NX; ++t) {                                           \
      acc[t][0] = vdotq_laneq_s32(acc[t][0], w0, a[t][(g) / 4], (g) % 4);    \
      acc[t][1] = vdotq_laneq_s32(acc[t][1], w1, a[t][(g) / 4], (g) % 4);    \
    }                                                                        \
  }
    PLLM_GEMM_GROUP(0) PLLM_GEMM_GROUP(1) PLLM_GEMM_GROUP(2) PLLM_GEMM_GROUP(3)
    PLLM_GEMM_GROUP(4) PLLM_GEMM_GROUP(5) PLLM_GEMM_GROUP(6) PLLM_GEMM_GROUP(7)
#undef PLLM_GEMM_GROUP
    const float32x4_t d0 = vld1q_f32(P.d[kb]), d1 = vld1q_f32(P.d[kb] + 4);
    for (int t = 0; t < NX; ++t) {
      const float da = ap.d[(t0 + t) * ap.ld + kb];
      f[t][0] = vfmaq_f32(f[t][0], vcvtq_f32_s32(acc[t][0]), vmulq_n_f32(d0, da));
      f[t][1] = vfmaq_f32(f[t][1], vcvtq_f32_s32(acc[t][1]), vmulq_n_f32(d1, da));
    }
    if constexpr (T::kMin) {
      const float32x4_t m0 = vld1q_f32(P.m[kb]), m1 = vld1q_f32(P.m[kb] + 4);
      for (int t = 0; t < NX; ++t) {
        f[t][0] = vfmaq_n_f32(f[t][0], m0, ap.s[(t0 + t) * ap.ld + kb]);
        f[t][1] = vfmaq_n_f32(f[t][1], m1, ap.s[(t0 + t) * ap.ld + kb]);
      }
    }
  }
  for (int t = 0; t < NX; ++t) {
    if (nr == kPanel) {
      vst1q_f32(out + t * os, f[t][0]);
      vst1q_f32(out + t * os + 4, f[t][1]);
    } else {
      float tmp[kPanel];
      vst1q_f32(tmp, f[t][0]);
      vst1q_f32(tmp + 4, f[t][1]);
      std::memcpy(out + t * os, tmp, sizeof(float) * nr);
    }
  }
}

// The micro-kernel as drivers/gemm_panels.h wants it.
struct Tiles {
  static constexpr int kPanel = pllm::kern::kPanel, kPanels = pllm::kern::kPanels, kKb = pllm::kern::kKb;
  static constexpr int kSuper = pllm::kern::kSuper, kTile = pllm::kern::kTile;
  using Panel = pllm::kern::Panel;
  using Mask = int;
  static Mask mask(int nr) { return nr; }
  template <class T>
  static constexpr auto pack = pack_panel<T>;
  template <class T>
  static constexpr auto pack_repacked = pllm::kern::pack_repacked<T>;
  template <class T, int NX>
  static constexpr auto micro = pllm::kern::micro<T, NX>;
};

}  // namespace

void fill_gemm_neon_dotprod(KernelTable& t) { drivers::set_gemm_q8<Tiles, Q40, Q80, Q41, true>(t); }

}  // namespace pllm::kern
