#include "model/matmul.h"

#include <algorithm>

#include "kernels/kernels.h"
#include "quant/panel.h"

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

namespace {

constexpr int kMaxTargets = 4;
static_assert(kMaxActFormats >= kMaxTargets, "one activation slot per target at most");
constexpr int kGroup = 4;  // token rows per fused W4A16 kernel call
// int8 products over at most this many token rows (a batched decode step) take
// vec_dot_rows_multi; longer ones (prefill) the tiled GEMM, whose per-call repacking only
// pays off over many tokens. Exact products take vec_dot_f32_rows_multi in groups of this
// many token rows (its largest register tile: one weight decode per 8 rows).
constexpr int kMultiRowDecode = 8;

struct Plan {
  const TypeKernels* tk[kMaxTargets];
  int act_slot[kMaxTargets];  // int8 activation buffer slot, or -1 for the exact f32 path
  bool f16[kMaxTargets];      // W4A16 kernels (f16 mode, type has them)
  bool i16[kMaxTargets];      // int16 tiles (int16 mode, this ISA has one for the type)
  int64_t first_task[kMaxTargets + 1];
  TensorType slot_type[kMaxActFormats];
  float slot_scale[kMaxActFormats];  // static step, or 0: dynamic absmax / 127 per block
  const TypeKernels* slot_tk[kMaxActFormats];
  int n_slots = 0;
};

}  // namespace

void matmul_group(std::span<const MatmulTarget> targets, const float* X, int n_tok, ActMode mode,
                  const MatmulScratch& s, ThreadPool& pool) {
  const KernelTable& kt = kernels();
  const int n_targets = int(targets.size());
  if (n_targets > kMaxTargets) {  // not expected; keep correctness anyway
    for (const MatmulTarget& t : targets) matmul_group({&t, 1}, X, n_tok, mode, s, pool);
    return;
  }
  if (s.observer)
    for (const MatmulTarget& t : targets) s.observer->observe(*t.W, X, n_tok);
  const int64_t cols = targets[0].W->cols;

  // Chunks of rows, the same size for every target: enough to balance the threads. A prompt
  // takes 4x more: its tasks are long, so a thread that runs slow (a busy core, another
  // process) would otherwise leave the others waiting for a whole one at the end.
  int64_t total_rows = 0;
  for (const MatmulTarget& t : targets) total_rows += t.W->rows;
  const int64_t n_chunks_target = int64_t(pool.size()) * (n_tok > kMultiRowDecode ? 16 : 4);
  int64_t chunk = std::max<int64_t>(16, (total_rows + n_chunks_target - 1) / n_chunks_target);
  // Prefill in int8 mode runs the tiled GEMM, which works on 16-row panels.
  const bool int8 = mode == ActMode::int8 || mode == ActMode::int8_static;
  const bool gemm = int8 && n_tok > 1;
  bool any_panels = false;
  for (const MatmulTarget& t : targets) any_panels = any_panels || t.W->panels;
  if (gemm || any_panels) chunk = (chunk + 15) / 16 * 16;  // (kPanelRows = 16)

  Plan p;
  p.first_task[0] = 0;
  bool any_f16 = false, any_i16 = false;
  for (int i = 0; i < n_targets; ++i) {
    const TypeKernels& tk = kt.for_type(targets[i].W->type);
    p.tk[i] = &tk;
    p.act_slot[i] = -1;
    p.f16[i] = mode == ActMode::f16 && tk.vec_dot_f16act != nullptr;
    any_f16 = any_f16 || p.f16[i];
    p.i16[i] = mode == ActMode::int16 && tk.vec_dot_i16act_tile != nullptr;
    any_i16 = any_i16 || p.i16[i];
    if (int8 && tk.act_type != TensorType::F32) {
      // Targets that share X share a quantised copy when format and step agree (the
      // model gives products with one input one scale, so Q/K/V and gate/up share).
      const float scale = mode == ActMode::int8_static ? targets[i].W->act_scale : 0.0f;
      int slot = 0;
      while (slot < p.n_slots && (p.slot_type[slot] != tk.act_type || p.slot_scale[slot] != scale)) ++slot;
      if (slot == p.n_slots) {
        p.slot_type[p.n_slots] = tk.act_type;
        p.slot_scale[p.n_slots] = scale;
        p.slot_tk[p.n_slots++] = &tk;
      }
      p.act_slot[i] = slot;
    }
    p.first_task[i + 1] = p.first_task[i] + (targets[i].W->rows + chunk - 1) / chunk;
  }

  const size_t slot_bytes = size_t(s.n_batch) * s.act_row_stride;
  // f16 mode: every token row rounded to halves once, into slot 0 (rows act_row_stride apart).
  const size_t h_stride = s.act_row_stride / sizeof(uint16_t);
  const uint16_t* xh = reinterpret_cast<const uint16_t*>(s.act_q);
  // int16 mode: likewise, every token row as block_q16 in slot 0.
  if (any_f16 || any_i16) {
    auto convert = [&](int64_t t) {
      if (any_i16) kt.quantize_row_q16(X + t * cols, s.act_q + t * s.act_row_stride, cols);
      else kt.f32_to_f16_row(X + t * cols, reinterpret_cast<uint16_t*>(s.act_q + t * s.act_row_stride), cols);
    };
    if (n_tok <= 2) {  // as for int8 below: cheaper here than a hand-off
      for (int t = 0; t < n_tok; ++t) convert(t);
    } else {
      pool.run_spread(n_tok, convert);
    }
  }
  if (p.n_slots > 0) {
    auto quantize = [&](int64_t task) {
      const int slot = int(task / n_tok), t = int(task % n_tok);
      uint8_t* xq = s.act_q + slot * slot_bytes + t * s.act_row_stride;
      if (p.slot_scale[slot] > 0.0f) p.slot_tk[slot]->quantize_act_static(X + t * cols, xq, cols, p.slot_scale[slot]);
      else p.slot_tk[slot]->quantize_act(X + t * cols, xq, cols);
    };
    // A row or two quantise in well under a microsecond: cheaper on this thread than a
    // hand-off to the pool (decode would otherwise pay one extra job per product).
    const int64_t n_q = int64_t(p.n_slots) * n_tok;
    if (n_q <= 2) {
      for (int64_t i = 0; i < n_q; ++i) quantize(i);
    } else {
      pool.run_spread(n_q, quantize);
    }
  }

  // Rows [r0, r1) of product i in the file's layout: row r at w + (r - r0) * row_bytes.
  auto file_rows = [&](int i, const uint8_t* w, size_t rb, int64_t r0, int64_t r1) {
    const int64_t rows = targets[i].W->rows;
    float* Y = targets[i].Y;
    const TypeKernels& tk = *p.tk[i];
    auto row = [&](int64_t r) { return w + size_t(r - r0) * rb; };
    if (p.act_slot[i] >= 0) {
      const uint8_t* xq = s.act_q + p.act_slot[i] * slot_bytes;
      if (n_tok == 1) {  // decode: the kernel streams several weight rows per activation load
        tk.vec_dot_rows(cols, w, rb, int(r1 - r0), xq, Y + r0);
        return;
      }
      if (n_tok <= kMultiRowDecode) {  // a batched decode step: no per-call repacking
        tk.vec_dot_rows_multi(cols, w, rb, int(r1 - r0), xq, s.act_row_stride, n_tok, Y + r0, rows);
        return;
      }
      if (gemm && tk.gemm_q8) {  // all tokens at once: the kernel tiles rows x tokens itself
        tk.gemm_q8(cols, w, rb, int(r1 - r0), xq, s.act_row_stride, n_tok, Y + r0, rows);
        return;
      }
      for (int64_t r = r0; r < r1; ++r)
        for (int t = 0; t < n_tok; ++t) Y[t * rows + r] = tk.vec_dot(cols, row(r), xq + t * s.act_row_stride);
      return;
    }
    if (p.i16[i]) {  // int16: a tile of weight rows x up to kMultiRowDecode token rows per call
      // Prefill: the GEMM, the tile's results bit for bit (2.2x faster at 64 rows in
      // bench_kernels on Zen 5; at 8 rows 15-25 % faster there, but a batched decode step of
      // 8 sequences ran 22 % slower with it than with the tile: 465 vs 600 tok/s, Q4_0).
      if (n_tok > kMultiRowDecode) {
        tk.gemm_i16(cols, w, rb, int(r1 - r0), s.act_q, s.act_row_stride, n_tok, Y + r0, rows);
        return;
      }
      for (int t0 = 0; t0 < n_tok; t0 += kMultiRowDecode) {
        const int nt = std::min(kMultiRowDecode, n_tok - t0);
        tk.vec_dot_i16act_tile(cols, w, rb, int(r1 - r0), s.act_q + size_t(t0) * s.act_row_stride, s.act_row_stride, nt,
                    Y + int64_t(t0) * rows + r0, rows);
      }
      return;
    }
    if (p.f16[i]) {  // W4A16: each weight block decoded once per group of up to kGroup token rows
      for (int t0 = 0; t0 < n_tok; t0 += kGroup) {
        const int nt = std::min(kGroup, n_tok - t0);
        const uint16_t* x = xh + int64_t(t0) * h_stride;
        float* y = Y + int64_t(t0) * rows;
        for (int64_t r = r0; r < r1; ++r) {
          if (nt == 1) y[r] = tk.vec_dot_f16act(cols, row(r), x);
          else tk.vec_dot_f16act_multi(cols, row(r), x, int64_t(h_stride), nt, y + r, rows);
        }
      }
      return;
    }
    if (n_tok == 1) {  // decode, exact: several weight rows share each activation vector
      tk.vec_dot_f32_rows(cols, w, rb, int(r1 - r0), X, Y + r0);
      return;
    }
    // Exact prefill: the GEMM decodes each weight block once for up to 64 token rows (the same
    // sums, bit for bit, as the multi-row kernel below).
    if (n_tok > kMultiRowDecode) {
      tk.gemm_f32(cols, w, rb, int(r1 - r0), X, cols, n_tok, Y + r0, rows);
      return;
    }
    // Exact, a batched decode step: a chunk of weight rows per call, each weight block decoded
    // in registers once for the step's rows and FMA'd with their f32 activations.
    for (int t0 = 0; t0 < n_tok; t0 += kMultiRowDecode) {
      const int nt = std::min(kMultiRowDecode, n_tok - t0);
      tk.vec_dot_f32_rows_multi(cols, w, rb, int(r1 - r0), X + int64_t(t0) * cols, cols, nt, Y + int64_t(t0) * rows + r0,
                                rows);
    }
  };

  pool.run(p.first_task[n_targets], [&](int64_t task) {
    int i = 0;
    while (task >= p.first_task[i + 1]) ++i;
    const Matrix& W = *targets[i].W;
    const int64_t r0 = (task - p.first_task[i]) * chunk, r1 = std::min(W.rows, r0 + chunk);
    if (!W.panels) {
      file_rows(i, W.row(r0), W.row_bytes, r0, r1);
      return;
    }
    // Repacked (16-row panels; r0, r1 are panel boundaries). int16 and int8 read the panels
    // directly; every other path unpacks one panel at a time into the file's layout.
    if (p.i16[i] && p.tk[i]->gemm_i16_panels) {  // every token count: the tile's sums, bit for bit
      p.tk[i]->gemm_i16_panels(cols, W.panel(r0 / kPanelRows), int((r1 - r0) / kPanelRows), s.act_q,
                               s.act_row_stride, n_tok, targets[i].Y + r0, W.rows);
      return;
    }
    // A batched decode step runs the decode kernel once per token row over the task's few
    // panels (a few KiB, L1-resident after the first row): the same arithmetic as a solo step.
    // (Panels made for the int16 kernels on a table without int8 panel kernels, AVX2, take the
    // unpacking path below in an int8 session.)
    if (p.act_slot[i] >= 0 && n_tok <= kMultiRowDecode && p.tk[i]->vec_dot_panels) {
      for (int t = 0; t < n_tok; ++t)
        p.tk[i]->vec_dot_panels(cols, W.panel(r0 / kPanelRows), int((r1 - r0) / kPanelRows),
                                s.act_q + p.act_slot[i] * slot_bytes + t * s.act_row_stride,
                                targets[i].Y + int64_t(t) * W.rows + r0);
      return;
    }
    if (p.act_slot[i] >= 0 && gemm && p.tk[i]->gemm_q8_panels) {
      p.tk[i]->gemm_q8_panels(cols, W.panel(r0 / kPanelRows), W.row_bytes, int(r1 - r0),
                              s.act_q + p.act_slot[i] * slot_bytes, s.act_row_stride, n_tok, targets[i].Y + r0, W.rows);
      return;
    }
    alignas(64) uint8_t tile[kPanelRows * kMaxPanelRowBytes];
    for (int64_t q0 = r0; q0 < r1; q0 += kPanelRows) {
      for (int j = 0; j < kPanelRows; ++j) unpack_panel_row(W.type, W.panel(q0 / kPanelRows), cols, j, tile + j * W.row_bytes);
      file_rows(i, tile, W.row_bytes, q0, q0 + kPanelRows);
    }
  });
}

}  // namespace pllm
