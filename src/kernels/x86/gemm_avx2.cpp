// AVX2 prefill GEMM (TypeKernels::gemm_q8) for Q4_0, Q8_0 and Q4_1. Compiled with
// -mavx2 -mfma -mf16c; used only after dispatch.cpp has checked the CPU. Same scheme
// as gemm_avx512.cpp (read that first), with 8-row panels (ymm int32 lane i = row i)
// and no VNNI: per group of 4 elements and token,
//   Q4_0 / Q4_1: vpmaddubsw(W[g] (nibbles 0..15), broadcast(4 activation bytes)) -> i16
//                pairs, summed over the block's 8 groups in i16 (|sum| <= 8 * 2 * 15 *
//                127 = 30480, no saturation), then one vpmaddwd by 1 per block;
//   Q8_0:        the sign trick, vpmaddubsw(|w|, sign(a, w)) (pairs <= 2 * 128 * 127 =
//                32512), vpmaddwd by 1 per group. No offset correction is needed.
// Q4_0 subtracts 8 * sum(a) exactly in int32, as in the AVX-512 kernel.
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

constexpr int kPanel = 8;    // rows per panel (ymm lanes)
constexpr int kPanels = 8;   // panels per packing group
constexpr int kKb = 32;      // blocks per K chunk
constexpr int kSuper = 64;   // tokens per activation-prep super-tile
constexpr int kTile = 4;     // tokens per micro-kernel call

struct Panel {
  alignas(64) uint32_t q[kKb][8][kPanel];  // [block][group][row]: 4 quant bytes (Q8_0: signed)
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
  static constexpr bool kSigned = true;  // signed weights: sign trick, no offset
  static constexpr int kOffset = 0;
  static void unpack(const W& b, __m128i& lo, __m128i& hi, float& d, float& m) {
    lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16));
    d = Pk::h2f(b.d);
    m = 0.0f;
  }
  static float act_d(const A& a) { return Pk::h2f(a.d); }
  static float act_s(const A&) { return 0.0f; }
};
using drivers::ActPrep;

template <class T, int NX>
inline void micro(const Panel& P, int kbn, const uint8_t* const* arow, const ActPrep& ap, int t0, float* out,
                  int64_t os, __m256i mask, bool accumulate) {
  constexpr size_t kAb = sizeof(typename T::A);
  constexpr size_t kQs = offsetof(typename T::A, qs);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 f[NX];
  for (int t = 0; t < NX; ++t) f[t] = accumulate ? _mm256_maskload_ps(out + t * os, mask) : _mm256_setzero_ps();
  for (int kb = 0; kb < kbn; ++kb) {
    __m256i acc[NX];
    if constexpr (T::kSigned) {
      for (int t = 0; t < NX; ++t) acc[t] = _mm256_setzero_si256();
      for (int g = 0; g < 8; ++g) {
        const __m256i wv = _mm256_load_si256(reinterpret_cast<const __m256i*>(P.q[kb][g]));
        const __m256i wa = _mm256_sign_epi8(wv, wv);
        for (int t = 0; t < NX; ++t) {
          int32_t a4;
          std::memcpy(&a4, arow[t] + kb * kAb + kQs + 4 * g, 4);
          const __m256i p = _mm256_maddubs_epi16(wa, _mm256_sign_epi8(_mm256_set1_epi32(a4), wv));
          acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(p, ones));
        }
      }
    } else {
      for (int t = 0; t < NX; ++t) acc[t] = _mm256_setzero_si256();  // i16 pair sums here
      for (int g = 0; g < 8; ++g) {
        const __m256i wv = _mm256_load_si256(reinterpret_cast<const __m256i*>(P.q[kb][g]));
        for (int t = 0; t < NX; ++t) {
          int32_t a4;
          std::memcpy(&a4, arow[t] + kb * kAb + kQs + 4 * g, 4);
          acc[t] = _mm256_add_epi16(acc[t], _mm256_maddubs_epi16(wv, _mm256_set1_epi32(a4)));
        }
      }
      for (int t = 0; t < NX; ++t) {
        acc[t] = _mm256_madd_epi16(acc[t], ones);
        if constexpr (T::kOffset != 0) acc[t] = _mm256_add_epi32(acc[t], _mm256_set1_epi32(ap.corr[(t0 + t) * ap.ld + kb]));
      }
    }
    const __m256 d = _mm256_load_ps(P.d[kb]);
    for (int t = 0; t < NX; ++t)
      f[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[t]), _mm256_mul_ps(d, _mm256_set1_ps(ap.d[(t0 + t) * ap.ld + kb])), f[t]);
    if constexpr (T::kMin) {
      const __m256 m = _mm256_load_ps(P.m[kb]);
      for (int t = 0; t < NX; ++t) f[t] = _mm256_fmadd_ps(m, _mm256_set1_ps(ap.s[(t0 + t) * ap.ld + kb]), f[t]);
    }
  }
  for (int t = 0; t < NX; ++t) _mm256_maskstore_ps(out + t * os, mask, f[t]);
}

// The micro-kernel as drivers/gemm_panels.h wants it.
struct Tiles {
  static constexpr int kPanel = pllm::kern::kPanel, kPanels = pllm::kern::kPanels, kKb = pllm::kern::kKb;
  static constexpr int kSuper = pllm::kern::kSuper, kTile = pllm::kern::kTile;
  using Panel = pllm::kern::Panel;
  using Mask = __m256i;
  static Mask mask(int nr) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(nr), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); }
  template <class T>
  static constexpr auto pack = Pk::panel<T>;
  template <class T, int NX>
  static constexpr auto micro = pllm::kern::micro<T, NX>;
  static constexpr auto sum32 = Pk::sum32;
};

}  // namespace

void fill_gemm_avx2(KernelTable& t) { drivers::set_gemm_q8<Tiles, Q40, Q80, Q41, false>(t); }

}  // namespace pllm::kern
