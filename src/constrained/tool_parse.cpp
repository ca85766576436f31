// Reading tool calls back out of a reply, whole or as it streams. One scanner serves both: it
// reads a call block from its marker as far as the text goes and says what it has seen (names
// finished, how far each call's arguments reach, whether the block is complete), so the stream
// can send each name once and then argument fragments, and the whole parse is the stream's end.
#include <algorithm>
#include <optional>

#include "constrained/tool_calls.h"

namespace pllm {
namespace {

using Json = nlohmann::ordered_json;
constexpr size_t npos = std::string_view::npos;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
size_t skip_ws(std::string_view t, size_t p) {
  while (p < t.size() && is_space(t[p])) ++p;
  return p;
}

// Where the call markers are and what the calls inside look like.
struct Syntax {
  std::string open, close;  // around a block ("<tool_call>", "</tool_call>")
  bool list = false;        // the block holds a [list] of calls (phi4, pythonic)
  bool python = false;      // calls are name(key=value) (pythonic)
  bool at_start = false;    // the block is the whole reply (llama3_json)
  const char* args_key = "arguments";
};

Syntax syntax_of(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::hermes: return {"<tool_call>", "</tool_call>", false, false, false, "arguments"};
    case ToolCallFormat::llama3_json: return {"<|python_tag|>", "", false, false, true, "parameters"};
    case ToolCallFormat::pythonic: return {"<|tool_call_start|>", "<|tool_call_end|>", true, true, false, "arguments"};
    case ToolCallFormat::phi4: return {"<|tool_call|>", "<|/tool_call|>", true, false, false, "arguments"};
  }
  return {};
}

// The end of the JSON (or Python literal) value starting at p; npos if the text ends first;
// `bad` set when it cannot be a value. Brackets are matched, strings skipped with escapes.
size_t value_end(std::string_view t, size_t p, bool& bad) {
  if (p >= t.size()) return npos;
  const char c = t[p];
  if (c == '"' || c == '\'') {
    for (size_t i = p + 1; i < t.size(); ++i) {
      if (t[i] == '\\') ++i;
      else if (t[i] == c) return i + 1;
    }
    return npos;
  }
  if (c == '{' || c == '[' || c == '(') {
    std::vector<char> stack{c};
    for (size_t i = p + 1; i < t.size(); ++i) {
      const char d = t[i];
      if (d == '"' || d == '\'') {
        const size_t e = value_end(t, i, bad);
        if (e == npos || bad) return e;
        i = e - 1;
      } else if (d == '{' || d == '[' || d == '(') {
        stack.push_back(d);
      } else if (d == '}' || d == ']' || d == ')') {
        const char want = stack.back() == '{' ? '}' : stack.back() == '[' ? ']' : ')';
        if (d != want) {
          bad = true;
          return npos;
        }
        stack.pop_back();
        if (stack.empty()) return i + 1;
      }
    }
    return npos;
  }
  // A scalar: up to the next delimiter (the text may still grow it).
  size_t i = p;
  while (i < t.size() && !is_space(t[i]) && t[i] != ',' && t[i] != '}' && t[i] != ']' && t[i] != ')') ++i;
  if (i == p) bad = true;
  return i == t.size() ? npos : i;
}

// ---- Python literals (LFM2's arguments) as JSON ----

struct PyReader {
  std::string_view t;
  size_t p = 0;
  bool ok = true;

  void ws() { p = skip_ws(t, p); }
  bool eat(char c) {
    ws();
    if (p < t.size() && t[p] == c) {
      ++p;
      return true;
    }
    return false;
  }
  std::string identifier() {
    ws();
    const size_t b = p;
    while (p < t.size() && (std::isalnum(static_cast<unsigned char>(t[p])) || t[p] == '_')) ++p;
    if (p == b) ok = false;
    return std::string(t.substr(b, p - b));
  }
  Json string_literal() {
    const char q = t[p++];
    std::string out;
    while (p < t.size() && t[p] != q) {
      if (t[p] == '\\' && p + 1 < t.size()) {
        const char e = t[p + 1];
        p += 2;
        switch (e) {
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          case 'r': out += '\r'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'u': {  // JSON-style escape (the grammar writes JSON strings): decode via JSON
            const size_t b = p - 2;
            size_t e2 = std::min(t.size(), p + 4);
            std::string js(1, '"');
            js.append(t.substr(b, e2 - b));
            if (e2 + 6 <= t.size() && t[e2] == '\\' && t[e2 + 1] == 'u') {  // a surrogate pair
              js.append(t.substr(e2, 6));
              e2 += 6;
            }
            js.push_back('"');
            auto j = Json::parse(js, nullptr, false);
            if (j.is_discarded()) ok = false;
            else out += j.get<std::string>();
            p = e2;
            break;
          }
          default: out += e;  // \" \' \\ \/
        }
      } else {
        out += t[p++];
      }
    }
    if (p >= t.size()) ok = false;
    else ++p;
    return out;
  }
  Json value(int depth = 0) {
    ws();
    if (!ok || p >= t.size() || depth > 64) {
      ok = false;
      return nullptr;
    }
    const char c = t[p];
    if (c == '"' || c == '\'') return string_literal();
    if (c == '[' || c == '(') {
      const char close = c == '[' ? ']' : ')';
      ++p;
      Json a = Json::array();
      if (eat(close)) return a;
      do a.push_back(value(depth + 1));
      while (ok && eat(','));
      if (!eat(close)) ok = false;
      return a;
    }
    if (c == '{') {
      ++p;
      Json o = Json::object();
      if (eat('}')) return o;
      do {
        Json k = value(depth + 1);
        if (!k.is_string() || !eat(':')) ok = false;
        if (!ok) break;
        o[k.get<std::string>()] = value(depth + 1);
      } while (ok && eat(','));
      if (!eat('}')) ok = false;
      return o;
    }
    const size_t b = p;
    while (p < t.size() && (std::isalnum(static_cast<unsigned char>(t[p])) || t[p] == '.' || t[p] == '-' || t[p] == '+'))
      ++p;
    const std::string word(t.substr(b, p - b));
    if (word == "True" || word == "true") return true;
    if (word == "False" || word == "false") return false;
    if (word == "None" || word == "null") return nullptr;
    auto num = Json::parse(word, nullptr, false);
    if (num.is_discarded() || !num.is_number()) ok = false;
    return num;
  }
};

// What the scanner saw of one call.
struct CallScan {
  std::string name;
  bool name_done = false;
  size_t args_begin = npos, args_end = npos;  // the arguments' text so far [begin, end)
  bool args_done = false;
  bool done = false;
  Json args;  // when done
};

struct BlockScan {
  bool bad = false;       // not a call block after all
  bool complete = false;  // through its closing marker
  size_t end = 0;
  std::vector<CallScan> calls;
};

// A JSON call object {"name": ..., "<args_key>": {...}} at p.
CallScan scan_json_call(std::string_view t, size_t p, const Syntax& sx, size_t& end, bool& bad) {
  CallScan c;
  end = npos;
  if (p >= t.size()) return c;
  if (t[p] != '{') {
    bad = true;
    return c;
  }
  const size_t obj_end = value_end(t, p, bad);
  if (bad) return c;
  // Walk the keys as far as the text goes.
  size_t i = skip_ws(t, p + 1);
  while (i < t.size() && t[i] == '"') {
    const size_t key_end = value_end(t, i, bad);
    if (bad || key_end == npos) return c;
    const std::string key(t.substr(i + 1, key_end - i - 2));
    i = skip_ws(t, key_end);
    if (i >= t.size()) return c;
    if (t[i] != ':') {
      bad = true;
      return c;
    }
    i = skip_ws(t, i + 1);
    if (i >= t.size()) return c;
    const size_t v_end = value_end(t, i, bad);
    if (bad) return c;
    if (key == "name") {
      if (t[i] != '"') {
        bad = true;
        return c;
      }
      if (v_end == npos) return c;
      auto j = Json::parse(t.substr(i, v_end - i), nullptr, false);
      if (j.is_discarded()) {
        bad = true;
        return c;
      }
      c.name = j.get<std::string>();
      c.name_done = true;
    } else if (key == sx.args_key || key == "arguments" || key == "parameters") {
      c.args_begin = i;
      c.args_end = v_end == npos ? t.size() : v_end;
      c.args_done = v_end != npos;
    }
    if (v_end == npos) return c;
    i = skip_ws(t, v_end);
    if (i < t.size() && t[i] == ',') i = skip_ws(t, i + 1);
  }
  if (obj_end == npos) return c;
  end = obj_end;
  auto whole = Json::parse(t.substr(p, obj_end - p), nullptr, false);
  if (whole.is_discarded() || !c.name_done) {
    bad = true;
    return c;
  }
  Json args = Json::object();
  for (const char* k : {sx.args_key, "arguments", "parameters"})
    if (whole.contains(k)) {
      args = whole[k];
      break;
    }
  if (args.is_string()) {  // some models write the arguments as a JSON string
    auto inner = Json::parse(args.get<std::string>(), nullptr, false);
    if (!inner.is_discarded()) args = inner;
  }
  c.args = std::move(args);
  c.done = true;
  return c;
}

// A Python call name(key=value, ...) at p.
CallScan scan_python_call(std::string_view t, size_t p, size_t& end, bool& bad) {
  CallScan c;
  end = npos;
  size_t i = p;
  while (i < t.size() && (std::isalnum(static_cast<unsigned char>(t[i])) || t[i] == '_')) ++i;
  if (i >= t.size()) return c;
  if (i == p || t[i] != '(') {
    bad = true;
    return c;
  }
  const size_t close = value_end(t, i, bad);
  if (bad || close == npos) return c;
  PyReader r{t.substr(0, close), i + 1};
  Json args = Json::object();
  if (!r.eat(')')) {
    do {
      const std::string k = r.identifier();
      if (!r.ok || !r.eat('=')) {
        r.ok = false;
        break;
      }
      args[k] = r.value();
    } while (r.ok && r.eat(','));
    if (r.ok && !r.eat(')')) r.ok = false;
  }
  if (!r.ok) {
    bad = true;
    return c;
  }
  c.name = std::string(t.substr(p, i - p));
  c.name_done = c.done = true;
  c.args = std::move(args);
  end = close;
  return c;
}

// Whether `t` from p is `lit`, a prefix of it (the text may still complete it: `partial`), or neither.
bool expect(std::string_view t, size_t& p, std::string_view lit, bool& partial) {
  const size_t n = std::min(lit.size(), t.size() - std::min(p, t.size()));
  if (t.substr(p, n) != lit.substr(0, n)) return false;
  if (n < lit.size()) {
    partial = true;
    return false;
  }
  p += lit.size();
  return true;
}

// The block starting at `p` (where its marker, or for llama3_json the reply, begins).
BlockScan scan_block(std::string_view t, size_t p, const Syntax& sx) {
  BlockScan b;
  bool partial = false;
  size_t i = p;
  if (sx.at_start) {
    i = skip_ws(t, i);
    if (!expect(t, i, sx.open, partial) && partial) return b;
    i = skip_ws(t, i);
  } else if (!expect(t, i, sx.open, partial)) {
    b.bad = !partial;
    return b;
  }
  if (sx.list) {
    if (!sx.python) i = skip_ws(t, i);
    if (!expect(t, i, "[", partial)) {
      b.bad = !partial;
      return b;
    }
  }
  for (;;) {
    i = skip_ws(t, i);
    size_t end = npos;
    CallScan c = sx.python ? scan_python_call(t, i, end, b.bad) : scan_json_call(t, i, sx, end, b.bad);
    if (b.bad) return b;
    if (i < t.size()) b.calls.push_back(std::move(c));
    if (end == npos) return b;
    i = skip_ws(t, end);
    if (!sx.list) break;
    if (i < t.size() && t[i] == ',') {
      ++i;
      continue;
    }
    if (!expect(t, i, "]", partial)) {
      b.bad = !partial;
      return b;
    }
    break;
  }
  if (!sx.close.empty()) {
    i = skip_ws(t, i);
    if (!expect(t, i, sx.close, partial)) {
      b.bad = !partial;
      return b;
    }
  }  // llama3_json: the call ends the block (text after it is content, as a stream sends it)
  b.complete = true;
  b.end = i;
  return b;
}

// Bytes of `s` that end in a whole UTF-8 character (a streamed fragment never splits one).
size_t utf8_safe_length(std::string_view s) {
  size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const unsigned char c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return len > back ? n - back : n;
  }
  return n;
}

std::string trim(std::string_view s) {
  const size_t b = skip_ws(s, 0);
  size_t e = s.size();
  while (e > b && is_space(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace

struct ToolCallStream::State {
  Syntax sx;
  std::string id_prefix;
  std::string text;
  size_t pos = 0;              // text before pos is sent (as content) or belongs to finished blocks
  std::optional<size_t> block;  // the start of the block being read
  struct Sent {
    bool named = false;
    size_t args_sent = 0;  // bytes of its arguments already sent
  };
  std::vector<Sent> sent;
  std::vector<ToolCall> calls;  // finished calls
  std::string content;          // all content sent
  bool failed = false;          // a block that did not parse: the rest is content

  // The earliest marker at or after p; npos when none. at_start formats: only at the reply's start.
  size_t find_open(size_t p, size_t& held) const {
    held = 0;
    if (sx.at_start) {
      if (p != 0) return npos;
      const size_t s = skip_ws(text, 0);
      if (s == text.size()) {
        held = text.size();  // only whitespace so far: it may still start a call
        return npos;
      }
      return text[s] == '{' || std::string_view(text).substr(s).starts_with(std::string_view(sx.open).substr(
                                   0, std::min(sx.open.size(), text.size() - s)))
                 ? 0
                 : npos;
    }
    const size_t at = text.find(sx.open, p);
    if (at != npos) return at;
    // Hold back a tail that may be the start of the marker.
    for (size_t k = std::min(sx.open.size() - 1, text.size() - p); k > 0; --k)
      if (std::string_view(text).substr(text.size() - k) == std::string_view(sx.open).substr(0, k)) {
        held = k;
        break;
      }
    return npos;
  }

  void step(ToolStreamDelta& out, bool final) {
    for (;;) {
      if (failed) {
        out.content += text.substr(pos);
        pos = text.size();
        return;
      }
      if (!block) {
        size_t held = 0;
        const size_t at = find_open(pos, held);
        const size_t upto = at != npos ? at : final ? text.size() : text.size() - held;
        std::string_view piece = std::string_view(text).substr(pos, upto - pos);
        if (!final && at == npos) piece = piece.substr(0, utf8_safe_length(piece));
        out.content += piece;
        pos += piece.size();
        if (at == npos) return;
        block = at;
        sent.clear();
      }
      BlockScan b = scan_block(text, *block, sx);
      if (!b.bad) {
        for (size_t k = 0; k < b.calls.size(); ++k) {
          const CallScan& c = b.calls[k];
          if (sent.size() <= k) sent.emplace_back();
          Sent& s = sent[k];
          if (!c.name_done) break;
          const int index = int(calls.size() + k);
          if (!s.named) {
            out.calls.push_back({index, id_prefix + std::to_string(index), c.name, ""});
            s.named = true;
          }
          if (sx.python) {  // arguments sent whole once the call is read (they are converted)
            if (c.done && s.args_sent == 0) {
              out.calls.push_back({index, "", "", json_text(c.args)});
              s.args_sent = 1;
            }
          } else if (c.args_begin != npos) {
            std::string_view a = std::string_view(text).substr(c.args_begin, c.args_end - c.args_begin);
            if (!c.args_done) a = a.substr(0, utf8_safe_length(a));
            if (a.size() > s.args_sent) {
              out.calls.push_back({index, "", "", std::string(a.substr(s.args_sent))});
              s.args_sent = a.size();
            }
          }
        }
      }
      if (b.bad || (final && !b.complete)) {
        // Not a call after all, or cut off: its text is content (what a stream already sent of
        // it stays sent; the request's finish_reason tells the client it was cut).
        failed = true;
        continue;
      }
      if (!b.complete) return;
      for (size_t k = 0; k < b.calls.size(); ++k) {
        const CallScan& c = b.calls[k];
        calls.push_back({id_prefix + std::to_string(calls.size()), c.name, json_text(c.args)});
      }
      pos = b.end;
      block.reset();
      if (sx.at_start) {
        failed = true;  // nothing may follow; anything that does is content
      }
    }
  }
};

ToolCallStream::ToolCallStream(ToolCallFormat f, std::string id_prefix) : st_(std::make_unique<State>()) {
  st_->sx = syntax_of(f);
  st_->id_prefix = std::move(id_prefix);
}
ToolCallStream::~ToolCallStream() = default;
ToolCallStream::ToolCallStream(ToolCallStream&&) noexcept = default;

ToolStreamDelta ToolCallStream::push(std::string_view bytes) {
  ToolStreamDelta out;
  st_->text += bytes;
  st_->step(out, false);
  st_->content += out.content;
  return out;
}

ToolStreamDelta ToolCallStream::finish() {
  ToolStreamDelta out;
  st_->step(out, true);
  st_->content += out.content;
  return out;
}

std::string json_text(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls) {
  nlohmann::json out = nlohmann::json::array();
  for (const ToolCall& c : calls)
    out.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  return out;
}

const std::vector<ToolCall>& ToolCallStream::calls() const { return st_->calls; }

ToolReply ToolCallStream::reply() const {
  // Beside calls, the text around them is only the whitespace and line breaks the model wrote.
  return {st_->calls.empty() ? st_->content : trim(st_->content), st_->calls};
}

ToolReply parse_tool_reply(ToolCallFormat f, std::string_view text, const std::string& id_prefix) {
  // The whole parse is a stream fed once: one scanner, one set of rules.
  ToolCallStream s(f, id_prefix);
  s.push(text);
  s.finish();
  return s.reply();
}

}  // namespace pllm
