// AVX-512 VNNI prefill GEMM (TypeKernels::gemm_q8) for Q4_0, Q8_0 (Q8_0 activations)
// and Q4_1 (Q8_1 activations). Compiled with the avx512.cpp flags; used only after
// dispatch.cpp has checked the CPU. Other types keep the vec_dot loop.
//
// Scheme: the weight rows are repacked on the fly (per call, into a stack buffer) into
// panels of 16 rows in which the zmm int32 lane i belongs to row i: for every block and
// every group g of 4 consecutive elements (4g..4g+3), one 64-byte vector holds those 4
// quants of all 16 rows as unsigned bytes (Q4: the nibble 0..15; Q8_0: w + 128). Then
//   vpdpbusd(acc, W[g], broadcast(4 activation bytes of group g of token x))
// accumulates the block's 16 row dot products for token x in one instruction per group,
// with no horizontal sums: 8 vpdpbusd per (16 rows x 1 token x 32 elements). The
// unsigned offset (8 or 128) times the activation block sum is subtracted exactly by
// starting the accumulator at -offset * sum(a), so the integer block sums equal
// vec_dot's. Per block and token the float work is one cvt + mul + fma on 16 rows.
// The repacking is amortised over all n_x tokens: the kernel wants many tokens per call.
//
// Loops: the per-(token, block) activation scales / sums are computed once per call
// (gemm_scratch); row groups of up to 64 rows (4 panels) x K chunks of 32 blocks are
// packed once (on the stack); then each panel runs against tiles of up to 8 tokens.
// Partial K chunks accumulate in out (first chunk stores, later chunks add).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/drivers/gemm_panels.h"
#include "kernels/internal.h"
#include "kernels/x86/gemm_pack_x86.h"
#include "quant/blocks.h"

namespace pllm::kern {

namespace {

constexpr int kPanel = 16;   // rows per panel (zmm lanes)
constexpr int kPanels = 4;   // panels per packing group
constexpr int kKb = 32;      // blocks per K chunk
constexpr int kSuper = 64;   // tokens per activation-prep super-tile
constexpr int kTile = 8;     // tokens per micro-kernel call

struct Panel {
  alignas(64) uint32_t q[kKb][8][kPanel];  // [block][group][row]: 4 unsigned quant bytes
  alignas(64) float d[kKb][kPanel];        // weight scale
  alignas(64) float m[kKb][kPanel];        // weight min (Q4_1 only)
};

using Pk = x86_gemm::Pack<Panel, kPanel>;  // panel packing, Q4_0 / Q4_1, sum32 (gemm_pack_x86.h)
using Q40 = Pk::Q40;
using Q41 = Pk::Q41;
struct Q80 {
  using W = block_q8_0;
  using A = block_q8_0;
  static constexpr bool kMin = false;
  static constexpr int kOffset = 128;
  static void unpack(const W& b, __m128i& lo, __m128i& hi, float& d, float& m) {
    const __m128i bias = _mm_set1_epi8(static_cast<char>(0x80));  // w + 128 as unsigned
    lo = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)), bias);
    hi = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16)), bias);
    d = Pk::h2f(b.d);
    m = 0.0f;
  }
  static float act_d(const A& a) { return Pk::h2f(a.d); }
  static float act_s(const A&) { return 0.0f; }
};

// The same panel from load-time repacked weights (quant/panel.h): w is the 16-row panel
// (nr == 16; row0 == 0, as both panels are 16 rows), blocks pbb bytes apart. Q4 vectors split
// into their low / high nibble groups; Q8_0 bytes are already w + 128.
template <class T>
void pack_from_repacked(const uint8_t* w, int /*row0*/, int kb0, int kbn, Panel& P) {
  constexpr size_t kPbb = kPanel * sizeof(typename T::W);
  constexpr size_t kQ = T::kMin ? 64 : 32;  // scales (and mins) come first
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  for (int kb = 0; kb < kbn; ++kb) {
    const uint8_t* b = w + size_t(kb0 + kb) * kPbb;
    _mm512_store_ps(P.d[kb], _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b))));
    if constexpr (T::kMin)
      _mm512_store_ps(P.m[kb], _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 32))));
    if constexpr (T::kOffset == 128) {
      for (int g = 0; g < 8; ++g) _mm512_store_si512(P.q[kb][g], _mm512_loadu_si512(b + kQ + 64 * g));
    } else {
      for (int v = 0; v < 4; ++v) {
        const __m512i q = _mm512_loadu_si512(b + kQ + 64 * v);
        _mm512_store_si512(P.q[kb][v], _mm512_and_si512(q, m4));
        _mm512_store_si512(P.q[kb][v + 4], _mm512_and_si512(_mm512_srli_epi16(q, 4), m4));
      }
    }
  }
}

using drivers::ActPrep;

template <class T, int NX>
inline void micro(const Panel& P, int kbn, const uint8_t* const* arow, const ActPrep& ap, int t0, float* out,
                  int64_t os, __mmask16 mask, bool accumulate) {
  constexpr size_t kAb = sizeof(typename T::A);
  constexpr size_t kQs = offsetof(typename T::A, qs);
  __m512 f[NX];
  for (int t = 0; t < NX; ++t) f[t] = accumulate ? _mm512_maskz_loadu_ps(mask, out + t * os) : _mm512_setzero_ps();
  for (int kb = 0; kb < kbn; ++kb) {
    __m512i acc[NX];
    for (int t = 0; t < NX; ++t)
      acc[t] = T::kOffset ? _mm512_set1_epi32(ap.corr[(t0 + t) * ap.ld + kb]) : _mm512_setzero_si512();
    for (int g = 0; g < 8; ++g) {
      const __m512i wv = _mm512_load_si512(P.q[kb][g]);
      for (int t = 0; t < NX; ++t) {
        int32_t a4;
        std::memcpy(&a4, arow[t] + kb * kAb + kQs + 4 * g, 4);
        acc[t] = _mm512_dpbusd_epi32(acc[t], wv, _mm512_set1_epi32(a4));
      }
    }
    const __m512 d = _mm512_load_ps(P.d[kb]);
    for (int t = 0; t < NX; ++t)
      f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[t]), _mm512_mul_ps(d, _mm512_set1_ps(ap.d[(t0 + t) * ap.ld + kb])), f[t]);
    if constexpr (T::kMin) {
      const __m512 m = _mm512_load_ps(P.m[kb]);
      for (int t = 0; t < NX; ++t) f[t] = _mm512_fmadd_ps(m, _mm512_set1_ps(ap.s[(t0 + t) * ap.ld + kb]), f[t]);
    }
  }
  for (int t = 0; t < NX; ++t) _mm512_mask_storeu_ps(out + t * os, mask, f[t]);
}

// The micro-kernel as drivers/gemm_panels.h wants it.
struct Tiles {
  static constexpr int kPanel = pllm::kern::kPanel, kPanels = pllm::kern::kPanels, kKb = pllm::kern::kKb;
  static constexpr int kSuper = pllm::kern::kSuper, kTile = pllm::kern::kTile;
  using Panel = pllm::kern::Panel;
  using Mask = __mmask16;
  static Mask mask(int nr) { return static_cast<__mmask16>((1u << nr) - 1); }
  template <class T>
  static constexpr auto pack = Pk::panel<T>;
  template <class T>
  static constexpr auto pack_repacked = pack_from_repacked<T>;
  template <class T, int NX>
  static constexpr auto micro = pllm::kern::micro<T, NX>;
  static constexpr auto sum32 = Pk::sum32;
};

}  // namespace

void fill_gemm_avx512(KernelTable& t) { drivers::set_gemm_q8<Tiles, Q40, Q80, Q41, true>(t); }

}  // namespace pllm::kern
