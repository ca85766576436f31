// Y = X · Wᵀ for a batch of activation rows, spread over the thread pool.
#pragma once
#include <cstdint>

#include "base/thread_pool.h"
#include "model/weights.h"

namespace pllm {

// How activations meet quantised weights.
//   exact: weight blocks are decoded to f32 in registers and multiplied with the f32
//          activations, so results match a float reference up to rounding (the default).
//   int8:  activations are quantised per block to int8 and dotted with integer kernels
//          (W4A8/W8A8 as llama.cpp does): faster, but on small models the rounding can flip
//          near-tied greedy choices.
enum class ActMode { exact, int8 };

struct MatmulScratch {
  uint8_t* act_q;         // [n_tok][act_row_stride] quantised activations (int8 mode)
  size_t act_row_stride;
};

// X: [n_tok][W.cols] f32; Y: [n_tok][W.rows].
void matmul(const Matrix& W, const float* X, int n_tok, float* Y, ActMode mode, const MatmulScratch& scratch,
            ThreadPool& pool);

// Bytes one activation row of n elements needs, for the widest activation format.
size_t max_act_row_bytes(int64_t n);

}  // namespace pllm
