// int16 activations on AVX2 + AVX-VNNI (the VEX-encoded ymm vpdpwssd of Alder Lake and later
// cores without AVX-512, and of Zen 5): TypeKernels::vec_dot_i16act_tile and gemm_i16 for Q4_0,
// Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q6_K in the avxvnni table, filled after i16act_avx2.cpp (whose
// quantize_row_q16 the table keeps). Compiled with the AVX2 flags plus -mavxvnni; used only after
// dispatch.cpp has checked the CPU.
//
// The AVX2 traits and micro-kernels (x86/i16_avx2.h) with one change: a pair product and its
// accumulation, vpmaddwd + vpaddd there, is one vpdpwssd here. The integer sums are exact either
// way (no lane can overflow: drivers/i16_tile.h's bound), so every result is the avx2 table's bit
// for bit (tests/cpp/test_i16act.cpp checks it). The tile's unit dot becomes vpmaddwd of the
// first 16 elements + vpdpwssd of the rest; its add tree joins lanes of different units and stays
// as it is.
//
// bench_kernels, Q4_0 576x1536, one thread, this project's Zen 5 box (medians, avx2 -> avxvnni):
// tile at 8 activation rows 171-181 -> 144-153 us, at 64 1442-1569 -> 1168-1236; GEMM at 64
// 811-1064 -> 765-835.
#include <immintrin.h>

#include <cstdint>

#include "kernels/internal.h"
#include "kernels/x86/i16_avx2.h"

namespace pllm::kern {

namespace {

struct S16Vnni : S16 {
  static PLLM_AI I dot(const Q& q, const int16_t* a) {
    return _mm256_dpwssd_avx_epi32(_mm256_madd_epi16(q.lo, load256(a)), q.hi, load256(a + 16));
  }
};

// No asm barrier (T256::dp's): GCC does not reassociate vpdpwssd chains. The codes are the last
// operand, the one VEX vpdpwssd can read from memory (the products commute), as vpmaddwd reads
// them in T256.
struct T256Vnni : T256 {
  static PLLM_AI V dp(V acc, V w, const int16_t* a) { return _mm256_dpwssd_avx_epi32(acc, bcast_pair(a), w); }
};

}  // namespace

void fill_i16act_avxvnni(KernelTable& t) { fill_i16_tiles<S16Vnni, T256Vnni>(t); }

}  // namespace pllm::kern
