// Internal to the kernels library: how dispatch.cpp builds the per-ISA tables.
// Declarations only (safe to include from ISA-specific translation units).
#pragma once
#include "kernels/kernels.h"

namespace pllm::kern {

// Fill every entry with the generic scalar twins (generic/scalar.cpp).
void fill_scalar(KernelTable& t);

// Each SIMD filler receives a copy of the scalar table and overrides what it
// implements. Only defined when the matching source file is compiled in.
void fill_avx2(KernelTable& t);          // x86/avx2.cpp
void fill_avx512(KernelTable& t);        // x86/avx512.cpp
void fill_neon(KernelTable& t);          // arm/neon.cpp
void fill_neon_dotprod(KernelTable& t);  // arm/neon_dotprod.cpp

}  // namespace pllm::kern
