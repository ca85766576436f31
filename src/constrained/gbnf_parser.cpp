// GBNF (llama.cpp's grammar syntax) parsed into the flat rule form of grammar_internal.h.
//
// Whitespace follows llama.cpp exactly, so its users' grammars load unchanged: a newline ends a
// rule except inside ( ), right after `::=` and right after `|`; `#` starts a comment to the end
// of the line. Groups and repetitions become generated rules: `x*` is `r ::= x r | ""` (the
// reference to r in tail position, so a matcher's stack does not grow per repetition), `x?` is
// `r ::= x | ""`, `x{m,n}` is m copies of x then n-m nested optionals.
//
// Nesting of ( ) is counted against GrammarLimits::max_nesting before recursing, so hostile
// input cannot overflow the C++ stack.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

#include "constrained/grammar.h"
#include "constrained/grammar_internal.h"

namespace pllm {
namespace {

using Sequence = std::vector<Element>;

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

constexpr int kUnbounded = -1;

class GbnfParser {
 public:
  GbnfParser(std::string_view text, const GrammarLimits& limits) : src_(text), limits_(limits) {}

  Result<std::shared_ptr<const Grammar>> run(std::string_view root_name) {
    if (src_.size() > limits_.max_text_bytes)
      return make_error(Status::invalid_argument, "grammar text is " + std::to_string(src_.size()) +
                                                      " bytes, more than the limit of " +
                                                      std::to_string(limits_.max_text_bytes));
    skip_space(true);
    while (pos_ < src_.size() && !error_)
      if (!parse_rule()) break;
    if (error_) return *error_;
    for (size_t r = 0; r < rule_alts_.size(); ++r)
      if (!defined_[r]) {
        const auto [line, col] = first_use_[r];
        return make_error(Status::invalid_argument, std::to_string(line) + ":" + std::to_string(col) +
                                                        ": undefined rule '" + names_[r] + "'");
      }
    const auto root = ids_.find(std::string(root_name));
    if (root == ids_.end() || !defined_[root->second])
      return make_error(Status::invalid_argument,
                        "the grammar has no rule named '" + std::string(root_name) + "' (the start rule)");
    auto g = std::make_shared<Grammar>();
    flatten(*g);
    g->root = root->second;
    PLLM_TRY(analyse_grammar(*g));
    return std::shared_ptr<const Grammar>(std::move(g));
  }

 private:
  // --- errors and positions -------------------------------------------------------------
  std::pair<uint32_t, uint32_t> line_col(size_t at) const {
    uint32_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < src_.size(); ++i) {
      if (src_[i] == '\n') {
        ++line;
        col = 1;
      } else if ((static_cast<unsigned char>(src_[i]) & 0xC0) != 0x80) {
        ++col;  // columns count code points
      }
    }
    return {line, col};
  }
  bool fail(const std::string& what) { return fail_at(pos_, what); }
  bool fail_at(size_t at, const std::string& what) {
    if (error_) return false;
    const auto [line, col] = line_col(at);
    std::string found = at >= src_.size() ? "end of input" : "'" + std::string(1, src_[at]) + "'";
    if (at < src_.size() && src_[at] == '\n') found = "end of line";
    error_ = make_error(Status::invalid_argument, std::to_string(line) + ":" + std::to_string(col) + ": " +
                                                      what + " (found " + found + ")");
    return false;
  }
  char peek(size_t ahead = 0) const { return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0'; }
  bool at_end() const { return pos_ >= src_.size(); }

  void skip_space(bool newline_ok) {
    while (!at_end()) {
      const char c = src_[pos_];
      if (c == ' ' || c == '\t') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && src_[pos_] != '\n' && src_[pos_] != '\r') ++pos_;
      } else if (newline_ok && (c == '\n' || c == '\r')) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  // --- rules -------------------------------------------------------------------------------
  uint32_t rule_id(std::string_view name, size_t at) {
    auto [it, inserted] = ids_.try_emplace(std::string(name), 0);
    if (inserted) {
      it->second = new_rule(std::string(name), 0);
      first_use_.back() = line_col(at);
    }
    return it->second;
  }
  uint32_t new_rule(std::string name, uint32_t owner) {
    const auto id = static_cast<uint32_t>(rule_alts_.size());
    rule_alts_.emplace_back();
    names_.push_back(std::move(name));
    owners_.push_back(names_.back().empty() ? owner : id);
    defined_.push_back(false);
    first_use_.emplace_back(0, 0);
    defined_at_.emplace_back(0, 0);
    return id;
  }
  // A generated rule holding the given alternatives.
  std::optional<uint32_t> generated_rule(std::vector<Sequence> alts) {
    if (rule_alts_.size() >= limits_.max_rules) {
      fail("more rules than the limit of " + std::to_string(limits_.max_rules) + " (after expanding groups and repetitions)");
      return std::nullopt;
    }
    const uint32_t id = new_rule("", current_rule_);
    rule_alts_[id] = std::move(alts);
    defined_[id] = true;
    defined_at_[id] = defined_at_[current_rule_];
    return id;
  }
  void count_elements(size_t n) { n_elements_ += n; }
  bool check_element_limit() {
    if (n_elements_ > limits_.max_elements)
      return fail("more grammar elements than the limit of " + std::to_string(limits_.max_elements));
    return true;
  }

  bool parse_rule() {
    const size_t name_start = pos_;
    while (!at_end() && is_word_char(src_[pos_])) ++pos_;
    if (pos_ == name_start) {
      if (peek() == '<' || peek() == '!') return fail("token references are not supported");
      return fail("expected a rule name");
    }
    const std::string_view name = src_.substr(name_start, pos_ - name_start);
    skip_space(false);
    if (src_.compare(pos_, 3, "::=") != 0) return fail("expected '::=' after rule name '" + std::string(name) + "'");
    const uint32_t id = rule_id(name, name_start);
    if (defined_[id]) return fail_at(name_start, "rule '" + std::string(name) + "' is defined twice");
    defined_[id] = true;
    defined_at_[id] = line_col(name_start);
    current_rule_ = id;
    pos_ += 3;
    skip_space(true);
    std::vector<Sequence> alts;
    if (!parse_alternates(alts, false)) return false;
    rule_alts_[id] = std::move(alts);
    if (peek() == '\r') {
      pos_ += peek(1) == '\n' ? 2 : 1;
    } else if (peek() == '\n') {
      ++pos_;
    } else if (!at_end()) {
      if (peek() == ')') return fail("unexpected ')' with no open '('");
      return fail("expected an element, '|' or the end of the line");
    }
    skip_space(true);
    return true;
  }

  bool parse_alternates(std::vector<Sequence>& alts, bool nested) {
    alts.emplace_back();
    if (!parse_sequence(alts.back(), nested)) return false;
    while (peek() == '|') {
      ++pos_;
      skip_space(true);
      alts.emplace_back();
      if (!parse_sequence(alts.back(), nested)) return false;
    }
    for (const Sequence& s : alts) count_elements(s.size() + 1);
    return check_element_limit();
  }

  bool parse_sequence(Sequence& seq, bool nested) {
    size_t last_start = seq.size();
    bool have_item = false;
    while (!at_end()) {
      const char c = src_[pos_];
      const size_t item_start = seq.size();
      if (c == '"') {
        ++pos_;
        while (!at_end() && src_[pos_] != '"') {
          uint32_t cp = 0;
          if (!parse_char(cp)) return false;
          seq.push_back({ElementKind::chars, charset_id(CharSet::from_ranges({{cp, cp}}))});
        }
        if (at_end()) return fail("unterminated string literal: expected '\"'");
        ++pos_;
      } else if (c == '[') {
        if (!parse_class(seq)) return false;
      } else if (is_word_char(c)) {
        const size_t start = pos_;
        while (!at_end() && is_word_char(src_[pos_])) ++pos_;
        seq.push_back({ElementKind::rule, rule_id(src_.substr(start, pos_ - start), start)});
      } else if (c == '(') {
        if (++depth_ > limits_.max_nesting)
          return fail("groups nested deeper than the limit of " + std::to_string(limits_.max_nesting));
        ++pos_;
        skip_space(true);
        std::vector<Sequence> alts;
        if (!parse_alternates(alts, true)) return false;
        if (peek() != ')') return fail("expected ')' to close the group");
        ++pos_;
        --depth_;
        const auto sub = generated_rule(std::move(alts));
        if (!sub) return false;
        seq.push_back({ElementKind::rule, *sub});
      } else if (c == '.') {
        ++pos_;
        seq.push_back({ElementKind::chars, charset_id(CharSet::from_ranges({{0, kMaxCodePoint}}))});
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_item) return fail(std::string("expected an item before '") + c + "'");
        int lo = 0, hi = kUnbounded;
        if (c == '{') {
          if (!parse_braces(lo, hi, nested)) return false;
        } else {
          // `x+*`, `x?+`...: one repetition, x* or x+ or x?. Nesting them instead would give
          // the matcher a number of parses exponential in the operators (each level may end or
          // go on).
          lo = 1, hi = 1;
          for (char op = c; op == '*' || op == '+' || op == '?'; op = peek()) {
            ++pos_;
            lo = op == '+' ? lo : 0;
            hi = op == '?' ? hi : kUnbounded;
            skip_space(nested);
          }
        }
        if (!repeat(seq, last_start, lo, hi)) return false;
        skip_space(nested);
        continue;  // the repeated item stays the last item: `x{2}{3}` repeats again
      } else if (c == '<' || (c == '!' && peek(1) == '<')) {
        return fail("token references are not supported");
      } else {
        break;
      }
      last_start = item_start;
      have_item = true;
      skip_space(nested);
    }
    return true;
  }

  // {m}, {m,}, {m,n} with optional spaces inside.
  bool parse_braces(int& lo, int& hi, bool nested) {
    ++pos_;
    skip_space(nested);
    if (!parse_int(lo)) return false;
    skip_space(nested);
    hi = lo;
    if (peek() == ',') {
      ++pos_;
      skip_space(nested);
      hi = kUnbounded;
      if (peek() >= '0' && peek() <= '9') {
        if (!parse_int(hi)) return false;
        skip_space(nested);
      }
    }
    if (peek() != '}') return fail("expected '}' to close the repetition");
    ++pos_;
    if (hi != kUnbounded && hi < lo)
      return fail("repetition {" + std::to_string(lo) + "," + std::to_string(hi) + "}: the maximum is below the minimum");
    return true;
  }
  bool parse_int(int& out) {
    if (!(peek() >= '0' && peek() <= '9')) return fail("expected a number");
    int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > limits_.max_repetition)
        return fail("repetition count above the limit of " + std::to_string(limits_.max_repetition));
      ++pos_;
    }
    out = static_cast<int>(v);
    return true;
  }

  // Replaces the item seq[last_start..] by its repetition {lo, hi}.
  bool repeat(Sequence& seq, size_t last_start, int lo, int hi) {
    Sequence item(seq.begin() + static_cast<std::ptrdiff_t>(last_start), seq.end());
    seq.resize(last_start);
    if (item.size() != 1) {  // a literal of several characters (or none) becomes one rule
      const auto wrapped = generated_rule({item});
      if (!wrapped) return false;
      item = {{ElementKind::rule, *wrapped}};
    }
    const Element x = item[0];
    count_elements(static_cast<size_t>(lo) + 3 * static_cast<size_t>(hi == kUnbounded ? 1 : hi - lo));
    if (!check_element_limit()) return false;
    for (int i = 0; i < lo; ++i) seq.push_back(x);
    if (hi == kUnbounded) {
      const auto star = generated_rule({});
      if (!star) return false;
      rule_alts_[*star] = {{x, {ElementKind::rule, *star}}, {}};
      seq.push_back({ElementKind::rule, *star});
    } else if (hi > lo) {
      // x{0,3} = (x (x (x)?)?)?, built from the inside out.
      std::optional<uint32_t> inner;
      for (int i = 0; i < hi - lo; ++i) {
        Sequence body{x};
        if (inner) body.push_back({ElementKind::rule, *inner});
        inner = generated_rule({body, {}});
        if (!inner) return false;
      }
      seq.push_back({ElementKind::rule, *inner});
    }
    return true;
  }

  bool parse_class(Sequence& seq) {
    ++pos_;  // '['
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<CodeRange> ranges;
    while (peek() != ']') {
      if (at_end()) return fail("unterminated character class: expected ']'");
      uint32_t lo = 0;
      if (!parse_char(lo)) return false;
      uint32_t hi = lo;
      if (peek() == '-' && pos_ + 1 < src_.size() && src_[pos_ + 1] != ']') {
        ++pos_;
        const size_t at = pos_;
        if (!parse_char(hi)) return false;
        if (hi < lo) return fail_at(at, "character range ends below its start");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    CharSet set = CharSet::from_ranges(std::move(ranges));
    if (negated) set = set.complement();
    seq.push_back({ElementKind::chars, charset_id(set)});
    return true;
  }

  // One character of a literal or class: an escape or one UTF-8 encoded code point.
  bool parse_char(uint32_t& cp) {
    const unsigned char c = static_cast<unsigned char>(src_[pos_]);
    if (c == '\\') {
      const char e = peek(1);
      int digits = 0;
      switch (e) {
        case 'n': cp = '\n'; pos_ += 2; return true;
        case 'r': cp = '\r'; pos_ += 2; return true;
        case 't': cp = '\t'; pos_ += 2; return true;
        case '\\': case '"': case '[': case ']': case '-': case '^': cp = static_cast<uint32_t>(e); pos_ += 2; return true;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        default:
          if (pos_ + 1 >= src_.size()) return fail("unterminated escape");
          return fail_at(pos_ + 1, "unknown escape: expected one of \\n \\r \\t \\\\ \\\" \\[ \\] \\xHH \\uHHHH \\UHHHHHHHH");
      }
      uint64_t v = 0;
      for (int i = 0; i < digits; ++i) {
        const int h = hex_value(peek(2 + static_cast<size_t>(i)));
        if (h < 0) return fail_at(pos_ + 2 + static_cast<size_t>(i), "expected " + std::to_string(digits) + " hex digits after \\" + e);
        v = v * 16 + static_cast<uint64_t>(h);
      }
      if (v > kMaxCodePoint) return fail("escape names a code point above U+10FFFF");
      cp = static_cast<uint32_t>(v);
      pos_ += 2 + static_cast<size_t>(digits);
      return true;
    }
    int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || pos_ + static_cast<size_t>(len) > src_.size()) return fail("invalid UTF-8 in the grammar text");
    cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i < len; ++i) {
      const unsigned char k = static_cast<unsigned char>(src_[pos_ + static_cast<size_t>(i)]);
      if ((k & 0xC0) != 0x80) return fail("invalid UTF-8 in the grammar text");
      cp = (cp << 6) | (k & 0x3F);
    }
    if (cp > kMaxCodePoint) return fail("invalid UTF-8 in the grammar text");
    pos_ += static_cast<size_t>(len);
    return true;
  }

  uint32_t charset_id(const CharSet& set) {
    std::string key;
    for (const CodeRange& r : set.ranges) key.append(reinterpret_cast<const char*>(&r), sizeof r);
    auto [it, inserted] = charset_ids_.try_emplace(key, static_cast<uint32_t>(charsets_.size()));
    if (inserted) charsets_.push_back(set);
    return it->second;
  }

  void flatten(Grammar& g) {
    g.charsets = std::move(charsets_);
    g.rules.resize(rule_alts_.size());
    size_t total = 0;
    for (const auto& alts : rule_alts_)
      for (const Sequence& s : alts) total += s.size() + 1;
    g.elements.reserve(total);
    for (size_t r = 0; r < rule_alts_.size(); ++r) {
      GrammarRule& rule = g.rules[r];
      rule.name = names_[r];
      rule.owner = owners_[r];
      rule.line = defined_at_[r].first;
      rule.column = defined_at_[r].second;
      for (const Sequence& s : rule_alts_[r]) {
        rule.alternatives.push_back(static_cast<uint32_t>(g.elements.size()));
        g.elements.insert(g.elements.end(), s.begin(), s.end());
        g.elements.push_back({ElementKind::end, 0});
      }
    }
  }

  std::string_view src_;
  const GrammarLimits& limits_;
  size_t pos_ = 0;
  int depth_ = 0;
  size_t n_elements_ = 0;
  uint32_t current_rule_ = 0;
  std::optional<Error> error_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<std::vector<Sequence>> rule_alts_;
  std::vector<std::string> names_;
  std::vector<uint32_t> owners_;
  std::vector<bool> defined_;
  std::vector<std::pair<uint32_t, uint32_t>> first_use_, defined_at_;
  std::vector<CharSet> charsets_;
  std::unordered_map<std::string, uint32_t> charset_ids_;
};

}  // namespace

Result<std::shared_ptr<const Grammar>> parse_gbnf(std::string_view text, std::string_view root,
                                                  const GrammarLimits& limits) {
  GbnfParser parser(text, limits);
  return parser.run(root);
}

}  // namespace pllm
