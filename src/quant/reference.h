// Scalar reference quantisers / dequantisers. The dequantisers define the meaning of
// each block format (ggml semantics, bit-exact layout); every SIMD kernel is tested
// against them. The Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 quantisers follow ggml's rounding choices;
// the Q4_K / Q6_K quantisers use a simpler (non-searching) scheme whose output still
// dequantises with the ggml semantics.
//
// n is always a multiple of the type's block size (32 or 256; 1 for F16/BF16).
#pragma once
#include <cstdint>

#include "quant/blocks.h"

namespace pllm::ref {

// 6-bit scale and min of sub-block j (0..7) of a Q4_K block (ggml get_scale_min_k4).
void get_scale_min_k4(int j, const uint8_t* scales, uint8_t* sc, uint8_t* m);
// Pack eight 6-bit scales and mins (each 0..63) into the 12-byte Q4_K scales field.
void pack_scale_min_k4(const uint8_t sc[8], const uint8_t m[8], uint8_t* scales);

// Packing of already chosen quants into the block layouts (shared with the quantiser in
// src/quantizer/, which picks scales and quants itself).
// q: 32 values 0..31 -> Q5_0/Q5_1 qs (low 4 bits) and qh (bit 4 of element j = bit j).
void pack_q5_quants(const int q[32], uint8_t* qs, uint8_t* qh);
// q: 256 values 0..15 (sub-block j = elements 32j..32j+31) -> Q4_K qs.
void pack_q4_K_quants(const uint8_t q[256], uint8_t* qs);
// q: 256 values 0..63 (the signed quant + 32) -> Q6_K ql, qh.
void pack_q6_K_quants(const uint8_t q[256], uint8_t* ql, uint8_t* qh);

// --- weight formats -------------------------------------------------------------
void quantize_row_q8_0(const float* x, block_q8_0* y, int64_t n);
void dequantize_row_q8_0(const block_q8_0* x, float* y, int64_t n);

void quantize_row_q4_0(const float* x, block_q4_0* y, int64_t n);
void dequantize_row_q4_0(const block_q4_0* x, float* y, int64_t n);

void quantize_row_q4_1(const float* x, block_q4_1* y, int64_t n);
void dequantize_row_q4_1(const block_q4_1* x, float* y, int64_t n);

void quantize_row_q5_0(const float* x, block_q5_0* y, int64_t n);
void dequantize_row_q5_0(const block_q5_0* x, float* y, int64_t n);

void quantize_row_q5_1(const float* x, block_q5_1* y, int64_t n);
void dequantize_row_q5_1(const block_q5_1* x, float* y, int64_t n);

void quantize_row_q4_K(const float* x, block_q4_K* y, int64_t n);
void dequantize_row_q4_K(const block_q4_K* x, float* y, int64_t n);

void quantize_row_q6_K(const float* x, block_q6_K* y, int64_t n);
void dequantize_row_q6_K(const block_q6_K* x, float* y, int64_t n);

// Types the engine reads but does not write (llama.cpp's files): dequantisers only, each the
// operations of ggml's (and gguf-py's) in the same order, so bit for bit its floats
// (reference_lowbit.cpp; tests/py/test_lowbit_dequant.py checks against gguf.quants).
// The sixteen signed sub-block scales (6-bit value - 32) of a Q3_K block's 12 scale bytes.
void q3_K_scales(const uint8_t* scales, int8_t out[16]);
// The 6-bit scale (0..63, not yet - 32) of sub-block j (0..7) of an IQ4_XS block.
int iq4_xs_scale(const block_iq4_xs& b, int j);
void dequantize_row_q2_K(const block_q2_K* x, float* y, int64_t n);
void dequantize_row_q3_K(const block_q3_K* x, float* y, int64_t n);
void dequantize_row_q5_K(const block_q5_K* x, float* y, int64_t n);
void dequantize_row_iq4_nl(const block_iq4_nl* x, float* y, int64_t n);
void dequantize_row_iq4_xs(const block_iq4_xs* x, float* y, int64_t n);

void quantize_row_f16(const float* x, uint16_t* y, int64_t n);
void dequantize_row_f16(const uint16_t* x, float* y, int64_t n);

void quantize_row_bf16(const float* x, uint16_t* y, int64_t n);
void dequantize_row_bf16(const uint16_t* x, float* y, int64_t n);

// --- activation formats (scalar twins of the SIMD quantize_act kernels) ----------
// Both use d = amax / 127, id = d ? 1/d : 0, q = nearbyint(x * id) (round half to
// even, as the SIMD conversions do), so |q| <= 127 (never -128).
void quantize_row_q8_1(const float* x, block_q8_1* y, int64_t n);
void dequantize_row_q8_1(const block_q8_1* x, float* y, int64_t n);

void quantize_row_q8_K(const float* x, block_q8_K* y, int64_t n);
void dequantize_row_q8_K(const block_q8_K* x, float* y, int64_t n);

// Static scale d > 0 (a calibrated per-tensor constant) instead of amax / 127: every
// block gets the same step, q = clamp(nearbyint(x * (1 / d)), -127, 127) (values past
// the threshold 127 d are clipped; the clamp is on the float, so NaN/inf are defined).
// Q8_0 blocks store d as fp16, so there d is rounded to fp16 first and 1/d taken of the
// rounded value (the step the dot kernel will multiply by). The sums (q8_1's s, q8_K's
// bsums) are of the clamped q, as in the dynamic formats.
void quantize_row_q8_0_static(const float* x, block_q8_0* y, int64_t n, float d);
void quantize_row_q8_1_static(const float* x, block_q8_1* y, int64_t n, float d);
void quantize_row_q8_K_static(const float* x, block_q8_K* y, int64_t n, float d);

}  // namespace pllm::ref
