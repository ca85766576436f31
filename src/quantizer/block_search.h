// Searching block quantisers: the "mse" method (w null: plain squared error) and the
// "act" method (w: per-element importance, the mean x² of the activation column each
// weight multiplies, as llama.cpp's imatrix weights its error).
//
// IQ4_NL / IQ4_XS quantise onto the non-linear kIq4nlValues: an element is the nearest table
// value at its (sub-)block's step, and the step grid aims the largest magnitude at either
// end of the table (-127 or 113), so both signs of the scale are tried.
//
// Each quantises one block. Per block (and per sub-block for the K-quants) it tries a
// grid of clipping ratios for the scale (and the min), refits each candidate's scale
// (and min) by weighted least squares for its quants, rounds the parameters to what the
// format stores and picks the quants nearest to every element at those final
// parameters; the K-quants then quantise the sub-block scales/mins to 6 or 8 bits and
// refit the super-block scales. The reference (rtn) quantiser's parameters are always
// one of the candidates, so the block's weighted squared error is never above what
// rtn's parameters give, and never above rtn's own block (whose quants are not always
// the nearest for its rounded scale).
//
// w, when given, has one value >= 0 per element of the block; a block whose weights
// are all zero is quantised unweighted.
#pragma once
#include "quant/blocks.h"

namespace pllm {

void search_q4_0(const float* x, const float* w, block_q4_0* y);
void search_q4_1(const float* x, const float* w, block_q4_1* y);
void search_q5_0(const float* x, const float* w, block_q5_0* y);
void search_q5_1(const float* x, const float* w, block_q5_1* y);
void search_q8_0(const float* x, const float* w, block_q8_0* y);
void search_iq4_nl(const float* x, const float* w, block_iq4_nl* y);
void search_q2_K(const float* x, const float* w, block_q2_K* y);
void search_q3_K(const float* x, const float* w, block_q3_K* y);
void search_q4_K(const float* x, const float* w, block_q4_K* y);
void search_q5_K(const float* x, const float* w, block_q5_K* y);
void search_q6_K(const float* x, const float* w, block_q6_K* y);
void search_iq4_xs(const float* x, const float* w, block_iq4_xs* y);

// Sum of w (x - y)² over n elements (w null: plain).
double weighted_sse(const float* x, const float* y, const float* w, int64_t n);

}  // namespace pllm
