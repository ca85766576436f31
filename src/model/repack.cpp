#include "model/repack.h"

#include <map>

#include "quant/panel.h"

namespace pllm {

bool repackable(const Matrix& m, const KernelTable& kt) {
  return !m.panels && m.data && panel_supported(m.type) && kt.for_type(m.type).vec_dot_panels &&
         m.rows > 0 && m.rows % kPanelRows == 0 && m.row_bytes <= kMaxPanelRowBytes;
}

RepackResult repack_weights(ModelWeights& w, const KernelTable& kt, const GgufFile& f,
                            std::vector<AlignedBuffer<uint8_t>>& store) {
  std::vector<Matrix*> all{&w.token_embd, &w.output};
  for (LayerWeights& L : w.layers)
    for (Matrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) all.push_back(m);

  // One arena for every panel: one allocation of huge pages (aligned_buffer.h) instead of a
  // few hundred sub-2 MiB buffers that would each stay on 4 KiB pages. Offsets are 64-byte
  // aligned; a tied output shares the embedding's panels.
  struct Slot {
    const uint8_t* src;
    size_t offset, bytes;
  };
  std::map<const uint8_t*, Slot> slots;
  std::vector<const Matrix*> order;
  size_t total = 0;
  for (Matrix* m : all) {
    if (!repackable(*m, kt) || slots.count(m->data)) continue;
    const size_t bytes = size_t(m->rows) * m->row_bytes;
    slots.emplace(m->data, Slot{m->data, total, bytes});
    order.push_back(m);
    total += (bytes + 63) / 64 * 64;
  }
  RepackResult r;
  if (order.empty()) return r;
  // Not zeroed: every byte read is written by pack_panel first, and untouched pages are not
  // faulted in, so the file's pages are released tensor by tensor as the arena fills and
  // peak memory stays near one copy of the weights.
  AlignedBuffer<uint8_t>& arena = store.emplace_back(total, /*zero=*/false);
  for (const Matrix* m : order) {
    const Slot& s = slots.at(m->data);
    uint8_t* dst = arena.data() + s.offset;
    for (int64_t p = 0; p < m->rows / kPanelRows; ++p)
      pack_panel(m->type, m->row(p * kPanelRows), m->row_bytes, m->cols, dst + size_t(p) * kPanelRows * m->row_bytes);
    f.release_pages(m->data, s.bytes);
    ++r.tensors;
    r.bytes += s.bytes;
  }
  for (Matrix* m : all) {
    auto it = slots.find(m->data);
    if (it == slots.end() || m->panels) continue;
    m->data = arena.data() + it->second.offset;
    m->panels = true;
  }
  return r;
}

}  // namespace pllm
