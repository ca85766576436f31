// int16 activations over load-time repacked 16-row panels on AVX2: TypeKernels::gemm_i16_panels
// for Q4_0, Q4_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS in the avx2 table (drivers/i16_panels.h over x86/i16_avx2.h's P256: two
// ymm per panel vector, rows 0-7 and 8-15; vpmaddwd + vpaddd against a broadcast activation
// pair). The avxvnni and avx512 tables have their own. Compiled with -mavx2 -mfma -mf16c.
#include "kernels/internal.h"
#include "kernels/x86/i16_avx2.h"

namespace pllm::kern {

void fill_i16panel_avx2(KernelTable& t) { fill_i16_panels<P256>(t); }

}  // namespace pllm::kern
