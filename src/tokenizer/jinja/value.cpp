#include "tokenizer/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cmath>
#include <cstring>

namespace pllm::jinja {

void fail(const std::string& message) { throw TemplateError(message); }

size_t& built_bytes() {
  thread_local size_t bytes = 0;
  return bytes;
}

Value Value::string(std::string s) {
  built_bytes() += s.size();
  return Value{std::make_shared<const std::string>(std::move(s))};
}

Value Value::list(ValueList items) {
  built_bytes() += items.size() * sizeof(Value);
  return Value{std::make_shared<const ValueList>(std::move(items))};
}
Value Value::tuple_of(ValueList items) {
  Value v = list(std::move(items));
  v.tuple = true;
  return v;
}
Value Value::dict(ValueDict d) { return Value{std::make_shared<const ValueDict>(std::move(d))}; }

double Value::to_double() const {
  if (is_bool()) return as_bool() ? 1.0 : 0.0;
  if (is_int()) return static_cast<double>(as_int());
  return as_float();
}

const Value* ValueDict::find(const std::string& key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void ValueDict::set(const std::string& key, Value value) {
  for (auto& [k, v] : items)
    if (k == key) {
      v = std::move(value);
      return;
    }
  items.emplace_back(key, std::move(value));
}

const Value* Args::get(size_t index, const char* name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [k, v] : keyword)
    if (name && k == name) return &v;
  return nullptr;
}

bool truthy(const Value& v) {
  switch (v.v.index()) {
    case 0: case 1: return false;
    case 2: return v.as_bool();
    case 3: return v.as_int() != 0;
    case 4: return v.as_float() != 0.0;
    case 5: return !v.as_string().empty();
    case 6: return !v.as_list().empty();
    case 7: return !v.as_dict().items.empty();
    default: return true;
  }
}

std::string type_name(const Value& v) {
  static const char* names[] = {"Undefined", "NoneType", "bool", "int", "float",
                                "str", "list", "dict", "function", "Namespace"};
  return names[v.v.index()];
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits, then Python's layout: plain between 1e-4 and 1e16, else exponent.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp = std::stoi(sci.substr(e + 1));
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out = digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
    }
  }
  if (out.empty()) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1, std::string::npos);
    }
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  }
  return sign + out;
}

namespace {

std::string repr_string(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char q = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == static_cast<unsigned char>(q) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += q;
  return out;
}

}  // namespace

std::string to_repr(const Value& v) {
  if (v.is_string()) return repr_string(v.as_string());
  if (v.is_list()) {
    std::string out = v.tuple ? "(" : "[";
    bool first = true;
    for (const auto& item : v.as_list()) {
      if (!first) out += ", ";
      first = false;
      out += to_repr(item);
    }
    if (v.tuple && v.as_list().size() == 1) out += ",";
    return out + (v.tuple ? ")" : "]");
  }
  if (v.is_dict()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, item] : v.as_dict().items) {
      if (!first) out += ", ";
      first = false;
      out += repr_string(k) + ": " + to_repr(item);
    }
    return out + "}";
  }
  return to_str(v);
}

std::string to_str(const Value& v) {
  switch (v.v.index()) {
    case 0: return "";
    case 1: return "None";
    case 2: return v.as_bool() ? "True" : "False";
    case 3: return std::to_string(v.as_int());
    case 4: return float_repr(v.as_float());
    case 5: return v.as_string();
    case 6: case 7: return to_repr(v);
    case 8: return "<function " + v.as_callable().name + ">";
    default: {
      Value d = Value::dict(v.as_namespace().attrs);
      return "<Namespace " + to_repr(d) + ">";
    }
  }
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.to_double() == b.to_double();
    const int64_t x = a.is_bool() ? a.as_bool() : a.as_int();
    const int64_t y = b.is_bool() ? b.as_bool() : b.as_int();
    return x == y;
  }
  if (a.v.index() != b.v.index()) return false;
  switch (a.v.index()) {
    case 0: case 1: return true;
    case 5: return a.as_string() == b.as_string();
    case 6: {
      if (a.tuple != b.tuple) return false;  // Python: (1,) != [1]
      const auto &x = a.as_list(), &y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equals(x[i], y[i])) return false;
      return true;
    }
    case 7: {
      const auto &x = a.as_dict(), &y = b.as_dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, item] : x.items) {
        const Value* other = y.find(k);
        if (!other || !equals(item, *other)) return false;
      }
      return true;
    }
    case 8: return std::get<8>(a.v) == std::get<8>(b.v);
    default: return std::get<9>(a.v) == std::get<9>(b.v);
  }
}

int compare(const Value& a, const Value& b, const char* op) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.to_double(), y = b.to_double();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    const int64_t x = a.is_bool() ? a.as_bool() : a.as_int();
    const int64_t y = b.is_bool() ? b.as_bool() : b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list()) {
    const auto &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return compare(x[i], y[i], op);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  if (a.is_undefined()) fail("'" + a.undefined_hint() + "' is undefined");
  if (b.is_undefined()) fail("'" + b.undefined_hint() + "' is undefined");
  fail(std::string("'") + op + "' not supported between instances of '" + type_name(a) + "' and '" +
       type_name(b) + "'");
}

size_t length_of(const Value& v) {
  if (v.is_undefined()) return 0;
  if (v.is_string()) return to_code_points(v.as_string()).size();
  if (v.is_list()) return v.as_list().size();
  if (v.is_dict()) return v.as_dict().items.size();
  fail("object of type '" + type_name(v) + "' has no len()");
}

namespace {

// Decode one UTF-8 sequence at s[pos]; invalid bytes decode as themselves (one byte).
uint32_t decode_at(const std::string& s, size_t pos, size_t* len) {
  const auto c = static_cast<unsigned char>(s[pos]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  if (pos + n > s.size()) n = 1;
  uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
  for (size_t i = 1; i < n; ++i) {
    const auto cc = static_cast<unsigned char>(s[pos + i]);
    if ((cc >> 6) != 2) {
      n = 1;
      cp = c;
      break;
    }
    cp = (cp << 6) | (cc & 0x3f);
  }
  *len = n;
  return cp;
}

bool is_py_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
         cp == 0x205f || cp == 0x3000;
}

}  // namespace

size_t space_len_at(const std::string& s, size_t pos) {
  if (pos >= s.size()) return 0;
  size_t n = 0;
  const uint32_t cp = decode_at(s, pos, &n);
  return is_py_space(cp) ? n : 0;
}

std::vector<uint32_t> to_code_points(const std::string& s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    size_t n = 0;
    out.push_back(decode_at(s, pos, &n));
    pos += n;
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

std::string from_code_points(const uint32_t* cps, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) append_utf8(out, cps[i]);
  return out;
}

// Simple case mappings of the scripts chat text is most often in (Latin-1, Latin Extended-A,
// Greek, Cyrillic); other characters map to themselves.
uint32_t upper_cp(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if ((c >= 0xe0 && c <= 0xfe && c != 0xf7)) return c - 32;
  if (c == 0xff) return 0x178;
  if (c >= 0x100 && c <= 0x17f && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17f) {
    const bool odd_is_lower = (c < 0x138) || (c > 0x148 && c < 0x178);
    if (odd_is_lower ? (c & 1) : !(c & 1) && c != 0x178) return c - 1;
    return c;
  }
  if (c >= 0x3b1 && c <= 0x3c9 && c != 0x3c2) return c - 32;
  if (c >= 0x430 && c <= 0x44f) return c - 32;
  if (c >= 0x450 && c <= 0x45f) return c - 80;
  return c;
}

uint32_t lower_cp(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if ((c >= 0xc0 && c <= 0xde && c != 0xd7)) return c + 32;
  if (c == 0x178) return 0xff;
  if (c >= 0x100 && c <= 0x17f && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17f) {
    const bool even_is_upper = (c < 0x138) || (c > 0x148 && c < 0x178);
    if (even_is_upper ? !(c & 1) : (c & 1)) return c + 1;
    return c;
  }
  if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) return c + 32;
  if (c >= 0x410 && c <= 0x42f) return c + 32;
  if (c >= 0x400 && c <= 0x40f) return c + 80;
  return c;
}

bool is_alpha_cp(uint32_t c) {
  return (c < 0x80 && std::isalpha(static_cast<int>(c))) || upper_cp(c) != c || lower_cp(c) != c || c == 0xdf;
}

std::string strip_spaces(const std::string& s, bool left, bool right) {
  const auto cps = to_code_points(s);
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && is_py_space(cps[b])) ++b;
  if (right)
    while (e > b && is_py_space(cps[e - 1])) --e;
  return from_code_points(cps.data() + b, e - b);
}

std::string strip_chars(const std::string& s, const std::string& chars, bool left, bool right) {
  const auto cps = to_code_points(s);
  const auto set = to_code_points(chars);
  auto in_set = [&](uint32_t c) { return std::find(set.begin(), set.end(), c) != set.end(); };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && in_set(cps[b])) ++b;
  if (right)
    while (e > b && in_set(cps[e - 1])) --e;
  return from_code_points(cps.data() + b, e - b);
}

}  // namespace pllm::jinja
