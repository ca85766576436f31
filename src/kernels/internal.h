// Internal to the kernels library: the fillers dispatch.cpp builds the per-ISA tables from.
// Declarations only (safe to include from ISA-specific translation units).
//
// A filler sets the entries its file implements and leaves the rest as they are. The order in
// which a table's fillers run (later ones override earlier ones) is each ISA's list in
// dispatch.cpp; a filler is defined only where its source file is compiled in.
#pragma once
#include "kernels/kernels.h"

namespace pllm::kern {

using Filler = void (*)(KernelTable& t);

// generic/: the scalar twins, every entry of the scalar table.
void fill_scalar(KernelTable& t);                 // scalar.cpp: the one-row kernels, SwiGLU, GeGLU, delta rule
void fill_attention_kv_scalar(KernelTable& t);    // attention_kv_scalar.cpp
void fill_rows_f32_multi_scalar(KernelTable& t);  // dot_loops.cpp: vec_dot_f32_multi per weight row
void fill_f16act_scalar(KernelTable& t);          // f16act_scalar.cpp
void fill_i16act_scalar(KernelTable& t);          // i16act_scalar.cpp
void fill_panel_scalar(KernelTable& t);           // panel_scalar.cpp

// generic/dot_loops.cpp, for every level: gemm_q8 (int8 activation formats), and vec_dot_rows,
// vec_dot_rows_multi, vec_dot_f32_rows as loops over the one-row kernels the table holds when
// the filler runs, recorded under level I.
template <Isa I>
void fill_gemm_loops(KernelTable& t);
template <Isa I>
void fill_rows_loops(KernelTable& t);

// x86/ (AVX2 flags; the avxvnni table is the avx2 one but for its int16 kernels).
void fill_avx2(KernelTable& t);               // avx2.cpp: one-row int8 dots, exact mode, dequantisers
void fill_lowbit_avx2(KernelTable& t);        // lowbit_avx2.cpp: the same for Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS
void fill_act_quant_avx2(KernelTable& t);     // act_quant_avx2.cpp: activation quantisers
void fill_attention_kv_avx2(KernelTable& t);  // attention_kv_avx2.cpp
void fill_gemm_avx2(KernelTable& t);          // gemm_avx2.cpp: tiled gemm_q8
void fill_rows_avx2(KernelTable& t);          // rows_avx2.cpp: multi-row decode
void fill_act_avx2(KernelTable& t);           // act_avx2.cpp: SwiGLU, GeGLU, delta rule (every x86 table)
void fill_f16act_avx2(KernelTable& t);        // f16act_avx2.cpp: W4A16 (every x86 table)
void fill_i16act_avx2(KernelTable& t);        // i16act_avx2.cpp: quantize_row_q16 (every x86 table), tiles
void fill_i16panel_avx2(KernelTable& t);      // i16panel_avx2.cpp
void fill_i16act_avxvnni(KernelTable& t);     // i16act_avxvnni.cpp: tiles and GEMMs on vpdpwssd (ymm)
void fill_i16panel_avxvnni(KernelTable& t);   // i16panel_avxvnni.cpp
// x86/ (AVX-512 flags).
void fill_avx512(KernelTable& t);               // avx512.cpp
void fill_attention_kv_avx512(KernelTable& t);  // attention_kv_avx512.cpp
void fill_gemm_avx512(KernelTable& t);          // gemm_avx512.cpp
void fill_rows_avx512(KernelTable& t);          // rows_avx512.cpp
void fill_panel_avx512(KernelTable& t);         // panel_avx512.cpp
void fill_i16act_avx512(KernelTable& t);        // i16act_avx512.cpp
void fill_i16panel_avx512(KernelTable& t);      // i16panel_avx512.cpp

// arm/ (baseline flags unless the name says otherwise).
void fill_neon(KernelTable& t);                // neon.cpp
void fill_lowbit_neon(KernelTable& t);         // lowbit_neon.cpp: exact mode of Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS
void fill_attention_kv_neon(KernelTable& t);   // attention_kv_neon.cpp
void fill_act_neon(KernelTable& t);            // act_neon.cpp: SwiGLU, GeGLU, delta rule (every ARM table)
void fill_f16act_neon(KernelTable& t);         // f16act_neon.cpp: W4A16, f32 FMA (every ARM table)
void fill_f16act_neon_fp16(KernelTable& t);    // f16act_neon_fp16.cpp: FP16 FMLA (needs ASIMDHP)
void fill_i16act_neon(KernelTable& t);         // i16act_neon.cpp (every ARM table)
void fill_i16act_dotprod(KernelTable& t);      // i16act_dotprod.cpp: tiles on SDOT / UDOT (dotprod, i8mm)
void fill_neon_dotprod(KernelTable& t);        // neon_dotprod.cpp: one-row int8 dots on SDOT
void fill_gemm_neon_dotprod(KernelTable& t);   // gemm_dotprod.cpp
void fill_panel_neon_dotprod(KernelTable& t);  // panel_dotprod.cpp (dotprod and i8mm tables)
void fill_gemm_neon_i8mm(KernelTable& t);      // gemm_i8mm.cpp: SMMLA

// Per-thread scratch for the GEMM kernels (generic/gemm_scratch.cpp): at least `bytes`, 64-byte
// aligned, valid until the next call on the same thread. Grows, never shrinks.
void* gemm_scratch(size_t bytes);

}  // namespace pllm::kern
