#include "backends/cpu/cpu_forward.h"

#include <climits>
#include <string>

#include "backends/cpu/cpu_layers.h"

namespace pllm {

Result<void> cpu_forward(const Model& m, StepScratch& s, ThreadPool& pool, std::span<const SeqStep> seqs,
                         const StepOptions& opt) {
  if (m.vocab_only()) return make_error(Status::invalid_argument, "model was loaded vocab-only");
  PLLM_ASSIGN(const StepShape shape, check_step(seqs));
  const int rows = shape.rows, out_rows = shape.out_rows;
  s.reserve(m.config(), rows, seqs.size() > 1 ? out_rows : 0, pool.size());
  int r = 0;
  for (const SeqStep& q : seqs) {
    const int pos0 = q.kv->end(), n = int(q.tokens.size());
    PLLM_TRY(q.kv->begin_batch(pos0, n));
    for (int i = 0; i < n; ++i, ++r) {
      s.row_kv[size_t(r)] = q.kv;
      s.row_pos[size_t(r)] = pos0 + i;
      s.row_token[size_t(r)] = q.tokens[size_t(i)];
      s.row_decode[size_t(r)] = n == 1 || q.as_decode_steps;
      s.row_last[size_t(r)] = q.bidirectional ? pos0 + n - 1 : pos0 + i;
      s.row_embd[size_t(r)] = q.embeddings ? q.embeddings + size_t(i) * size_t(m.config().n_embd) : nullptr;
    }
  }
  CpuLayers ops(m.config(), s, pool, seqs, rows, opt);
  return m.run_layers(ops);
}

}  // namespace pllm
