// AArch64 prefill GEMM with the int8 matrix-multiply extension (FEAT_I8MM, SMMLA) for
// Q4_0, Q8_0 and Q4_1 (TypeKernels::gemm_q8 of the i8mm table; everything else in that
// table is the dotprod table). Compiled with -march=armv8.2-a+dotprod+i8mm; selected only
// when getauxval reports HWCAP2_I8MM (and dotprod). Anonymous namespace only (see avx2.cpp).
//
// vmmlaq_s32(acc, a, b): a and b each hold two rows of 8 int8 (bytes 0-7, bytes 8-15);
// acc (2x2 int32, row-major) += a * b^T, i.e. lane 2i + j += dot(a row i, b row j).
// With a = 8 quants of weight rows r, r+1 and b = the 8 activation quants of tokens t, t+1
// at the same k, one instruction adds 2 rows x 2 tokens x 8 products.
//
// Packing (per call, as gemm_dotprod.cpp):
//   weights, panels of 8 rows = 4 row pairs, K chunks of kKb blocks:
//     q[block][k-step s][pair p] = 16 bytes: quants 8s..8s+7 of row 2p, then of row 2p+1
//       (signed: Q4_0 q - 8, Q8_0 w, Q4_1 q);  d[block][p] = {d_2p, d_2p, d_2p+1, d_2p+1}, m alike;
//   activations, once per call into gemm_scratch, token pairs (an odd last token is paired
//     with zeros): q[s] = quants 8s..8s+7 of token t then t+1; d = {d_t, d_t+1, d_t, d_t+1}, s alike.
// Micro-kernel: 4 row pairs x 2 token pairs (8 rows x 4 tokens): per 8-element k-step 4 + 2
// loads and 8 SMMLA (vs 32 SDOT for the same work in gemm_dotprod.cpp). Per block the 2x2 int32
// sums (exact) are converted and FMA'd with the lane-matched scale products into 8 float32x4:
// the same float arithmetic as the SDOT kernel, so the result equals looping vec_dot up to f32
// rounding (kernels.h). Lanes of accumulator (p, q): [2p,2q] [2p,2q+1] [2p+1,2q] [2p+1,2q+1]
// (row, token); stores transpose them with vuzp1q/vuzp2q (loads back with vzip1q/vzip2q).
// gemm_q8_panels packs the same panels from load-time 16-row panels (quant/panel.h): a panel
// vector's 16-byte quarter is one 4-element group of 4 rows (32-bit word i = row i), so
// zipping the words of groups 2s and 2s + 1 gives k-step s of two row pairs; bit for bit gemm_q8.
#include <arm_neon.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/arm/int8_neon.h"
#include "kernels/internal.h"
#include "quant/blocks.h"
#include "quant/panel.h"

namespace pllm::kern {

namespace {

constexpr int kPanel = 8;   // rows per panel (4 row pairs)
constexpr int kPanels = 8;  // panels per packing group
constexpr int kKb = 32;     // blocks per K chunk

// The weight types (arm/int8_neon.h) need only the half-to-float conversion from the level.
struct Level {
  static float h2f(uint16_t h) { return static_cast<float>(std::bit_cast<__fp16>(h)); }
};
using I8 = neon_int8::Blocks<Level>;
using Q40 = I8::Gemm<I8::Q4_0>;
using Q80 = I8::Gemm<I8::Q8_0>;
using Q41 = I8::Gemm<I8::Q4_1>;

struct Panel {
  alignas(16) int8_t q[kKb][4][4][16];  // [block][k-step][row pair][2 x 8 quants]
  alignas(16) float d[kKb][4][4];       // [block][row pair][lane]
  alignas(16) float m[kKb][4][4];
};

struct ActBlock {  // one block of one token pair
  alignas(16) int8_t q[4][16];  // [k-step][2 x 8 quants]
  float d[4];
  float s[4];
};


template <class T>
void pack_panel(const uint8_t* w, size_t w_stride, int nr, int kb0, int kbn, Panel& P) {
  int8_t q[32];
  for (int r = 0; r < kPanel; ++r) {
    const int p = r / 2, h = r % 2;
    if (r >= nr) {
      for (int kb = 0; kb < kbn; ++kb) {
        for (int s = 0; s < 4; ++s) std::memset(P.q[kb][s][p] + 8 * h, 0, 8);
        P.d[kb][p][2 * h] = P.d[kb][p][2 * h + 1] = 0.0f;
        P.m[kb][p][2 * h] = P.m[kb][p][2 * h + 1] = 0.0f;
      }
      continue;
    }
    const typename T::W* blk = reinterpret_cast<const typename T::W*>(w + r * w_stride) + kb0;
    // Weights come from DRAM once per call: prefetch two rows ahead (may run past the
    // panel or the matrix; prefetches never fault).
    const uintptr_t ahead = reinterpret_cast<uintptr_t>(blk) + 2 * w_stride;
    for (size_t off = 0; off < kbn * sizeof(typename T::W); off += 64)
      __builtin_prefetch(reinterpret_cast<const void*>(ahead + off));
    for (int kb = 0; kb < kbn; ++kb) {
      float d, m;
      T::unpack(blk[kb], q, d, m);
      for (int s = 0; s < 4; ++s) std::memcpy(P.q[kb][s][p] + 8 * h, q + 8 * s, 8);
      P.d[kb][p][2 * h] = P.d[kb][p][2 * h + 1] = d;
      P.m[kb][p][2 * h] = P.m[kb][p][2 * h + 1] = m;
    }
  }
}

// Rows row0 .. row0 + 7 (row0 0 or 8) of the load-time panel at w, kbn blocks from kb0.
template <class T>
void pack_repacked(const uint8_t* w, int row0, int kb0, int kbn, Panel& P) {
  // Quarter h of the 8 rows (4 rows) = row pairs 2h, 2h + 1.
  I8::panel_half<typename T::W>(w, row0, kb0, kbn, [&](int kb, int h, const uint8_t* b, int k) {
    for (int s = 0; s < 4; ++s) {
      const int32x4_t g0 = vreinterpretq_s32_s8(T::panel_group(b + T::kPanelQs, 2 * s, k));
      const int32x4_t g1 = vreinterpretq_s32_s8(T::panel_group(b + T::kPanelQs, 2 * s + 1, k));
      vst1q_s8(P.q[kb][s][2 * h], vreinterpretq_s8_s32(vzip1q_s32(g0, g1)));
      vst1q_s8(P.q[kb][s][2 * h + 1], vreinterpretq_s8_s32(vzip2q_s32(g0, g1)));
    }
    const float32x4_t d = I8::panel_f16x4(b, k);
    vst1q_f32(P.d[kb][2 * h], vzip1q_f32(d, d));
    vst1q_f32(P.d[kb][2 * h + 1], vzip2q_f32(d, d));
    if constexpr (T::kMin) {  // (the micro-kernel reads P.m for these types only)
      const float32x4_t m = I8::panel_f16x4(b + 32, k);
      vst1q_f32(P.m[kb][2 * h], vzip1q_f32(m, m));
      vst1q_f32(P.m[kb][2 * h + 1], vzip2q_f32(m, m));
    }
  });
}

// Token pair (t, t + 1) of the activation rows -> nb ActBlocks; t1 == nullptr: zeros.
template <class T>
void pack_act_pair(const typename T::A* t0, const typename T::A* t1, int nb, ActBlock* out) {
  for (int kb = 0; kb < nb; ++kb) {
    ActBlock& o = out[kb];
    const int64x2_t a0 = vreinterpretq_s64_s8(vld1q_s8(t0[kb].qs));
    const int64x2_t a1 = vreinterpretq_s64_s8(vld1q_s8(t0[kb].qs + 16));
    const int64x2_t b0 = t1 ? vreinterpretq_s64_s8(vld1q_s8(t1[kb].qs)) : vdupq_n_s64(0);
    const int64x2_t b1 = t1 ? vreinterpretq_s64_s8(vld1q_s8(t1[kb].qs + 16)) : vdupq_n_s64(0);
    vst1q_s8(o.q[0], vreinterpretq_s8_s64(vzip1q_s64(a0, b0)));
    vst1q_s8(o.q[1], vreinterpretq_s8_s64(vzip2q_s64(a0, b0)));
    vst1q_s8(o.q[2], vreinterpretq_s8_s64(vzip1q_s64(a1, b1)));
    vst1q_s8(o.q[3], vreinterpretq_s8_s64(vzip2q_s64(a1, b1)));
    const float d0 = T::act_d(t0[kb]), d1 = t1 ? T::act_d(t1[kb]) : 0.0f;
    const float s0 = T::act_s(t0[kb]), s1 = t1 ? T::act_s(t1[kb]) : 0.0f;
    o.d[0] = o.d[2] = d0;
    o.d[1] = o.d[3] = d1;
    o.s[0] = o.s[2] = s0;
    o.s[1] = o.s[3] = s1;
  }
}

// 8 rows (nr valid) x 2 * NQ tokens (nt valid) over kbn blocks; ap[q] = token pair q at the
// chunk's first block. accumulate: add to what out holds (later K chunks).
template <class T, int NQ>
void micro(const Panel& P, int kbn, const ActBlock* const* ap, float* out, int64_t os, int nr, int nt,
           bool accumulate) {
  float32x4_t f[4][NQ];
  for (int q = 0; q < NQ; ++q) {
    if (accumulate) {
      float rows[2][kPanel] = {};
      for (int u = 0; u < 2; ++u)
        if (2 * q + u < nt) std::memcpy(rows[u], out + (2 * q + u) * os, sizeof(float) * nr);
      for (int h = 0; h < 2; ++h) {
        const float32x4_t a = vld1q_f32(rows[0] + 4 * h), b = vld1q_f32(rows[1] + 4 * h);
        f[2 * h][q] = vzip1q_f32(a, b);
        f[2 * h + 1][q] = vzip2q_f32(a, b);
      }
    } else {
      for (int p = 0; p < 4; ++p) f[p][q] = vdupq_n_f32(0.0f);
    }
  }
  for (int kb = 0; kb < kbn; ++kb) {
    int32x4_t acc[4][NQ];
    for (int p = 0; p < 4; ++p)
      for (int q = 0; q < NQ; ++q) acc[p][q] = vdupq_n_s32(0);
    for (int s = 0; s < 4; ++s) {
      const int8x16_t w0 = vld1q_s8(P.q[kb][s][0]), w1 = vld1q_s8(P.q[kb][s][1]);
      const int8x16_t w2 = vld1q_s8(P.q[kb][s][2]), w3 = vld1q_s8(P.q[kb][s][3]);
      for (int q = 0; q < NQ; ++q) {
        const int8x16_t a = vld1q_s8(ap[q][kb].q[s]);
        acc[0][q] = vmmlaq_s32(acc[0][q], w0, a);
        acc[1][q] = vmmlaq_s32(acc[1][q], w1, a);
        acc[2][q] = vmmlaq_s32(acc[2][q], w2, a);
        acc[3][q] = vmmlaq_s32(acc[3][q], w3, a);
      }
    }
    for (int q = 0; q < NQ; ++q) {
      const float32x4_t ad = vld1q_f32(ap[q][kb].d);
      for (int p = 0; p < 4; ++p)
        f[p][q] = vfmaq_f32(f[p][q], vcvtq_f32_s32(acc[p][q]), vmulq_f32(vld1q_f32(P.d[kb][p]), ad));
      if constexpr (T::kMin) {
        const float32x4_t as = vld1q_f32(ap[q][kb].s);
        for (int p = 0; p < 4; ++p) f[p][q] = vfmaq_f32(f[p][q], vld1q_f32(P.m[kb][p]), as);
      }
    }
  }
  for (int q = 0; q < NQ; ++q) {
    float rows[2][kPanel];
    vst1q_f32(rows[0], vuzp1q_f32(f[0][q], f[1][q]));
    vst1q_f32(rows[0] + 4, vuzp1q_f32(f[2][q], f[3][q]));
    vst1q_f32(rows[1], vuzp2q_f32(f[0][q], f[1][q]));
    vst1q_f32(rows[1] + 4, vuzp2q_f32(f[2][q], f[3][q]));
    for (int u = 0; u < 2; ++u)
      if (2 * q + u < nt) std::memcpy(out + (2 * q + u) * os, rows[u], sizeof(float) * nr);
  }
}

// Repacked: w holds load-time 16-row panels (n_rows a multiple of 16; kernels.h gemm_q8_panels).
template <class T, bool Repacked = false>
void gemm(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t xq_stride, int n_x,
          float* out, int64_t out_stride) {
  const int nb = static_cast<int>(n / 32);
  const int npairs = (n_x + 1) / 2;
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  const uint8_t* xb = static_cast<const uint8_t*>(xq);
  ActBlock* act = static_cast<ActBlock*>(gemm_scratch(size_t(npairs) * nb * sizeof(ActBlock)));
  for (int pr = 0; pr < npairs; ++pr) {
    const int t = 2 * pr;
    const auto* a0 = reinterpret_cast<const typename T::A*>(xb + t * xq_stride);
    const auto* a1 = t + 1 < n_x ? reinterpret_cast<const typename T::A*>(xb + (t + 1) * xq_stride) : nullptr;
    pack_act_pair<T>(a0, a1, nb, act + int64_t(pr) * nb);
  }
  Panel panels[kPanels];
  for (int rg = 0; rg < n_rows; rg += kPanel * kPanels) {
    const int nrg = n_rows - rg < kPanel * kPanels ? n_rows - rg : kPanel * kPanels;
    const int np = (nrg + kPanel - 1) / kPanel;
    for (int kb0 = 0; kb0 < nb; kb0 += kKb) {
      const int kbn = nb - kb0 < kKb ? nb - kb0 : kKb;
      for (int p = 0; p < np; ++p) {
        const int nr = nrg - p * kPanel < kPanel ? nrg - p * kPanel : kPanel;
        const int r = rg + p * kPanel;
        if constexpr (Repacked)
          pack_repacked<T>(wb + size_t(r / kPanelRows) * kPanelRows * w_stride, r % kPanelRows, kb0, kbn, panels[p]);
        else pack_panel<T>(wb + r * w_stride, w_stride, nr, kb0, kbn, panels[p]);
      }
      for (int p = 0; p < np; ++p) {
        const int nr = nrg - p * kPanel < kPanel ? nrg - p * kPanel : kPanel;
        for (int t0 = 0; t0 < n_x; t0 += 4) {
          const int nt = n_x - t0 < 4 ? n_x - t0 : 4;
          const ActBlock* ap[2] = {act + int64_t(t0 / 2) * nb + kb0,
                                   act + int64_t(t0 / 2 + (nt > 2 ? 1 : 0)) * nb + kb0};
          float* o = out + t0 * out_stride + rg + p * kPanel;
          if (nt <= 2) micro<T, 1>(panels[p], kbn, ap, o, out_stride, nr, nt, kb0 > 0);
          else micro<T, 2>(panels[p], kbn, ap, o, out_stride, nr, nt, kb0 > 0);
        }
      }
    }
  }
}

}  // namespace

void fill_gemm_neon_i8mm(KernelTable& t) {
  t.types[static_cast<uint32_t>(TensorType::Q4_0)].gemm_q8 = gemm<Q40>;
  t.types[static_cast<uint32_t>(TensorType::Q8_0)].gemm_q8 = gemm<Q80>;
  t.types[static_cast<uint32_t>(TensorType::Q4_1)].gemm_q8 = gemm<Q41>;
  t.types[static_cast<uint32_t>(TensorType::Q4_0)].gemm_q8_panels = gemm<Q40, true>;
  t.types[static_cast<uint32_t>(TensorType::Q8_0)].gemm_q8_panels = gemm<Q80, true>;
  t.types[static_cast<uint32_t>(TensorType::Q4_1)].gemm_q8_panels = gemm<Q41, true>;
}

}  // namespace pllm::kern
