// int16 activations over load-time repacked 16-row panels on AVX2 + AVX-VNNI:
// TypeKernels::gemm_i16_panels for Q4_0, Q4_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS in the avxvnni table. The AVX2 panel traits
// (x86/i16_avx2.h's P256) with each pair product and its accumulation one vpdpwssd instead of
// vpmaddwd + vpaddd: the same exact int32 sums, so the avx2 table's results bit for bit. Compiled
// with the AVX2 flags plus -mavxvnni; used only after dispatch.cpp has checked the CPU.
#include <immintrin.h>

#include <cstdint>

#include "kernels/internal.h"
#include "kernels/x86/i16_avx2.h"

namespace pllm::kern {

namespace {

// The codes are the last operand, the one VEX vpdpwssd can read from memory (the products
// commute); with them first GCC loaded every code vector into a register and spilled the
// broadcasts. The empty asm (as T256::dp's) keeps the sums in order, which left fewer spills.
// bench_kernels Q4_0 576x1536, 64 activation rows, Zen 5: 918-976 us before both, 804-838
// after, about avx2's (769-871 in the same runs); at 8 rows 101-124 us against avx2's 115-152,
// at 1 within noise of it.
struct P256Vnni : P256 {
  // vpdpwssd accumulates in the product (latency 4-5): 8 chains in all.
  static constexpr int dot1_chains(bool one) { return one ? 4 : 2; }
  static PLLM_AI V dp(V acc, V w, const int16_t* a) {
    V r = _mm256_dpwssd_avx_epi32(acc, bcast_pair(a), w);
    __asm__("" : "+x"(r));
    return r;
  }
};

}  // namespace

void fill_i16panel_avxvnni(KernelTable& t) { fill_i16_panels<P256Vnni>(t); }

}  // namespace pllm::kern
