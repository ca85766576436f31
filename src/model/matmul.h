// Y = X · Wᵀ for a batch of activation rows, spread over the thread pool.
#pragma once
#include <cstdint>

#include "base/thread_pool.h"
#include "model/weights.h"

namespace pllm {

// X: [n_tok][W.cols] f32; Y: [n_tok][W.rows]. act_q: scratch of at least
// n_tok * act_row_stride bytes for the activations in the weight type's format.
void matmul(const Matrix& W, const float* X, int n_tok, float* Y, uint8_t* act_q, size_t act_row_stride,
            ThreadPool& pool);

// Bytes one activation row of n elements needs, for the widest activation format.
size_t max_act_row_bytes(int64_t n);

}  // namespace pllm
