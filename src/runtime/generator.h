// The generation loop: reuse the cached prefix (runtime/prefix_reuse.h), prefill the rest,
// then sample, stream and stop (end of turn, max tokens, stop string, callback, cancellation,
// full context).
#pragma once
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "runtime/end_reason.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "runtime/speculative.h"

namespace pllm {

struct GenerateParams {
  SamplingConfig sampling;
  int max_tokens = 256;
  std::vector<std::string> stop_strings;
  bool ignore_eos = false;  // keep going past end-of-generation tokens
  GrammarConstraint grammar;  // the text follows it (the model may end only where it is complete)
  // Speculative decoding (runtime/speculative.h): guesses from this drafter, made for this
  // session (make_drafter), verified in batched passes of at most draft_max + 1 rows. Null: plain.
  Drafter* drafter = nullptr;
  int draft_max = 8;
  int draft_min = 0;  // the adaptive length never drafts fewer (draft_max: a fixed length)
};

struct GenerateStats {
  int n_prompt = 0;
  int n_reused = 0;    // prompt tokens the session already held
  int n_restored = 0;  // prompt tokens restored from the prefix cache (included in n_reused)
  int n_generated = 0;
  double ttft_ms = 0;
  double prefill_tps = 0;
  double decode_tps = 0;
  // done (max_tokens generated), eos, stop_string, callback, cancelled or context_full
  EndReason reason = EndReason::eos;
  int n_draft_passes = 0;    // speculative: verify passes with guesses
  int n_drafted = 0;         // guesses verified
  int n_draft_accepted = 0;  // guesses kept
};

// Called per generated token with the newly completed text; return false to stop.
using TokenCallback = std::function<bool(int32_t token, std::string_view text)>;

// The error of a generation whose grammar allows no token (history: prompt then generated);
// matcher (may be null) tells whether one of its bounds, not the grammar, refused.
Error grammar_dead_end(const Tokenizer& tok, std::span<const int32_t> history, size_t n_prompt,
                       const GrammarMatcher* matcher);
// The reason added to that error when the matcher's bounds refused: empty otherwise.
std::string grammar_bound_note(const GrammarMatcher* matcher);

Result<GenerateStats> generate(Session& s, std::span<const int32_t> prompt, const GenerateParams& params,
                               const TokenCallback& on_token);

}  // namespace pllm
