#include "model/repack.h"

#include <algorithm>
#include <map>

#include "quant/panel.h"

namespace pllm {

bool repackable(const Matrix& m, const KernelTable& kt, RepackMode mode) {
  const TypeKernels& tk = kt.for_type(m.type);
  const bool kernel = mode == RepackMode::all ? tk.vec_dot_panels != nullptr
                                              : mode == RepackMode::int16 && tk.gemm_i16_panels != nullptr;
  return !m.panels && m.data && panel_supported(m.type) && kernel &&
         m.rows > 0 && m.rows % kPanelRows == 0 && m.row_bytes <= kMaxPanelRowBytes;
}

namespace {

size_t round64(size_t n) { return (n + 63) / 64 * 64; }

// Every 1-D weight the forward pass reads (norms, biases); null ones are skipped later.
std::vector<const float**> vector_views(ModelWeights& w) {
  std::vector<const float**> v{&w.output_norm};
  for (LayerWeights& L : w.layers)
    for (const float** p : L.vectors()) v.push_back(p);
  return v;
}

}  // namespace

RepackResult repack_weights(ModelWeights& w, const KernelTable& kt, const GgufFile& f,
                            std::vector<AlignedBuffer<uint8_t>>& store, RepackMode mode) {
  std::vector<Matrix*> all{&w.token_embd, &w.output};
  for (LayerWeights& L : w.layers)
    for (Matrix* m : L.matrices()) all.push_back(m);

  // Everything goes into one arena: one allocation of huge pages (aligned_buffer.h) instead
  // of a few hundred sub-2 MiB buffers that would each stay on 4 KiB pages. The 1-D weights
  // are copied in too, so the file's weight pages are never touched after load (reading a
  // norm would map back the whole large page-cache folio around it, up to 2 MiB of released
  // weights). Offsets are 64-byte aligned; views of one tensor (a tied output) share it.
  struct Item {
    const uint8_t* src;
    size_t bytes;
    size_t offset;
    const Matrix* m;  // packed into panels; null: copied as it is (a matrix in the file's layout, a vector)
  };
  std::vector<Item> items;
  std::map<const uint8_t*, size_t> offset;  // file data -> offset in the arena
  size_t total = 0;
  auto add = [&](const uint8_t* src, size_t bytes, const Matrix* m) {
    if (!offset.emplace(src, total).second) return;
    items.push_back({src, bytes, total, m});
    total += round64(bytes);
  };
  // An untied embedding table stays in the file: a step reads only its token's rows, so
  // holding all of it would cost its whole size in memory (131 MB at a 152k vocabulary).
  const bool tied = w.output.data == w.token_embd.data;
  auto streamed = [&](const Matrix* m) { return m->data && (m != &w.token_embd || tied); };
  for (const Matrix* m : all)
    if (streamed(m) && repackable(*m, kt, mode)) add(m->data, size_t(m->rows) * m->row_bytes, m);
  RepackResult r;
  // The matrices no panel kernel reads (Q5_x, F16; K-quants where the table has no int16 panel
  // kernel...) are copied into the arena in the file's layout: a decode step streams them too, and
  // from the file's 4 KiB page-cache pages it paid a TLB miss every 4 KiB (relocate_measure in
  // docs/PERFORMANCE.md). Same bytes, same kernels: results unchanged.
  for (const Matrix* m : all)
    if (streamed(m) && !m->panels && !repackable(*m, kt, mode)) {
      const size_t before = total;
      add(m->data, size_t(m->rows) * m->row_bytes, nullptr);
      if (total != before) {
        ++r.copied;
        r.copied_bytes += size_t(m->rows) * m->row_bytes;
      }
    }
  if (items.empty()) return r;
  std::map<const uint8_t*, const TensorInfo*> by_data;
  for (const TensorInfo& t : f.tensors()) by_data.emplace(t.data, &t);
  const std::vector<const float**> vectors = vector_views(w);
  for (const float** p : vectors) {
    auto it = *p ? by_data.find(reinterpret_cast<const uint8_t*>(*p)) : by_data.end();
    if (it != by_data.end()) add(it->first, size_t(it->second->n_bytes), nullptr);
    // else absent, or not a whole tensor of the file: left in place
  }

  // Not zeroed: every byte read is written first, and untouched pages are not faulted in.
  // In file order, each source is released in chunks as it is consumed but for its last
  // 2 MiB, and in full once the next tensor is done (large folios straddle tensor
  // boundaries and a read maps the whole folio): peak memory stays near one copy of the
  // weights, the largest tensor never held twice.
  AlignedBuffer<uint8_t>& arena = store.emplace_back(total, /*zero=*/false);
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.src < b.src; });
  constexpr size_t kTail = size_t(2) << 20;
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    uint8_t* dst = arena.data() + it.offset;
    size_t released = 0;
    auto consumed = [&](size_t done) {  // bytes of the source done: release all but the tail
      if (done >= released + 2 * kTail) {
        f.release_pages(it.src, done - kTail);
        released = done - kTail;
      }
    };
    if (it.m) {
      const Matrix& m = *it.m;
      const size_t panel_bytes = kPanelRows * m.row_bytes;
      for (int64_t p = 0; p < m.rows / kPanelRows; ++p) {
        pack_panel(m.type, m.row(p * kPanelRows), m.row_bytes, m.cols, dst + size_t(p) * panel_bytes);
        consumed(size_t(p + 1) * panel_bytes);
      }
      ++r.tensors;
      r.bytes += it.bytes;
    } else {
      for (size_t o = 0; o < it.bytes; o += kTail) {
        const size_t n = std::min(kTail, it.bytes - o);
        std::copy(it.src + o, it.src + o + n, dst + o);
        consumed(o + n);
      }
    }
    if (i > 0) f.release_pages(items[i - 1].src, items[i - 1].bytes);
  }
  f.release_pages(items.back().src, items.back().bytes);

  // Point every view at the arena.
  std::map<const uint8_t*, bool> packed;  // file data -> held as panels
  for (const Item& it : items) packed[it.src] = it.m != nullptr;
  for (Matrix* m : all) {
    auto it = offset.find(m->data);
    if (it == offset.end() || m->panels) continue;
    m->panels = packed[m->data];
    m->data = arena.data() + it->second;
  }
  for (const float** p : vectors) {
    auto it = *p ? offset.find(reinterpret_cast<const uint8_t*>(*p)) : offset.end();
    if (it != offset.end()) *p = reinterpret_cast<const float*>(arena.data() + it->second);
  }
  return r;
}

}  // namespace pllm
