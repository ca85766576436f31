// The matcher's engine (internal): a pushdown automaton over code points, determinised lazily
// over bytes.
//
// State representation. A parse position is a stack of element indices (grammar_internal.h): the
// top is the terminal (a code point set) to match next, the frames below are where each
// enclosing rule continues. Stacks are hash-consed nodes (position, parent), so equal stacks are
// equal ids and stacks share their tails. A matcher state is a sorted set of such stacks (all the
// ways the text so far can be parsed; node 0, the empty stack, means "complete") plus the bytes
// of an unfinished UTF-8 character.
//
// Why sets of stacks (as llama.cpp) rather than Earley items: the grammars we run (JSON,
// JSON Schema, tool calls) are nearly deterministic, so a state holds a handful of stacks, and a
// set of stacks is a value that can be hashed and compared — which is what makes the next part
// possible.
//
// Lazy DFA. Each distinct (stack set, partial UTF-8) is interned once as a DFA state id, and its
// transition on each byte is computed once and memoised in a 256-entry row. Inside a JSON string
// every byte leads back to the same few states, so a vocabulary walk after the first costs one
// array load per trie node.
//
// Bounds. A stack deeper than kMaxStackDepth, a state with more than kMaxStacks stacks or one
// step whose closure expands more than kMaxClosureWork frames is refused (the byte leads
// nowhere), so hostile grammars or inputs cost bounded time and memory: nested ambiguous
// repetitions such as ((x+ y?)+ z?)+ hold a number of stacks exponential in their depth. A
// refusal for a bound is remembered (hit_bound) so the caller's error can say why; after one
// for the stacks or the work, a grammar that ambiguous gets no new states at all (transitions
// already computed still hold), so one hostile grammar costs one exceeded budget, not one per
// byte of every token walked.
// The memo tables grow with use; the owner calls over_budget() between operations and rebuilds
// from snapshots (save/restore) when they are too large.
#pragma once
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "constrained/grammar_internal.h"

namespace pllm {

// Bytes of a code point not yet complete.
struct Utf8Partial {
  uint32_t value = 0;     // the bits read so far
  uint8_t remaining = 0;  // continuation bytes still expected (0: none pending)
  uint8_t length = 0;     // the sequence's total length
};

// A state independent of any DFA's ids: each stack bottom to top, and the partial character.
struct DfaSnapshot {
  std::vector<std::vector<uint32_t>> stacks;  // an empty stack = complete
  Utf8Partial partial;
};

class LazyDfa {
 public:
  static constexpr int32_t kDead = -1;
  static constexpr uint32_t kMaxStackDepth = 4096;
  static constexpr uint32_t kMaxStacks = 65536;
  static constexpr uint32_t kMaxClosureWork = 65536;

  explicit LazyDfa(std::shared_ptr<const Grammar> g);

  int32_t start();
  // The state after one more byte, or kDead.
  int32_t step(int32_t state, uint8_t byte) {
    const int32_t row = states_[static_cast<size_t>(state)].row;
    if (row >= 0) {
      int32_t& next = rows_[static_cast<size_t>(row) * 256 + byte];
      if (next == kUnknown) next = compute(state, byte);
      return next;
    }
    return step_slow(state, byte);
  }
  // Whether every byte sequence that is valid UTF-8, made of the given ASCII bytes (and of any
  // other code points when non_ascii), leads from `state` back to `state`: then every token made
  // of them is allowed without walking it.
  bool loops_on(int32_t state, const uint64_t ascii[2], bool non_ascii);
  bool is_complete(int32_t state) const;
  bool is_finished(int32_t state) const;
  size_t n_states() const { return states_.size(); }

  bool over_budget() const;
  // Some byte was refused for a bound rather than by the grammar (since construction).
  bool hit_bound() const { return hit_bound_; }
  DfaSnapshot save(int32_t state) const;
  int32_t restore(const DfaSnapshot& snap);
  void clear();

 private:
  static constexpr int32_t kUnknown = -2;
  static constexpr uint32_t kNoNode = UINT32_MAX;
  struct Node {
    uint32_t pos;     // element index of the top frame (UINT32_MAX for the empty stack)
    uint32_t parent;  // the stack below
    uint32_t depth;
  };
  struct State {
    uint32_t set;  // index into set_begin_
    Utf8Partial partial;
    int32_t row;  // transitions memo, -1 until first used (or when over the row budget)
    // loops_on's facts, computed on first use: the ASCII bytes leading back here, and whether
    // every other code point does.
    bool loop_known = false;
    bool loop_non_ascii = false;
    uint64_t loop_ascii[2] = {0, 0};
  };
  void compute_loops(int32_t state);

  int32_t step_slow(int32_t state, uint8_t byte);
  int32_t compute(int32_t state, uint8_t byte);
  int32_t advance(uint32_t set, uint32_t cp);
  bool any_top_intersects(uint32_t set, uint32_t lo, uint32_t hi) const;
  uint32_t node(uint32_t pos, uint32_t parent);
  // A new closure step: fresh seen/emitted marks, empty output, the whole work budget.
  void begin_step();
  bool refuse_for_bound();  // notes that a bound, not the grammar, refused; returns false
  bool refuse_as_ambiguous();  // the same for the stack or work bound, which also stops advance()
  // Adds to out_ the terminal-topped stacks reachable from `stack` without input. False when a
  // bound is exceeded.
  bool close(uint32_t stack);
  bool close_alternatives(uint32_t rule, uint32_t base);
  int32_t intern_state(std::vector<uint32_t>& stacks, Utf8Partial partial);
  int32_t intern_partial(uint32_t set, Utf8Partial partial);
  std::pair<const uint32_t*, const uint32_t*> set_range(uint32_t set) const {
    return {set_nodes_.data() + set_begin_[set], set_nodes_.data() + set_begin_[set + 1]};
  }

  std::shared_ptr<const Grammar> g_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> node_ids_;
  std::vector<uint32_t> set_nodes_, set_begin_;
  std::vector<bool> set_uniform_;  // per set: every top holds all of U+0080.. or none of it
  std::unordered_multimap<uint64_t, uint32_t> set_ids_;
  std::vector<State> states_;
  std::unordered_map<uint64_t, int32_t> state_ids_;
  std::vector<int32_t> rows_;
  int32_t start_ = kUnknown;
  // Scratch of close(): nodes seen in this closure (stamped), the work list and the output.
  std::vector<uint32_t> seen_, emitted_, work_, out_;
  uint32_t stamp_ = 0;
  uint32_t work_left_ = 0;  // frames close() may still expand in this step
  bool hit_bound_ = false;
  bool too_ambiguous_ = false;  // the stack or work bound was exceeded: advance() refuses
};

}  // namespace pllm
