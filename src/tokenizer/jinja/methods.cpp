// The methods of str, dict and list that chat templates call, Python's % formatting, and the
// string helpers the filters share with them.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/methods.h"

namespace pllm::jinja {

const std::string& need_string(const Value& v, const std::string& what) {
  if (!v.is_string()) fail(what + " needs a string, not '" + type_name(v) + "'");
  return v.as_string();
}

namespace {

std::string map_case(const std::string& s, uint32_t (*f)(uint32_t)) {
  std::string out;
  for (uint32_t cp : to_code_points(s)) append_utf8(out, f(cp));
  return out;
}
}  // namespace

std::string py_lower(const std::string& s) { return map_case(s, lower_cp); }
std::string py_upper(const std::string& s) { return map_case(s, upper_cp); }

std::string capitalize(const std::string& s) {
  auto cps = to_code_points(s);
  for (size_t i = 0; i < cps.size(); ++i) cps[i] = i == 0 ? upper_cp(cps[i]) : lower_cp(cps[i]);
  return from_code_points(cps.data(), cps.size());
}

namespace {

// str.title(): a cased letter after an uncased character starts a word.
std::string py_title(const std::string& s) {
  std::string out;
  bool prev_cased = false;
  for (uint32_t cp : to_code_points(s)) {
    const bool cased = is_alpha_cp(cp);
    append_utf8(out, cased ? (prev_cased ? lower_cp(cp) : upper_cp(cp)) : cp);
    prev_cased = cased;
  }
  return out;
}

}  // namespace

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count,
                        Interpreter* in) {
  std::string out;
  if (from.empty()) {  // Python inserts `to` between characters
    const auto cps = to_code_points(s);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      if (i < cps.size()) append_utf8(out, cps[i]);
      if (in) in->check_size(out.size());
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  for (;;) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string::npos || (count >= 0 && done >= count)) break;
    out.append(s, pos, hit - pos);
    out += to;
    if (in) in->check_size(out.size());
    pos = hit + from.size();
    ++done;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

namespace {

Value split(const std::string& s, const Value* sep, int64_t maxsplit) {
  ValueList parts;
  if (!sep || sep->is_none()) {  // runs of whitespace, no empty parts
    size_t pos = 0;
    while (pos < s.size()) {
      while (size_t n = space_len_at(s, pos)) pos += n;
      if (pos >= s.size()) break;
      size_t end = pos;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) {
        parts.push_back(Value::string(strip_spaces(s.substr(pos), false, true)));
        return Value::list(std::move(parts));
      }
      while (end < s.size() && space_len_at(s, end) == 0) ++end;
      parts.push_back(Value::string(s.substr(pos, end - pos)));
      pos = end;
    }
    return Value::list(std::move(parts));
  }
  const std::string& d = need_string(*sep, "split");
  if (d.empty()) fail("empty separator");
  size_t pos = 0;
  for (;;) {
    const size_t hit = s.find(d, pos);
    if (hit == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit)) break;
    parts.push_back(Value::string(s.substr(pos, hit - pos)));
    pos = hit + d.size();
  }
  parts.push_back(Value::string(s.substr(pos)));
  return Value::list(std::move(parts));
}

bool affix_match(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& a) {
    const std::string& x = need_string(a, prefix ? "startswith" : "endswith");
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_list()) {
    for (const auto& a : affix.as_list())
      if (one(a)) return true;
    return false;
  }
  return one(affix);
}

Value strip_method(const std::string& s, const Args& a, bool left, bool right) {
  const Value* chars = a.get(0, "chars");
  if (!chars || chars->is_none()) return Value::string(strip_spaces(s, left, right));
  return Value::string(strip_chars(s, need_string(*chars, "strip"), left, right));
}

Value string_method(const std::string& s, const std::string& name, Interpreter& in, const Args& a) {
  auto arg = [&](size_t i, const char* n) -> const Value& {
    const Value* v = a.get(i, n);
    if (!v) fail("str." + name + "() missing an argument");
    return *v;
  };
  auto int_arg = [&](size_t i, const char* n, int64_t dflt) {
    const Value* v = a.get(i, n);
    return v && v->is_int() ? v->as_int() : dflt;
  };
  if (name == "startswith") return Value::boolean(affix_match(s, arg(0, "prefix"), true));
  if (name == "endswith") return Value::boolean(affix_match(s, arg(0, "suffix"), false));
  if (name == "strip") return strip_method(s, a, true, true);
  if (name == "lstrip") return strip_method(s, a, true, false);
  if (name == "rstrip") return strip_method(s, a, false, true);
  if (name == "split") return split(s, a.get(0, "sep"), int_arg(1, "maxsplit", -1));
  if (name == "replace")
    return Value::string(replace_all(s, need_string(arg(0, "old"), "replace"), need_string(arg(1, "new"), "replace"),
                                     int_arg(2, "count", -1), &in));
  if (name == "lower") return Value::string(py_lower(s));
  if (name == "upper") return Value::string(py_upper(s));
  if (name == "title") return Value::string(py_title(s));
  if (name == "capitalize") return Value::string(capitalize(s));
  if (name == "find" || name == "count") {
    const std::string& x = need_string(arg(0, "sub"), name);
    if (name == "find") {
      const size_t hit = s.find(x);
      if (hit == std::string::npos) return Value::integer(-1);
      return Value::integer(static_cast<int64_t>(to_code_points(s.substr(0, hit)).size()));
    }
    if (x.empty()) return Value::integer(static_cast<int64_t>(to_code_points(s).size()) + 1);
    int64_t n = 0;
    for (size_t p = s.find(x); p != std::string::npos; p = s.find(x, p + x.size())) ++n;
    return Value::integer(n);
  }
  if (name == "join") {
    std::string out;
    bool first = true;
    for (const auto& item : iterate(arg(0, "iterable"))) {
      if (!first) out += s;
      first = false;
      out += need_string(item, "str.join");
      in.check_size(out.size());
    }
    return Value::string(std::move(out));
  }
  if (name == "isdigit" || name == "isalpha" || name == "isspace" || name == "isalnum") {
    if (s.empty()) return Value::boolean(false);
    for (unsigned char c : s) {
      const bool ok = name == "isdigit"   ? std::isdigit(c)
                      : name == "isalpha" ? std::isalpha(c)
                      : name == "isalnum" ? std::isalnum(c)
                                          : std::isspace(c);
      if (!ok) return Value::boolean(false);
    }
    return Value::boolean(true);
  }
  fail("str has no method '" + name + "'");
}

bool is_string_method(const std::string& n) {
  static const char* names[] = {"startswith", "endswith", "strip", "lstrip", "rstrip", "split", "replace",
                                "lower", "upper", "title", "capitalize", "find", "count", "join",
                                "isdigit", "isalpha", "isspace", "isalnum"};
  for (const char* x : names)
    if (n == x) return true;
  return false;
}

}  // namespace

Value dict_method(const Value& self, const std::string& name, const Args& a) {
  const ValueDict& d = self.as_dict();
  if (name == "get") {
    const Value* key = a.get(0, "key");
    if (!key) fail("dict.get() missing the key");
    const Value* dflt = a.get(1, "default");
    const Value* hit = key->is_string() ? d.find(key->as_string()) : nullptr;
    return hit ? *hit : (dflt ? *dflt : Value::none());
  }
  ValueList out;
  for (const auto& [k, v] : d.items) {
    if (name == "keys") out.push_back(Value::string(k));
    else if (name == "values") out.push_back(v);
    else out.push_back(Value::tuple_of({Value::string(k), v}));
  }
  return Value::list(std::move(out));
}

std::string percent_format(const std::string& fmt, const ValueList& args) {
  std::string out;
  size_t next = 0;
  auto take = [&]() -> const Value& {
    if (next >= args.size()) fail("not enough arguments for format string");
    return args[next++];
  };
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    size_t j = i + 1;
    std::string spec = "%";
    // (strchr also matches the terminator: a NUL byte is a conversion, refused below)
    while (j < fmt.size() && fmt[j] != '\0' && std::strchr("-+ #0123456789.", fmt[j])) spec += fmt[j++];
    if (j >= fmt.size()) fail("incomplete format");
    const char conv = fmt[j];
    i = j;
    if (conv == '%') {
      out += '%';
      continue;
    }
    const Value& v = take();
    const size_t dot = spec.find('.');
    if (std::atoi(spec.c_str() + 1 + std::strspn(spec.c_str() + 1, "-+ #0")) > 256 ||
        (dot != std::string::npos && std::atoi(spec.c_str() + dot + 1) > 100))
      fail("format width or precision too large");
    char buf[512];
    if (conv == 's' || conv == 'r') {
      const std::string text = conv == 's' ? to_str(v) : to_repr(v);
      // flags, width, .precision: as Python pads and cuts, in characters
      size_t k = 1;
      bool left = false;
      for (; k < spec.size() && std::strchr("-+ #0", spec[k]); ++k) left = left || spec[k] == '-';
      const size_t width = static_cast<size_t>(std::atoi(spec.c_str() + k));
      auto cps = to_code_points(text);
      if (dot != std::string::npos)
        cps.resize(std::min(cps.size(), static_cast<size_t>(std::atoi(spec.c_str() + dot + 1))));
      const std::string body = from_code_points(cps.data(), cps.size());
      const std::string pad(width > cps.size() ? width - cps.size() : 0, ' ');
      out += left ? body + pad : pad + body;
      continue;
    } else if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X' || conv == 'o') {
      if (!v.is_number()) fail(std::string(1, '%') + conv + " format: a number is required, not " + type_name(v));
      const long long n = v.is_float() ? static_cast<long long>(v.as_float()) : (v.is_bool() ? v.as_bool() : v.as_int());
      std::snprintf(buf, sizeof buf, (spec + "ll" + (conv == 'i' ? 'd' : conv)).c_str(), n);
    } else if (conv == 'f' || conv == 'F' || conv == 'e' || conv == 'E' || conv == 'g' || conv == 'G') {
      if (!v.is_number()) fail("must be real number, not " + type_name(v));
      std::snprintf(buf, sizeof buf, (spec + conv).c_str(), v.to_double());
    } else {
      fail(std::string("unsupported format character '") + conv + "'");
    }
    out += buf;
  }
  if (next < args.size()) fail("not all arguments converted during string formatting");
  return out;
}

Value bound_method(const Value& obj, const std::string& name) {
  auto bind = [&](std::function<Value(Interpreter&, const Args&)> fn) {
    auto c = std::make_shared<Callable>();
    c->name = name;
    c->fn = std::move(fn);
    return Value{c};
  };
  if (obj.is_string() && is_string_method(name)) {
    return bind([s = obj.as_string(), name](Interpreter& in, const Args& a) { return string_method(s, name, in, a); });
  }
  if (obj.is_dict() && (name == "get" || name == "items" || name == "keys" || name == "values")) {
    return bind([obj, name](Interpreter&, const Args& a) { return dict_method(obj, name, a); });
  }
  if (obj.is_list() && (name == "index" || name == "count")) {
    return bind([obj, name](Interpreter&, const Args& a) {
      const Value* x = a.get(0, nullptr);
      if (!x) fail("list." + name + "() missing an argument");
      const auto& items = obj.as_list();
      int64_t n = 0;
      for (size_t i = 0; i < items.size(); ++i) {
        if (!equals(items[i], *x)) continue;
        if (name == "index") return Value::integer(static_cast<int64_t>(i));
        ++n;
      }
      if (name == "index") fail("value is not in list");
      return Value::integer(n);
    });
  }
  return Value::undefined();
}

}  // namespace pllm::jinja
