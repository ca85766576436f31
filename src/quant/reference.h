// Scalar reference quantisers / dequantisers. The dequantisers define the meaning of
// each block format (ggml semantics, bit-exact layout); every SIMD kernel is tested
// against them. The Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 quantisers follow ggml's rounding choices;
// the K-quant and IQ4 quantisers use a simpler (non-searching, round-to-nearest) scheme whose
// output still dequantises with the ggml semantics (the searching ones are src/quantizer/'s).
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
// q: 256 values 0..31 -> Q5_K qs (low 4 bits, as Q4_K) and qh (the fifth bit).
void pack_q5_K_quants(const uint8_t q[256], uint8_t* qs, uint8_t* qh);
// q: 256 values 0..3 -> Q2_K qs (also Q3_K's low two bits).
void pack_q2_K_quants(const uint8_t q[256], uint8_t* qs);
// q: 256 values -4..3 -> Q3_K qs and hmask.
void pack_q3_K_quants(const int8_t q[256], uint8_t* qs, uint8_t* hmask);
// Sixteen signed scales (-32..31) -> Q3_K's 12 scale bytes (the inverse of q3_K_scales).
void pack_q3_K_scales(const int8_t sc[16], uint8_t* scales);
// q: 32 indices 0..15 into kIq4nlValues -> IQ4_NL nibbles (also each IQ4_XS sub-block's).
void pack_iq4_quants(const uint8_t q[32], uint8_t* qs);
// The 6-bit scale ls (0..63, the signed scale + 32) of sub-block j into an IQ4_XS block.
void set_iq4_xs_scale(block_iq4_xs& b, int j, int ls);
// Index of the kIq4nlValues entry nearest to v (the lower one on a tie; 0 for NaN).
int nearest_iq4nl(float v);

// Round-to-nearest K-quant parameters of one 256-element super-block (the reference
// quantisers' choice, also the searching quantisers' rtn candidate).
// Sub-block scales and mins (Q2_K: n_sub 16, qmax 3, code_max 15; Q4_K: 8, 15, 63; Q5_K:
// 8, 31, 63): x ~= (d sc_j) q - dmin m_j, q in [0, qmax], sc_j and m_j in [0, code_max].
void rtn_k_scale_min(const float* x, int n_sub, int qmax, int code_max, uint16_t* d, uint16_t* dmin, uint8_t* sc,
                     uint8_t* m, uint8_t* q);
// Signed sub-block scales (Q3_K: n_sub 16, qneg 4, code_max 31; Q6_K: 16, 32, 127): x ~=
// (d sc_g) q, q in [-qneg, qneg - 1], sc_g in [-code_max, code_max].
void rtn_k_signed_scale(const float* x, int n_sub, int qneg, int code_max, uint16_t* d, int8_t* sc, int8_t* q);

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

// llama.cpp's low-bit types (reference_lowbit.cpp). The dequantisers do ggml's (and gguf-py's)
// operations in the same order, so bit for bit its floats (tests/py/test_lowbit_dequant.py
// checks against gguf.quants). The quantisers round to nearest: Q2_K, Q5_K and Q3_K with
// rtn_k_scale_min / rtn_k_signed_scale; IQ4_NL with d = (the signed value of largest
// magnitude) / -127, so that it maps exactly onto the table's -127, and each element the
// nearest table value at the fp16-rounded d; IQ4_XS the same per 32-element sub-block, with
// the sub-block scales quantised to 6 signed bits of a fp16 super-block scale.
// The sixteen signed sub-block scales (6-bit value - 32) of a Q3_K block's 12 scale bytes.
void q3_K_scales(const uint8_t* scales, int8_t out[16]);
// The 6-bit scale (0..63, not yet - 32) of sub-block j (0..7) of an IQ4_XS block.
int iq4_xs_scale(const block_iq4_xs& b, int j);
void dequantize_row_q2_K(const block_q2_K* x, float* y, int64_t n);
void dequantize_row_q3_K(const block_q3_K* x, float* y, int64_t n);
void dequantize_row_q5_K(const block_q5_K* x, float* y, int64_t n);
void dequantize_row_iq4_nl(const block_iq4_nl* x, float* y, int64_t n);
void dequantize_row_iq4_xs(const block_iq4_xs* x, float* y, int64_t n);
void quantize_row_q2_K(const float* x, block_q2_K* y, int64_t n);
void quantize_row_q3_K(const float* x, block_q3_K* y, int64_t n);
void quantize_row_q5_K(const float* x, block_q5_K* y, int64_t n);
void quantize_row_iq4_nl(const float* x, block_iq4_nl* y, int64_t n);
void quantize_row_iq4_xs(const float* x, block_iq4_xs* y, int64_t n);

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
