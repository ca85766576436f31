// Panel packing of the x86 prefill GEMMs (gemm_avx2.cpp: 8-row panels, gemm_avx512.cpp:
// 16-row panels), written once: the panel holds, per block and group g of 4 elements, those
// 4 quant bytes of every row as one dword lane (the scheme is in gemm_avx512.cpp's header).
// Also the weight types whose packed quants are the same for both (Q4_0, Q4_1: unsigned
// nibbles) and the activation block sum the offset correction needs.
//
// ODR: everything is a member of a template over the including file's Panel type (declared
// in its anonymous namespace), so each file's instantiations are its own, compiled with its
// -m flags; nothing here is a plain inline function the linker could share between them.
#pragma once
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "quant/blocks.h"

namespace pllm::kern::x86_gemm {

// Panel: q[kKb][8][kPanel] (uint32: 4 quant bytes), d[kKb][kPanel], m[kKb][kPanel].
template <class Panel, int kPanel>
struct Pack {
  static float h2f(uint16_t h) { return _cvtsh_ss(h); }

  // 16 packed bytes -> unsigned quants: lo = low nibbles (elements 0..15), hi = high (16..31).
  static void nibbles(const uint8_t* p, __m128i& lo, __m128i& hi) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), m4 = _mm_set1_epi8(0x0F);
    lo = _mm_and_si128(v, m4);
    hi = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
  }

  // Sum of the 32 signed activation bytes.
  static int32_t sum32(const int8_t* qs) {
    const __m256i v = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs)),
                                       _mm256_set1_epi8(static_cast<char>(0x80)));  // a + 128
    const __m256i s = _mm256_sad_epu8(v, _mm256_setzero_si256());
    const __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    return static_cast<int32_t>(_mm_cvtsi128_si64(t) + _mm_extract_epi64(t, 1)) - 32 * 128;
  }

  // Per-type traits (drivers/gemm_panels.h's T): block layouts, the weight block as 32
  // unsigned bytes (lo: elements 0..15, hi: 16..31) with its scale and min, and the
  // activation block's scale and min term. kSigned: gemm_avx2.cpp's sign-trick path.
  struct Q40 {
    using W = block_q4_0;
    using A = block_q8_0;
    static constexpr bool kMin = false;
    static constexpr bool kSigned = false;
    static constexpr int kOffset = 8;
    static void unpack(const W& b, __m128i& lo, __m128i& hi, float& d, float& m) {
      nibbles(b.qs, lo, hi);
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
    static constexpr bool kSigned = false;
    static constexpr int kOffset = 0;
    static void unpack(const W& b, __m128i& lo, __m128i& hi, float& d, float& m) {
      nibbles(b.qs, lo, hi);
      d = h2f(b.d);
      m = h2f(b.m);
    }
    static float act_d(const A& a) { return a.d; }
    static float act_s(const A& a) { return a.s; }
  };

  // v[i]: the 4 groups (dwords) of row i -> dst[g * stride]: group g of rows 0..3.
  static void transpose4_store(const __m128i v[4], uint32_t* dst, size_t stride) {
    const __m128i t0 = _mm_unpacklo_epi32(v[0], v[1]), t1 = _mm_unpacklo_epi32(v[2], v[3]);
    const __m128i t2 = _mm_unpackhi_epi32(v[0], v[1]), t3 = _mm_unpackhi_epi32(v[2], v[3]);
    _mm_store_si128(reinterpret_cast<__m128i*>(dst), _mm_unpacklo_epi64(t0, t1));
    _mm_store_si128(reinterpret_cast<__m128i*>(dst + stride), _mm_unpackhi_epi64(t0, t1));
    _mm_store_si128(reinterpret_cast<__m128i*>(dst + 2 * stride), _mm_unpacklo_epi64(t2, t3));
    _mm_store_si128(reinterpret_cast<__m128i*>(dst + 3 * stride), _mm_unpackhi_epi64(t2, t3));
  }

  // Rows in quads: unpack 4 rows' block to (groups 0-3, groups 4-7) vectors, then a 4x4
  // dword transpose writes group g of the 4 rows with one 16-byte store. Rows nr.. are zero.
  template <class T>
  static void panel(const uint8_t* w, size_t w_stride, int nr, int kb0, int kbn, Panel& P) {
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
};

}  // namespace pllm::kern::x86_gemm
