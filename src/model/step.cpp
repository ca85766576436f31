#include "model/step.h"

#include <climits>
#include <string>

namespace pllm {

Result<StepShape> check_step(std::span<const SeqStep> seqs) {
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
    if (q.bidirectional && q.kv->type() == KvType::q4)
      return make_error(Status::unsupported, "rows that see each other both ways (an image's) need an f16, f32 or q8 KV "
                                             "cache, not q4");
    rows += n;
    if (q.logits) out_rows += q.all_logits ? n : 1;
    if (rows > INT_MAX / 2) return make_error(Status::invalid_argument, "step too large");
  }
  return StepShape{int(rows), int(out_rows)};
}

}  // namespace pllm
