// The sampler chain: repetition penalty -> top-k -> top-p -> min-p -> temperature -> draw.
// Greedy when temperature <= 0. Seeded, so the same seed gives the same tokens.
// With a grammar (constrained/), the drawn token is checked first; only when the grammar refuses
// it are the refused tokens masked out and the draw repeated (most tokens pass the cheap check).
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "constrained/grammar_matcher.h"
#include "model/sampling_config.h"

namespace pllm {

// A grammar the generated text must follow: the compiled grammar and the model's vocabulary
// trie (built once per model and shared).
// With triggers the grammar is lazy: free text until a trigger is written, the grammar from its
// first byte on (a sampled token that completes a trigger the grammar then refuses is redrawn).
// refuse_triggers: no grammar, and a token that would complete a trigger is never drawn
// (tool_choice "none").
struct GrammarConstraint {
  std::shared_ptr<const Grammar> grammar;
  std::shared_ptr<const TokenVocab> vocab;
  std::vector<GrammarTrigger> triggers = {};
  bool refuse_triggers = false;
  explicit operator bool() const { return grammar != nullptr || !triggers.empty(); }
};

// The model's vocabulary trie, built on the first constrained request and then shared.
class LazyTokenVocab {
 public:
  std::shared_ptr<const TokenVocab> get(const Tokenizer& tok) {
    std::call_once(once_, [&] { vocab_ = TokenVocab::build(tok); });
    return vocab_;
  }

 private:
  std::once_flag once_;
  std::shared_ptr<const TokenVocab> vocab_;
};

class Sampler {
 public:
  Sampler(const SamplingConfig& cfg, int n_vocab, const GrammarConstraint& grammar = {});
  // logits are modified in place (penalties, the grammar's mask). recent: the previous tokens,
  // oldest first. Returns kNoToken when the grammar allows no token at all.
  int32_t sample(float* logits, std::span<const int32_t> recent);
  static constexpr int32_t kNoToken = -1;
  // The grammar's matcher (null without one): the state after the tokens sampled so far.
  GrammarMatcher* grammar() { return matcher_ ? &*matcher_ : nullptr; }

 private:
  double next_uniform();  // [0, 1)
  int32_t draw(float* logits);
  // Before a lazy grammar's trigger: id unless it completes a trigger the grammar refuses
  // (or any trigger, when they are refused); then the grammar holds.
  int32_t watch_triggers(float* logits, int32_t id);

  SamplingConfig cfg_;
  GrammarConstraint lazy_;  // triggers still being watched for (empty once the grammar holds)
  std::string tail_;        // the end of the text so far, as long as a trigger could span
  std::string window_;      // tail_ and the drawn token's bytes (reused: no allocation per token)
  size_t longest_trigger_ = 0;
  bool started_ = false;    // something other than whitespace was written (at_start triggers are over)
  std::optional<GrammarMatcher> matcher_;
  uint64_t rng_state_;
  struct Cand {
    int32_t id;
    float logit;
    float p;
  };
  std::vector<Cand> cands_;  // reserved to n_vocab once: no allocation per token
};

}  // namespace pllm
