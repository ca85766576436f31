// Y = X · Wᵀ for a batch of activation rows, spread over the thread pool.
#pragma once
#include <cstdint>
#include <span>

#include "base/thread_pool.h"
#include "model/act_observer.h"
#include "model/weights.h"

namespace pllm {

// How activations meet quantised weights.
//   exact: weight blocks are decoded to f32 in registers and multiplied with the f32
//          activations, so results match a float reference up to rounding (the default).
//   int8:  activations are quantised per block to int8 and dotted with integer kernels
//          (W4A8/W8A8 as llama.cpp does): on small models the rounding can flip
//          near-tied greedy choices.
//   f16:   W4A16: activations are rounded once per row to IEEE half and weight blocks
//          decoded in registers (fp16 FMLA on ARM with FP16 arithmetic, F16C loads + f32
//          FMA on x86) for Q4_0, Q4_1 and Q8_0; other weight types take the exact path.
//   int8_static: int8 with a calibrated per-tensor step (Matrix::act_scale) for every
//          block instead of each block's absmax / 127: q = clamp(round(x / d), -127, 127).
//          Same integer kernels. Matrices without a scale (act_scale 0) quantise dynamically.
//   int16: activations rounded per 32-element block to int16 (step 2^-16 of the block
//          maximum: 256 times finer than int8) and dotted with exact integer products
//          (block_q16, TypeKernels::vec_dot_i16act_tile); types without a tile on this ISA
//          take the exact path.
enum class ActMode { exact, int8, f16, int8_static, int16 };

// Quantised copies of X a group may need at once: one per (activation format, static
// scale) pair, so at most one per target (kMaxTargets in matmul.cpp).
inline constexpr int kMaxActFormats = 4;

struct MatmulScratch {
  uint8_t* act_q;         // [kMaxActFormats][n_batch][act_row_stride] quantised activations
                          // (f16 mode: slot 0 holds the half rows)
  size_t act_row_stride;
  int n_batch;
  ActObserver* observer = nullptr;  // sees every product's input first (calibration); null: none
};

// One product of a group: Y = X · Wᵀ, Y laid out [n_tok][W->rows].
struct MatmulTarget {
  const Matrix* W;
  float* Y;
};

// Several products that share the input X ([n_tok][cols], same cols for every W), run as
// one job on the pool (e.g. Q, K and V; gate and up): one hand-off instead of several.
// scratch.observer, when set, sees X once per target before the products run.
void matmul_group(std::span<const MatmulTarget> targets, const float* X, int n_tok, ActMode mode,
                  const MatmulScratch& scratch, ThreadPool& pool);

inline void matmul(const Matrix& W, const float* X, int n_tok, float* Y, ActMode mode,
                   const MatmulScratch& scratch, ThreadPool& pool) {
  const MatmulTarget t{&W, Y};
  matmul_group({&t, 1}, X, n_tok, mode, scratch, pool);
}

// Bytes one activation row of n elements needs, for the widest activation format.
size_t max_act_row_bytes(int64_t n);

}  // namespace pllm
