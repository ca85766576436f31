// Filters and the methods of str, dict and list that chat templates use.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/json.h"
#include "tokenizer/jinja/methods.h"

namespace pllm::jinja {

namespace {

const std::string& need_string(const Value& v, const std::string& what) {
  if (!v.is_string()) fail(what + " needs a string, not '" + type_name(v) + "'");
  return v.as_string();
}

std::string map_case(const std::string& s, uint32_t (*f)(uint32_t)) {
  std::string out;
  for (uint32_t cp : to_code_points(s)) append_utf8(out, f(cp));
  return out;
}
std::string py_lower(const std::string& s) { return map_case(s, lower_cp); }
std::string py_upper(const std::string& s) { return map_case(s, upper_cp); }

std::string capitalize(const std::string& s) {
  auto cps = to_code_points(s);
  for (size_t i = 0; i < cps.size(); ++i) cps[i] = i == 0 ? upper_cp(cps[i]) : lower_cp(cps[i]);
  return from_code_points(cps.data(), cps.size());
}

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

// jinja2's title filter: words start after spaces and any of -({[<.
std::string jinja_title(const std::string& s) {
  std::string out;
  bool word_start = true;
  for (uint32_t cp : to_code_points(s)) {
    const bool sep = space_len_at(from_code_points(&cp, 1), 0) > 0 || cp == '-' || cp == '(' || cp == '{' ||
                     cp == '[' || cp == '<';
    append_utf8(out, sep ? cp : (word_start ? upper_cp(cp) : lower_cp(cp)));
    word_start = sep;
  }
  return out;
}

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

// The attribute `attribute` of v, dotted ("a.b") and with integer parts, as jinja2's make_attrgetter.
Value attribute_of(const Value& v, const std::string& attribute) {
  Value cur = v;
  size_t pos = 0;
  while (pos <= attribute.size()) {
    const size_t dot = attribute.find('.', pos);
    const std::string part = attribute.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    if (cur.is_undefined()) fail(cur.undefined_hint());
    cur = digits ? get_item(cur, Value::integer(std::stoll(part))) : get_item(cur, Value::string(part));
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  return cur;
}

// select/reject/selectattr/rejectattr: keep the items whose test (default: truthiness) is `keep`.
Value select_items(Interpreter& in, const Value& seq, const Args& a, bool by_attr, bool keep) {
  size_t next = 0;
  std::string attr;
  if (by_attr) {
    const Value* at = a.get(next++, nullptr);
    if (!at || !at->is_string()) fail("selectattr/rejectattr need an attribute name");
    attr = at->as_string();
  }
  const Value* test = a.get(next++, nullptr);
  Args test_args;
  for (size_t i = next; i < a.positional.size(); ++i) test_args.positional.push_back(a.positional[i]);
  ValueList out;
  for (const auto& item : iterate(seq)) {
    in.count_iterations(1);
    const Value subject = by_attr ? attribute_of(item, attr) : item;
    bool r;
    if (test) {
      r = apply_test(in, need_string(*test, "select"), subject, test_args);
    } else {
      r = truthy(subject);
    }
    if (r == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value sort_items(ValueList items, const Args& a, bool dict_mode) {
  const Value* rev = a.get(dict_mode ? 2 : 0, "reverse");
  const Value* cs = a.get(dict_mode ? 0 : 1, "case_sensitive");
  const Value* at = dict_mode ? nullptr : a.get(2, "attribute");
  const Value* by = dict_mode ? a.get(1, "by") : nullptr;
  const bool reverse = rev && truthy(*rev);
  const bool case_sensitive = cs && truthy(*cs);
  const bool by_value = by && by->is_string() && by->as_string() == "value";
  auto key = [&](const Value& v) {
    Value k = dict_mode ? v.as_list()[by_value ? 1 : 0] : v;
    if (at && at->is_string()) k = attribute_of(k, at->as_string());
    if (!case_sensitive && k.is_string()) k = Value::string(py_lower(k.as_string()));
    return k;
  };
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& v : items) keyed.emplace_back(key(v), std::move(v));
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? compare(y.first, x.first, "<") < 0 : compare(x.first, y.first, "<") < 0;
  });
  ValueList out;
  for (auto& [k, v] : keyed) out.push_back(std::move(v));
  return Value::list(std::move(out));
}

Value tojson_filter(const Value& v, const Args& a) {
  JsonDumpOptions o;
  if (const Value* x = a.get(0, "ensure_ascii")) o.ensure_ascii = truthy(*x);
  if (const Value* x = a.get(1, "indent"); x && !x->is_none()) {
    if (x->is_int()) o.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(x->as_int(), 0, 64)), ' ');
    else if (x->is_string()) o.indent = x->as_string();
    else fail("tojson: indent must be an integer or a string");
  }
  if (const Value* x = a.get(2, "separators"); x && !x->is_none()) {
    if (!x->is_list() || x->as_list().size() != 2 || !x->as_list()[0].is_string() || !x->as_list()[1].is_string())
      fail("tojson: separators must be a pair of strings");
    o.item_separator = x->as_list()[0].as_string();
    o.key_separator = x->as_list()[1].as_string();
  }
  if (const Value* x = a.get(3, "sort_keys")) o.sort_keys = truthy(*x);
  return Value::string(to_json(v, o));
}

Value min_max(const Value& v, bool want_max) {
  ValueList items = iterate(v);
  if (items.empty()) return Value::undefined("no min/max item, sequence was empty");
  Value best = items[0];
  for (const auto& x : items) {
    const int c = compare(x, best, want_max ? ">" : "<");
    if (want_max ? c > 0 : c < 0) best = x;
  }
  return best;
}

Value to_int(const Value& v, const Args& a) {
  const Value* dflt = a.get(0, "default");
  const Value fallback = dflt ? *dflt : Value::integer(0);
  if (v.is_bool() || v.is_int()) return Value::integer(v.is_bool() ? v.as_bool() : v.as_int());
  if (v.is_float()) return std::isfinite(v.as_float()) ? Value::integer(static_cast<int64_t>(v.as_float())) : fallback;
  if (v.is_string()) {
    const std::string s = strip_spaces(v.as_string(), true, true);
    char* end = nullptr;
    errno = 0;
    const long long i = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && *end == '\0' && errno == 0) return Value::integer(i);
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0' && std::isfinite(d)) return Value::integer(static_cast<int64_t>(d));
  }
  return fallback;
}

}  // namespace

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
    while (j < fmt.size() && std::strchr("-+ #0123456789.", fmt[j])) spec += fmt[j++];
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
      while (k < spec.size() && std::strchr("-+ #0", spec[k])) left = left || spec[k++] == '-';
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

Value apply_filter(Interpreter& in, const std::string& name, const Value& v, const Args& a) {
  auto str = [&] { return to_str(v); };
  if (name == "trim") {
    const Value* chars = a.get(0, "chars");
    if (chars && !chars->is_none()) return Value::string(strip_chars(str(), need_string(*chars, "trim"), true, true));
    return Value::string(strip_spaces(str(), true, true));
  }
  if (name == "length" || name == "count") return Value::integer(static_cast<int64_t>(length_of(v)));
  if (name == "tojson") return tojson_filter(v, a);
  if (name == "string") return v.is_string() ? v : Value::string(str());
  if (name == "safe") return v;
  if (name == "int") return to_int(v, a);
  if (name == "float") {
    if (v.is_number()) return Value::floating(v.to_double());
    if (v.is_string()) {
      char* end = nullptr;
      const std::string s = strip_spaces(v.as_string(), true, true);
      const double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && *end == '\0') return Value::floating(d);
    }
    const Value* dflt = a.get(0, "default");
    return dflt ? *dflt : Value::floating(0.0);
  }
  if (name == "lower") return Value::string(py_lower(str()));
  if (name == "upper") return Value::string(py_upper(str()));
  if (name == "title") return Value::string(jinja_title(str()));
  if (name == "capitalize") return Value::string(capitalize(str()));
  if (name == "replace") {
    const Value* from = a.get(0, "old");
    const Value* to = a.get(1, "new");
    const Value* count = a.get(2, "count");
    if (!from || !to) fail("replace needs two arguments");
    return Value::string(replace_all(str(), to_str(*from), to_str(*to),
                                     count && count->is_int() ? count->as_int() : -1, &in));
  }
  if (name == "join") {
    const Value* sep = a.get(0, "d");
    const Value* attr = a.get(1, "attribute");
    std::string out;
    bool first = true;
    for (const auto& item : iterate(v)) {
      if (!first) out += sep ? to_str(*sep) : "";
      first = false;
      out += to_str(attr ? attribute_of(item, to_str(*attr)) : item);
      in.check_size(out.size());
    }
    return Value::string(std::move(out));
  }
  if (name == "first" || name == "last") {
    ValueList items = iterate(v);
    if (items.empty()) return Value::undefined("no " + name + " item, sequence was empty");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value::list(iterate(v));
  if (name == "items") {
    if (v.is_undefined()) return Value::list({});
    if (!v.is_dict()) fail("items filter needs a mapping, not '" + type_name(v) + "'");
    return dict_method(v, "items", Args{});
  }
  if (name == "dictsort") {
    if (!v.is_dict()) fail("dictsort needs a mapping, not '" + type_name(v) + "'");
    return sort_items(dict_method(v, "items", Args{}).as_list(), a, true);
  }
  if (name == "sort") return sort_items(iterate(v), a, false);
  if (name == "reverse") {
    if (v.is_string()) {
      auto cps = to_code_points(v.as_string());
      std::reverse(cps.begin(), cps.end());
      return Value::string(from_code_points(cps.data(), cps.size()));
    }
    ValueList items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (name == "unique") {
    ValueList out;
    for (const auto& x : iterate(v)) {
      in.count_iterations(out.size() + 1);
      auto same = [&](const Value& y) {
        if (x.is_string() && y.is_string()) return py_lower(x.as_string()) == py_lower(y.as_string());
        return equals(x, y);
      };
      if (std::none_of(out.begin(), out.end(), same)) out.push_back(x);
    }
    return Value::list(std::move(out));
  }
  if (name == "select") return select_items(in, v, a, false, true);
  if (name == "reject") return select_items(in, v, a, false, false);
  if (name == "selectattr") return select_items(in, v, a, true, true);
  if (name == "rejectattr") return select_items(in, v, a, true, false);
  if (name == "map") {
    ValueList out;
    const Value* attr = nullptr;
    for (const auto& [k, x] : a.keyword)
      if (k == "attribute") attr = &x;
    const Value* dflt = nullptr;
    for (const auto& [k, x] : a.keyword)
      if (k == "default") dflt = &x;
    for (const auto& item : iterate(v)) {
      in.count_iterations(1);
      if (attr) {
        Value r = attribute_of(item, to_str(*attr));
        out.push_back(r.is_undefined() && dflt ? *dflt : r);
      } else {
        if (a.positional.empty()) fail("map needs a filter name or attribute=");
        Args rest;
        rest.positional.assign(a.positional.begin() + 1, a.positional.end());
        out.push_back(apply_filter(in, need_string(a.positional[0], "map"), item, rest));
      }
    }
    return Value::list(std::move(out));
  }
  if (name == "default" || name == "d") {
    const Value* dflt = a.get(0, "default_value");
    const Value* boolean = a.get(1, "boolean");
    const bool use = v.is_undefined() || (boolean && truthy(*boolean) && !truthy(v));
    return use ? (dflt ? *dflt : Value::string("")) : v;
  }
  if (name == "min" || name == "max") return min_max(v, name == "max");
  if (name == "abs") {
    if (v.is_float()) return Value::floating(std::fabs(v.as_float()));
    if (v.is_int() && v.as_int() != INT64_MIN) return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
    fail("abs needs a number");
  }
  if (name == "sum") {
    Value total = Value::integer(0);
    for (const auto& x : iterate(v)) total = binary_op(in, "+", total, x);
    return total;
  }
  if (name == "indent") {
    const Value* w = a.get(0, "width");
    const Value* first = a.get(1, "first");
    const Value* blank = a.get(2, "blank");
    const std::string pad = w && w->is_string() ? w->as_string()
                                                : std::string(static_cast<size_t>(std::clamp<int64_t>(
                                                                  w && w->is_int() ? w->as_int() : 4, 0, 256)),
                                                              ' ');
    std::vector<std::string> lines;  // str.splitlines() of the text plus "\n", as jinja2 does
    const std::string text = str() + "\n";
    size_t pos = 0;
    while (pos < text.size()) {
      size_t nl = text.find_first_of("\r\n", pos);
      lines.push_back(text.substr(pos, nl - pos));
      pos = nl + ((text[nl] == '\r' && nl + 1 < text.size() && text[nl + 1] == '\n') ? 2 : 1);
    }
    std::string out = lines.empty() ? std::string() : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      out += '\n';
      if (!lines[i].empty() || (blank && truthy(*blank))) out += pad;
      out += lines[i];
      in.check_size(out.size());
    }
    if (first && truthy(*first)) out = pad + out;
    return Value::string(std::move(out));
  }
  if (name == "format") {
    if (!a.keyword.empty()) fail("format: keyword arguments are not supported");
    return Value::string(percent_format(need_string(v, "format"), a.positional));
  }
  if (name == "escape" || name == "e") {
    std::string out;
    for (char c : str()) {
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&#34;"; break;
        case '\'': out += "&#39;"; break;
        default: out += c;
      }
    }
    return Value::string(std::move(out));
  }
  fail("no filter named '" + name + "'");
}

}  // namespace pllm::jinja
