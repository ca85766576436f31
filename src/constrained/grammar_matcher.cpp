// GrammarMatcher: the sampler-facing side of the lazy DFA (grammar_dfa.h) — a token is its bytes
// stepped through the DFA; a mask is one preorder pass over the vocabulary trie
// (token_trie.h) that skips every subtree whose prefix dies; masks are memoised per DFA state.
//
// A matcher is not safe to use from two threads at once, const methods included: they fill the
// DFA's memo tables and the mask cache.
#include "constrained/grammar_matcher.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <limits>

#include "constrained/grammar_dfa.h"
#include "constrained/token_trie.h"

namespace pllm {
namespace {

// Rollback reaches this many accepted tokens back (speculative decoding drafts are shorter; a
// stop string is shorter). Older states are dropped.
constexpr size_t kMaxHistory = 64;
// Masks kept per matcher (each n_vocab bytes: 32 x 152k = 4.9 MB at most).
constexpr size_t kMaskCacheEntries = 32;

// A grammar that matches nothing, for a matcher constructed without one.
std::shared_ptr<const Grammar> empty_grammar() {
  auto g = std::make_shared<Grammar>();
  g->rules.resize(1);
  g->rules[0].name = "root";
  return g;
}

struct CachedMask {
  int32_t state = LazyDfa::kDead;
  uint64_t last_use = 0;
  std::vector<uint8_t> mask;
};

}  // namespace

struct GrammarMatcher::State {
  State(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenVocab> v)
      : grammar(g ? std::move(g) : empty_grammar()), vocab(std::move(v)), dfa(grammar) {
    current = dfa.start();
  }

  std::shared_ptr<const Grammar> grammar;
  std::shared_ptr<const TokenVocab> vocab;
  LazyDfa dfa;
  int32_t current = LazyDfa::kDead;
  std::deque<int32_t> history;  // states before each of the last accepted steps
  std::vector<CachedMask> masks;
  uint64_t clock = 0;
  std::vector<int32_t> walk;  // DFA state per trie depth during a mask
  std::vector<uint8_t> scratch;

  // The DFA's memo tables grew past their budget: rebuild them holding only the live states.
  void compact() {
    if (!dfa.over_budget()) return;
    const bool dead = current == LazyDfa::kDead;
    const DfaSnapshot now = dead ? DfaSnapshot{} : dfa.save(current);
    std::vector<std::pair<bool, DfaSnapshot>> past;
    for (int32_t s : history) past.emplace_back(s == LazyDfa::kDead, s == LazyDfa::kDead ? DfaSnapshot{} : dfa.save(s));
    dfa.clear();
    masks.clear();
    current = dead ? LazyDfa::kDead : dfa.restore(now);
    for (size_t i = 0; i < past.size(); ++i) history[i] = past[i].first ? LazyDfa::kDead : dfa.restore(past[i].second);
  }

  int32_t walk_bytes(int32_t s, std::string_view bytes) {
    for (char c : bytes) {
      if (s == LazyDfa::kDead) break;
      s = dfa.step(s, static_cast<uint8_t>(c));
    }
    return s;
  }

  void commit(int32_t next) {
    history.push_back(current);
    if (history.size() > kMaxHistory) history.pop_front();
    current = next;
  }

  bool complete() const { return current != LazyDfa::kDead && dfa.is_complete(current); }

  void compute_mask(std::span<uint8_t> out);
};

void GrammarMatcher::State::compute_mask(std::span<uint8_t> out) {
  std::fill(out.begin(), out.end(), 0);
  if (!vocab || current == LazyDfa::kDead) return;
  const TokenVocab::Impl& t = vocab->impl();
  const size_t n = std::min(out.size(), t.pieces.size());
  if (out.size() == t.pieces.size()) {
    for (CachedMask& c : masks) {
      if (c.state != current) continue;
      c.last_use = ++clock;
      std::memcpy(out.data(), c.mask.data(), out.size());
      return;
    }
  }
  walk.resize(t.max_depth + 1);
  walk[0] = current;
  const uint32_t n_nodes = static_cast<uint32_t>(t.byte.size());
  for (uint32_t i = 1; i < n_nodes;) {
    const int32_t s = dfa.step(walk[t.depth[i] - 1], t.byte[i]);
    if (s == LazyDfa::kDead) {
      i = t.subtree_end[i];
      continue;
    }
    // A subtree made only of bytes on which this state loops: all its tokens, without a walk.
    const uint32_t b = t.below_index[i];
    const bool whole = b != TokenVocab::Impl::kNoSummary && t.below[b].valid_utf8 &&
                       dfa.loops_on(s, t.below[b].ascii, t.below[b].non_ascii);
    const uint32_t last = whole ? t.subtree_end[i] : i + 1;
    for (uint32_t k = t.token_begin[i]; k < t.token_begin[last]; ++k)
      if (static_cast<size_t>(t.tokens[k]) < n) out[static_cast<size_t>(t.tokens[k])] = 1;
    walk[t.depth[i]] = s;
    i = last;
  }
  const uint8_t eog = complete() ? 1 : 0;
  for (int32_t id : t.eog_ids)
    if (static_cast<size_t>(id) < n) out[static_cast<size_t>(id)] = eog;
  if (out.size() != t.pieces.size()) return;
  CachedMask* slot = nullptr;
  if (masks.size() < kMaskCacheEntries) {
    slot = &masks.emplace_back();
  } else {
    slot = &*std::min_element(masks.begin(), masks.end(),
                              [](const CachedMask& a, const CachedMask& b) { return a.last_use < b.last_use; });
  }
  slot->state = current;
  slot->last_use = ++clock;
  slot->mask.assign(out.begin(), out.end());
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenVocab> v)
    : st_(std::make_unique<State>(std::move(g), std::move(v))) {}
GrammarMatcher::GrammarMatcher(GrammarMatcher&&) noexcept = default;
GrammarMatcher& GrammarMatcher::operator=(GrammarMatcher&&) noexcept = default;
GrammarMatcher::~GrammarMatcher() = default;

GrammarMatcher GrammarMatcher::clone() const {
  GrammarMatcher copy(st_->grammar, st_->vocab);
  *copy.st_ = *st_;
  copy.st_->masks.clear();  // memory the copy would rarely use
  return copy;
}

bool GrammarMatcher::accepts(int32_t id) const {
  if (!st_->vocab || id < 0 || id >= st_->vocab->n_vocab()) return false;
  if (st_->vocab->is_end_of_generation(id)) return st_->complete();
  const std::string_view piece = st_->vocab->piece(id);
  if (piece.empty() || st_->current == LazyDfa::kDead) return false;
  st_->compact();
  return st_->walk_bytes(st_->current, piece) != LazyDfa::kDead;
}

Result<void> GrammarMatcher::accept(int32_t id) {
  if (!st_->vocab || id < 0 || id >= st_->vocab->n_vocab())
    return make_error(Status::invalid_argument, "token " + std::to_string(id) + " is not in the vocabulary");
  if (st_->vocab->is_end_of_generation(id)) {
    if (!st_->complete())
      return make_error(Status::invalid_argument, "end of generation before the grammar is complete");
    st_->commit(st_->current);  // the state stays; rollback(1) still undoes this step
    return {};
  }
  const std::string_view piece = st_->vocab->piece(id);
  st_->compact();
  const int32_t next = piece.empty() || st_->current == LazyDfa::kDead ? LazyDfa::kDead
                                                                       : st_->walk_bytes(st_->current, piece);
  if (next == LazyDfa::kDead)
    return make_error(Status::invalid_argument, "token " + std::to_string(id) + " is not allowed by the grammar here");
  st_->commit(next);
  return {};
}

void GrammarMatcher::allowed(std::span<uint8_t> allowed) const {
  st_->compact();
  st_->compute_mask(allowed);
}

void GrammarMatcher::mask_logits(std::span<float> logits) const {
  std::vector<uint8_t>& mask = st_->scratch;
  mask.resize(st_->vocab ? static_cast<size_t>(st_->vocab->n_vocab()) : 0);
  allowed(mask);
  for (size_t i = 0; i < logits.size(); ++i)
    if (i >= mask.size() || !mask[i]) logits[i] = -std::numeric_limits<float>::infinity();
}

bool GrammarMatcher::is_complete() const { return st_->complete(); }

bool GrammarMatcher::is_finished() const {
  return st_->current != LazyDfa::kDead && st_->dfa.is_finished(st_->current);
}

bool GrammarMatcher::accept_text(std::string_view text) {
  if (st_->current == LazyDfa::kDead) return false;
  st_->compact();
  const int32_t next = st_->walk_bytes(st_->current, text);
  if (next == LazyDfa::kDead) return false;
  st_->commit(next);
  return true;
}

Result<void> GrammarMatcher::rollback(int n_tokens) {
  if (n_tokens < 0 || static_cast<size_t>(n_tokens) > st_->history.size())
    return make_error(Status::invalid_argument, "cannot roll back " + std::to_string(n_tokens) + " tokens: " +
                                                    std::to_string(st_->history.size()) +
                                                    " are kept (at most " + std::to_string(kMaxHistory) + ")");
  if (n_tokens == 0) return {};
  st_->current = st_->history[st_->history.size() - static_cast<size_t>(n_tokens)];
  st_->history.resize(st_->history.size() - static_cast<size_t>(n_tokens));
  return {};
}

bool GrammarMatcher::hit_bound() const { return st_->dfa.hit_bound(); }

void GrammarMatcher::reset() {
  st_->history.clear();
  st_->current = st_->dfa.start();
}

}  // namespace pllm
