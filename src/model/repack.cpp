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

  RepackResult r;
  std::map<const uint8_t*, const uint8_t*> done;  // file data -> panels (tied output = embedding)
  for (Matrix* m : all) {
    if (!repackable(*m, kt)) continue;
    auto it = done.find(m->data);
    if (it == done.end()) {
      const size_t bytes = size_t(m->rows) * m->row_bytes;
      AlignedBuffer<uint8_t>& buf = store.emplace_back(bytes);
      for (int64_t p = 0; p < m->rows / kPanelRows; ++p)
        pack_panel(m->type, m->row(p * kPanelRows), m->row_bytes, m->cols, buf.data() + size_t(p) * kPanelRows * m->row_bytes);
      f.release_pages(m->data, bytes);
      it = done.emplace(m->data, buf.data()).first;
      ++r.tensors;
      r.bytes += bytes;
    }
    m->data = it->second;
    m->panels = true;
  }
  return r;
}

}  // namespace pllm
