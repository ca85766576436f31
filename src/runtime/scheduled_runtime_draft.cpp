// ScheduledRuntime: speculative decoding's rows. A drafting request's decode row carries its
// drawn token plus the guesses the plan made room for (runtime/speculative.h); after the
// step, each row's logits draw the next token as a plain decode step would (same sampler,
// same history), and the guesses are kept while the draws equal them. The first draw that
// differs is streamed and fed as the next step's token (like a preempted row's); the
// session drops the guesses after it.
#include <algorithm>
#include <chrono>

#include "runtime/decode_steps.h"
#include "runtime/scheduled_runtime.h"
#include "runtime/scheduled_runtime_parts.h"

namespace pllm {

Result<std::span<const int32_t>> ScheduledRuntime::draft_row(RowWork& w) {
  Live& live = *w.live;
  Session& s = *w.slot->session;
  live.verify_row.assign(1, w.token);
  // At most what the plan made room for, what the adaptive length wants, and what the request
  // may still stream after the drawn token (each kept guess and the first miss stream one).
  int k = std::min({w.row.n_tokens - 1, live.draft_length->next(), live.req.max_tokens - live.generated,
                    s.n_batch() - 1});
  if (!s.unbounded()) k = std::min(k, s.n_ctx() - int(s.history().size()) - 1);
  live.draft_ms = 0;
  if (k > 0) {
    const auto t0 = std::chrono::steady_clock::now();
    live.seq_scratch.assign(s.history().begin(), s.history().end());
    live.seq_scratch.push_back(w.token);
    std::vector<int32_t>& guesses = live.verify_row;  // appended after the drawn token
    auto r = live.drafter->draft(s, live.seq_scratch, k, guesses);
    if (!r.ok() && r.error().code != Status::cancelled) return r.error();
    if (!r.ok()) guesses.resize(1);  // a preempting submit: the row runs (and stops) without guesses
    if (guesses.size() > size_t(k) + 1) guesses.resize(size_t(k) + 1);
    guesses.resize(1 + grammar_prefix(live.sampler ? live.sampler->grammar() : nullptr,
                                      std::span<const int32_t>(guesses).subspan(1)));
    live.draft_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  live.verify_logits.resize(live.verify_row.size() * size_t(model_->config().n_vocab));
  return std::span<const int32_t>(live.verify_row);
}

RowResult ScheduledRuntime::settle_verify(RowWork& w, double forward_ms) {
  Live& live = *w.live;
  Session& s = *w.slot->session;
  const size_t n_vocab = size_t(model_->config().n_vocab);
  const size_t n_rows = live.verify_row.size(), n_guesses = n_rows - 1;
  const size_t base = s.history().size() - n_rows;  // the history before the row
  const int rows_run = int(n_rows);
  const auto done = [&](size_t fed, bool eos, Status st = Status::ok) {
    if (n_guesses > 0) {
      live.draft_length->record_verify(int(n_guesses), int(fed - 1), forward_ms, live.draft_ms);
      ++live.draft_stats.passes;
      live.draft_stats.drafted += int(n_guesses);
      live.draft_stats.accepted += int(fed - 1);
    } else {
      live.draft_length->record_plain(forward_ms);
    }
    if (auto r = s.truncate_exactly(base + fed); !r.ok()) return RowResult{0, false, r.error().code};
    return RowResult{int(fed), eos, st, rows_run};
  };
  if (!live.sampler)  // a replayed first token: the sampler exists once a token was drawn
    live.sampler = std::make_unique<Sampler>(live.req.sampling, int32_t(n_vocab), live.req.grammar);
  std::vector<float>& raw = scratch_->logits;
  for (size_t kept = 0; kept < n_guesses; ++kept) {
    float* row = live.verify_logits.data() + kept * n_vocab;
    const auto history = std::span<const int32_t>(s.history()).first(base + 1 + kept);
    if (live.req.top_logprobs >= 0) raw.assign(row, row + n_vocab);
    const int32_t x = live.sampler->sample(row, history);
    if (x == Sampler::kNoToken) {  // the next step draws from this row again, and fails there
      std::copy(live.verify_logits.data() + kept * n_vocab, live.verify_logits.data() + (kept + 1) * n_vocab,
                s.last_logits());
      w.slot->has_logits = true;
      return done(1 + kept, false);
    }
    if (!emit_token(live, x, live.req.top_logprobs >= 0 ? raw.data() : nullptr)) return done(1 + kept, true);
    if (x != live.verify_row[1 + kept]) {  // a miss: x is fed next step; the guesses after it go
      live.replay_token = x;
      w.slot->has_logits = false;
      return done(1 + kept, false);
    }
  }
  // Every guess kept: the last row is the next position's.
  const float* last = live.verify_logits.data() + n_guesses * n_vocab;
  std::copy(last, last + n_vocab, s.last_logits());
  w.slot->has_logits = true;
  return done(n_rows, false);
}

}  // namespace pllm
