#include "runtime/decode_steps.h"

#include <algorithm>
#include <chrono>

namespace pllm {
namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }
}  // namespace

size_t grammar_prefix(GrammarMatcher* g, std::span<const int32_t> guesses) {
  if (!g) return guesses.size();
  size_t n = 0;
  while (n < guesses.size() && g->accepts(guesses[n]) && g->accept(guesses[n]).ok()) ++n;
  if (n > 0) (void)g->rollback(int(n));
  return n;
}

DecodeSteps::DecodeSteps(Session& s, Drafter* drafter, int draft_min, int draft_max)
    : s_(s), drafter_(drafter), length_(draft_min, draft_max, drafter && drafter->free()), n_vocab_(s.model().config().n_vocab) {
  if (drafter_) seq_ = s.history();
}

std::span<const int32_t> DecodeSteps::sequence() const {
  return drafter_ ? std::span<const int32_t>(seq_) : std::span<const int32_t>(s_.history());
}

Result<float*> DecodeSteps::advance(int32_t id, int remaining, GrammarMatcher* grammar) {
  if (!drafter_) {
    const int32_t one[1] = {id};
    PLLM_TRY(s_.eval_last(one));
    return s_.last_logits();
  }
  seq_.push_back(id);
  if (used_ < drafts_.size() && drafts_[used_] == id) {  // a kept guess: its row is computed
    ++used_;
    ++stats_.accepted;
    if (used_ == drafts_.size() && !resolved_) {
      length_.record_verify(int(drafts_.size()), int(used_), pass_ms_, draft_ms_);
      resolved_ = true;
    }
    return rows_.data() + used_ * size_t(n_vocab_);
  }
  if (!resolved_) {
    length_.record_verify(int(drafts_.size()), int(used_), pass_ms_, draft_ms_);
    resolved_ = true;
  }
  return verify(id, remaining, grammar);
}

Result<float*> DecodeSteps::verify(int32_t id, int remaining, GrammarMatcher* grammar) {
  // The session holds seq_ but id, then perhaps guesses that were not kept: drop them. A cache
  // that cannot resume there (never within a batch's reach) keeps fewer: run those again.
  PLLM_TRY(s_.truncate_exactly(seq_.size() - 1));

  drafts_.clear();
  used_ = 0;
  int k = remaining > 1 ? std::min(length_.next(), remaining - 1) : 0;
  k = std::min(k, s_.n_batch() - 1);
  if (!s_.unbounded()) k = std::min(k, s_.n_ctx() - int(seq_.size()));
  if (k > 0) {
    const auto t0 = Clock::now();
    PLLM_TRY(drafter_->draft(s_, seq_, k, drafts_));
    if (drafts_.size() > size_t(k)) drafts_.resize(size_t(k));
    drafts_.resize(grammar_prefix(grammar, drafts_));
    draft_ms_ = ms_since(t0);
  }
  const auto t0 = Clock::now();
  if (drafts_.empty()) {
    const int32_t one[1] = {id};
    PLLM_TRY(s_.eval_last(one));
    length_.record_plain(ms_since(t0));
    return s_.last_logits();
  }
  batch_.assign(1, id);
  batch_.insert(batch_.end(), drafts_.begin(), drafts_.end());
  rows_.resize(batch_.size() * size_t(n_vocab_));
  PLLM_TRY(s_.eval_as_steps(batch_, rows_.data()));
  pass_ms_ = ms_since(t0);
  resolved_ = false;
  ++stats_.passes;
  stats_.drafted += int(drafts_.size());
  return rows_.data();
}

void DecodeSteps::finish() {
  if (!drafter_) return;
  s_.truncate(std::min(seq_.size(), s_.history().size()));
}

}  // namespace pllm
