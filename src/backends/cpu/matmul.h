// Y = X · Wᵀ for a batch of activation rows, spread over the thread pool.
#pragma once
#include <cstdint>
#include <span>

#include "base/thread_pool.h"
#include "model/act_mode.h"
#include "model/act_observer.h"
#include "model/weights.h"

namespace pllm {

// ActMode: model/act_mode.h.

// Quantised copies of X a group may need at once: one per (activation format, static
// scale) pair, so at most one per target (kMaxTargets in matmul.cpp).
inline constexpr int kMaxActFormats = 4;

// Bytes of one unpacking tile: a 16-row panel (kPanelRows) back in the file's row layout.
inline constexpr size_t kUnpackTileBytes = 16 * kMaxPanelRowBytes;

struct MatmulScratch {
  uint8_t* act_q;         // [kMaxActFormats][n_batch][act_row_stride] quantised activations
                          // (f16 mode: slot 0 holds the half rows)
  size_t act_row_stride;
  int n_batch;
  ActObserver* observer = nullptr;  // sees every product's input first (calibration); null: none
  // [n_unpack_tiles][kUnpackTileBytes], 64-byte aligned: one tile per pool thread, for
  // products whose panels no kernel reads directly. Needed (n_unpack_tiles >= pool.size())
  // only when some W has panels.
  uint8_t* unpack_tiles = nullptr;
  int n_unpack_tiles = 0;
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
