// The compiled form of a grammar, shared by the parser, the printer and the matcher (not a
// public header). Every alternative of every rule is a run of elements in one flat array,
// closed by an `end` element, so a matcher's stack frame is one index into that array.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "constrained/grammar.h"

namespace pllm {

struct CodeRange {
  uint32_t lo = 0, hi = 0;  // inclusive
};

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// A set of code points: sorted, disjoint, non-adjacent ranges (negated classes are complemented
// when parsed), with a bitmap for ASCII because most grammar text is ASCII.
struct CharSet {
  std::vector<CodeRange> ranges;
  uint64_t ascii[2] = {0, 0};

  static CharSet from_ranges(std::vector<CodeRange> ranges);  // normalises (sort, merge)
  CharSet complement() const;
  bool contains(uint32_t cp) const {
    if (cp < 128) return (ascii[cp >> 6] >> (cp & 63)) & 1;
    for (const CodeRange& r : ranges) {
      if (cp < r.lo) return false;
      if (cp <= r.hi) return true;
    }
    return false;
  }
  bool intersects(uint32_t lo, uint32_t hi) const {
    for (const CodeRange& r : ranges)
      if (r.lo <= hi && lo <= r.hi) return true;
    return false;
  }
  bool operator==(const CharSet& o) const;
};

enum class ElementKind : uint8_t { end, chars, rule };

struct Element {
  ElementKind kind = ElementKind::end;
  uint32_t value = 0;  // chars: index into Grammar::charsets; rule: index into Grammar::rules
};

struct GrammarRule {
  std::string name;   // empty for a rule made from a group or a repetition
  uint32_t owner = 0; // the named rule whose text made this one (itself when named)
  std::vector<uint32_t> alternatives;  // start of each alternative in Grammar::elements
  bool nullable = false;               // derives the empty string
  uint32_t line = 0, column = 0;       // where it was defined (for messages)
};

struct Grammar {
  std::vector<Element> elements;
  std::vector<GrammarRule> rules;
  std::vector<CharSet> charsets;
  uint32_t root = 0;
};

// Fills GrammarRule::nullable and rejects left recursion (grammar_analysis.cpp). A cycle made only
// of references in tail position (the last element of an alternative, reached through nullable
// elements only) derives nothing new and the matcher's closure stops it, so it is allowed: it
// is what `(x?)*` compiles to. Any other cycle through leftmost positions is an error.
Result<void> analyse_grammar(Grammar& g);

// The display name of a rule: its own, or "<owner>-<index>" for a generated one.
std::string rule_display_name(const Grammar& g, uint32_t rule);

}  // namespace pllm
