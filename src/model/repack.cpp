#include "model/repack.h"

#include <algorithm>
#include <map>

#include "quant/panel.h"

namespace pllm {

bool repackable(const Matrix& m, const KernelTable& kt) {
  return !m.panels && m.data && panel_supported(m.type) && kt.for_type(m.type).vec_dot_panels &&
         m.rows > 0 && m.rows % kPanelRows == 0 && m.row_bytes <= kMaxPanelRowBytes;
}

namespace {

size_t round64(size_t n) { return (n + 63) / 64 * 64; }

// Every 1-D weight the forward pass reads (norms, biases); null ones are skipped later.
std::vector<const float**> vector_views(ModelWeights& w) {
  std::vector<const float**> v{&w.output_norm};
  for (LayerWeights& L : w.layers)
    for (const float** p : {&L.attn_norm, &L.bq, &L.bk, &L.bv, &L.ffn_norm, &L.attn_q_norm, &L.attn_k_norm,
                            &L.post_attn_norm, &L.post_ffn_norm})
      v.push_back(p);
  return v;
}

}  // namespace

RepackResult repack_weights(ModelWeights& w, const KernelTable& kt, const GgufFile& f,
                            std::vector<AlignedBuffer<uint8_t>>& store) {
  std::vector<Matrix*> all{&w.token_embd, &w.output};
  for (LayerWeights& L : w.layers)
    for (Matrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) all.push_back(m);

  // One arena for every panel: one allocation of huge pages (aligned_buffer.h) instead of a
  // few hundred sub-2 MiB buffers that would each stay on 4 KiB pages. Offsets are 64-byte
  // aligned; a tied output shares the embedding's panels.
  std::map<const uint8_t*, size_t> offset;  // file data -> offset in the arena
  std::vector<const Matrix*> order;
  size_t total = 0;
  for (Matrix* m : all) {
    if (!repackable(*m, kt) || offset.count(m->data)) continue;
    offset.emplace(m->data, total);
    order.push_back(m);
    total += round64(size_t(m->rows) * m->row_bytes);
  }
  RepackResult r;
  if (order.empty()) return r;

  // The 1-D weights are copied into the arena too. Once everything is copied the file's
  // weight pages are never touched again; otherwise reading a norm would map back the whole
  // large page-cache folio (up to 2 MiB) around it, released weight bytes included.
  std::map<const uint8_t*, const TensorInfo*> by_data;
  for (const TensorInfo& t : f.tensors()) by_data.emplace(t.data, &t);
  std::vector<std::pair<const float**, const TensorInfo*>> vectors;
  for (const float** p : vector_views(w)) {
    auto it = *p ? by_data.find(reinterpret_cast<const uint8_t*>(*p)) : by_data.end();
    if (it == by_data.end()) continue;  // absent, or not a whole tensor of the file: left in place
    if (!offset.count(it->first)) {
      offset.emplace(it->first, total);
      total += round64(it->second->n_bytes);
    }
    vectors.emplace_back(p, it->second);
  }

  // Not zeroed: every byte read is written first, and untouched pages are not faulted in,
  // so peak memory stays near one copy of the weights as the file's pages are released
  // behind the packing.
  AlignedBuffer<uint8_t>& arena = store.emplace_back(total, /*zero=*/false);
  // In file order, each tensor's pages released as soon as it is packed but for its last
  // 2 MiB, which go once the next one is packed: large page-cache folios straddle tensor
  // boundaries, and reading a tensor's first bytes maps the whole folio, the end of the
  // tensor before included. The largest tensor is never held twice.
  std::sort(order.begin(), order.end(), [](const Matrix* a, const Matrix* b) { return a->data < b->data; });
  auto bytes_of = [](const Matrix* m) { return size_t(m->rows) * m->row_bytes; };
  for (size_t i = 0; i < order.size(); ++i) {
    const Matrix& m = *order[i];
    uint8_t* dst = arena.data() + offset.at(m.data);
    for (int64_t p = 0; p < m.rows / kPanelRows; ++p)
      pack_panel(m.type, m.row(p * kPanelRows), m.row_bytes, m.cols, dst + size_t(p) * kPanelRows * m.row_bytes);
    constexpr size_t kTail = size_t(2) << 20;
    if (bytes_of(&m) > kTail) f.release_pages(m.data, bytes_of(&m) - kTail);
    if (i > 0) f.release_pages(order[i - 1]->data, bytes_of(order[i - 1]));
    ++r.tensors;
    r.bytes += bytes_of(&m);
  }
  for (auto& [p, t] : vectors) {
    uint8_t* dst = arena.data() + offset.at(t->data);
    std::copy(t->data, t->data + t->n_bytes, dst);
    *p = reinterpret_cast<const float*>(dst);
  }
  // Everything copied is released once more, now that nothing will read those ranges.
  for (const Matrix* m : order) f.release_pages(m->data, bytes_of(m));
  for (auto& [p, t] : vectors) f.release_pages(t->data, t->n_bytes);

  for (Matrix* m : all) {
    auto it = offset.find(m->data);
    if (it == offset.end() || m->panels) continue;
    m->data = arena.data() + it->second;
    m->panels = true;
  }
  return r;
}

}  // namespace pllm
