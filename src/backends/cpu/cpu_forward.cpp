#include "backends/cpu/cpu_forward.h"

#include <climits>
#include <string>

#include "backends/cpu/cpu_layers.h"

namespace pllm {

Result<void> cpu_forward(const Model& m, StepScratch& s, ThreadPool& pool, std::span<const SeqStep> seqs,
                         const StepOptions& opt) {
  if (m.vocab_only()) return make_error(Status::invalid_argument, "model was loaded vocab-only");
  if (seqs.empty()) return make_error(Status::invalid_argument, "a step needs at least one sequence");
  int64_t rows = 0, out_rows = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const SeqStep& q = seqs[i];
    if (!q.kv || q.tokens.empty()) return make_error(Status::invalid_argument, "bad batch size");
    for (size_t j = 0; j < i; ++j)
      if (seqs[j].kv == q.kv) return make_error(Status::invalid_argument, "a sequence appears twice in one step");
    const int64_t pos0 = q.kv->end(), n = int64_t(q.tokens.size());
    if (!q.kv->fits(pos0, n))
      return make_error(Status::out_of_range, "context full: " + std::to_string(pos0 + n) + " tokens > n_ctx " +
                                                  std::to_string(q.kv->n_ctx()));
    rows += n;
    if (q.logits) out_rows += q.all_logits ? n : 1;
  }
  if (rows > INT_MAX / 2) return make_error(Status::invalid_argument, "step too large");
  s.reserve(m.config(), int(rows), seqs.size() > 1 ? int(out_rows) : 0);
  int r = 0;
  for (const SeqStep& q : seqs) {
    const int pos0 = q.kv->end(), n = int(q.tokens.size());
    PLLM_TRY(q.kv->begin_batch(pos0, n));
    for (int i = 0; i < n; ++i, ++r) {
      s.row_kv[size_t(r)] = q.kv;
      s.row_pos[size_t(r)] = pos0 + i;
      s.row_token[size_t(r)] = q.tokens[size_t(i)];
    }
  }
  CpuLayers ops(m.config(), s, pool, seqs, int(rows), opt);
  return m.run_layers(ops);
}

}  // namespace pllm
