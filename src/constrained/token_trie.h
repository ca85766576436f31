// The vocabulary as a byte trie in preorder (internal to the matcher): a mask is one pass over
// these arrays, skipping a whole subtree as soon as its prefix leaves the grammar.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "constrained/grammar_matcher.h"

namespace pllm {

struct TokenVocab::Impl {
  std::vector<std::string> pieces;  // per token id
  std::vector<uint8_t> end_of_generation;
  std::vector<int32_t> eog_ids;
  // Trie node i > 0 adds byte[i] to its parent's prefix; node 0 is the empty prefix. Nodes are in
  // preorder, so node i's subtree is [i, subtree_end[i]) and its parent is the nearest node
  // before it with depth[i] - 1. Tokens whose piece ends at node i: tokens[token_begin[i] ..
  // token_begin[i + 1]). Tokens with an empty piece and end-of-generation tokens are not in it.
  std::vector<uint8_t> byte;
  std::vector<uint32_t> depth;
  std::vector<uint32_t> subtree_end;
  std::vector<uint32_t> token_begin;
  std::vector<int32_t> tokens;
  uint32_t max_depth = 0;

  // What the bytes below a node are, so a mask can take a whole subtree at once when the
  // grammar loops on all of them (inside a JSON string every token without a quote or backslash
  // is allowed): the ASCII bytes that occur, whether others do, and whether every path is valid
  // UTF-8 (starting at the node on a character boundary). Kept only for nodes with
  // kSummaryMinNodes or more descendants, the others are quicker to walk.
  struct Below {
    uint64_t ascii[2] = {0, 0};
    bool non_ascii = false;
    bool valid_utf8 = true;
  };
  static constexpr uint32_t kSummaryMinNodes = 8;
  static constexpr uint32_t kNoSummary = UINT32_MAX;
  std::vector<uint32_t> below_index;  // per node: index into below, or kNoSummary
  std::vector<Below> below;

  void build_trie();
  void build_summaries(const std::vector<uint32_t>& parent);
};

}  // namespace pllm
