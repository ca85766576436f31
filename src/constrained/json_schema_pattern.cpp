// `pattern` (an ECMAScript regex subset) -> GBNF over string content. Supported: literals,
// classes (ranges, negation, \d \w \s and their negations), `.`, escapes, groups (capturing,
// non-capturing, named), alternation, greedy and lazy quantifiers (laziness does not change
// the language). Refused with an error: lookaround, backreferences, word boundaries, Unicode
// property escapes, and anchors anywhere but the ends of a top-level alternative.
//
// JSON Schema patterns search (they are not anchored): an alternative without ^ gets any
// string before it, one without $ any string after it.
#include "constrained/json_schema_internal.h"

namespace pllm::schema_detail {
namespace {

constexpr int kMaxGroupDepth = 64;

CodePointSet range_set(std::initializer_list<std::pair<uint32_t, uint32_t>> rs) {
  CodePointSet s;
  for (const auto& r : rs) s.add(r.first, r.second);
  return s;
}

CodePointSet digit_set() { return range_set({{'0', '9'}}); }
CodePointSet word_set() { return range_set({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}); }
// ECMAScript WhiteSpace and LineTerminator.
CodePointSet space_set() {
  return range_set({{0x09, 0x0D}, {0x20, 0x20}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
                    {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}});
}
CodePointSet dot_set() { return range_set({{0x0A, 0x0A}, {0x0D, 0x0D}, {0x2028, 0x2029}}).complement(); }

class PatternCompiler {
 public:
  PatternCompiler(std::vector<uint32_t> cps, std::string_view pointer, RuleTable& rules)
      : cps_(std::move(cps)), pointer_(pointer), rules_(rules) {}

  Result<std::string> compile() {
    const std::string any = rules_.add("char", json_char_gbnf(CodePointSet{}.complement())) + "*";
    std::string alts;
    int n_alts = 0;
    while (true) {
      bool anchored_start = eat('^');
      bool anchored_end = false;
      PLLM_ASSIGN(std::string seq, sequence(0, &anchored_end));
      std::string alt = anchored_start ? "" : any;
      if (!seq.empty()) alt += (alt.empty() ? "" : " ") + seq;
      if (!anchored_end) alt += (alt.empty() ? "" : " ") + any;
      if (alt.empty()) alt = "\"\"";
      alts += (alts.empty() ? "" : " | ") + alt;
      if (at_end()) break;
      if (!eat('|')) return fail("unbalanced ')'");
      ++n_alts;
    }
    // Parenthesised: the caller puts the quotes around it.
    return n_alts > 0 ? "(" + alts + ")" : alts;
  }

 private:
  bool at_end() const { return pos_ >= cps_.size(); }
  uint32_t peek(size_t ahead = 0) const { return pos_ + ahead < cps_.size() ? cps_[pos_ + ahead] : 0xFFFFFFFF; }
  bool eat(uint32_t c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  Error fail(const std::string& why) const {
    return schema_error("pattern", std::string(pointer_), why +
                                                    " (at character " + std::to_string(pos_) + ")");
  }

  // Alternatives inside a group.
  Result<std::string> alternation(int depth) {
    std::string alts;
    int n = 0;
    do {
      PLLM_ASSIGN(std::string seq, sequence(depth, nullptr));
      alts += (n++ ? " | " : "") + (seq.empty() ? std::string("\"\"") : seq);
    } while (eat('|'));
    return n > 1 ? "(" + alts + ")" : alts;
  }

  // Atoms up to '|' or ')' (or the end). At the top level `anchored_end` reports a final '$'.
  Result<std::string> sequence(int depth, bool* anchored_end) {
    std::string out;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        ++pos_;
        if (anchored_end && (at_end() || peek() == '|')) {
          *anchored_end = true;
          break;
        }
        return fail("'$' is supported only at the end of a top-level alternative");
      }
      if (peek() == '^') return fail("'^' is supported only at the start of a top-level alternative");
      PLLM_ASSIGN(std::string atom_expr, atom(depth));
      PLLM_ASSIGN(std::string quantified, quantifier(atom_expr));
      out += (out.empty() ? "" : " ") + quantified;
    }
    if (depth == 0 && peek() == ')') return fail("unbalanced ')'");
    return out;
  }

  Result<std::string> quantifier(const std::string& atom_expr) {
    std::string q;
    const size_t start = pos_;
    if (eat('*')) {
      q = "*";
    } else if (eat('+')) {
      q = "+";
    } else if (eat('?')) {
      q = "?";
    } else if (peek() == '{') {
      ++pos_;
      int64_t lo = 0, hi = -1;
      bool ok = read_int(lo);
      bool bounded = true;
      if (ok && eat(',')) {
        bounded = read_int(hi);
        if (!bounded) hi = -1;
      } else {
        hi = lo;
      }
      if (!ok || !eat('}')) {
        pos_ = start;  // not a quantifier: a literal '{' (ECMAScript Annex B)
        return atom_expr;
      }
      if (hi >= 0 && hi < lo) return fail("quantifier {n,m} with m < n");
      const int64_t cost = hi >= 0 ? hi : lo;
      if (cost > kMaxRepetition) return fail("quantifier bound above " + std::to_string(kMaxRepetition));
      PLLM_TRY(rules_.charge_repetition(cost, "pattern", pointer_));
      q = "{" + std::to_string(lo) + (hi == lo ? "" : "," + (hi >= 0 ? std::to_string(hi) : "")) + "}";
    } else {
      return atom_expr;
    }
    eat('?');  // lazy: the same language
    if (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{') {
      if (peek() != '{') return fail("nothing to repeat");
    }
    // A rule per repeated atom keeps the parser's expansion of {n,m} linear.
    return rules_.add("pat", atom_expr) + q;
  }

  bool read_int(int64_t& v) {
    if (at_end() || peek() < '0' || peek() > '9') return false;
    v = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      v = std::min<int64_t>(v * 10 + (peek() - '0'), int64_t(1) << 40);
      ++pos_;
    }
    return true;
  }

  Result<std::string> set_expr(const CodePointSet& s) {
    std::string e = json_char_gbnf(s);
    if (e.empty()) return fail("a class that matches no character");
    return e;
  }

  Result<std::string> atom(int depth) {
    const uint32_t c = peek();
    ++pos_;
    switch (c) {
      case '(': {
        if (depth + 1 > kMaxGroupDepth) return fail("groups nested too deeply");
        if (eat('?')) {
          if (eat(':')) {
          } else if (peek() == '<' && peek(1) != '=' && peek(1) != '!') {
            while (!at_end() && peek() != '>') ++pos_;  // named group: the name is irrelevant
            if (!eat('>')) return fail("unterminated group name");
          } else {
            return fail("lookaround and other (?...) groups are not supported");
          }
        }
        PLLM_ASSIGN(std::string inner, alternation(depth + 1));
        if (!eat(')')) return fail("missing ')'");
        return "(" + (inner.empty() ? std::string("\"\"") : inner) + ")";
      }
      case '[': return char_class();
      case '.': return set_expr(dot_set());
      case '\\': {
        CodePointSet s;
        PLLM_TRY(escape(false, s));
        return set_expr(s);
      }
      case '*':
      case '+':
      case '?': return fail("nothing to repeat");
      default: {
        CodePointSet s;
        s.add(c, c);
        return set_expr(s);
      }
    }
  }

  // After a backslash; inside a class \b is a backspace.
  Result<void> escape(bool in_class, CodePointSet& out) {
    if (at_end()) return fail("trailing backslash");
    const uint32_t c = peek();
    ++pos_;
    switch (c) {
      case 'd': out = digit_set(); return {};
      case 'D': out = digit_set().complement(); return {};
      case 'w': out = word_set(); return {};
      case 'W': out = word_set().complement(); return {};
      case 's': out = space_set(); return {};
      case 'S': out = space_set().complement(); return {};
      case 'n': out.add(0x0A, 0x0A); return {};
      case 'r': out.add(0x0D, 0x0D); return {};
      case 't': out.add(0x09, 0x09); return {};
      case 'f': out.add(0x0C, 0x0C); return {};
      case 'v': out.add(0x0B, 0x0B); return {};
      case 'b':
        if (!in_class) return fail("word boundaries (\\b) are not supported");
        out.add(0x08, 0x08);
        return {};
      case '0':
        if (peek() >= '0' && peek() <= '9') return fail("octal escapes are not supported");
        out.add(0, 0);
        return {};
      case 'x':
      case 'u': {
        const int n = c == 'x' ? 2 : 4;
        uint32_t v = 0;
        for (int i = 0; i < n; ++i) {
          const uint32_t h = peek();
          int d = h >= '0' && h <= '9' ? int(h - '0') : h >= 'a' && h <= 'f' ? int(h - 'a' + 10)
                : h >= 'A' && h <= 'F' ? int(h - 'A' + 10) : -1;
          if (d < 0) return fail(std::string("malformed \\") + char(c) + " escape");
          v = v * 16 + uint32_t(d);
          ++pos_;
        }
        if (v >= 0xD800 && v <= 0xDFFF) return fail("surrogate escapes are not supported");
        out.add(v, v);
        return {};
      }
      default: break;
    }
    if (c >= '1' && c <= '9') return fail("backreferences are not supported");
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
      return fail(std::string("escape \\") + char(c) + " is not supported");
    out.add(c, c);  // an escaped punctuation character stands for itself
    return {};
  }

  Result<std::string> char_class() {
    const bool negated = eat('^');
    CodePointSet set;
    bool first = true;
    while (true) {
      if (at_end()) return fail("unterminated character class");
      if (peek() == ']' ) {
        ++pos_;
        break;
      }
      first = false;
      CodePointSet item;
      bool single = true;
      uint32_t lo = 0;
      if (eat('\\')) {
        PLLM_TRY(escape(true, item));
        single = item.ranges.size() == 1 && item.ranges[0].first == item.ranges[0].second;
        if (single) lo = item.ranges[0].first;
      } else {
        lo = peek();
        ++pos_;
        item.add(lo, lo);
      }
      if (peek() == '-' && peek(1) != ']' && peek(1) != 0xFFFFFFFF) {
        ++pos_;
        if (!single) return fail("a class escape cannot start a range");
        uint32_t hi = 0;
        if (eat('\\')) {
          CodePointSet end;
          PLLM_TRY(escape(true, end));
          if (end.ranges.size() != 1 || end.ranges[0].first != end.ranges[0].second)
            return fail("a class escape cannot end a range");
          hi = end.ranges[0].first;
        } else {
          hi = peek();
          ++pos_;
        }
        if (hi < lo) return fail("range out of order in character class");
        item = CodePointSet{};
        item.add(lo, hi);
      }
      set.add_set(item);
    }
    (void)first;
    if (negated) set = set.complement();
    return set_expr(set);
  }

  std::vector<uint32_t> cps_;
  size_t pos_ = 0;
  std::string_view pointer_;
  RuleTable& rules_;
};

}  // namespace

Result<std::string> pattern_to_gbnf(std::string_view pattern, std::string_view pointer, RuleTable& rules) {
  std::vector<uint32_t> cps;
  if (!decode_utf8(pattern, cps))
    return schema_error("pattern", std::string(pointer), "not valid UTF-8");
  if (cps.size() > 4096)
    return schema_error("pattern", std::string(pointer), "longer than 4096 characters");
  PatternCompiler pc(std::move(cps), pointer, rules);
  return pc.compile();
}

}  // namespace pllm::schema_detail
