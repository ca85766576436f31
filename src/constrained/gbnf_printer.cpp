// A compiled grammar written back as GBNF: one line per rule, generated rules (groups,
// repetitions) under names of their own, runs of single characters merged into literals.
// parse_gbnf of the output accepts the same language (the tests check it).
#include <set>
#include <string>

#include "constrained/grammar.h"
#include "constrained/grammar_internal.h"
#include "tokenizer/vocab.h"  // append_utf8

namespace pllm {
namespace {

// One code point inside "..." or [...]: printable ASCII as itself, controls and anything the
// syntax reserves as an escape, other code points as UTF-8 (surrogates as \u escapes).
void append_char(std::string& out, uint32_t cp, bool in_class) {
  static const char* kHex = "0123456789ABCDEF";
  switch (cp) {
    case '\n': out += "\\n"; return;
    case '\r': out += "\\r"; return;
    case '\t': out += "\\t"; return;
    case '\\': out += "\\\\"; return;
    case '"': out += "\\\""; return;
    case '[': out += "\\["; return;
    case ']': out += "\\]"; return;
    default: break;
  }
  if (in_class && (cp == '-' || cp == '^')) {
    out += cp == '-' ? "\\x2D" : "\\x5E";
  } else if (cp < 0x20 || cp == 0x7F) {
    out += "\\x";
    out += kHex[cp >> 4];
    out += kHex[cp & 15];
  } else if (cp >= 0xD800 && cp <= 0xDFFF) {
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(cp >> shift) & 15];
  } else {
    append_utf8(out, cp);
  }
}

void append_class(std::string& out, const CharSet& set) {
  if (set.ranges.size() == 1 && set.ranges[0].lo == 0 && set.ranges[0].hi == kMaxCodePoint) {
    out += '.';
    return;
  }
  // Written negated when that is shorter, e.g. [^"\\] rather than three ranges.
  const CharSet inverse = set.complement();
  const bool negate = inverse.ranges.size() < set.ranges.size();
  out += negate ? "[^" : "[";
  for (const CodeRange& r : (negate ? inverse : set).ranges) {
    append_char(out, r.lo, true);
    if (r.hi != r.lo) {
      if (r.hi != r.lo + 1) out += '-';
      append_char(out, r.hi, true);
    }
  }
  out += ']';
}

bool single_char(const CharSet& set) { return set.ranges.size() == 1 && set.ranges[0].lo == set.ranges[0].hi; }

}  // namespace

std::string grammar_to_gbnf(const Grammar& g) {
  // Names for generated rules that no named rule uses.
  std::set<std::string> taken;
  for (const GrammarRule& r : g.rules)
    if (!r.name.empty()) taken.insert(r.name);
  std::vector<std::string> names(g.rules.size());
  for (uint32_t r = 0; r < g.rules.size(); ++r) {
    names[r] = rule_display_name(g, r);
    if (!g.rules[r].name.empty()) continue;
    while (taken.count(names[r])) names[r] += "-g";
    taken.insert(names[r]);
  }
  std::string out;
  auto write_rule = [&](uint32_t r) {
    out += names[r];
    out += " ::=";
    const auto& alts = g.rules[r].alternatives;
    for (size_t a = 0; a < alts.size(); ++a) {
      if (a > 0) out += " |";
      size_t written = 0;
      for (uint32_t e = alts[a]; g.elements[e].kind != ElementKind::end; ++e, ++written) {
        const Element& el = g.elements[e];
        out += ' ';
        if (el.kind == ElementKind::rule) {
          out += names[el.value];
          continue;
        }
        const CharSet& set = g.charsets[el.value];
        if (!single_char(set)) {
          append_class(out, set);
          continue;
        }
        out += '"';
        for (; g.elements[e].kind == ElementKind::chars && single_char(g.charsets[g.elements[e].value]); ++e)
          append_char(out, g.charsets[g.elements[e].value].ranges[0].lo, false);
        out += '"';
        --e;  // the loop's ++e moves to the element after the literal
      }
      if (written == 0) out += " \"\"";
    }
    out += '\n';
  };
  // Rules in the order the text first mentions them (the order parse_gbnf numbers them), so
  // printing a printed grammar gives the same text.
  std::vector<uint32_t> order;
  std::vector<bool> listed(g.rules.size(), false);
  auto list = [&](uint32_t r) {
    if (!listed[r]) order.push_back(r);
    listed[r] = true;
  };
  list(g.root);
  for (size_t i = 0, unreached = 0; i < order.size();) {
    for (uint32_t start : g.rules[order[i]].alternatives)
      for (uint32_t e = start; g.elements[e].kind != ElementKind::end; ++e)
        if (g.elements[e].kind == ElementKind::rule) list(g.elements[e].value);
    write_rule(order[i]);
    ++i;
    while (i == order.size() && unreached < g.rules.size()) list(static_cast<uint32_t>(unreached++));
  }
  return out;
}

}  // namespace pllm
