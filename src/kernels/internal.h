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
void fill_act_quant_avx2(KernelTable& t);  // x86/act_quant_avx2.cpp (called by fill_avx2)
void fill_avx512(KernelTable& t);        // x86/avx512.cpp
void fill_neon(KernelTable& t);          // arm/neon.cpp
void fill_neon_dotprod(KernelTable& t);  // arm/neon_dotprod.cpp

// KV-cache segment kernels (KernelTable::attn_seg_*).
void fill_attention_kv_scalar(KernelTable& t);  // generic/attention_kv_scalar.cpp
void fill_attention_kv_avx2(KernelTable& t);    // x86/attention_kv_avx2.cpp
void fill_attention_kv_avx512(KernelTable& t);  // x86/attention_kv_avx512.cpp
void fill_attention_kv_neon(KernelTable& t);    // arm/attention_kv_neon.cpp

// Prefill GEMM (TypeKernels::gemm_q8), filled after the ISA's own filler(s) above.
void fill_gemm_vec_dot_loop(KernelTable& t, Isa isa);  // generic/gemm_scalar.cpp: loop t's vec_dot
void fill_gemm_scalar(KernelTable& t);                 // generic/gemm_scalar.cpp
void fill_gemm_avx2(KernelTable& t);                   // x86/gemm_avx2.cpp
void fill_gemm_avx512(KernelTable& t);                 // x86/gemm_avx512.cpp
void fill_gemm_neon(KernelTable& t);                   // arm/gemm_neon.cpp (vec_dot loops)
void fill_gemm_neon_dotprod(KernelTable& t);           // arm/gemm_neon.cpp
// Per-thread scratch for the GEMM kernels (generic/gemm_scalar.cpp, so the std
// containers behind it are never compiled with ISA flags): at least `bytes`, 64-byte
// aligned, valid until the next call on the same thread. Grows, never shrinks.
void* gemm_scratch(size_t bytes);

// Decode matvec (TypeKernels::vec_dot_rows / vec_dot_f32_rows), filled after the GEMM fillers.
void fill_rows_loop(KernelTable& t, Isa isa);  // generic/rows_scalar.cpp: loop t's vec_dot / vec_dot_f32
void fill_rows_scalar(KernelTable& t);         // generic/rows_scalar.cpp
void fill_rows_avx2(KernelTable& t);           // x86/rows_avx2.cpp
void fill_rows_avx512(KernelTable& t);         // x86/rows_avx512.cpp
void fill_rows_neon(KernelTable& t);           // arm/rows_neon.cpp (baseline NEON)
void fill_rows_neon_dotprod(KernelTable& t);   // arm/rows_neon.cpp (int8 kernels need dotprod)

// ARM i8mm level: the dotprod table plus SMMLA prefill GEMM (arm/gemm_i8mm.cpp, +i8mm flags).
// SwiGLU: the scalar twin is in generic/scalar.cpp; each SIMD file keeps its own scalar
// tail in its anonymous namespace (no inline function shared with ISA-flagged files).
void fill_act_avx2(KernelTable& t);  // x86/act_avx2.cpp (every x86 table)
void fill_act_neon(KernelTable& t);  // arm/act_neon.cpp (every ARM table)

void fill_panel_scalar(KernelTable& t);  // generic/panel_scalar.cpp
void fill_panel_avx512(KernelTable& t);  // x86/panel_avx512.cpp
void fill_panel_neon_dotprod(KernelTable& t);  // arm/panel_neon.cpp (SDOT: dotprod and i8mm tables)

void fill_gemm_neon_i8mm(KernelTable& t);
void fill_rows_neon_i8mm(KernelTable& t);  // arm/rows_neon.cpp (the dotprod kernels, own loop slot)

// W4A16 (TypeKernels::vec_dot_f16act*, KernelTable::f32_to_f16_row), filled last.
void fill_f16act_scalar(KernelTable& t);     // generic/f16act_scalar.cpp
void fill_f16act_avx2(KernelTable& t);       // x86/f16act_avx2.cpp (F16C loads, f32 FMA; every x86 table)
void fill_f16act_neon(KernelTable& t);       // arm/f16act_neon.cpp (baseline: widen to f32, f32 FMA)
void fill_f16act_neon_fp16(KernelTable& t);  // arm/f16act_neon_fp16.cpp (FP16 FMLA; needs ASIMDHP)

// int16 activations (TypeKernels::vec_dot_i16act_tile, KernelTable::quantize_row_q16), filled
// last; a SIMD table keeps only the tiles its ISA implements (see dispatch.cpp).
void fill_i16act_scalar(KernelTable& t);  // generic/i16act_scalar.cpp
void fill_i16act_avx2(KernelTable& t);     // x86/i16act_avx2.cpp (every x86 table)
void fill_i16act_avxvnni(KernelTable& t);  // x86/i16act_avxvnni.cpp (the tiles and GEMMs, over fill_i16act_avx2)
void fill_i16act_avx512(KernelTable& t);   // x86/i16act_avx512.cpp (the tiles and GEMMs, over fill_i16act_avx2)
void fill_i16panel_avx2(KernelTable& t);     // x86/i16panel_avx2.cpp (gemm_i16_panels, the avx2 table)
void fill_i16panel_avxvnni(KernelTable& t);  // x86/i16panel_avxvnni.cpp (gemm_i16_panels)
void fill_i16panel_avx512(KernelTable& t);   // x86/i16panel_avx512.cpp (gemm_i16_panels)
void fill_i16act_neon(KernelTable& t);    // arm/i16act_neon.cpp (baseline NEON; every ARM table)

}  // namespace pllm::kern
