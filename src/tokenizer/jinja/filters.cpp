// The filters chat templates use, with jinja2's semantics.
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
