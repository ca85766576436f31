#include "backends/cpu/matmul.h"

#include <algorithm>
#include <cassert>

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
static_assert(kUnpackTileBytes == size_t(kPanelRows) * kMaxPanelRowBytes, "a tile holds one panel");
constexpr int kGroup = 4;  // token rows per fused W4A16 kernel call
// int8 products over at most this many token rows (a batched decode step) take
// vec_dot_rows_multi; longer ones (prefill) the tiled GEMM, whose per-call repacking only
// pays off over many tokens. Exact products take vec_dot_f32_rows_multi in groups of this
// many token rows (its largest register tile: one weight decode per 8 rows).
constexpr int kMultiRowDecode = 8;

// How a target's rows are computed: chosen once per target in the plan (choose_file_path,
// choose_path), run by the task in one call.
enum class Path : uint8_t {
  // Weights in the file's layout.
  int8_decode,         // vec_dot_rows
  int8_multi,          // vec_dot_rows_multi
  int8_gemm,           // gemm_q8
  int8_per_dot,        // vec_dot per weight row and token row
  i16_gemm,            // gemm_i16
  i16_tile,            // vec_dot_i16act_tile
  f16,                 // vec_dot_f16act(_multi)
  exact_decode,        // vec_dot_f32_rows
  exact_gemm,          // gemm_f32
  exact_multi,         // vec_dot_f32_rows_multi
  // Weights repacked into 16-row panels.
  i16_panels,          // gemm_i16_panels
  int8_panels_decode,  // vec_dot_panels, once per token row
  int8_gemm_panels,    // gemm_q8_panels
  unpack_panels,       // one panel at a time back into the file's layout, then its file path
};

struct Plan {
  const TypeKernels* tk[kMaxTargets];
  int act_slot[kMaxTargets];  // int8 activation buffer slot, or -1 when the path takes none
  Path path[kMaxTargets];
  Path file_path[kMaxTargets];  // the path over the file's layout (after unpacking, for panels)
  int64_t first_task[kMaxTargets + 1];
  TensorType slot_type[kMaxActFormats];
  float slot_scale[kMaxActFormats];  // static step, or 0: dynamic absmax / 127 per block
  const TypeKernels* slot_tk[kMaxActFormats];
  int n_slots = 0;
};

// What every path reads.
struct Group {
  std::span<const MatmulTarget> targets;
  const float* X;
  int n_tok;
  int64_t cols;
  const MatmulScratch& s;
  size_t slot_bytes;  // one activation slot: n_batch rows
  Plan p;

  const uint8_t* xq(int i) const { return s.act_q + size_t(p.act_slot[i]) * slot_bytes; }
};

// The path for weights in the file's layout. int8 needs a quantised activation slot (types
// whose activations stay f32 have none); int16 and f16 need the type's kernel for the mode;
// anything else runs exact, on the f32 activations.
Path choose_file_path(ActMode mode, const TypeKernels& tk, bool has_act_slot, int n_tok) {
  if (has_act_slot) {
    if (n_tok == 1) return Path::int8_decode;  // the kernel streams several weight rows per activation load
    if (n_tok <= kMultiRowDecode) return Path::int8_multi;  // a batched decode step: no per-call repacking
    if (tk.gemm_q8) return Path::int8_gemm;  // all tokens at once: the kernel tiles rows x tokens itself
    return Path::int8_per_dot;
  }
  if (mode == ActMode::int16 && tk.vec_dot_i16act_tile) {
    // Prefill: the GEMM, the tile's results bit for bit (2.2x faster at 64 rows in
    // bench_kernels on Zen 5; at 8 rows 15-25 % faster there, but a batched decode step of
    // 8 sequences ran 22 % slower with it than with the tile: 465 vs 600 tok/s, Q4_0).
    return n_tok > kMultiRowDecode ? Path::i16_gemm : Path::i16_tile;
  }
  if (mode == ActMode::f16 && tk.vec_dot_f16act) return Path::f16;
  if (n_tok == 1) return Path::exact_decode;
  // Exact prefill: the GEMM decodes each weight block once for up to 64 token rows (the same
  // sums, bit for bit, as the multi-row kernel).
  return n_tok > kMultiRowDecode ? Path::exact_gemm : Path::exact_multi;
}

// The path for a target: its file path, or for panels (int16 and int8 read them directly)
// a panel kernel when the table has one for the case.
Path choose_path(const Matrix& W, const TypeKernels& tk, Path file_path, int n_tok) {
  if (!W.panels) return file_path;
  const bool int8 = file_path == Path::int8_decode || file_path == Path::int8_multi ||
                    file_path == Path::int8_gemm || file_path == Path::int8_per_dot;
  const bool i16 = file_path == Path::i16_gemm || file_path == Path::i16_tile;
  if (i16 && tk.gemm_i16_panels) return Path::i16_panels;  // every token count: the tile's sums, bit for bit
  // A batched decode step runs the decode kernel once per token row over the task's few
  // panels (a few KiB, L1-resident after the first row): the same arithmetic as a solo step.
  // (Panels made for the int16 kernels on a table without int8 panel kernels, AVX2, take the
  // unpacking path in an int8 session.)
  if (int8 && n_tok <= kMultiRowDecode && tk.vec_dot_panels) return Path::int8_panels_decode;
  if (int8 && n_tok > 1 && tk.gemm_q8_panels) return Path::int8_gemm_panels;
  return Path::unpack_panels;
}

// ---- File-layout paths: rows [r0, r1) of target i, row r at w + (r - r0) * rb.

void int8_decode(const Group& g, int i, const uint8_t* w, size_t rb, int64_t r0, int64_t r1) {
  g.p.tk[i]->vec_dot_rows(g.cols, w, rb, int(r1 - r0), g.xq(i), g.targets[i].Y + r0);
}

void int8_multi(const Group& g, int i, const uint8_t* w, size_t rb, int64_t r0, int64_t r1) {
  const MatmulTarget& t = g.targets[i];
  g.p.tk[i]->vec_dot_rows_multi(g.cols, w, rb, int(r1 - r0), g.xq(i), g.s.act_row_stride, g.n_tok, t.Y + r0,
                                t.W->rows);
}

void int8_gemm(const Group& g, int i, const uint8_t* w, size_t rb, int64_t r0, int64_t r1) {
  const MatmulTarget& t = g.targets[i];
  g.p.tk[i]->gemm_q8(g.cols, w, rb, int(r1 - r0), g.xq(i), g.s.act_row_stride, g.n_tok, t.Y + r0, t.W->rows);
}

void int8_per_dot(const Group& g, int i, const uint8_t* w, size_t rb, int64_t r0, int64_t r1) {
  const int64_t rows = g.targets[i].W->rows;
  const uint8_t* xq = g.xq(i);
  for (int64_t r = r0; r < r1; ++r)
    for (int t = 0; t < g.n_tok; ++t)
      g.targets[i].Y[t * rows + r] = g.p.tk[i]->vec_dot(g.cols, w + size_t(r - r0) * rb, xq + t * g.s.act_row_stride);
}

void i16_gemm(const Group& g, int i, const uint8_t* w, size_t rb, int64_t r0, int64_t r1) {
  const MatmulTarget& t = g.targets[i];
  g.p.tk[i]->gemm_i16(g.cols, w, rb, int(r1 - r0), g.s.act_q, g.s.act_row_stride, g.n_tok, t.Y + r0, t.W->rows);
}

// A tile of weight rows x up to kMultiRowDecode token rows per call.
void i16_tile(const Group& g, int i, const uint8_t* w, size_t rb, int64_t r0, int64_t r1) {
  const int64_t rows = g.targets[i].W->rows;
  for (int t0 = 0; t0 < g.n_tok; t0 += kMultiRowDecode) {
    const int nt = std::min(kMultiRowDecode, g.n_tok - t0);
    g.p.tk[i]->vec_dot_i16act_tile(g.cols, w, rb, int(r1 - r0), g.s.act_q + size_t(t0) * g.s.act_row_stride,
                                   g.s.act_row_stride, nt, g.targets[i].Y + int64_t(t0) * rows + r0, rows);
  }
}

// W4A16: each weight block decoded once per group of up to kGroup token rows.
void f16(const Group& g, int i, const uint8_t* w, size_t rb, int64_t r0, int64_t r1) {
  const TypeKernels& tk = *g.p.tk[i];
  const int64_t rows = g.targets[i].W->rows;
  const size_t h_stride = g.s.act_row_stride / sizeof(uint16_t);
  const uint16_t* xh = reinterpret_cast<const uint16_t*>(g.s.act_q);
  for (int t0 = 0; t0 < g.n_tok; t0 += kGroup) {
    const int nt = std::min(kGroup, g.n_tok - t0);
    const uint16_t* x = xh + int64_t(t0) * h_stride;
    float* y = g.targets[i].Y + int64_t(t0) * rows;
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* row = w + size_t(r - r0) * rb;
      if (nt == 1) y[r] = tk.vec_dot_f16act(g.cols, row, x);
      else tk.vec_dot_f16act_multi(g.cols, row, x, int64_t(h_stride), nt, y + r, rows);
    }
  }
}

// Decode, exact: several weight rows share each activation vector.
void exact_decode(const Group& g, int i, const uint8_t* w, size_t rb, int64_t r0, int64_t r1) {
  g.p.tk[i]->vec_dot_f32_rows(g.cols, w, rb, int(r1 - r0), g.X, g.targets[i].Y + r0);
}

void exact_gemm(const Group& g, int i, const uint8_t* w, size_t rb, int64_t r0, int64_t r1) {
  const MatmulTarget& t = g.targets[i];
  g.p.tk[i]->gemm_f32(g.cols, w, rb, int(r1 - r0), g.X, g.cols, g.n_tok, t.Y + r0, t.W->rows);
}

// Exact, a batched decode step: a chunk of weight rows per call, each weight block decoded
// in registers once for the step's rows and FMA'd with their f32 activations.
void exact_multi(const Group& g, int i, const uint8_t* w, size_t rb, int64_t r0, int64_t r1) {
  const int64_t rows = g.targets[i].W->rows;
  for (int t0 = 0; t0 < g.n_tok; t0 += kMultiRowDecode) {
    const int nt = std::min(kMultiRowDecode, g.n_tok - t0);
    g.p.tk[i]->vec_dot_f32_rows_multi(g.cols, w, rb, int(r1 - r0), g.X + int64_t(t0) * g.cols, g.cols, nt,
                                      g.targets[i].Y + int64_t(t0) * rows + r0, rows);
  }
}

void file_rows(Path path, const Group& g, int i, const uint8_t* w, size_t rb, int64_t r0, int64_t r1) {
  switch (path) {
    case Path::int8_decode: return int8_decode(g, i, w, rb, r0, r1);
    case Path::int8_multi: return int8_multi(g, i, w, rb, r0, r1);
    case Path::int8_gemm: return int8_gemm(g, i, w, rb, r0, r1);
    case Path::int8_per_dot: return int8_per_dot(g, i, w, rb, r0, r1);
    case Path::i16_gemm: return i16_gemm(g, i, w, rb, r0, r1);
    case Path::i16_tile: return i16_tile(g, i, w, rb, r0, r1);
    case Path::f16: return f16(g, i, w, rb, r0, r1);
    case Path::exact_decode: return exact_decode(g, i, w, rb, r0, r1);
    case Path::exact_gemm: return exact_gemm(g, i, w, rb, r0, r1);
    case Path::exact_multi: return exact_multi(g, i, w, rb, r0, r1);
    default: return;  // panel paths never get here
  }
}

// ---- Panel paths: rows [r0, r1) of target i are whole panels.

void i16_panels(const Group& g, int i, int64_t r0, int64_t r1) {
  const MatmulTarget& t = g.targets[i];
  g.p.tk[i]->gemm_i16_panels(g.cols, t.W->panel(r0 / kPanelRows), int((r1 - r0) / kPanelRows), g.s.act_q,
                             g.s.act_row_stride, g.n_tok, t.Y + r0, t.W->rows);
}

void int8_panels_decode(const Group& g, int i, int64_t r0, int64_t r1) {
  const MatmulTarget& t = g.targets[i];
  for (int tok = 0; tok < g.n_tok; ++tok)
    g.p.tk[i]->vec_dot_panels(g.cols, t.W->panel(r0 / kPanelRows), int((r1 - r0) / kPanelRows),
                              g.xq(i) + tok * g.s.act_row_stride, t.Y + int64_t(tok) * t.W->rows + r0);
}

void int8_gemm_panels(const Group& g, int i, int64_t r0, int64_t r1) {
  const MatmulTarget& t = g.targets[i];
  g.p.tk[i]->gemm_q8_panels(g.cols, t.W->panel(r0 / kPanelRows), t.W->row_bytes, int(r1 - r0), g.xq(i),
                            g.s.act_row_stride, g.n_tok, t.Y + r0, t.W->rows);
}

// tile: kUnpackTileBytes of the running thread's own.
void unpack_panels(const Group& g, int i, int64_t r0, int64_t r1, uint8_t* tile) {
  const Matrix& W = *g.targets[i].W;
  for (int64_t q0 = r0; q0 < r1; q0 += kPanelRows) {
    const uint8_t* panel = W.panel(q0 / kPanelRows);
    for (int j = 0; j < kPanelRows; ++j) unpack_panel_row(W.type, panel, g.cols, j, tile + j * W.row_bytes);
    file_rows(g.p.file_path[i], g, i, tile, W.row_bytes, q0, q0 + kPanelRows);
  }
}

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
  const bool int8 = is_int8(mode);
  bool any_panels = false;
  for (const MatmulTarget& t : targets) any_panels = any_panels || t.W->panels;
  if ((int8 && n_tok > 1) || any_panels) chunk = (chunk + kPanelRows - 1) / kPanelRows * kPanelRows;

  Group g{targets, X, n_tok, cols, s, size_t(s.n_batch) * s.act_row_stride, {}};
  Plan& p = g.p;
  p.first_task[0] = 0;
  bool any_f16 = false, any_i16 = false, any_unpack = false;
  for (int i = 0; i < n_targets; ++i) {
    const TypeKernels& tk = kt.for_type(targets[i].W->type);
    p.tk[i] = &tk;
    p.act_slot[i] = -1;
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
    p.file_path[i] = choose_file_path(mode, tk, p.act_slot[i] >= 0, n_tok);
    p.path[i] = choose_path(*targets[i].W, tk, p.file_path[i], n_tok);
    any_f16 = any_f16 || p.file_path[i] == Path::f16;
    any_i16 = any_i16 || p.file_path[i] == Path::i16_gemm || p.file_path[i] == Path::i16_tile;
    any_unpack = any_unpack || p.path[i] == Path::unpack_panels;
    p.first_task[i + 1] = p.first_task[i] + (targets[i].W->rows + chunk - 1) / chunk;
  }
  assert(!any_unpack || (s.unpack_tiles && s.n_unpack_tiles >= pool.size()));
  (void)any_unpack;

  // f16 mode: every token row rounded to halves once, into slot 0 (rows act_row_stride apart).
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
      uint8_t* xq = s.act_q + slot * g.slot_bytes + t * s.act_row_stride;
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

  pool.run_indexed(p.first_task[n_targets], [&](int64_t task, int thread) {
    int i = 0;
    while (task >= p.first_task[i + 1]) ++i;
    const Matrix& W = *targets[i].W;
    const int64_t r0 = (task - p.first_task[i]) * chunk, r1 = std::min(W.rows, r0 + chunk);
    switch (p.path[i]) {
      case Path::i16_panels: return i16_panels(g, i, r0, r1);
      case Path::int8_panels_decode: return int8_panels_decode(g, i, r0, r1);
      case Path::int8_gemm_panels: return int8_gemm_panels(g, i, r0, r1);
      case Path::unpack_panels: return unpack_panels(g, i, r0, r1, s.unpack_tiles + size_t(thread) * kUnpackTileBytes);
      default: return file_rows(p.path[i], g, i, W.row(r0), W.row_bytes, r0, r1);
    }
  });
}

}  // namespace pllm
