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
#include "quant/blocks.h"

namespace pllm::kern {

namespace {

constexpr int kPanel = 16;   // rows per panel (zmm lanes)
constexpr int kPanels = 4;   // panels per packing group
constexpr int kKb = 32;      // blocks per K chunk
constexpr int kSuper = 64;   // tokens per activation-prep super-tile
constexpr int kTile = 8;     // tokens per micro-kernel call

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

struct Panel {
  alignas(64) uint32_t q[kKb][8][kPanel];  // [block][group][row]: 4 unsigned quant bytes
  alignas(64) float d[kKb][kPanel];        // weight scale
  alignas(64) float m[kKb][kPanel];        // weight min (Q4_1 only)
};

// 16 packed bytes -> unsigned quants: lo = low nibbles (elements 0..15), hi = high (16..31).
inline void nibbles(const uint8_t* p, __m128i& lo, __m128i& hi) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), m4 = _mm_set1_epi8(0x0F);
  lo = _mm_and_si128(v, m4);
  hi = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
}

// v[i]: the 4 groups (dwords) of row i -> dst[g * stride]: group g of rows 0..3.
inline void transpose4_store(const __m128i v[4], uint32_t* dst, size_t stride) {
  const __m128i t0 = _mm_unpacklo_epi32(v[0], v[1]), t1 = _mm_unpacklo_epi32(v[2], v[3]);
  const __m128i t2 = _mm_unpackhi_epi32(v[0], v[1]), t3 = _mm_unpackhi_epi32(v[2], v[3]);
  _mm_store_si128(reinterpret_cast<__m128i*>(dst), _mm_unpacklo_epi64(t0, t1));
  _mm_store_si128(reinterpret_cast<__m128i*>(dst + stride), _mm_unpackhi_epi64(t0, t1));
  _mm_store_si128(reinterpret_cast<__m128i*>(dst + 2 * stride), _mm_unpacklo_epi64(t2, t3));
  _mm_store_si128(reinterpret_cast<__m128i*>(dst + 3 * stride), _mm_unpackhi_epi64(t2, t3));
}

// Per-type traits: block layouts, how to unpack a weight block to 32 unsigned bytes,
// and the activation block's scale / offset-correction / min term.
struct Q40 {
  using W = block_q4_0;
  using A = block_q8_0;
  static constexpr bool kMin = false;
  static constexpr int kOffset = 8;
  static void unpack(const W& b, __m128i& lo, __m128i& hi, float& d, float& m) {
    nibbles(b.qs, lo, hi);
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
  static constexpr int kOffset = 128;
  static void unpack(const W& b, __m128i& lo, __m128i& hi, float& d, float& m) {
    const __m128i bias = _mm_set1_epi8(static_cast<char>(0x80));  // w + 128 as unsigned
    lo = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)), bias);
    hi = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16)), bias);
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
  static void unpack(const W& b, __m128i& lo, __m128i& hi, float& d, float& m) {
    nibbles(b.qs, lo, hi);
    d = h2f(b.d);
    m = h2f(b.m);
  }
  static float act_d(const A& a) { return a.d; }
  static float act_s(const A& a) { return a.s; }
};

// Sum of the 32 signed activation bytes.
inline int32_t sum32_bytes(const int8_t* qs) {
  const __m256i v = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs)),
                                     _mm256_set1_epi8(static_cast<char>(0x80)));  // a + 128
  const __m256i s = _mm256_sad_epu8(v, _mm256_setzero_si256());
  const __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  return static_cast<int32_t>(_mm_cvtsi128_si64(t) + _mm_extract_epi64(t, 1)) - 32 * 128;
}

// Rows in quads: unpack 4 rows' block to (groups 0-3, groups 4-7) vectors, then a 4x4
// dword transpose writes group g of the 4 rows with one 16-byte store.
template <class T>
void pack_panel(const uint8_t* w, size_t w_stride, int nr, int kb0, int kbn, Panel& P) {
  for (int r4 = 0; r4 < kPanel; r4 += 4) {
    // The weights come from DRAM once per call: prefetch the next quad's rows (may run
    // past the panel or the matrix; prefetches never fault).
    for (int i = 0; i < 4; ++i) {
      const uintptr_t ahead = reinterpret_cast<uintptr_t>(w) + (r4 + 4 + i) * w_stride + kb0 * sizeof(typename T::W);
      for (size_t off = 0; off < kbn * sizeof(typename T::W); off += 64)
        __builtin_prefetch(reinterpret_cast<const void*>(ahead + off));
    }
    for (int kb = 0; kb < kbn; ++kb) {
      __m128i lo[4], hi[4];
      for (int i = 0; i < 4; ++i) {
        const int r = r4 + i;
        if (r < nr) {
          const typename T::W* blk = reinterpret_cast<const typename T::W*>(w + r * w_stride) + kb0 + kb;
          T::unpack(*blk, lo[i], hi[i], P.d[kb][r], P.m[kb][r]);
        } else {
          lo[i] = hi[i] = _mm_setzero_si128();
          P.d[kb][r] = 0.0f;
          P.m[kb][r] = 0.0f;
        }
      }
      transpose4_store(lo, &P.q[kb][0][r4], kPanel);
      transpose4_store(hi, &P.q[kb][4][r4], kPanel);
    }
  }
}

// The same panel from load-time repacked weights (quant/panel.h): w is the 16-row panel
// (nr == 16), blocks pbb bytes apart. Q4 vectors split into their low / high nibble
// groups; Q8_0 bytes are already w + 128.
template <class T>
void pack_from_repacked(const uint8_t* w, int kb0, int kbn, Panel& P) {
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

template <class T>
void micro_n(int nx, const Panel& P, int kbn, const uint8_t* const* arow, const ActPrep& ap, int t0, float* out,
             int64_t os, __mmask16 mask, bool acc) {
  switch (nx) {
    case 1: micro<T, 1>(P, kbn, arow, ap, t0, out, os, mask, acc); break;
    case 2: micro<T, 2>(P, kbn, arow, ap, t0, out, os, mask, acc); break;
    case 3: micro<T, 3>(P, kbn, arow, ap, t0, out, os, mask, acc); break;
    case 4: micro<T, 4>(P, kbn, arow, ap, t0, out, os, mask, acc); break;
    case 5: micro<T, 5>(P, kbn, arow, ap, t0, out, os, mask, acc); break;
    case 6: micro<T, 6>(P, kbn, arow, ap, t0, out, os, mask, acc); break;
    case 7: micro<T, 7>(P, kbn, arow, ap, t0, out, os, mask, acc); break;
    default: micro<T, 8>(P, kbn, arow, ap, t0, out, os, mask, acc); break;
  }
}


// The micro-kernel as drivers/gemm_panels.h wants it.
struct Tiles {
  static constexpr int kPanel = pllm::kern::kPanel, kPanels = pllm::kern::kPanels, kKb = pllm::kern::kKb;
  static constexpr int kSuper = pllm::kern::kSuper, kTile = pllm::kern::kTile;
  static_assert(kTile <= 8, "micro_n handles up to 8 tokens");
  using Panel = pllm::kern::Panel;
  using Mask = __mmask16;
  static Mask mask(int nr) { return static_cast<__mmask16>((1u << nr) - 1); }
  template <class T>
  static void pack(const uint8_t* w, size_t w_stride, int nr, int kb0, int kbn, Panel& P) {
    pack_panel<T>(w, w_stride, nr, kb0, kbn, P);
  }
  template <class T>
  static void pack_repacked(const uint8_t* w, int kb0, int kbn, Panel& P) { pack_from_repacked<T>(w, kb0, kbn, P); }
  template <class T>
  static void micro(int nx, const Panel& P, int kbn, const uint8_t* const* arow, const ActPrep& ap, int t0, float* out,
                    int64_t os, Mask mask, bool acc) {
    micro_n<T>(nx, P, kbn, arow, ap, t0, out, os, mask, acc);
  }
  static int32_t sum32(const int8_t* qs) { return sum32_bytes(qs); }
};

}  // namespace

void fill_gemm_avx512(KernelTable& t) {
  fill_gemm_vec_dot_loop(t, Isa::avx512);
  t.types[static_cast<uint32_t>(TensorType::Q4_0)].gemm_q8 = drivers::gemm_q8<Tiles, Q40>;
  t.types[static_cast<uint32_t>(TensorType::Q8_0)].gemm_q8 = drivers::gemm_q8<Tiles, Q80>;
  t.types[static_cast<uint32_t>(TensorType::Q4_1)].gemm_q8 = drivers::gemm_q8<Tiles, Q41>;
  t.types[static_cast<uint32_t>(TensorType::Q4_0)].gemm_q8_panels = drivers::gemm_q8<Tiles, Q40, true>;
  t.types[static_cast<uint32_t>(TensorType::Q8_0)].gemm_q8_panels = drivers::gemm_q8<Tiles, Q80, true>;
  t.types[static_cast<uint32_t>(TensorType::Q4_1)].gemm_q8_panels = drivers::gemm_q8<Tiles, Q41, true>;
}

}  // namespace pllm::kern
