// AVX-512 VNNI decode matvec over load-time repacked 16-row panels (vec_dot_panels; layout
// in quant/panel.h). Compiled with the avx512.cpp flags; used only after dispatch.cpp has
// checked the CPU.
//
// zmm int32 lane i belongs to row i of the panel for the whole block, so per block:
//   acc = -offset * sum(a)                    (Q4_0: 8, Q8_0: 128; Q4_1: 0)
//   acc = vpdpbusd(acc, W[g], broadcast(a[4g .. 4g+3]))   for the 8 element groups g
// gives the 16 rows' exact integer block sums with no shuffles and no horizontal sums;
// then one cvt and one FMA (16 fp16 row scales times the activation scale) per block.
// The Q4 vectors hold two groups each (low and high nibbles), so they are split by one
// AND and one shift + AND. Two accumulator chains per block (low / high groups) keep the
// dependent vpdpbusd chains short. Blocks stream linearly, so the hardware prefetcher
// sees one sequential stream per thread.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/internal.h"
#include "quant/blocks.h"
#include "quant/panel.h"

namespace pllm::kern {

namespace {

#define PLLM_AI inline __attribute__((always_inline))

constexpr int kR = kPanelRows;

PLLM_AI __m512i load512(const void* p) { return _mm512_loadu_si512(p); }
PLLM_AI __m512i bcast4(const int8_t* a) {
  int32_t v;
  std::memcpy(&v, a, 4);
  return _mm512_set1_epi32(v);
}
PLLM_AI __m512 scales16(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
PLLM_AI int32_t block_sum(const int8_t* q) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
  const __m512i w = _mm512_cvtepi8_epi16(v);
  return _mm512_reduce_add_epi32(_mm512_madd_epi16(w, _mm512_set1_epi16(1)));
}

// The offset term -c * sum(a) of every activation block: the same for every panel of a
// call, so computed once (rows of up to kMaxNb blocks; longer rows recompute per panel).
constexpr int64_t kMaxNb = 1024;
struct Offsets {
  int32_t v[kMaxNb];
  bool pre;
  Offsets(const block_q8_0* a, int64_t nb, int32_t c) : pre(nb <= kMaxNb) {
    if (pre)
      for (int64_t b = 0; b < nb; ++b) v[b] = -c * block_sum(a[b].qs);
  }
  PLLM_AI int32_t at(const block_q8_0* a, int64_t b, int32_t c) const { return pre ? v[b] : -c * block_sum(a[b].qs); }
};

// Sum over the 8 groups of a Q4 panel block: nibble vectors at qs (4 x 64 bytes).
PLLM_AI __m512i q4_block(const uint8_t* qs, const int8_t* a, __m512i init) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512i lo = init, hi = _mm512_setzero_si512();
  for (int v = 0; v < 4; ++v) {
    const __m512i w = load512(qs + 64 * v);
    lo = _mm512_dpbusd_epi32(lo, _mm512_and_si512(w, m4), bcast4(a + 4 * v));
    hi = _mm512_dpbusd_epi32(hi, _mm512_and_si512(_mm512_srli_epi16(w, 4), m4), bcast4(a + 16 + 4 * v));
  }
  return _mm512_add_epi32(lo, hi);
}

void panels_q4_0(int64_t n, const void* w, int n_panels, const void* xq, float* out) {
  const int64_t nb = n / QK4_0;
  const auto* a = static_cast<const block_q8_0*>(xq);
  const uint8_t* p = static_cast<const uint8_t*>(w);
  constexpr size_t kBB = kR * sizeof(block_q4_0);
  const Offsets off(a, nb, 8);
  for (int pn = 0; pn < n_panels; ++pn) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b, p += kBB) {
      const __m512i s = q4_block(p + 32, a[b].qs, _mm512_set1_epi32(off.at(a, b, 8)));
      const __m512 d = _mm512_mul_ps(scales16(p), _mm512_set1_ps(_cvtsh_ss(a[b].d)));
      acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(s), acc);
    }
    _mm512_storeu_ps(out + pn * kR, acc);
  }
}

void panels_q4_1(int64_t n, const void* w, int n_panels, const void* xq, float* out) {
  const int64_t nb = n / QK4_1;
  const auto* a = static_cast<const block_q8_1*>(xq);
  const uint8_t* p = static_cast<const uint8_t*>(w);
  constexpr size_t kBB = kR * sizeof(block_q4_1);
  for (int pn = 0; pn < n_panels; ++pn) {
    __m512 acc = _mm512_setzero_ps(), accm = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b, p += kBB) {
      const __m512i s = q4_block(p + 64, a[b].qs, _mm512_setzero_si512());
      const __m512 d = _mm512_mul_ps(scales16(p), _mm512_set1_ps(a[b].d));
      acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(s), acc);
      accm = _mm512_fmadd_ps(scales16(p + 32), _mm512_set1_ps(a[b].s), accm);
    }
    _mm512_storeu_ps(out + pn * kR, _mm512_add_ps(acc, accm));
  }
}

void panels_q8_0(int64_t n, const void* w, int n_panels, const void* xq, float* out) {
  const int64_t nb = n / QK8_0;
  const auto* a = static_cast<const block_q8_0*>(xq);
  const uint8_t* p = static_cast<const uint8_t*>(w);
  constexpr size_t kBB = kR * sizeof(block_q8_0);
  const Offsets off(a, nb, 128);
  for (int pn = 0; pn < n_panels; ++pn) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b, p += kBB) {
      const uint8_t* qs = p + 32;
      __m512i s0 = _mm512_set1_epi32(off.at(a, b, 128)), s1 = _mm512_setzero_si512();
      for (int g = 0; g < 8; g += 2) {
        s0 = _mm512_dpbusd_epi32(s0, load512(qs + 64 * g), bcast4(a[b].qs + 4 * g));
        s1 = _mm512_dpbusd_epi32(s1, load512(qs + 64 * (g + 1)), bcast4(a[b].qs + 4 * (g + 1)));
      }
      const __m512 d = _mm512_mul_ps(scales16(p), _mm512_set1_ps(_cvtsh_ss(a[b].d)));
      acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), acc);
    }
    _mm512_storeu_ps(out + pn * kR, acc);
  }
}

}  // namespace

void fill_panel_avx512(KernelTable& t) {
  t.types[int(TensorType::Q4_0)].vec_dot_panels = panels_q4_0;
  t.types[int(TensorType::Q4_1)].vec_dot_panels = panels_q4_1;
  t.types[int(TensorType::Q8_0)].vec_dot_panels = panels_q8_0;
}

}  // namespace pllm::kern
