// Per-type grammars of the JSON Schema compiler: enum/const literals, numbers, strings, arrays
// and objects. Object keys come in one canonical order: the schema's `properties` in schema
// order (then keys `required` names without a property schema), then additionalProperties' keys.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>

#include "constrained/json_schema_internal.h"

namespace pllm::schema_detail {
namespace {

constexpr size_t kMaxEnumValues = 10000;
constexpr size_t kMaxKeyTrieNodes = 100000;
const std::string kQuote = "\"\\\"\"";  // GBNF literal of one double quote

std::string seq(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + " " + b;
}

// Optional part: "" stays "" (nothing to make optional).
std::string optional(const std::string& x) { return x.empty() ? "" : "(" + x + ")?"; }

Result<std::optional<int64_t>> count_keyword(const Json& schema, const char* key, const std::string& pointer) {
  if (!schema.contains(key)) return std::optional<int64_t>();
  const Json& v = schema[key];
  double d = v.is_number() ? v.get<double>() : -1;
  if (!v.is_number() || d < 0 || std::floor(d) != d)
    return schema_error(key, pointer, "must be a non-negative integer");
  if (d > 1e15) d = 1e15;
  return std::optional<int64_t>(static_cast<int64_t>(d));
}

bool is_python_identifier(std::string_view s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

}  // namespace

Result<Compiled> SchemaCompiler::child(const Json& schema, const std::string& pointer) {
  ++container_depth_;
  auto r = compile(schema, pointer);
  --container_depth_;
  return r;
}

// ---- enum / const ----

Result<std::string> SchemaCompiler::literal_gbnf(const Json& v, const std::string& pointer, int depth) {
  if (depth > 64) return schema_error("enum", pointer, "value nested too deeply");
  if (v.is_null()) return null_gbnf();
  if (v.is_boolean()) return bool_literal_gbnf(v.get<bool>());
  if (v.is_string()) return seq(seq(kQuote, json_string_content_gbnf(v.get_ref<const std::string&>())), kQuote);
  if (v.is_number()) {
    // Numbers compare by value: 1, 1.0 and 1.00 are one value; -0 is 0.
    std::string digits;
    if (v.is_number_integer()) {
      digits = v.dump();
    } else {
      const double d = v.get<double>();
      if (!std::isfinite(d)) return schema_error("enum", pointer, "non-finite number");
      if (std::floor(d) == d && std::fabs(d) < 9e15) {
        digits = std::to_string(static_cast<int64_t>(d));
      } else {
        char buf[64];
        auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);  // shortest round trip
        digits.assign(buf, end);
        if (ec != std::errc() || digits.find_first_of("eE") != std::string::npos)
          return schema_error("enum", pointer, "number " + digits + " has no exact grammar (exponent form)");
        return gbnf_literal(digits) + " \"0\"*";
      }
    }
    if (digits == "0") return std::string("\"-\"? \"0\" (\".\" \"0\"+)?");
    return gbnf_literal(digits) + " (\".\" \"0\"+)?";
  }
  const std::string w = ws();
  if (v.is_array()) {
    std::string body;
    for (const auto& e : v) {
      PLLM_ASSIGN(std::string item, literal_gbnf(e, pointer, depth + 1));
      body += (body.empty() ? "" : sep()) + item;
    }
    return "\"[\"" + w + body + (body.empty() ? "" : w) + "\"]\"";
  }
  std::string body;
  for (const auto& [k, e] : v.items()) {
    PLLM_ASSIGN(std::string item, literal_gbnf(e, pointer, depth + 1));
    body += (body.empty() ? "" : sep()) + seq(seq(kQuote, json_string_content_gbnf(k)), kQuote) + w + "\":\"" + w + item;
  }
  return "\"{\"" + w + body + (body.empty() ? "" : w) + "\"}\"";
}

Result<Compiled> SchemaCompiler::enum_gbnf(const Json& schema, const std::string& pointer, unsigned types) {
  for (const auto& [key, value] : schema.items()) {
    if (key == "enum" || key == "const" || key == "type") continue;
    static const char* kIgnored[] = {"properties", "required", "additionalProperties", "items", "prefixItems",
                                     "minItems", "maxItems", "minLength", "maxLength", "pattern", "format",
                                     "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
    for (const char* k : kIgnored)
      if (key == k)
        return schema_error(key, pointer, "beside enum/const is not supported");
  }
  Json values;
  if (schema.contains("const")) {
    values = Json::array({schema["const"]});
    if (schema.contains("enum")) {
      const Json& e = schema["enum"];
      if (!e.is_array()) return schema_error("enum", pointer, "must be an array");
      if (std::find(e.begin(), e.end(), values[0]) == e.end()) values = Json::array();
    }
  } else {
    values = schema["enum"];
    if (!values.is_array()) return schema_error("enum", pointer, "must be an array");
  }
  if (values.size() > kMaxEnumValues)
    return schema_error("enum", pointer, "more than " + std::to_string(kMaxEnumValues) + " values");
  std::string alts;
  std::map<std::string, bool> seen;

  for (const auto& v : values) {
    if (!(type_bit_of(v) & types)) continue;
    PLLM_ASSIGN(std::string lit, literal_gbnf(v, pointer, 0));
    if (seen.emplace(lit, true).second) alts += (alts.empty() ? "" : " | ") + lit;
  }
  if (alts.empty()) return Compiled();
  return Compiled(rules_.add("enum", alts));
}

// ---- numbers ----

Result<Compiled> SchemaCompiler::number_gbnf(const Json& schema, const std::string& pointer, unsigned types) {
  std::optional<int64_t> lo, hi;
  const char* first_bound = nullptr;
  for (const char* key : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
    if (!schema.contains(key)) continue;
    const Json& v = schema[key];
    const std::string at = child_pointer(pointer, key);
    if (!v.is_number()) return schema_error(key, pointer, "must be a number");
    if (!first_bound) first_bound = key;
    const std::string k = key;
    const bool lower = k == "minimum" || k == "exclusiveMinimum";
    const bool exclusive = k.rfind("exclusive", 0) == 0;
    int64_t bound = 0;
    if (v.is_number_integer()) {
      if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
        return schema_error(key, pointer, "bound outside the 64-bit integer range");
      bound = v.get<int64_t>();
      if (exclusive) {
        if ((lower && bound == INT64_MAX) || (!lower && bound == INT64_MIN))
          return schema_error(key, pointer, "bound outside the 64-bit integer range");
        bound += lower ? 1 : -1;
      }
    } else {
      const double d = v.get<double>();
      if (!(std::fabs(d) < 9.2e18)) return schema_error(key, pointer, "bound outside the 64-bit integer range");
      // The integers x with x >= d are x >= ceil(d); x > d: x >= floor(d) + 1.
      double b = lower ? (exclusive ? std::floor(d) + 1 : std::ceil(d)) : (exclusive ? std::ceil(d) - 1 : std::floor(d));
      bound = static_cast<int64_t>(b);
    }
    if (lower) lo = lo ? std::max(*lo, bound) : bound;
    else hi = hi ? std::min(*hi, bound) : bound;
  }
  if (types & kFraction) {
    if (!first_bound) {
      value_rule();  // defines `number`
      return Compiled(std::string("number"));
    }
    return schema_error(first_bound, pointer,
                        "bounds on non-integer numbers cannot be enforced exactly (use type integer)");
  }
  std::string e = integer_range_gbnf(lo, hi, rules_);
  return e.empty() ? Compiled() : Compiled(e);
}

// ---- strings ----

Result<Compiled> SchemaCompiler::string_gbnf(const Json& schema, const std::string& pointer) {
  PLLM_ASSIGN(auto min_len, count_keyword(schema, "minLength", pointer));
  PLLM_ASSIGN(auto max_len, count_keyword(schema, "maxLength", pointer));
  const bool has_len = min_len.has_value() || max_len.has_value();
  const int constraints = int(schema.contains("pattern")) + int(schema.contains("format")) + int(has_len);
  if (constraints > 1) {
    const char* key = schema.contains("pattern") ? "pattern" : "format";
    return schema_error(key, pointer,
                        "combined with another of pattern/format/minLength/maxLength is not supported");
  }
  auto quoted = [&](const std::string& content) { return Compiled(rules_.add("str", seq(seq(kQuote, content), kQuote))); };
  if (schema.contains("pattern")) {
    const std::string at = child_pointer(pointer, "pattern");
    if (!schema["pattern"].is_string()) return schema_error("pattern", pointer, "must be a string");
    PLLM_ASSIGN(std::string content, pattern_to_gbnf(schema["pattern"].get<std::string>(), pointer, rules_));
    return quoted(content);
  }
  if (schema.contains("format")) {
    const std::string at = child_pointer(pointer, "format");
    if (!schema["format"].is_string()) return schema_error("format", pointer, "must be a string");
    PLLM_ASSIGN(std::string content, format_to_gbnf(schema["format"].get<std::string>(), pointer, rules_));
    return quoted(content);
  }
  if (!has_len) return Compiled(string_rule());
  const int64_t lo = min_len.value_or(0);
  if (max_len && *max_len < lo) return Compiled();
  const int64_t cost = max_len ? *max_len : lo;
  const char* key = max_len ? "maxLength" : "minLength";
  if (cost > kMaxRepetition)
    return schema_error(key, pointer, "above " + std::to_string(kMaxRepetition) + " is not supported");
  PLLM_TRY(rules_.charge_repetition(cost, key, pointer));
  // Code points, each in canonical encoding, so one repetition is one character of the value.
  const std::string ch = rules_.add("char", json_char_gbnf(CodePointSet{}.complement()));
  std::string rep = max_len ? (*max_len == lo ? "{" + std::to_string(lo) + "}"
                                             : "{" + std::to_string(lo) + "," + std::to_string(*max_len) + "}")
                            : (lo == 0 ? "*" : "{" + std::to_string(lo) + ",}");
  if (max_len && *max_len == 0) return quoted("");
  return quoted(ch + rep);
}

// ---- arrays ----

Result<Compiled> SchemaCompiler::array_gbnf(const Json& schema, const std::string& pointer) {
  PLLM_ASSIGN(auto min_items, count_keyword(schema, "minItems", pointer));
  PLLM_ASSIGN(auto max_items, count_keyword(schema, "maxItems", pointer));
  const int64_t lo = min_items.value_or(0);
  if (max_items && *max_items < lo) return Compiled();
  std::vector<Compiled> prefix;
  if (schema.contains("prefixItems")) {
    const Json& p = schema["prefixItems"];
    const std::string at = child_pointer(pointer, "prefixItems");
    if (!p.is_array()) return schema_error("prefixItems", pointer, "must be an array of schemas");
    for (size_t i = 0; i < p.size(); ++i) {
      PLLM_ASSIGN(Compiled c, child(p[i], child_pointer(at, std::to_string(i))));
      prefix.push_back(std::move(c));
    }
  }
  Compiled items = value_rule();
  if (schema.contains("items")) {
    const std::string at = child_pointer(pointer, "items");
    if (schema["items"].is_array()) return schema_error("items", pointer, "the array form is draft 2019 (use prefixItems)");
    PLLM_ASSIGN(items, child(schema["items"], at));
  }
  const int64_t k = static_cast<int64_t>(prefix.size());
  // Elements past the prefix: `items` repeated, each after a comma unless it is the first.
  Compiled rest;
  {
    const int64_t need = std::max<int64_t>(0, lo - k);
    const std::optional<int64_t> room = max_items ? std::optional<int64_t>(std::max<int64_t>(0, *max_items - k)) : std::nullopt;
    if (!items || (room && *room == 0)) {
      rest = need == 0 ? Compiled("") : Compiled();
    } else {
      const int64_t cost = room ? *room : need;
      const char* key = room ? "maxItems" : "minItems";
      if (cost > kMaxRepetition)
        return schema_error(key, pointer, "above " + std::to_string(kMaxRepetition) + " is not supported");
      PLLM_TRY(rules_.charge_repetition(cost, key, pointer));
      const std::string next = rules_.add("item", seq(sep(), *items));
      // Repetitions of `next` given that the first element (if k == 0) is written separately.
      auto reps = [&](int64_t a, std::optional<int64_t> b) -> std::string {
        if (b && *b == 0) return "";
        if (!b) return next + (a == 0 ? "*" : a == 1 ? "+" : "{" + std::to_string(a) + ",}");
        if (a == *b) return next + "{" + std::to_string(a) + "}";
        return next + "{" + std::to_string(a) + "," + std::to_string(*b) + "}";
      };
      if (k > 0) {
        rest = reps(need, room);
      } else {
        std::string tail = reps(std::max<int64_t>(0, need - 1), room ? std::optional<int64_t>(*room - 1) : std::nullopt);
        std::string first = seq(*items, tail);
        rest = need > 0 ? first : optional(first);
      }
    }
  }
  // Prefix elements from the last back to the first; the array may end before element i when
  // i >= minItems, and must end before it when i >= maxItems.
  for (int64_t i = k - 1; i >= 0; --i) {
    if (max_items && i >= *max_items) {
      rest = Compiled("");
      continue;
    }
    Compiled cur;
    if (prefix[i] && rest) cur = seq(i > 0 ? sep() : "", seq(*prefix[i], *rest));
    if (i >= lo) rest = cur ? Compiled(optional(*cur)) : Compiled("");
    else rest = cur;
  }
  if (!rest) return Compiled();
  std::string body = rest->empty() ? "" : rules_.add("items", *rest);
  return Compiled(rules_.add("array", seq(seq("\"[\"" + ws(), body), ws() + "\"]\"")));
}

// ---- objects ----

// Strings (canonical encoding) that are none of `names`: a trie walk where each node may end the
// key (if no name ends there), leave the trie with any other character, or follow a child.
Result<std::string> SchemaCompiler::key_excluding(const std::vector<std::string>& names, const std::string& pointer) {
  struct Node {
    std::map<uint32_t, size_t> children;
    bool terminal = false;
  };
  std::vector<Node> trie(1);
  for (const auto& name : names) {
    std::vector<uint32_t> cps;
    if (!decode_utf8(name, cps)) return schema_error("properties", pointer, "property name is not valid UTF-8");
    size_t n = 0;
    for (uint32_t c : cps) {
      auto it = trie[n].children.find(c);
      if (it == trie[n].children.end()) {
        if (trie.size() >= kMaxKeyTrieNodes) return schema_error("properties", pointer, "too many property names");
        trie.push_back(Node{});
        it = trie[n].children.emplace(c, trie.size() - 1).first;
      }
      n = it->second;
    }
    trie[n].terminal = true;
  }
  const std::string any_char = rules_.add("char", json_char_gbnf(CodePointSet{}.complement()));
  const std::string free_tail = rules_.add("key-tail", any_char + "* " + kQuote);
  // Children are numbered after their parents, so building from the back sees them defined.
  std::vector<std::string> rule_of(trie.size());
  for (size_t i = trie.size(); i-- > 0;) {
    std::string alts;
    auto add = [&](const std::string& a) { alts += (alts.empty() ? "" : " | ") + a; };
    if (!trie[i].terminal) add(kQuote);
    CodePointSet others;
    for (const auto& [c, child_index] : trie[i].children) {
      CodePointSet one;
      one.add(c, c);
      add(seq(json_char_gbnf(one), rule_of[child_index]));
      others.add(c, c);
    }
    const std::string other = json_char_gbnf(others.complement());
    if (!other.empty()) add(seq(other, free_tail));
    rule_of[i] = rules_.add("key", alts);
  }
  return seq(kQuote, rule_of[0]);
}

Result<Compiled> SchemaCompiler::object_gbnf(const Json& schema, const std::string& pointer) {
  struct Entry {
    std::string name;
    Compiled value;
    bool required = false;
  };
  std::vector<Entry> entries;
  std::vector<std::string> names;
  std::vector<std::string> required;
  // A pythonic tool call: name(key=value, ...) with the declared keys only (no extra keywords).
  std::string call;
  if (opts_.python && schema.contains(kPythonCallKey) && schema[kPythonCallKey].is_string())
    call = schema[kPythonCallKey].get<std::string>();
  if (schema.contains("required")) {
    const Json& r = schema["required"];
    const std::string at = child_pointer(pointer, "required");
    if (!r.is_array()) return schema_error("required", pointer, "must be an array of strings");
    for (const auto& n : r) {
      if (!n.is_string()) return schema_error("required", pointer, "must be an array of strings");
      if (std::find(required.begin(), required.end(), n.get<std::string>()) == required.end())
        required.push_back(n.get<std::string>());
    }
  }
  Compiled additional = value_rule();
  if (schema.contains("additionalProperties")) {
    PLLM_ASSIGN(additional, child(schema["additionalProperties"], child_pointer(pointer, "additionalProperties")));
  }
  if (schema.contains("properties")) {
    const Json& props = schema["properties"];
    const std::string at = child_pointer(pointer, "properties");
    if (!props.is_object()) return schema_error("properties", pointer, "must be an object of schemas");
    for (const auto& [name, sub] : props.items()) {
      PLLM_ASSIGN(Compiled c, child(sub, child_pointer(at, name)));
      const bool req = std::find(required.begin(), required.end(), name) != required.end();
      entries.push_back({name, c, req});
      names.push_back(name);
    }
  }
  for (const auto& name : required)
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      entries.push_back({name, additional, true});
      names.push_back(name);
    }
  const std::string w = ws();
  auto key_value = [&](const std::string& key, const std::string& value) {
    return seq(key + w + (call.empty() ? "\":\"" : "\"=\"") + w, value);
  };
  auto key_literal = [&](const std::string& name) -> Result<std::string> {
    if (call.empty()) return seq(seq(kQuote, json_string_content_gbnf(name)), kQuote);
    if (!is_python_identifier(name))
      return schema_error("properties", pointer, "'" + name + "' is not a Python identifier (a pythonic call's keyword)");
    return "\"" + name + "\"";
  };
  // T: what may follow once something is written; F: the same from an empty object.
  std::string T, F;
  if (additional && call.empty()) {
    std::string key = names.empty() ? string_rule() : "";
    if (key.empty()) {
      PLLM_ASSIGN(key, key_excluding(names, pointer));
    }
    const std::string kv = rules_.add("kv", key_value(key, *additional));
    T = rules_.add("more-kv", seq(sep(), kv)) + "*";
    F = optional(seq(kv, T));
  }
  for (size_t i = entries.size(); i-- > 0;) {
    const Entry& e = entries[i];
    if (!e.value) {
      if (e.required) return Compiled();  // a required property no value satisfies
      continue;                           // an optional one that can never appear
    }
    PLLM_ASSIGN(const std::string key_lit, key_literal(e.name));
    const std::string kv = rules_.add("kv", key_value(key_lit, *e.value));
    const std::string T_next = T.empty() ? "" : rules_.add("obj-rest", T);
    const std::string F_next = F.empty() ? "" : rules_.add("obj-from", F);
    if (e.required) {
      T = seq(seq(sep(), kv), T_next);
      F = seq(kv, T_next);
    } else {
      T = seq(optional(seq(sep(), kv)), T_next);
      F = F_next.empty() ? optional(seq(kv, T_next)) : "(" + seq(kv, T_next) + " | " + F_next + ")";
    }
  }
  std::string body = F.empty() ? "" : rules_.add("props", F);
  if (!call.empty()) {
    if (!is_python_identifier(call)) return schema_error(kPythonCallKey, pointer, "'" + call + "' is not a Python identifier");
    return Compiled(rules_.add("call", seq(seq("\"" + call + "(\"" + w, body), w + "\")\"")));
  }
  return Compiled(rules_.add("object", seq(seq("\"{\"" + w, body), w + "\"}\"")));
}

}  // namespace pllm::schema_detail
