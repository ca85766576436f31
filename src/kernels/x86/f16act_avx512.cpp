// W4A16 on AVX-512: the 512-bit variant of f16act_avx2.cpp (read that first). A
// 32-element block is two __m512 of decoded weights (dequantize_row's floats) and two
// vcvtph2ps loads of 16 halves per activation row; each row gets A = 2 (NX <= 4) or 1
// 16-lane accumulator, so a product sees <= n/16 lane additions + 5 reduction levels,
// within the vec_dot_f32 bound. The AVX2 f32_to_f16_row stays (memory bound).
#include <immintrin.h>

#include <cstdint>

#include "kernels/internal.h"
#include "quant/blocks.h"

namespace pllm::kern {

namespace {

#define PLLM_AI inline __attribute__((always_inline))

PLLM_AI float h2f(uint16_t h) { return _cvtsh_ss(h); }
PLLM_AI __m512 load16h(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
PLLM_AI __m512i zx16(const uint8_t* p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

struct DecQ4_0 {
  const block_q4_0* w;
  explicit DecQ4_0(const void* row) : w(static_cast<const block_q4_0*>(row)) {}
  PLLM_AI void block(int64_t b, __m512 v[2]) const {
    const float df = h2f(w[b].d);
    const __m512 d = _mm512_set1_ps(df), m8d = _mm512_set1_ps(-8.0f * df);
    const __m512i a = zx16(w[b].qs);
    v[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(a, _mm512_set1_epi32(0x0F))), d, m8d);
    v[1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(a, 4)), d, m8d);
  }
};

struct DecQ4_1 {
  const block_q4_1* w;
  explicit DecQ4_1(const void* row) : w(static_cast<const block_q4_1*>(row)) {}
  PLLM_AI void block(int64_t b, __m512 v[2]) const {
    const __m512 d = _mm512_set1_ps(h2f(w[b].d)), m = _mm512_set1_ps(h2f(w[b].m));
    const __m512i a = zx16(w[b].qs);
    v[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(a, _mm512_set1_epi32(0x0F))), d, m);
    v[1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(a, 4)), d, m);
  }
};

struct DecQ8_0 {
  const block_q8_0* w;
  explicit DecQ8_0(const void* row) : w(static_cast<const block_q8_0*>(row)) {}
  PLLM_AI void block(int64_t b, __m512 v[2]) const {
    const __m512 d = _mm512_set1_ps(h2f(w[b].d));
    for (int k = 0; k < 2; ++k) {
      const __m512i i = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].qs + 16 * k)));
      v[k] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(i));
    }
  }
};

template <int NX, class D>
void fused(int64_t n, const void* w_row, const uint16_t* x, int64_t xs, float* out, int64_t os) {
  constexpr int A = NX <= 4 ? 2 : 1;
  const D dec(w_row);
  __m512 acc[NX][A];
  for (int j = 0; j < NX; ++j)
    for (int a = 0; a < A; ++a) acc[j][a] = _mm512_setzero_ps();
  const uint16_t* xp = x;
  for (int64_t b = 0; b < n / 32; ++b, xp += 32) {
    __m512 wv[2];
    dec.block(b, wv);
    for (int k = 0; k < 2; ++k)
      for (int j = 0; j < NX; ++j) acc[j][k % A] = _mm512_fmadd_ps(wv[k], load16h(xp + j * xs + 16 * k), acc[j][k % A]);
  }
  for (int j = 0; j < NX; ++j) {
    __m512 s = acc[j][0];
    if constexpr (A == 2) s = _mm512_add_ps(acc[j][0], acc[j][1]);
    out[j * os] = _mm512_reduce_add_ps(s);
  }
}

template <class D>
float fused_one(int64_t n, const void* w_row, const uint16_t* x) {
  float r;
  fused<1, D>(n, w_row, x, 0, &r, 0);
  return r;
}

template <class D>
void fused_multi(int64_t n, const void* w_row, const uint16_t* x, int64_t xs, int n_x, float* out, int64_t os) {
  for (int j0 = 0; j0 < n_x; j0 += 8) {
    const uint16_t* xr = x + j0 * xs;
    float* o = out + j0 * os;
    switch (n_x - j0 < 8 ? n_x - j0 : 8) {
      case 1: fused<1, D>(n, w_row, xr, xs, o, os); break;
      case 2: fused<2, D>(n, w_row, xr, xs, o, os); break;
      case 3: fused<3, D>(n, w_row, xr, xs, o, os); break;
      case 4: fused<4, D>(n, w_row, xr, xs, o, os); break;
      case 5: fused<5, D>(n, w_row, xr, xs, o, os); break;
      case 6: fused<6, D>(n, w_row, xr, xs, o, os); break;
      case 7: fused<7, D>(n, w_row, xr, xs, o, os); break;
      default: fused<8, D>(n, w_row, xr, xs, o, os); break;
    }
  }
}

template <class D>
void set(KernelTable& t, TensorType type) {
  TypeKernels& k = t.types[static_cast<uint32_t>(type) & 31];
  k.vec_dot_f16act = fused_one<D>;
  k.vec_dot_f16act_multi = fused_multi<D>;
}

}  // namespace

void fill_f16act_avx512(KernelTable& t) {
  set<DecQ4_0>(t, TensorType::Q4_0);
  set<DecQ4_1>(t, TensorType::Q4_1);
  set<DecQ8_0>(t, TensorType::Q8_0);
}

}  // namespace pllm::kern
