#include "model/repack.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <system_error>
#include <thread>

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

// Load-time threads: a phone's big cores; more only contend for memory bandwidth.
constexpr size_t kRepackThreads = 4;

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
  // An untied embedding table stays in the file: a step reads only its token's rows, so
  // holding all of it would cost its whole size in memory (131 MB at a 152k vocabulary).
  const bool tied = w.output.data == w.token_embd.data;
  std::vector<Matrix*> streamed;
  for (Matrix* m : all)
    if (m->data && (m != &w.token_embd || tied)) streamed.push_back(m);
  return repack_matrices(streamed, vector_views(w), kt, f, store, mode);
}

RepackResult repack_matrices(std::span<Matrix* const> all, std::span<const float** const> vectors,
                             const KernelTable& kt, const GgufFile& f, std::vector<AlignedBuffer<uint8_t>>& store,
                             RepackMode mode) {
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
  auto in_file = [&](const Matrix* m) { return m->data && f.holds(m->data); };
  for (const Matrix* m : all)
    if (in_file(m) && repackable(*m, kt, mode)) add(m->data, size_t(m->rows) * m->row_bytes, m);
  RepackResult r;
  // The matrices no panel kernel reads (Q5_x, F16; K-quants where the table has no int16 panel
  // kernel...) are copied into the arena in the file's layout: a decode step streams them too, and
  // from the file's 4 KiB page-cache pages it paid a TLB miss every 4 KiB (relocate_measure in
  // docs/PERFORMANCE.md). Same bytes, same kernels: results unchanged.
  for (const Matrix* m : all)
    if (in_file(m) && !m->panels && !repackable(*m, kt, mode)) {
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
  for (const float** p : vectors) {
    auto it = *p ? by_data.find(reinterpret_cast<const uint8_t*>(*p)) : by_data.end();
    if (it != by_data.end()) add(it->first, size_t(it->second->n_bytes), nullptr);
    // else absent, or not a whole tensor of the file: left in place
  }

  // Not zeroed: every byte read is written first, and untouched pages are not faulted in.
  // The work is cut into runs of about 2 MiB (whole panels for a matrix) taken in file order by
  // a few load-time threads, joined before this returns: on a 1.5B file most of the load was
  // this loop, half of it the kernel clearing the arena's fresh pages as they are first
  // written, and both spread over cores. Each run's source pages are released when it is done
  // and every source in full at the end (a large page-cache folio straddling two runs maps back
  // when the next run reads it), so peak memory stays near one copy of the weights.
  AlignedBuffer<uint8_t>& arena = store.emplace_back(total, /*zero=*/false);
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.src < b.src; });
  constexpr size_t kRun = size_t(2) << 20;
  struct Run {
    const Item* item;
    size_t begin, end;  // source bytes of the item
  };
  std::vector<Run> runs;
  for (const Item& it : items) {
    const size_t step = it.m ? std::max<size_t>(1, kRun / (kPanelRows * it.m->row_bytes)) * kPanelRows * it.m->row_bytes
                             : kRun;
    for (size_t o = 0; o < it.bytes; o += step) runs.push_back({&it, o, std::min(it.bytes, o + step)});
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < runs.size();) {
      const Run& run = runs[i];
      const Item& it = *run.item;
      uint8_t* dst = arena.data() + it.offset;
      if (it.m) {
        const Matrix& m = *it.m;
        const size_t panel_bytes = kPanelRows * m.row_bytes;
        for (size_t o = run.begin; o < run.end; o += panel_bytes)
          pack_panel(m.type, it.src + o, m.row_bytes, m.cols, dst + o);
      } else {
        std::copy(it.src + run.begin, it.src + run.end, dst + run.begin);
      }
      f.release_pages(it.src + run.begin, run.end - run.begin);
    }
  };
  const size_t n_threads = std::min<size_t>({kRepackThreads, std::max(1u, std::thread::hardware_concurrency()), runs.size()});
  std::vector<std::thread> helpers;
  try {
    for (size_t t = 1; t < n_threads; ++t) helpers.emplace_back(work);
  } catch (const std::system_error&) {  // no thread to be had: the ones started (or this one) do it all
  }
  work();
  for (std::thread& t : helpers) t.join();
  for (const Item& it : items) {
    f.release_pages(it.src, it.bytes);
    if (it.m) {
      ++r.tensors;
      r.bytes += it.bytes;
    }
  }

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
