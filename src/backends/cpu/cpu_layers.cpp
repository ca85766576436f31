#include "backends/cpu/cpu_layers.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

#include "backends/cpu/matmul.h"
#include "base/mapped_file.h"
#include "base/trace.h"
#include "kernels/kernels.h"
#include "kernels/ops_f32.h"

namespace pllm {

CpuLayers::CpuLayers(const ModelConfig& c, StepScratch& s, ThreadPool& pool, std::span<const SeqStep> seqs,
                     int n_rows, const StepOptions& opt)
    : c_(c), s_(s), pool_(pool), seqs_(seqs), n_(n_rows), opt_(opt) {
  s_.mm.observer = opt.observer;
}

bool CpuLayers::cancelled() const {
  return std::all_of(seqs_.begin(), seqs_.end(), [](const SeqStep& q) { return q.cancelled(); });
}

float* CpuLayers::buf(Act a) {
  switch (a) {
    case Act::x: return s_.x.data();
    case Act::h: return s_.h.data();
    case Act::q: return s_.q.data();
    case Act::k: return s_.k.data();
    case Act::v: return s_.v.data();
    case Act::att: return s_.att.data();
    case Act::gate: return s_.gate.data();
    case Act::up: return s_.up.data();
    case Act::proj: return s_.proj.data();
    case Act::ple: return s_.ple.data();
  }
  return nullptr;
}

Result<void> CpuLayers::embed(const Matrix& table, float scale) {
  TraceScope ts(opt_.tracer, "embed");
  const KernelTable& kt = kernels();
  const int E = c_.n_embd;
  for (int r = 0; r < n_; ++r) {
    if (const float* e = s_.row_embd[size_t(r)]) {  // an image row: its embedding as it is
      std::memcpy(s_.x.data() + size_t(r) * E, e, size_t(E) * sizeof(float));
      continue;
    }
    const int32_t id = s_.row_token[size_t(r)];
    if (id < 0 || id >= table.rows)
      return make_error(Status::invalid_argument, "token id " + std::to_string(id) + " is out of range");
    float* x = s_.x.data() + size_t(r) * E;
    alignas(64) uint8_t row[kMaxPanelRowBytes];
    kt.for_type(table.type).dequantize_row(file_row(table, id, row), x, E);
    if (scale != 1.0f)
      for (int j = 0; j < E; ++j) x[j] *= scale;
  }
  return {};
}

void CpuLayers::norm(const char* name, int layer, Act src, const float* w, Act dst) {
  TraceScope ts(opt_.tracer, name, layer);
  const size_t E = size_t(c_.n_embd);
  const float* in = buf(src);
  float* out = buf(dst);
  for_rows([&](int64_t r) { rmsnorm_f32(in + r * E, w, out + r * E, int64_t(E), c_.rms_eps); });
}

// int16 mode: a prompt's rows run exact where this ISA has no int16 GEMM (the tile alone is
// slower there than exact's f32 GEMM); decode rows always run int16.
ActMode CpuLayers::mode_of(const SeqStep& q) const {
  const bool exact_prompt = opt_.act_mode == ActMode::int16 && q.tokens.size() > 1 && !kernels().int16_prompts;
  return exact_prompt ? ActMode::exact : opt_.act_mode;
}

template <class RowsOf, class F>
void CpuLayers::for_each_mode_run(RowsOf rows_of, F f) const {
  int first = 0, row = 0;
  ActMode mode = opt_.act_mode;
  for (const SeqStep& q : seqs_) {
    const int n = rows_of(q);
    if (n == 0) continue;
    const ActMode m = mode_of(q);
    if (row > first && m != mode) {
      f(first, row - first, mode);
      first = row;
    }
    mode = m;
    row += n;
  }
  if (row > first) f(first, row - first, mode);
}

void CpuLayers::project(const char* name, int layer, std::initializer_list<Product> products, Act in) {
  TraceScope ts(opt_.tracer, name, layer);
  MatmulTarget targets[4];
  int n_t = 0;
  for (const Product& p : products) targets[n_t++] = {p.W, buf(p.out)};
  const size_t E = size_t(targets[0].W->cols);
  const float* X = buf(in);
  auto rows_of = [](const SeqStep& q) { return int(q.tokens.size()); };
  for_each_mode_run(rows_of, [&](int r0, int n, ActMode mode) {
    MatmulTarget at[4];
    for (int i = 0; i < n_t; ++i) at[i] = {targets[i].W, targets[i].Y + size_t(r0) * size_t(targets[i].W->rows)};
    if (opt_.fuse) {
      matmul_group({at, size_t(n_t)}, X + size_t(r0) * E, n, mode, s_.mm, pool_);
    } else {
      for (int i = 0; i < n_t; ++i) matmul(*at[i].W, X + size_t(r0) * E, n, at[i].Y, mode, s_.mm, pool_);
    }
  });
}

void CpuLayers::qkv_to_cache(int l, const QkvSpec& sp) {
  TraceScope ts(opt_.tracer, "qkv_rope_kv", l);
  const int QD = c_.q_dim_at(l), KD = c_.kv_dim_at(l), HD = c_.head_dim_at(l);
  // Per row: biases, q/k norms and RoPE (independent rows: on the pool for a prompt), then the
  // cache writes in row order (a q4 cache quantises a group once its last row is in). A layer
  // sharing another's keys and values (sp.store_kv false) prepares its queries only.
  for_rows([&](int64_t r) {
    float* q = &s_.q[size_t(r) * QD];
    float* k = &s_.k[size_t(r) * KD];
    float* v = &s_.v[size_t(r) * KD];
    if (sp.bq) {
      add_f32(q, sp.bq, QD);
      add_f32(k, sp.bk, KD);
      add_f32(v, sp.bv, KD);
    }
    const int pos = s_.row_pos[size_t(r)];
    float cs[kMaxRopeDims];
    rope_angles(sp.rope.n_rot, sp.rope.table(s_.row_kv[size_t(r)]->n_ctx()), double(pos), cs, sp.rope.mscale);
    for (int h = 0; h < c_.n_head; ++h) {
      if (sp.q_norm) rmsnorm_f32(q + h * HD, sp.q_norm, q + h * HD, HD, c_.rms_eps);
      rope_apply(q + h * HD, sp.rope.n_rot, cs, sp.rope.neox);
    }
    if (!sp.store_kv) return;
    for (int h = 0; h < c_.n_head_kv; ++h) {
      if (sp.k_norm) rmsnorm_f32(k + h * HD, sp.k_norm, k + h * HD, HD, c_.rms_eps);
      rope_apply(k + h * HD, sp.rope.n_rot, cs, sp.rope.neox);
      if (sp.v_norm) rmsnorm_f32(v + h * HD, nullptr, v + h * HD, HD, c_.rms_eps);
    }
  });
  if (!sp.store_kv) return;
  for (int r = 0; r < n_; ++r)
    s_.row_kv[size_t(r)]->store(l, s_.row_pos[size_t(r)], &s_.k[size_t(r) * KD], &s_.v[size_t(r) * KD]);
}

void CpuLayers::short_conv(int l, const float* kernel, Act b_act, Act c_act, Act x_act, Act out_act) {
  TraceScope ts(opt_.tracer, "short_conv", l);
  const size_t E = size_t(c_.n_embd);
  float* b = buf(b_act);
  const float* c = buf(c_act);
  const float* x = buf(x_act);
  float* out = buf(out_act);
  for_rows([&](int64_t r) {  // b = b * x: the rows' conv inputs
    for (size_t j = 0; j < E; ++j) b[size_t(r) * E + j] *= x[size_t(r) * E + j];
  });
  for_rows([&](int64_t r) {
    float* o = out + size_t(r) * E;
    causal_conv_row(l, r, b, E, kernel, o, 0, E);
    for (size_t j = 0; j < E; ++j) o[j] *= c[size_t(r) * E + j];
  });
  keep_conv_rows(l, b, E);
}

void CpuLayers::causal_conv_row(int l, int64_t r, const float* rows, size_t width, const float* kernel, float* out,
                                size_t j0, size_t j1) const {
  const int T = c_.conv_taps;
  const KvCache* kv = s_.row_kv[size_t(r)];
  const int pos = s_.row_pos[size_t(r)];
  const float* in[64];
  for (int t = 0; t < T; ++t) {
    const int p = pos - (T - 1) + t;
    const int64_t rr = r - (pos - p);
    in[t] = p < 0 ? nullptr : rr >= 0 && s_.row_kv[size_t(rr)] == kv ? rows + size_t(rr) * width : kv->conv_row(l, p);
  }
  for (size_t j = j0; j < j1; ++j) {
    const float* k = kernel + j * size_t(T);
    float acc = 0.0f;
    for (int t = 0; t < T; ++t)
      if (in[t]) acc += k[t] * in[t][j];
    out[j] = acc;
  }
}

void CpuLayers::keep_conv_rows(int l, const float* rows, size_t width) {
  for_rows([&](int64_t r) {
    KvCache* kv = s_.row_kv[size_t(r)];
    const int pos = s_.row_pos[size_t(r)];
    if (pos >= kv->end() - kv->conv_history()) std::memcpy(kv->conv_row(l, pos), rows + size_t(r) * width, width * sizeof(float));
  });
}

// A decode row with a long context would leave threads idle with one task per kv head: its
// visible positions are split into parts, merged afterwards in order. The count is the one a
// step of this row alone would use (its visible positions, the kv heads, the threads), never
// the step's other rows: a row's logits are then the same in any batch, which batched decoding
// and speculative verify passes (SeqStep::as_decode_steps) rely on.
int CpuLayers::decode_parts(int l, int r) const {
  const int visible = s_.row_kv[size_t(r)]->n_visible(l, s_.row_pos[size_t(r)], s_.row_last[size_t(r)]);
  const int tasks = c_.n_head_kv, threads = pool_.size();
  int n_parts = std::clamp(visible / 512, 1, StepScratch::kMaxAttnParts);
  // Fewer tasks than a multiple of the threads (SmolLM2: 3 kv heads on 2 threads) would leave
  // a thread idle for a whole head: split further while each part keeps >= 64 positions.
  while ((tasks * n_parts) % threads != 0 && n_parts < StepScratch::kMaxAttnParts && visible / (n_parts + 1) >= 64)
    ++n_parts;
  return n_parts;
}

void CpuLayers::attend(int l, AttnScore scale, const RopeSpec& rope) {
  TraceScope ts(opt_.tracer, "attention", l);
  const int n_kv = c_.n_head_kv, HD = c_.head_dim_at(l), QD = c_.q_dim_at(l), group = c_.n_head / c_.n_head_kv;
  // Prompt rows: the query heads sharing a kv head go together, so each kv head is read once per
  // row, and up to kMaxGroup / group consecutive rows of a sequence go together too, so each
  // cached key and value is read (and widened from f16) once per tile (KvCache::attend_rows:
  // the same results bit for bit as one row alone unsplit). Decode rows: one task per (row, kv
  // head, part) of decode_parts.
  const int tile = std::max(1, KvCache::kMaxGroup / group);
  int n_tiles = 0, n_split = 0;
  int64_t split_tasks = 0;
  for (int r = 0; r < n_;) {
    // Decode rows and bidirectional rows (each sees its step's later rows): one task per part.
    if (s_.row_decode[size_t(r)] || s_.row_last[size_t(r)] != s_.row_pos[size_t(r)]) {
      const int parts = decode_parts(l, r);
      s_.split_row[size_t(n_split)] = r;
      s_.split_parts[size_t(n_split)] = parts;
      s_.split_first[size_t(n_split)] = int(split_tasks);
      split_tasks += int64_t(parts) * n_kv;
      ++n_split;
      ++r;
      continue;
    }
    int e = r + 1;
    while (e < n_ && !s_.row_decode[size_t(e)] && e - r < tile && s_.row_kv[size_t(e)] == s_.row_kv[size_t(r)] &&
           s_.row_pos[size_t(e)] == s_.row_pos[size_t(r)] + (e - r))
      ++e;
    s_.attn_tiles[size_t(n_tiles)] = r;
    s_.attn_tile_end[size_t(n_tiles++)] = e;
    r = e;
  }
  s_.split_first[size_t(n_split)] = int(split_tasks);
  const size_t need = size_t(split_tasks) * size_t(group);
  if (s_.attn_parts.size() < need) s_.attn_parts.resize(need, /*zero=*/false);
  AttnAccum* parts = s_.attn_parts.data();  // [decode row][g][part][j]
  const int64_t tile_tasks = int64_t(n_tiles) * n_kv;
  pool_.run(tile_tasks + split_tasks, [&](int64_t task) {
    if (task < tile_tasks) {
      // Last tiles first: they see the most positions, so the threads end together.
      const int t = n_tiles - 1 - int(task / n_kv), g = int(task % n_kv);
      const int r0 = s_.attn_tiles[size_t(t)], nr = s_.attn_tile_end[size_t(t)] - r0;
      const size_t gq = size_t(group) * HD;
      alignas(64) float qt[KvCache::kMaxGroup * kMaxHeadDim];  // the tile's query heads, row by row
      for (int j = 0; j < nr; ++j)
        std::memcpy(qt + size_t(j) * gq, &s_.q[size_t(r0 + j) * QD + size_t(g) * gq], gq * sizeof(float));
      AttnAccum a[KvCache::kMaxGroup];
      for (int j = 0; j < nr * group; ++j) attn_accum_init(a[j], HD);
      s_.row_kv[size_t(r0)]->attend_rows(l, s_.row_pos[size_t(r0)], nr, g, group, qt, scale, rope, a);
      for (int j = 0; j < nr; ++j)
        for (int h = 0; h < group; ++h)
          attn_accum_finish(a[j * group + h], HD, &s_.att[size_t(r0 + j) * QD + size_t(g) * gq + size_t(h) * HD]);
      return;
    }
    const int64_t st = task - tile_tasks;
    const int i = int(std::upper_bound(s_.split_first.begin(), s_.split_first.begin() + n_split, int(st)) -
                      s_.split_first.begin()) - 1;
    const int r = s_.split_row[size_t(i)], n_parts = s_.split_parts[size_t(i)];
    const int local = int(st) - s_.split_first[size_t(i)], g = local / n_parts, p = local % n_parts;
    AttnAccum* a = parts + size_t(st) * group;
    for (int j = 0; j < group; ++j) attn_accum_init(a[j], HD);
    const size_t at = size_t(r) * QD + size_t(g) * group * HD;
    // Causal: the row at position pos sees what its cache keeps up to pos (up to row_last when
    // its step is bidirectional).
    s_.row_kv[size_t(r)]->attend_part(l, s_.row_pos[size_t(r)], g, group, &s_.q[at], scale, rope, p, n_parts, a,
                                      s_.row_last[size_t(r)]);
  });
  for (int i = 0; i < n_split; ++i) {
    const int r = s_.split_row[size_t(i)], n_parts = s_.split_parts[size_t(i)];
    for (int g = 0; g < n_kv; ++g)
      for (int j = 0; j < group; ++j) {
        AttnAccum* first = parts + (size_t(s_.split_first[size_t(i)]) + size_t(g) * n_parts) * group;
        for (int p = 1; p < n_parts; ++p) merge_accum(first[j], first[size_t(p) * group + j], HD);
        attn_accum_finish(first[j], HD, &s_.att[size_t(r) * QD + (size_t(g) * group + j) * HD]);
      }
  }
}

void CpuLayers::glu(int l, Glu kind, int n_ff) {
  TraceScope ts(opt_.tracer, kind == Glu::silu ? "swiglu" : "geglu", l);
  const auto f = kind == Glu::silu ? kernels().swiglu_f32 : kernels().geglu_f32;
  float* g = s_.gate.data();
  const float* u = s_.up.data();
  for_rows([&](int64_t r) { f(g + r * n_ff, u + r * n_ff, g + r * n_ff, n_ff); });
}

Result<void> CpuLayers::per_layer_inputs(const PerLayerInputSpec& sp, Act ple_act) {
  TraceScope ts(opt_.tracer, "per_layer_inputs");
  const KernelTable& kt = kernels();
  const Matrix& table = *sp.table;
  const int P = c_.n_embd_per_layer;
  const size_t W = size_t(c_.n_layer) * size_t(P);
  float* ple = buf(ple_act);
  // An image row (an embedding, no token) takes the padding token 0's row, as llama.cpp does
  // (its TAG_GEMMA4_IMG_PADDING).
  auto table_row = [&](int r) { return s_.row_embd[size_t(r)] ? 0 : s_.row_token[size_t(r)]; };
  for (int r = 0; r < n_; ++r) {  // ids first: a bad one fails the step before any row changes
    const int32_t id = table_row(r);
    if (id < 0 || id >= table.rows)
      return make_error(Status::invalid_argument, "token id " + std::to_string(id) + " is out of range");
  }
  // The rows stay in the file (most of an E2B file): where they are not in the page cache, a
  // prompt's rows are read together rather than as one fault after another on each thread.
  for (int r = 0; r < n_; ++r) MappedFile::will_need(table.row(table_row(r)), table.row_bytes);
  for_rows([&](int64_t r) {
    float* p = ple + size_t(r) * W;
    // The table row is read where it lies in the mapped file: repacking never visits this
    // table (model/repack.cpp: token_embd, output and the layers' matrices), so it has no panels.
    alignas(64) float tok[kMaxPanelRowBytes / 2];
    const uint8_t* row = table.row(table_row(int(r)));
    for (int l = 0; l < c_.n_layer; ++l) {
      float* b = p + size_t(l) * size_t(P);
      kt.for_type(table.type).dequantize_row(row + size_t(l) * (table.row_bytes / size_t(c_.n_layer)), tok, P);
      for (int j = 0; j < P; ++j) b[j] *= sp.proj_scale;
      rmsnorm_f32(b, sp.proj_norm, b, P, c_.rms_eps);
      for (int j = 0; j < P; ++j) b[j] = (b[j] + tok[j] * sp.tok_scale) * sp.out_scale;
    }
  });
  return {};
}

void CpuLayers::per_layer_input(int l, Act ple_act, Act dst) {
  const size_t P = size_t(c_.n_embd_per_layer), W = size_t(c_.n_layer) * P;
  const float* ple = buf(ple_act);
  float* out = buf(dst);
  for (int r = 0; r < n_; ++r) std::memcpy(out + size_t(r) * P, ple + size_t(r) * W + size_t(l) * P, P * sizeof(float));
}

void CpuLayers::scale(int, Act a, float sc) {
  const size_t E = size_t(c_.n_embd);
  float* y = buf(a);
  for_rows([&](int64_t r) {
    for (size_t j = 0; j < E; ++j) y[size_t(r) * E + j] *= sc;
  });
}

void CpuLayers::residual(int l, Act from, const float* bias, const float* post_norm, float scale) {
  TraceScope ts(opt_.tracer, "residual", l);
  const int E = c_.n_embd;
  float* y = buf(from);
  for_rows([&](int64_t r) {
    float* yr = y + r * E;
    if (bias) add_f32(yr, bias, E);
    if (post_norm) rmsnorm_f32(yr, post_norm, yr, E, c_.rms_eps);
    if (scale != 1.0f)
      for (int j = 0; j < E; ++j) yr[j] *= scale;
    add_f32(s_.x.data() + r * E, yr, E);
  });
}

namespace {
void finish_logits(float* z, size_t n, const HeadSpec& spec) {
  if (spec.softcap > 0.0f) {
    const float m = spec.mul / spec.softcap;
    for (size_t i = 0; i < n; ++i) z[i] = spec.softcap * std::tanh(z[i] * m);
  } else if (spec.mul != 1.0f) {
    for (size_t i = 0; i < n; ++i) z[i] *= spec.mul;
  }
}
}  // namespace

void CpuLayers::head(const float* norm, const Matrix& out, const HeadSpec& spec) {
  // The rows whose logits are wanted: all of a sequence's rows or its last one.
  int n_out = 0, row = 0;
  for (const SeqStep& q : seqs_) {
    const int n = int(q.tokens.size());
    if (q.logits)
      for (int i = q.all_logits ? 0 : n - 1; i < n; ++i) s_.out_rows[size_t(n_out++)] = row + i;
    row += n;
  }
  if (n_out == 0) return;
  TraceScope ts(opt_.tracer, "output_head");
  const int E = c_.n_embd;
  for (int i = 0; i < n_out; ++i)
    rmsnorm_f32(&s_.x[size_t(s_.out_rows[size_t(i)]) * E], norm, &s_.h[size_t(i) * E], E, c_.rms_eps);
  const size_t V = size_t(out.rows);
  if (seqs_.size() == 1) {  // straight into the caller's buffer
    matmul(out, s_.h.data(), n_out, seqs_[0].logits, mode_of(seqs_[0]), s_.mm, pool_);
    finish_logits(seqs_[0].logits, size_t(n_out) * V, spec);
    return;
  }
  auto rows_of = [](const SeqStep& q) { return q.logits ? int(q.all_logits ? q.tokens.size() : 1) : 0; };
  for_each_mode_run(rows_of, [&](int r0, int n, ActMode mode) {
    matmul(out, s_.h.data() + size_t(r0) * size_t(E), n, s_.logits.data() + size_t(r0) * V, mode, s_.mm, pool_);
  });
  int at = 0;
  for (const SeqStep& q : seqs_) {
    if (!q.logits) continue;
    const size_t n = q.all_logits ? q.tokens.size() : 1;
    std::memcpy(q.logits, s_.logits.data() + size_t(at) * V, n * V * sizeof(float));
    finish_logits(q.logits, n * V, spec);
    at += int(n);
  }
}

}  // namespace pllm
