// Where generate() gets the logits of each next position: a plain decode step per token, or
// (with a drafter, runtime/speculative.h) the rows of one verify pass over the drawn token and
// the guesses after it, each row used while the drawn tokens equal the guesses.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "base/result.h"
#include "constrained/grammar_matcher.h"
#include "runtime/session.h"
#include "runtime/speculative.h"

namespace pllm {

// How many of the guesses the grammar (the sampler's matcher after the drawn token) accepts
// in turn: a guess it refuses is not worth a verify row. Leaves the matcher as it was.
size_t grammar_prefix(GrammarMatcher* g, std::span<const int32_t> guesses);

class DecodeSteps {
 public:
  // The session holds the prompt and its last logits. drafter: null for plain decoding.
  DecodeSteps(Session& s, Drafter* drafter, int draft_min, int draft_max);
  // The logits of the position after the session's last token (before the first advance).
  float* first() { return s_.last_logits(); }
  // The tokens so far, the last drawn one included once advanced past it (what the sampler's
  // repetition penalty reads).
  std::span<const int32_t> sequence() const;
  // `id` was drawn for the current position; returns the logits of the position after it.
  // remaining: how many more tokens the caller may draw after id (drafts beyond are wasted).
  // grammar: the sampler's matcher after id, or null (guesses it refuses are not verified).
  Result<float*> advance(int32_t id, int remaining, GrammarMatcher* grammar);
  // Drops unverified guesses from the session (call once when generation ends).
  void finish();
  const DraftStats& stats() const { return stats_; }

 private:
  Result<float*> verify(int32_t id, int remaining, GrammarMatcher* grammar);
  Session& s_;
  Drafter* drafter_;
  DraftLength length_;
  int n_vocab_;
  std::vector<int32_t> seq_;     // with a drafter: the verified tokens (the session may hold guesses after them)
  std::vector<int32_t> drafts_;  // the last pass's guesses
  size_t used_ = 0;              // of them, kept so far
  std::vector<float> rows_;      // the last pass's logits, (1 + drafts_.size()) rows
  std::vector<int32_t> batch_;   // the last pass's tokens
  double pass_ms_ = 0, draft_ms_ = 0;
  bool resolved_ = true;         // the last pass's acceptance was recorded
  DraftStats stats_;
};

}  // namespace pllm
