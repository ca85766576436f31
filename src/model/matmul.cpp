#include "model/matmul.h"

#include <algorithm>

#include "kernels/kernels.h"

namespace pllm {

size_t max_act_row_bytes(int64_t n) {
  const KernelTable& kt = kernels();
  size_t best = size_t(n) * sizeof(float);
  for (const TypeKernels& tk : kt.types) {
    if (!tk.available) continue;
    // act_bytes needs n to be a multiple of the block size; round n up to 256.
    const int64_t nr = (n + 255) / 256 * 256;
    best = std::max(best, tk.act_bytes(nr));
  }
  return (best + 63) / 64 * 64;
}

void matmul(const Matrix& W, const float* X, int n_tok, float* Y, ActMode mode, const MatmulScratch& s,
            ThreadPool& pool) {
  const KernelTable& kt = kernels();
  const TypeKernels& tk = kt.for_type(W.type);
  const int64_t cols = W.cols, rows = W.rows;
  const bool float_weights = tk.act_type == TensorType::F32;

  if (mode == ActMode::int8 || float_weights) {
    // Float weights dot f32 activations directly; quantised ones meet int8 activation blocks.
    pool.run(n_tok, [&](int64_t t) { tk.quantize_act(X + t * cols, s.act_q + t * s.act_row_stride, cols); });
    const int64_t n_chunks_target = int64_t(pool.size()) * 4;
    const int64_t chunk = std::max<int64_t>(16, (rows + n_chunks_target - 1) / n_chunks_target);
    const int64_t n_chunks = (rows + chunk - 1) / chunk;
    pool.run(n_chunks, [&](int64_t c) {
      const int64_t r0 = c * chunk, r1 = std::min(rows, r0 + chunk);
      for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* w = W.row(r);
        for (int t = 0; t < n_tok; ++t) Y[t * rows + r] = tk.vec_dot(cols, w, s.act_q + t * s.act_row_stride);
      }
    });
    return;
  }

  // Exact: fused kernels decode each weight block in registers and FMA it against f32
  // activations, for up to kGroup token rows at once (weights decoded once per group).
  constexpr int kGroup = 4;
  const int64_t n_chunks_target = int64_t(pool.size()) * 4;
  const int64_t chunk = std::max<int64_t>(16, (rows + n_chunks_target - 1) / n_chunks_target);
  const int64_t n_chunks = (rows + chunk - 1) / chunk;
  pool.run(n_chunks, [&](int64_t c) {
    const int64_t r0 = c * chunk, r1 = std::min(rows, r0 + chunk);
    for (int t0 = 0; t0 < n_tok; t0 += kGroup) {
      const int nt = std::min(kGroup, n_tok - t0);
      const float* x = X + int64_t(t0) * cols;
      float* y = Y + int64_t(t0) * rows;
      for (int64_t r = r0; r < r1; ++r) {
        if (nt == 1) y[r] = tk.vec_dot_f32(cols, W.row(r), x);
        else tk.vec_dot_f32_multi(cols, W.row(r), x, cols, nt, y + r, rows);
      }
    }
  });
}

}  // namespace pllm
