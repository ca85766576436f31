// A hook that sees the exact f32 input of every weight product (calibration statistics,
// activation-aware quantisation). Attached per session by C++ tools only; when none is
// attached the forward pass pays one pointer test per product group.
#pragma once

namespace pllm {

struct Matrix;

struct ActObserver {
  virtual ~ActObserver() = default;
  // X is [n_tok][W.cols] f32, the input of Y = X · Wᵀ, seen before the product runs.
  // Called on the thread that runs the forward pass, once per weight (Q, K and V each see
  // the same X).
  virtual void observe(const Matrix& W, const float* X, int n_tok) = 0;
};

}  // namespace pllm
