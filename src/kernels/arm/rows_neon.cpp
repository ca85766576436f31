// AArch64 decode matvec (TypeKernels::vec_dot_rows / vec_dot_f32_rows). Built with the
// baseline flags: it only stores function pointers (fill_rows_loop), so it is safe on
// every AArch64 CPU. No multi-row NEON kernels yet: both NEON tables loop their own
// one-row kernels (vec_dot / vec_dot_f32), which is exactly what matmul_group did before.
#include "kernels/internal.h"

namespace pllm::kern {

void fill_rows_neon(KernelTable& t) { fill_rows_loop(t, Isa::neon); }
void fill_rows_neon_dotprod(KernelTable& t) { fill_rows_loop(t, Isa::neon_dotprod); }
void fill_rows_neon_i8mm(KernelTable& t) { fill_rows_loop(t, Isa::neon_i8mm); }

}  // namespace pllm::kern
