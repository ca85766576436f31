// Walks a grammar token by token: which tokens may come next, accepting one, rolling back.
// The sampler asks accepts(sampled) first and computes the full mask only when the sampled token
// is refused (lazy evaluation); the mask walks a trie of the vocabulary's bytes so shared prefixes
// are matched once.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "constrained/grammar.h"

namespace pllm {

class Tokenizer;

// The vocabulary's token bytes in a trie, built once per model and shared by all matchers.
class TokenVocab {
 public:
  static std::shared_ptr<const TokenVocab> build(const Tokenizer& tok);
  // For tests: explicit token byte strings; end_of_generation lists the EOG ids.
  static std::shared_ptr<const TokenVocab> from_pieces(std::vector<std::string> pieces,
                                                       std::vector<int32_t> end_of_generation);
  int32_t n_vocab() const;
  std::string_view piece(int32_t id) const;
  bool is_end_of_generation(int32_t id) const;
  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  std::shared_ptr<const Impl> impl_;
};

class GrammarMatcher {
 public:
  GrammarMatcher(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenVocab> v);
  GrammarMatcher(GrammarMatcher&&) noexcept;
  GrammarMatcher& operator=(GrammarMatcher&&) noexcept;
  ~GrammarMatcher();

  // Whether token id may come next. An end-of-generation token is allowed only where the text so
  // far is a complete sentence of the grammar; a token with no bytes (control) never is otherwise.
  bool accepts(int32_t id) const;
  // Advances past id; Status::invalid_argument if the grammar does not allow it.
  Result<void> accept(int32_t id);
  // Sets allowed[id] = 1 for every token that may come next, 0 otherwise (size n_vocab).
  void allowed(std::span<uint8_t> allowed) const;
  // Sets logits of refused tokens to -infinity.
  void mask_logits(std::span<float> logits) const;
  // The text so far is a complete sentence (end of generation allowed)...
  bool is_complete() const;
  // ...and nothing can follow it (the sampler then ends the generation).
  bool is_finished() const;
  // Feeds raw text (for validation: does this instance belong to the grammar?). Returns false
  // and leaves the state unchanged if the text leaves the grammar.
  bool accept_text(std::string_view text);
  // Undoes the last n accepted tokens (speculative decoding, stop-string truncation). The last
  // 64 steps are kept (an accept_text call is one step); more is Status::invalid_argument.
  Result<void> rollback(int n_tokens);
  void reset();
  // Some text was refused for one of the matcher's bounds (stack depth, or the ambiguity of
  // nested repetitions: grammar_dfa.h) rather than by the grammar itself.
  bool hit_bound() const;
  // An independent matcher in the same state (for trying a token without committing to it).
  GrammarMatcher clone() const;

 private:
  struct State;
  std::unique_ptr<State> st_;
};

}  // namespace pllm
