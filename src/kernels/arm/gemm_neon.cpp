// AArch64 prefill GEMM (TypeKernels::gemm_q8). Compiled with -march=armv8.2-a+dotprod.
//   fill_gemm_neon:         baseline NEON (no SDOT): the ISA's vec_dot in a loop. It only
//                           stores function pointers, so running it on a CPU without
//                           dotprod is safe although this file is built with +dotprod.
//   fill_gemm_neon_dotprod: tiled SDOT kernels for Q4_0, Q8_0 and Q4_1 (selected only
//                           when getauxval reports ASIMDDP).
//
// Scheme (as x86/gemm_avx512.cpp, read that first): weights repacked per call into
// panels of 8 rows; for every block and group g of 4 elements one 32-byte pair of
// int8x16 vectors holds those 4 quants of rows 0-3 and 4-7 (signed: Q4_0 q - 8, Q8_0 w,
// Q4_1 q). The token's 32 activation bytes sit in two int8x16 registers and
//   vdotq_laneq_s32(acc, W[g], a, g % 4)
// adds group g's 4-byte dot for 4 rows in one instruction: 16 SDOT per (8 rows x 1 token
// x 32 elements), no horizontal sums, no offset corrections (SDOT is signed x signed).
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

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

inline float h2f(uint16_t h) {
  __fp16 v;
  __builtin_memcpy(&v, &h, 2);
  return static_cast<float>(v);
}

struct Panel {
  alignas(16) int8_t q[kKb][8][kPanel][4];  // [block][group][row][4 signed quants]
  alignas(16) float d[kKb][kPanel];
  alignas(16) float m[kKb][kPanel];
};

struct Q40 {
  using W = block_q4_0;
  using A = block_q8_0;
  static constexpr bool kMin = false;
  static constexpr int kOffset = 0;  // SDOT is signed x signed: no unsigned offset
  static void unpack(const W& b, int8_t q[32], float& d, float& m) {
    const uint8x16_t v = vld1q_u8(b.qs);
    const int8x16_t eight = vdupq_n_s8(8);
    vst1q_s8(q, vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F))), eight));
    vst1q_s8(q + 16, vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), eight));
    d = h2f(b.d);
    m = 0.0f;
  }
  static float act_d(const A& a) { return h2f(a.d); }
  static float act_s(const A&) { return 0.0f; }
};
struct Q80 {
  using W = block_q8_0;
  using A = block_q8_0;
  static constexpr bool kMin = false;
  static constexpr int kOffset = 0;  // SDOT is signed x signed: no unsigned offset
  static void unpack(const W& b, int8_t q[32], float& d, float& m) {
    std::memcpy(q, b.qs, 32);
    d = h2f(b.d);
    m = 0.0f;
  }
  static float act_d(const A& a) { return h2f(a.d); }
  static float act_s(const A&) { return 0.0f; }
};
struct Q41 {
  using W = block_q4_1;
  using A = block_q8_1;
  static constexpr bool kMin = true;
  static constexpr int kOffset = 0;
  static void unpack(const W& b, int8_t q[32], float& d, float& m) {
    const uint8x16_t v = vld1q_u8(b.qs);
    vst1q_s8(q, vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F))));
    vst1q_s8(q + 16, vreinterpretq_s8_u8(vshrq_n_u8(v, 4)));
    d = h2f(b.d);
    m = h2f(b.m);
  }
  static float act_d(const A& a) { return a.d; }
  static float act_s(const A& a) { return a.s; }
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

template <class T>
void micro_n(int nx, const Panel& P, int kbn, const uint8_t* const* arow, const ActPrep& ap, int t0, float* out,
             int64_t os, int nr, bool acc) {
  switch (nx) {
    case 1: micro<T, 1>(P, kbn, arow, ap, t0, out, os, nr, acc); break;
    case 2: micro<T, 2>(P, kbn, arow, ap, t0, out, os, nr, acc); break;
    case 3: micro<T, 3>(P, kbn, arow, ap, t0, out, os, nr, acc); break;
    default: micro<T, 4>(P, kbn, arow, ap, t0, out, os, nr, acc); break;
  }
}


// The micro-kernel as drivers/gemm_panels.h wants it.
struct Tiles {
  static constexpr int kPanel = pllm::kern::kPanel, kPanels = pllm::kern::kPanels, kKb = pllm::kern::kKb;
  static constexpr int kSuper = pllm::kern::kSuper, kTile = pllm::kern::kTile;
  static_assert(kTile <= 4, "micro_n handles up to 4 tokens");
  using Panel = pllm::kern::Panel;
  using Mask = int;
  static Mask mask(int nr) { return nr; }
  template <class T>
  static void pack(const uint8_t* w, size_t w_stride, int nr, int kb0, int kbn, Panel& P) {
    pack_panel<T>(w, w_stride, nr, kb0, kbn, P);
  }
  template <class T>
  static void micro(int nx, const Panel& P, int kbn, const uint8_t* const* arow, const ActPrep& ap, int t0, float* out,
                    int64_t os, Mask mask, bool acc) {
    micro_n<T>(nx, P, kbn, arow, ap, t0, out, os, mask, acc);
  }
};

}  // namespace

void fill_gemm_neon(KernelTable& t) { fill_gemm_vec_dot_loop(t, Isa::neon); }

void fill_gemm_neon_dotprod(KernelTable& t) {
  fill_gemm_vec_dot_loop(t, Isa::neon_dotprod);
  t.types[static_cast<uint32_t>(TensorType::Q4_0)].gemm_q8 = drivers::gemm_q8<Tiles, Q40>;
  t.types[static_cast<uint32_t>(TensorType::Q8_0)].gemm_q8 = drivers::gemm_q8<Tiles, Q80>;
  t.types[static_cast<uint32_t>(TensorType::Q4_1)].gemm_q8 = drivers::gemm_q8<Tiles, Q41>;
}

}  // namespace pllm::kern
