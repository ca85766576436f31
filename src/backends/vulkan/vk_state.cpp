#include "backends/vulkan/vk_state.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/checked.h"
#include "kernels/kv_format.h"

namespace pllm::vk {
namespace {

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }
// Offsets of bound ranges: a multiple of every device's minStorageBufferOffsetAlignment (≤ 256).
constexpr uint64_t kAlign = 256;

}  // namespace

Result<DevMatrix> DeviceWeights::matrix(const Matrix& m) {
  if (auto it = mats_.find(m.data); it != mats_.end()) return it->second;
  if (!matmul_supported(m.type))
    return make_error(Status::unsupported, "Vulkan: no device matmul for " + std::string(m.name) + "'s type");
  const auto total = checked_mul(uint64_t(m.rows), m.row_bytes);
  if (!total) return make_error(Status::invalid_argument, "Vulkan: matrix too large");
  const size_t bytes = size_t(*total);
  PLLM_ASSIGN(Buffer b, ctx_.buffer(align_up(bytes, 16), Mem::device));
  if (!m.panels) {
    PLLM_TRY(ctx_.upload(b, 0, m.data, bytes));
  } else {  // the device reads the file's layout: unpack the CPU's panels row by row
    std::vector<uint8_t> rows(bytes);
    for (int64_t r = 0; r < m.rows; ++r) {
      alignas(64) uint8_t tmp[kMaxPanelRowBytes];
      std::memcpy(rows.data() + size_t(r) * m.row_bytes, file_row(m, r, tmp), m.row_bytes);
    }
    PLLM_TRY(ctx_.upload(b, 0, rows.data(), bytes));
  }
  bytes_ += b.size();
  DevMatrix d{view(b, 0, b.size()), m.type, m.rows, m.cols, m.row_bytes};
  bufs_.emplace(m.data, std::move(b));
  mats_.emplace(m.data, d);
  return d;
}

Result<View> DeviceWeights::vector(const float* p, int n) {
  if (auto it = bufs_.find(p); it != bufs_.end()) return view(it->second);
  PLLM_ASSIGN(Buffer b, ctx_.buffer(size_t(n) * 4, Mem::device));
  PLLM_TRY(ctx_.upload(b, 0, p, size_t(n) * 4));
  bytes_ += b.size();
  const View v = view(b);
  bufs_.emplace(p, std::move(b));
  return v;
}

size_t kv_elem_bytes(KvFormat f) { return f == KvFormat::f32 ? 4 : f == KvFormat::f16 ? 2 : 1; }

bool kv_format_of(KvType t, KvFormat* f) {
  switch (t) {
    case KvType::f32: *f = KvFormat::f32; return true;
    case KvType::f16: *f = KvFormat::f16; return true;
    case KvType::q8: *f = KvFormat::q8; return true;
    case KvType::q4: return false;
  }
  return false;
}

Result<KvMirror> make_mirror(Context& ctx, KvFormat f, int n_layer, int kv_dim, int cap) {
  KvMirror m;
  m.format = f;
  m.cap = cap;
  const uint64_t rows = align_up(uint64_t(cap) * uint64_t(kv_dim) * kv_elem_bytes(f), kAlign);
  const uint64_t scales = f == KvFormat::q8 ? align_up(uint64_t(cap) * uint64_t(kv_dim / kKvQ8Group) * 4, kAlign) : 0;
  m.layers.resize(size_t(n_layer));
  for (KvMirror::Layer& L : m.layers) {
    PLLM_ASSIGN(L.buf, ctx.buffer(2 * rows + 2 * scales, Mem::device));
    L.views.k = view(L.buf, 0, rows);
    L.views.v = view(L.buf, rows, rows);
    if (scales) {
      L.views.ks = view(L.buf, 2 * rows, scales);
      L.views.vs = view(L.buf, 2 * rows + scales, scales);
    }
  }
  return m;
}

void copy_mirror(Recorder& rec, const KvMirror& from, KvMirror& to, int n, int kv_dim) {
  if (n == 0) return;
  const uint64_t row = uint64_t(n) * uint64_t(kv_dim) * kv_elem_bytes(from.format);
  const uint64_t sc = uint64_t(n) * uint64_t(kv_dim / kKvQ8Group) * 4;
  for (size_t l = 0; l < from.layers.size(); ++l) {
    const KvLayerViews& a = from.layers[l].views;
    const KvLayerViews& b = to.layers[l].views;
    rec.copy({a.k.buf, a.k.offset, row}, {b.k.buf, b.k.offset, row});
    rec.copy({a.v.buf, a.v.offset, row}, {b.v.buf, b.v.offset, row});
    if (from.format == KvFormat::q8) {
      rec.copy({a.ks.buf, a.ks.offset, sc}, {b.ks.buf, b.ks.offset, sc});
      rec.copy({a.vs.buf, a.vs.offset, sc}, {b.vs.buf, b.vs.offset, sc});
    }
  }
}

Result<void> upload_mirror(Context& ctx, const KvCache& kv, KvMirror& m) {
  const int n = kv.end();
  if (n > m.cap) return make_error(Status::internal, "Vulkan: KV mirror smaller than the cache");
  if (n > 0) {
    PLLM_ASSIGN(const size_t bytes, kv.prefix_bytes(n));
    std::vector<uint8_t> snap(bytes);
    PLLM_TRY(kv.export_prefix(n, snap.data()));
    // Per layer: K rows, V rows, then (q8) K scales, V scales (KvCache::export_prefix).
    const size_t D = size_t(kv.kv_dim());
    const size_t row = size_t(n) * D * kv_elem_bytes(m.format), sc = size_t(n) * (D / kKvQ8Group) * 4;
    const uint8_t* p = snap.data();
    for (KvMirror::Layer& L : m.layers) {
      PLLM_TRY(ctx.upload(L.buf, L.views.k.offset, p, row));
      PLLM_TRY(ctx.upload(L.buf, L.views.v.offset, p + row, row));
      p += 2 * row;
      if (m.format == KvFormat::q8) {
        PLLM_TRY(ctx.upload(L.buf, L.views.ks.offset, p, sc));
        PLLM_TRY(ctx.upload(L.buf, L.views.vs.offset, p + sc, sc));
        p += 2 * sc;
      }
    }
  }
  m.end = n;
  m.stamp = kv.stamp();
  return {};
}

Result<void> StepBuffers::reserve(Context& ctx, const ModelConfig& c, int n_vocab, int n_rows, int n_out) {
  if (n_rows <= rows && n_out <= out_rows) return {};
  const int R = std::max(n_rows, rows), O = std::max(std::max(n_out, out_rows), 1);
  int ff = 0;
  for (int l = 0; l < c.n_layer; ++l) ff = std::max(ff, c.n_ff_at(l));
  const size_t r = size_t(R) * 4, E = size_t(c.n_embd), QD = size_t(c.q_dim()), KD = size_t(c.kv_dim());
  PLLM_ASSIGN(x, ctx.buffer(r * E, Mem::device));
  PLLM_ASSIGN(h, ctx.buffer(r * E, Mem::device));
  PLLM_ASSIGN(proj, ctx.buffer(r * E, Mem::device));
  PLLM_ASSIGN(q, ctx.buffer(r * QD, Mem::device));
  PLLM_ASSIGN(att, ctx.buffer(r * QD, Mem::device));
  PLLM_ASSIGN(k, ctx.buffer(r * KD, Mem::device));
  PLLM_ASSIGN(v, ctx.buffer(r * KD, Mem::device));
  PLLM_ASSIGN(gate, ctx.buffer(r * size_t(ff), Mem::device));
  PLLM_ASSIGN(up, ctx.buffer(r * size_t(ff), Mem::device));
  PLLM_ASSIGN(sel, ctx.buffer(size_t(O) * 4 * E, Mem::device));
  PLLM_ASSIGN(x_in, ctx.buffer(r * E, Mem::host));
  PLLM_ASSIGN(cs, ctx.buffer(2 * r * size_t(c.n_rot), Mem::host));  // two RoPE tables (gemma3: local, global)
  PLLM_ASSIGN(kv_out, ctx.buffer(size_t(c.n_layer) * 2 * r * KD, Mem::host));
  PLLM_ASSIGN(logits, ctx.buffer(size_t(O) * 4 * size_t(n_vocab), Mem::host));
  rows = R;
  out_rows = O;
  return {};
}

}  // namespace pllm::vk
