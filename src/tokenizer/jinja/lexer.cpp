#include "tokenizer/jinja/lexer.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "tokenizer/jinja/value.h"

namespace pllm::jinja {

namespace {

// jinja2 splits the source on \r\n, \r and \n, drops one trailing newline, joins with \n.
std::string normalize_newlines(const std::string& src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out += '\n';
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out += src[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool all_spaces(const std::string& s, size_t from) {
  while (from < s.size()) {
    const size_t n = space_len_at(s, from);
    if (n == 0) return false;
    from += n;
  }
  return true;
}

// Python's str.rstrip() on UTF-8: drop trailing whitespace characters.
void rstrip_in_place(std::string& s) { s = strip_spaces(s, false, true); }

size_t skip_spaces(const std::string& s, size_t pos) {
  while (size_t n = space_len_at(s, pos)) pos += n;
  return pos;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The escapes of Python's unicode-escape codec (what jinja2 applies to string literals).
std::string unescape(const std::string& body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 >= body.size()) {
      out += body[i];
      continue;
    }
    const char c = body[++i];
    switch (c) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case '\n': break;
      case 'x': case 'u': case 'U': {
        const size_t digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (size_t k = 0; k < digits; ++k) {
          const int h = i + 1 + k < body.size() ? hex_value(body[i + 1 + k]) : -1;
          if (h < 0) fail("line " + std::to_string(line) + ": truncated \\" + c + " escape in a string");
          cp = cp * 16 + static_cast<uint32_t>(h);
        }
        if (cp > 0x10ffff) fail("line " + std::to_string(line) + ": \\U escape out of range");
        i += digits;
        append_utf8(out, cp);
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          uint32_t cp = static_cast<uint32_t>(c - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k)
            cp = cp * 8 + static_cast<uint32_t>(body[++i] - '0');
          append_utf8(out, cp);
        } else {
          out += '\\';
          out += c;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : s_(normalize_newlines(src)) {}

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < s_.size()) {
      const size_t open = find_open(pos);
      std::string text = s_.substr(pos, (open == std::string::npos ? s_.size() : open) - pos);
      if (open == std::string::npos) {
        push_text(text);
        break;
      }
      const char kind = s_[open + 1];  // '{', '%' or '#'
      const char sign = open + 2 < s_.size() ? s_[open + 2] : '\0';
      push_text(strip_before_tag(std::move(text), sign, kind != '{', line_starting));
      line_ += count_lines(pos, open);
      pos = open + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (kind == '#') {
        pos = end_comment(pos, &line_starting);
      } else if (kind == '%' && tag_named(pos, "raw")) {
        pos = lex_raw(pos, &line_starting);
      } else {
        pos = lex_tag(pos, kind == '{', &line_starting);
      }
    }
    tokens_.push_back(Token{Tok::eof, "", 0, 0, line_});
    return std::move(tokens_);
  }

 private:
  size_t find_open(size_t pos) const {
    for (size_t i = s_.find('{', pos); i != std::string::npos; i = s_.find('{', i + 1))
      if (i + 1 < s_.size() && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#')) return i;
    return std::string::npos;
  }

  // The text before a tag: `-` strips all whitespace before it; lstrip_blocks (not for {{ }},
  // not with `+`) strips the spaces between the line's start and a block or comment tag.
  std::string strip_before_tag(std::string text, char sign, bool is_block, bool line_starting) const {
    if (sign == '-') {
      rstrip_in_place(text);
    } else if (sign != '+' && is_block) {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting) && l_pos < text.size() && all_spaces(text, l_pos)) text.resize(l_pos);
    }
    return text;
  }

  // Whether the block tag whose body starts at pos is `name` alone: {% raw %}, {%- endraw -%}.
  bool tag_named(size_t pos, const char* name, size_t* end = nullptr) const {
    pos = skip_spaces(s_, pos);
    const size_t n = std::strlen(name);
    if (s_.compare(pos, n, name) != 0) return false;
    pos = skip_spaces(s_, pos + n);
    if (pos < s_.size() && (s_[pos] == '-' || s_[pos] == '+')) ++pos;
    if (s_.compare(pos, 2, "%}") != 0) return false;
    if (end) *end = pos + 2;
    return true;
  }

  // {% raw %}...{% endraw %}: the text between, verbatim (whitespace control still applies).
  size_t lex_raw(size_t pos, bool* line_starting) {
    size_t close = 0;
    tag_named(pos, "raw", &close);
    pos = after_close(close, s_[close - 3] == '-', s_[close - 3] == '+', true, line_starting);
    for (size_t open = s_.find("{%", pos); open != std::string::npos; open = s_.find("{%", open + 2)) {
      const char sign = open + 2 < s_.size() ? s_[open + 2] : '\0';
      const size_t body = open + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      size_t end = 0;
      if (!tag_named(body, "endraw", &end)) continue;
      push_text(strip_before_tag(s_.substr(pos, open - pos), sign, true, *line_starting));
      line_ += count_lines(pos, end);
      return after_close(end, s_[end - 3] == '-', s_[end - 3] == '+', true, line_starting);
    }
    error("missing end of raw directive");
  }

  int count_lines(size_t from, size_t to) const {
    int n = 0;
    for (size_t i = from; i < to && i < s_.size(); ++i) n += s_[i] == '\n';
    return n;
  }

  void push_text(const std::string& text) {
    if (!text.empty()) tokens_.push_back(Token{Tok::text, text, 0, 0, line_});
  }

  [[noreturn]] void error(const std::string& what) const { fail("line " + std::to_string(line_) + ": " + what); }

  // After a closing marker at `pos` (past it): `-` strips all whitespace, trim_blocks one newline.
  size_t after_close(size_t pos, bool minus, bool plus, bool trim_newline, bool* line_starting) {
    if (minus) {
      const size_t end = skip_spaces(s_, pos);
      line_ += count_lines(pos, end);
      *line_starting = end > pos && s_[end - 1] == '\n';
      return end;
    }
    if (!plus && trim_newline && pos < s_.size() && s_[pos] == '\n') {
      ++line_;
      *line_starting = true;
      return pos + 1;
    }
    *line_starting = false;
    return pos;
  }

  size_t end_comment(size_t pos, bool* line_starting) {
    const size_t close = s_.find("#}", pos);
    if (close == std::string::npos) error("missing end of comment tag");
    line_ += count_lines(pos, close);
    const bool minus = close > pos && s_[close - 1] == '-';
    const bool plus = close > pos && s_[close - 1] == '+';
    return after_close(close + 2, minus, plus, true, line_starting);
  }

  // Tokens of one {{ }} or {% %} tag starting at pos; returns the position after it.
  size_t lex_tag(size_t pos, bool is_var, bool* line_starting) {
    tokens_.push_back(Token{is_var ? Tok::var_begin : Tok::block_begin, "", 0, 0, line_});
    const char* close = is_var ? "}}" : "%}";
    int depth = 0;  // brackets open: a `}}` inside {{ {'a': {}}} }} closes a dict first
    for (;;) {
      const size_t start = pos;
      pos = skip_spaces(s_, pos);
      line_ += count_lines(start, pos);
      if (pos >= s_.size()) error(std::string("unexpected end of template, expected '") + close + "'");
      const bool minus = s_[pos] == '-' && s_.compare(pos + 1, 2, close) == 0;
      const bool plus = !is_var && s_[pos] == '+' && s_.compare(pos + 1, 2, close) == 0;
      if (depth <= 0 && (minus || plus || s_.compare(pos, 2, close) == 0)) {
        tokens_.push_back(Token{is_var ? Tok::var_end : Tok::block_end, "", 0, 0, line_});
        return after_close(pos + 2 + (minus || plus ? 1 : 0), minus, plus, !is_var, line_starting);
      }
      pos = lex_one(pos, &depth);
    }
  }

  size_t lex_one(size_t pos, int* depth) {
    const char c = s_[pos];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t e = pos;
      while (e < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[e])) || s_[e] == '_')) ++e;
      tokens_.push_back(Token{Tok::name, s_.substr(pos, e - pos), 0, 0, line_});
      return e;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return lex_number(pos);
    if (c == '\'' || c == '"') {
      size_t e = pos + 1;
      while (e < s_.size() && s_[e] != c) e += s_[e] == '\\' ? 2 : 1;
      if (e >= s_.size()) error("unterminated string");
      const std::string body = s_.substr(pos + 1, e - pos - 1);
      tokens_.push_back(Token{Tok::string, unescape(body, line_), 0, 0, line_});
      line_ += count_lines(pos, e);
      return e + 1;
    }
    static const char* ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                                "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", ";"};
    for (const char* op : ops) {
      const size_t n = std::strlen(op);
      if (s_.compare(pos, n, op) == 0) {
        if (n == 1 && (c == '(' || c == '[' || c == '{')) ++*depth;
        if (n == 1 && (c == ')' || c == ']' || c == '}')) --*depth;
        tokens_.push_back(Token{Tok::op, op, 0, 0, line_});
        return pos + n;
      }
    }
    error(std::string("unexpected char '") + c + "'");
  }

  size_t lex_number(size_t pos) {
    size_t e = pos;
    auto digits = [&] {
      while (e < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[e])) || s_[e] == '_')) ++e;
    };
    digits();
    bool is_float = false;
    if (e + 1 < s_.size() && s_[e] == '.' && std::isdigit(static_cast<unsigned char>(s_[e + 1]))) {
      is_float = true;
      ++e;
      digits();
    }
    if (e < s_.size() && (s_[e] == 'e' || s_[e] == 'E')) {
      size_t k = e + 1;
      if (k < s_.size() && (s_[k] == '+' || s_[k] == '-')) ++k;
      if (k < s_.size() && std::isdigit(static_cast<unsigned char>(s_[k]))) {
        is_float = true;
        e = k;
        digits();
      }
    }
    std::string lit;
    for (size_t i = pos; i < e; ++i)
      if (s_[i] != '_') lit += s_[i];
    Token t{is_float ? Tok::floating : Tok::integer, lit, 0, 0, line_};
    if (is_float) {
      t.float_value = std::strtod(lit.c_str(), nullptr);
    } else {
      errno = 0;
      t.int_value = std::strtoll(lit.c_str(), nullptr, 10);
      if (errno == ERANGE) error("integer literal out of range: " + lit);
    }
    tokens_.push_back(t);
    return e;
  }

  std::string s_;
  std::vector<Token> tokens_;
  int line_ = 1;
};

}  // namespace

std::vector<Token> lex(const std::string& source) { return Lexer(source).run(); }

}  // namespace pllm::jinja
