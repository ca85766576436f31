// int16 activations over load-time repacked 16-row panels (quant/panel.h) on AVX-512 VNNI:
// TypeKernels::gemm_i16_panels for Q4_0, Q4_1 and Q8_0, every activation-row count (decode,
// batched decode, prefill). Compiled with the avx512.cpp flags; used only after dispatch.cpp
// has checked the CPU.
//
// Why: vec_dot_i16act_tile and drivers/i16_gemm.h read the file's row layout, so each call
// decodes the weight blocks and moves codes of different rows into place (the tile's
// transposing add tree, the GEMM's 16 x 16 shuffle transposition and its scalar scale
// gathers). In a panel, 64-byte vector v already holds 4 consecutive codes of each of the 16
// rows in dword lane i = row i. One vpshufb per code pair spreads two of those bytes into the
// two words of the lane: lane i = (code 2k, code 2k + 1) of row i, which is what vpdpwssd
// multiplies with a broadcast activation pair. So a panel block (16 rows x 32 elements) is
// 16 code vectors after about 24 instructions, and each activation row then costs 16 vpdpwssd
// (their broadcasts folded into the instruction) plus the block's scaling; nothing is
// transposed or summed across lanes.
//
// Results: bit for bit vec_dot_i16act_tile's (tests/cpp/test_i16act.cpp). The arithmetic is
// drivers/i16_gemm.h's, which documents the tile's order: per (row, activation row, unit) two
// exact int32 halves, elements {0-7, 16-23} (code groups 0, 1, 4, 5) and {8-15, 24-31}
// (groups 2, 3, 6, 7), converted and added in f32, FMA'd into unit accumulator u % 8 with
// scale * d_a, then the min term; the 8 accumulators summed per slice of kI16Slice units as
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), the slices added to out in order.
// Integer sums are exact here too (|code| <= 128, 16 products per half), so only the f32 steps
// had to be the same, and they are.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/drivers/i16_tile.h"  // kI16Slice
#include "kernels/internal.h"
#include "kernels/x86/simd_avx512.h"
#include "quant/blocks.h"
#include "quant/panel.h"

namespace pllm::kern {

namespace {

using drivers::kI16Slice;
constexpr int kR = kPanelRows;  // 16 rows: one per int32 lane
constexpr int kPass = 32;       // activation rows per pass (unit accumulators: 32 x 8 x 16 f32, 16 KiB)
constexpr int kTileX = 4;       // activation rows per register tile
constexpr int kAhead = 8;       // software prefetch distance, panel blocks

PLLM_AI __m512i load512(const void* p) { return _mm512_loadu_si512(p); }

// vpshufb controls (within each 128-bit lane, dword j = row 4L + j): bytes 4j + 2k and
// 4j + 2k + 1 of a code vector to the low bytes (zero-extended words) of dword j, or to the
// high bytes (words = code << 8, for a sign-extending shift). Index [2 * high + k].
struct PairControls {
  alignas(64) int8_t c[4][64];
  constexpr PairControls() : c{} {
    for (int v = 0; v < 4; ++v)
      for (int i = 0; i < 64; ++i) {
        const int k = v % 2, j = (i % 16) / 4, b = i % 4;  // dword j of the 128-bit lane, byte b of it
        const bool code_byte = (b % 2 == 1) == (v >= 2);
        c[v][i] = code_byte ? int8_t(4 * j + 2 * k + b / 2) : int8_t(-128);
      }
  }
};
constexpr PairControls kPairs;
PLLM_AI __m512i pair_ctl(int k, bool high) { return _mm512_load_si512(kPairs.c[2 * high + k]); }

// A panel block's codes: w[2g + k] = pair k (codes 4g + 2k, 4g + 2k + 1) of group g, lane i =
// row i; sc, mn: the rows' per-block factors (the tile's scale and min of the unit).
struct Codes {
  __m512i w[16];
  __m512 sc, mn;
};

// Q4 nibble vectors at qs (4 x 64 bytes): vector v holds group v in its low and v + 4 in its
// high nibbles. Zero-extended words, so a shift right by 4 leaves the high nibble alone.
PLLM_AI void q4_codes(const uint8_t* qs, Codes& c) {
  const __m512i p0 = pair_ctl(0, false), p1 = pair_ctl(1, false), m4 = _mm512_set1_epi16(0x0F);
  for (int v = 0; v < 4; ++v) {
    const __m512i n = load512(qs + 64 * v);
    const __m512i b0 = _mm512_shuffle_epi8(n, p0), b1 = _mm512_shuffle_epi8(n, p1);
    c.w[2 * v] = _mm512_and_si512(b0, m4);
    c.w[2 * v + 1] = _mm512_and_si512(b1, m4);
    c.w[2 * (v + 4)] = _mm512_srli_epi16(b0, 4);
    c.w[2 * (v + 4) + 1] = _mm512_srli_epi16(b1, 4);
  }
}

PLLM_AI __m512 scales16(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// x = d * (q - 8) = d * q + (-8 d)
struct PQ4_0 {
  static constexpr size_t kBlock = kR * sizeof(block_q4_0);
  static constexpr bool kMin = true, kOne = true;
  static PLLM_AI void decode(const uint8_t* p, Codes& c) {
    c.sc = scales16(p);
    c.mn = _mm512_mul_ps(c.sc, _mm512_set1_ps(-8.0f));
    q4_codes(p + 32, c);
  }
};

// x = d * q + m
struct PQ4_1 {
  static constexpr size_t kBlock = kR * sizeof(block_q4_1);
  static constexpr bool kMin = true, kOne = true;
  static PLLM_AI void decode(const uint8_t* p, Codes& c) {
    c.sc = scales16(p);
    c.mn = scales16(p + 32);
    q4_codes(p + 64, c);
  }
};

// x = d * q; the panel stores q + 128: flipped back to q, placed in the words' high bytes and
// shifted down arithmetically (sign-extended).
struct PQ8_0 {
  static constexpr size_t kBlock = kR * sizeof(block_q8_0);
  static constexpr bool kMin = false, kOne = false;
  static PLLM_AI void decode(const uint8_t* p, Codes& c) {
    c.sc = scales16(p);
    c.mn = _mm512_setzero_ps();
    const __m512i p0 = pair_ctl(0, true), p1 = pair_ctl(1, true), flip = _mm512_set1_epi8(-128);
    for (int g = 0; g < 8; ++g) {
      const __m512i q = _mm512_xor_si512(load512(p + 32 + 64 * g), flip);
      c.w[2 * g] = _mm512_srai_epi16(_mm512_shuffle_epi8(q, p0), 8);
      c.w[2 * g + 1] = _mm512_srai_epi16(_mm512_shuffle_epi8(q, p1), 8);
    }
  }
};

// An activation pair broadcast to every lane, read through a may_alias type so that the
// compiler folds it into vpdpwssd as an embedded {1to16} memory operand.
typedef int32_t alias_i32 __attribute__((may_alias, aligned(4)));
PLLM_AI __m512i bpair(const int16_t* a) { return _mm512_set1_epi32(*reinterpret_cast<const alias_i32*>(a)); }

// NX activation rows (block b of each at a[x]) against one decoded panel block; ua[x]: the
// row's accumulator for this unit (u % 8), 16 lanes, which starts at +0 when first (the
// slice's first 8 units: what the tile's zeroed accumulator gives, without storing zeros
// first). Each half runs as two int32 chains when
// NX <= 2 (the dependent vpdpwssd chain would otherwise bound a decode step), added exactly.
template <bool kMin, bool kOne, int NX>
PLLM_AI void tile_x(const Codes& c, const block_q16* const* a, float* const* ua, bool first) {
  constexpr int C = NX <= 2 ? 2 : 1;  // chains per half
  __m512i h[2][NX][C];  // kOne (codes <= 15): h[0] holds the whole unit, see drivers/i16_gemm.h
  for (int s = 0; s < 2; ++s)
    for (int x = 0; x < NX; ++x)
      for (int j = 0; j < C; ++j) h[s][x][j] = _mm512_setzero_si512();
#pragma GCC unroll 8
  for (int g = 0; g < 8; ++g) {
    const int s = kOne ? 0 : (g >> 1) & 1;  // half A: groups 0, 1, 4, 5; half B: 2, 3, 6, 7
    const int j = C == 2 ? (g >> 2) : 0;
    for (int x = 0; x < NX; ++x)
      for (int k = 0; k < 2; ++k)
        h[s][x][j] = _mm512_dpwssd_epi32(h[s][x][j], c.w[2 * g + k], bpair(a[x]->qs + 4 * g + 2 * k));
  }
  for (int x = 0; x < NX; ++x) {
    __m512i ha = h[0][x][0], hb = h[1][x][0];
    if constexpr (C == 2) {
      ha = _mm512_add_epi32(ha, h[0][x][1]);
      hb = _mm512_add_epi32(hb, h[1][x][1]);
    }
    const __m512 t = kOne ? _mm512_cvtepi32_ps(ha) : _mm512_add_ps(_mm512_cvtepi32_ps(ha), _mm512_cvtepi32_ps(hb));
    __m512 acc = _mm512_fmadd_ps(t, _mm512_mul_ps(c.sc, _mm512_set1_ps(a[x]->d)), first ? _mm512_setzero_ps() : _mm512_load_ps(ua[x]));
    if constexpr (kMin) acc = _mm512_fmadd_ps(c.mn, _mm512_set1_ps(a[x]->d * static_cast<float>(a[x]->sum)), acc);
    _mm512_store_ps(ua[x], acc);
  }
}

template <bool kMin, bool kOne, int NX = kTileX>
PLLM_AI void tile_any(int nx, const Codes& c, const block_q16* const* a, float* const* ua, bool first) {
  if (nx == NX) return tile_x<kMin, kOne, NX>(c, a, ua, first);
  if constexpr (NX > 1) tile_any<kMin, kOne, NX - 1>(nx, c, a, ua, first);
}

// TypeKernels::gemm_i16_panels.
template <class P>
void gemm_panels(int64_t n, const void* w, int n_panels, const void* xq, size_t xs, int n_x, float* out,
                 int64_t os) {
  const int64_t nb = n / 32;
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  const uint8_t* xb = static_cast<const uint8_t*>(xq);
  alignas(64) float ua[kPass * 8 * kR];  // (activation row, unit % 8, lane)
  // Passes of activation rows outside, panels inside: a pass's rows (32 x n / 32 blocks of 72
  // bytes) stay in L1 / L2 while the panels stream past them once per pass.
  for (int x0 = 0; x0 < n_x; x0 += kPass) {
    const int nxp = n_x - x0 < kPass ? n_x - x0 : kPass;
    for (int pn = 0; pn < n_panels; ++pn) {
      const uint8_t* panel = wb + size_t(pn) * size_t(nb) * P::kBlock;
      for (int64_t s0 = 0; s0 < nb; s0 += kI16Slice) {
        const int64_t s1 = nb - s0 < kI16Slice ? nb : s0 + kI16Slice;
        for (int x = 0; x < nxp; ++x)  // the unit slots a short slice leaves untouched
          for (int64_t u = s1 - s0; u < 8; ++u) _mm512_store_ps(ua + (x * 8 + u) * kR, _mm512_setzero_ps());
        for (int64_t b = s0; b < s1; ++b) {
          // A decode step streams the weights from DRAM once; the hardware prefetcher alone
          // left half of this loop waiting on the block loads (perf, --parallel 8).
          const uint8_t* ahead = panel + size_t(b + kAhead) * P::kBlock;
          for (size_t o = 0; o < P::kBlock; o += 64) _mm_prefetch(reinterpret_cast<const char*>(ahead + o), _MM_HINT_T0);
          Codes c;
          P::decode(panel + size_t(b) * P::kBlock, c);
          for (int x = 0; x < nxp; x += kTileX) {
            const int nx = nxp - x < kTileX ? nxp - x : kTileX;
            const block_q16* a[kTileX];
            float* u[kTileX];
            for (int j = 0; j < nx; ++j) {
              a[j] = reinterpret_cast<const block_q16*>(xb + size_t(x0 + x + j) * xs) + b;
              u[j] = ua + ((x + j) * 8 + (b - s0) % 8) * kR;
            }
            tile_any<P::kMin, P::kOne>(nx, c, a, u, b - s0 < 8);
          }
        }
        for (int x = 0; x < nxp; ++x) {  // the slice's sum, in the tile's order
          auto l = [&](int k) { return _mm512_load_ps(ua + (x * 8 + k) * kR); };
          const __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(l(0), l(4)), _mm512_add_ps(l(2), l(6))),
                                         _mm512_add_ps(_mm512_add_ps(l(1), l(5)), _mm512_add_ps(l(3), l(7))));
          float* o = out + int64_t(x0 + x) * os + pn * kR;
          _mm512_storeu_ps(o, s0 == 0 ? s : _mm512_add_ps(_mm512_loadu_ps(o), s));
        }
      }
    }
  }
}

}  // namespace

void fill_i16panel_avx512(KernelTable& t) {
  t.types[int(TensorType::Q4_0)].gemm_i16_panels = gemm_panels<PQ4_0>;
  t.types[int(TensorType::Q4_1)].gemm_i16_panels = gemm_panels<PQ4_1>;
  t.types[int(TensorType::Q8_0)].gemm_i16_panels = gemm_panels<PQ8_0>;
}

}  // namespace pllm::kern
