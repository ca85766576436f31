// JSON Schema -> GBNF: the walk over subschemas, local references and combinators.
//
// Exactness is the rule: every keyword either becomes grammar that accepts exactly the values it
// allows (in one canonical serialisation: keys in schema order, canonical string escapes) or an
// error naming it. allOf is merged keyword by keyword where the conjunction is expressible
// (bounds tighten, property schemas conjoin), anyOf becomes alternation, oneOf alternation only
// where its branches cannot overlap.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "constrained/json_schema.h"
#include "constrained/json_schema_internal.h"

namespace pllm {
namespace schema_detail {
namespace {

constexpr int kMaxSchemaDepth = 200;  // nested subschemas (also bounds the native stack)
constexpr int kMaxJsonDepth = 400;    // nesting of the schema document itself
constexpr int kMaxFlattenDepth = 32;  // $ref/allOf inlined into one another
constexpr size_t kMaxWork = 200000;   // subschemas compiled, merges included

// Keywords not listed below are annotations (title, description, default, examples, $comment,
// $schema, deprecated, readOnly, contentMediaType, ...) or unknown, and constrain nothing.
const std::set<std::string, std::less<>> kSupported = {
    "type", "enum", "const", "properties", "required", "additionalProperties", "items", "prefixItems",
    "minItems", "maxItems", "minLength", "maxLength", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf", "allOf", "$ref"};
// Constraining keywords a grammar cannot (or this compiler does not) enforce.
const std::set<std::string, std::less<>> kUnsupported = {
    "multipleOf", "uniqueItems", "not", "if", "then", "else", "dependentRequired", "dependentSchemas",
    "dependencies", "patternProperties", "propertyNames", "minProperties", "maxProperties", "contains",
    "minContains", "maxContains", "unevaluatedItems", "unevaluatedProperties", "$dynamicRef",
    "$recursiveRef", "$recursiveAnchor", "additionalItems"};

bool is_constraining(const std::string& key) { return kSupported.count(key) || kUnsupported.count(key); }

bool is_true_schema(const Json& s) { return s.is_boolean() && s.get<bool>(); }
bool is_false_schema(const Json& s) { return s.is_boolean() && !s.get<bool>(); }

// The conjunction of two subschemas as one schema.
Json conjoin(const Json& x, const Json& y) {
  if (is_true_schema(x)) return y;
  if (is_true_schema(y) || x == y) return x;
  if (is_false_schema(x) || is_false_schema(y)) return Json(false);
  return Json{{"allOf", Json::array({x, y})}};
}

// Depth of a JSON document without recursion (a hostile document may nest 60,000 levels).
bool deeper_than(const Json& doc, int limit) {
  std::vector<std::pair<const Json*, int>> stack{{&doc, 0}};
  while (!stack.empty()) {
    auto [node, d] = stack.back();
    stack.pop_back();
    if (d > limit) return true;
    if (node->is_structured())
      for (const auto& child : *node) stack.emplace_back(&child, d + 1);
  }
  return false;
}

bool text_deeper_than(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

}  // namespace

std::string child_pointer(const std::string& parent, std::string_view token) {
  std::string out = parent + "/";
  for (char c : token) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

Error schema_error(std::string_view keyword, const std::string& pointer, const std::string& why) {
  return make_error(Status::invalid_argument,
                    std::string(keyword) + " at " + (pointer.empty() ? "/" : pointer) + ": " + why);
}

// ---- the walk ----

SchemaCompiler::SchemaCompiler(const Json& root, const JsonSchemaOptions& opts) : root_(root), opts_(opts) {
  rules_.reserve_names(opts.reserved_names);
  rules_.reserve_names({opts.root_name});
  const int n = std::clamp(opts.max_whitespace, 0, kMaxRepetition);
  if (n > 0) {
    rules_.add_fixed("ws", "[ \\t\\n\\r]{0," + std::to_string(n) + "}");
    ws_ = " ws ";
  } else {
    ws_ = " ";
  }
  sep_ = ws_ + "\",\"" + ws_;
}

std::string SchemaCompiler::string_rule() {
  value_rule();
  return "string";
}

std::string SchemaCompiler::value_rule() {
  if (value_rules_added_) return "value";
  value_rules_added_ = true;
  // Fixed names (RuleTable never hands them out): the rules refer to one another.
  const std::string w = ws_;
  rules_.add_fixed("value", "object | array | string | number | " + bool_gbnf() + " | " + null_gbnf());
  rules_.add_fixed("object", "\"{\"" + w + "(string" + w + "\":\"" + w + "value (" + sep_ + "string" + w + "\":\"" + w +
                              "value)*)?" + w + "\"}\"");
  rules_.add_fixed("array", "\"[\"" + w + "(value (" + sep_ + "value)*)?" + w + "\"]\"");
  rules_.add_fixed("string", "\"\\\"\" string-char* \"\\\"\"");
  rules_.add_fixed("string-char", "[^\\x22\\x5C\\x00-\\x1F] | \"\\\\\" ([\\x22\\x5C/bfnrt] | \"u\" [0-9a-fA-F]{4})");
  rules_.add_fixed("number", "\"-\"? (\"0\" | [1-9] [0-9]*) (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)?");
  return "value";
}

Result<std::string> SchemaCompiler::run() {
  if (deeper_than(root_, kMaxJsonDepth))
    return schema_error("schema", "", "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  PLLM_ASSIGN(Compiled root, compile(root_, ""));
  if (!root) return schema_error("schema", "", "no JSON value satisfies it");
  return rules_.to_gbnf(opts_.root_name, *root);
}

Result<void> SchemaCompiler::check_keywords(const Json& schema, const std::string& pointer) const {
  if (!schema.is_object()) return {};
  for (const auto& [key, value] : schema.items()) {
    if (key == "uniqueItems" && value.is_boolean() && !value.get<bool>()) continue;  // no constraint
    if (kUnsupported.count(key)) return schema_error(key, pointer, "not supported");
    if (key == "$id" && &schema != &root_)
      return schema_error(key, pointer, "a base URI below the root is not supported");
  }
  return {};
}

Result<Compiled> SchemaCompiler::compile(const Json& schema, const std::string& pointer) {
  if (++work_ > kMaxWork) return schema_error("schema", pointer, "too many subschemas to compile");
  if (depth_ >= kMaxSchemaDepth)
    return schema_error("schema", pointer, "nested deeper than " + std::to_string(kMaxSchemaDepth) + " subschemas");
  struct DepthGuard {
    int& d;
    explicit DepthGuard(int& x) : d(x) { ++d; }
    ~DepthGuard() { --d; }
  } guard(depth_);

  if (schema.is_boolean()) return schema.get<bool>() ? Compiled(value_rule()) : Compiled();
  if (!schema.is_object()) return schema_error("schema", pointer, "must be an object or a boolean");
  PLLM_TRY(check_keywords(schema, pointer));

  bool ref_siblings = false;
  for (const auto& [key, value] : schema.items())
    if (key != "$ref" && is_constraining(key)) ref_siblings = true;
  if (schema.contains("$ref")) {
    const Json& ref = schema["$ref"];
    if (!ref.is_string()) return schema_error("$ref", pointer, "must be a string");
    if (!ref_siblings) return compile_ref(ref.get<std::string>(), pointer);
  }
  if (schema.contains("$ref") || schema.contains("allOf")) {
    PLLM_ASSIGN(Json flat, flatten(schema, pointer, 0));
    if (flat.is_boolean()) return flat.get<bool>() ? Compiled(value_rule()) : Compiled();
    if (flat.contains("anyOf") || flat.contains("oneOf")) return compile_branches(flat, pointer);
    return compile_plain(flat, pointer);
  }
  if (schema.contains("anyOf") || schema.contains("oneOf")) return compile_branches(schema, pointer);
  return compile_plain(schema, pointer);
}

Result<std::pair<const Json*, std::string>> SchemaCompiler::resolve(const std::string& ref,
                                                                   const std::string& pointer) const {
  std::string rest = ref;
  // A reference through the root's own $id is local.
  if (root_.is_object() && root_.contains("$id") && root_["$id"].is_string()) {
    const std::string id = root_["$id"].get<std::string>();
    if (!id.empty() && rest.rfind(id, 0) == 0 && (rest.size() == id.size() || rest[id.size()] == '#'))
      rest = rest.substr(id.size());
  }
  if (rest.empty()) rest = "#";
  if (rest[0] != '#') return schema_error("$ref", pointer, "'" + ref + "' is not a local reference (remote and relative references are not supported)");
  // Percent-decoding of the fragment.
  std::string frag;
  for (size_t i = 1; i < rest.size(); ++i) {
    if (rest[i] == '%' && i + 2 < rest.size() + 0 && std::isxdigit(static_cast<unsigned char>(rest[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(rest[i + 2]))) {
      frag += static_cast<char>(std::stoi(rest.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      frag += rest[i];
    }
  }
  if (!frag.empty() && frag[0] != '/') return schema_error("$ref", pointer, "'" + ref + "': anchors are not supported");
  const Json* node = &root_;
  std::string canonical;
  size_t pos = 0;
  while (pos < frag.size()) {
    size_t next = frag.find('/', pos + 1);
    std::string raw = frag.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1);
    std::string token;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '~' && i + 1 < raw.size() && (raw[i + 1] == '0' || raw[i + 1] == '1')) {
        token += raw[i + 1] == '0' ? '~' : '/';
        ++i;
      } else {
        token += raw[i];
      }
    }
    if (node->is_object() && node->contains(token)) {
      node = &(*node)[token];
    } else if (node->is_array() && !token.empty() && token.size() < 10 &&
               std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
               (token == "0" || token[0] != '0') && std::stoul(token) < node->size()) {
      node = &(*node)[std::stoul(token)];
    } else {
      return schema_error("$ref", pointer, "'" + ref + "' does not resolve");
    }
    canonical = child_pointer(canonical, token);
    if (next == std::string::npos) break;
    pos = next;
  }
  return std::make_pair(node, canonical);
}

Result<Compiled> SchemaCompiler::compile_ref(const std::string& ref, const std::string& pointer) {
  PLLM_ASSIGN(auto target, resolve(ref, pointer));
  const auto& [node, target_pointer] = target;
  for (const auto& [active, at_depth] : active_refs_)
    if (active == target_pointer && at_depth == container_depth_)
      return schema_error("$ref", pointer,
                          "'" + ref + "' recurses without consuming input (no value would ever end)");
  auto it = ref_rules_.find(target_pointer);
  if (it != ref_rules_.end()) return Compiled(it->second);
  const std::string hint = target_pointer.substr(target_pointer.rfind('/') + 1);
  const std::string name = rules_.reserve("ref-" + hint);
  ref_rules_[target_pointer] = name;
  active_refs_.emplace_back(target_pointer, container_depth_);
  auto body = compile(*node, target_pointer);
  active_refs_.pop_back();
  if (!body.ok()) return body.error();
  if (!*body) return schema_error("$ref", pointer, "'" + ref + "' matches no JSON value");
  rules_.define(name, **body);
  return Compiled(name);
}

Result<Json> SchemaCompiler::flatten(const Json& schema, const std::string& pointer, int depth) {
  if (++work_ > kMaxWork) return schema_error("schema", pointer, "too many subschemas to compile");
  if (depth > kMaxFlattenDepth)
    return schema_error("$ref", pointer, "references inside allOf (or beside other keywords) nest too deeply or recurse");
  if (schema.is_boolean()) return schema;
  if (!schema.is_object()) return schema_error("schema", pointer, "must be an object or a boolean");
  PLLM_TRY(check_keywords(schema, pointer));
  Json base = Json::object();
  for (const auto& [key, value] : schema.items())
    if (key != "$ref" && key != "allOf" && key != "$defs" && key != "definitions" && key != "$id") base[key] = value;
  if (schema.contains("$ref")) {
    if (!schema["$ref"].is_string()) return schema_error("$ref", pointer, "must be a string");
    PLLM_ASSIGN(auto target, resolve(schema["$ref"].get<std::string>(), pointer));
    PLLM_ASSIGN(Json flat, flatten(*target.first, target.second, depth + 1));
    if (flat.is_boolean()) {
      if (!flat.get<bool>()) return Json(false);
    } else {
      PLLM_ASSIGN(base, merge(std::move(base), flat, pointer));
    }
  }
  if (schema.contains("allOf")) {
    const Json& all = schema["allOf"];
    const std::string at = child_pointer(pointer, "allOf");
    if (!all.is_array() || all.empty()) return schema_error("allOf", pointer, "must be a non-empty array");
    for (size_t i = 0; i < all.size(); ++i) {
      PLLM_ASSIGN(Json flat, flatten(all[i], child_pointer(at, std::to_string(i)), depth + 1));
      if (flat.is_boolean()) {
        if (!flat.get<bool>()) return Json(false);
        continue;
      }
      PLLM_ASSIGN(base, merge(std::move(base), flat, pointer));
    }
  }
  return base;
}

Result<Json> SchemaCompiler::merge(Json a, const Json& b_in, const std::string& pointer) const {
  Json b = b_in;
  for (Json* s : {&a, &b}) {
    if (s->contains("const")) {
      Json values = Json::array({(*s)["const"]});
      if (s->contains("enum")) {
        const Json& e = (*s)["enum"];
        if (!e.is_array() || std::find(e.begin(), e.end(), values[0]) == e.end()) values = Json::array();
      }
      s->erase("const");
      (*s)["enum"] = values;
    }
  }
  auto fail = [&](const std::string& key, const std::string& why) { return schema_error("allOf", pointer, key + ": " + why); };
  for (const auto& [key, vb] : b.items()) {
    if (!a.contains(key)) {
      if (key != "properties" && key != "additionalProperties" && key != "items" && key != "prefixItems") a[key] = vb;
      continue;
    }
    Json& va = a[key];
    if (key == "type") {
      PLLM_ASSIGN(unsigned ma, type_mask(a, pointer));
      PLLM_ASSIGN(unsigned mb, type_mask(b, pointer));
      const unsigned m = ma & mb;
      Json names = Json::array();
      if (m & kNull) names.push_back("null");
      if (m & kBool) names.push_back("boolean");
      if (m & kObject) names.push_back("object");
      if (m & kArray) names.push_back("array");
      if (m & kString) names.push_back("string");
      if ((m & kFraction) && (m & kInteger)) names.push_back("number");
      else if (m & kInteger) names.push_back("integer");
      else if (m & kFraction) return fail(key, "the intersection is non-integer numbers only, which is not expressible");
      va = names;
    } else if (key == "required") {
      if (!va.is_array() || !vb.is_array()) return fail(key, "must be an array");
      for (const auto& r : vb)
        if (std::find(va.begin(), va.end(), r) == va.end()) va.push_back(r);
    } else if (key == "minItems" || key == "minLength" || key == "minimum" || key == "exclusiveMinimum") {
      if (!va.is_number() || !vb.is_number()) return fail(key, "must be a number");
      if (vb > va) va = vb;
    } else if (key == "maxItems" || key == "maxLength" || key == "maximum" || key == "exclusiveMaximum") {
      if (!va.is_number() || !vb.is_number()) return fail(key, "must be a number");
      if (vb < va) va = vb;
    } else if (key == "enum") {
      if (!va.is_array() || !vb.is_array()) return fail(key, "must be an array");
      Json both = Json::array();
      for (const auto& v : va)
        if (std::find(vb.begin(), vb.end(), v) != vb.end()) both.push_back(v);
      va = both;
    } else if (key == "pattern" || key == "format") {
      if (va != vb) return fail(key, "two different values cannot be merged into one grammar");
    } else if (key == "anyOf" || key == "oneOf") {
      return fail(key, "more than one anyOf/oneOf cannot be merged");
    } else if (is_constraining(key) && key != "properties" && key != "additionalProperties" && key != "items" &&
               key != "prefixItems") {
      if (va != vb) return fail(key, "cannot be merged");
    }
  }
  if ((a.contains("anyOf") && b.contains("oneOf")) || (a.contains("oneOf") && b.contains("anyOf")))
    return fail("oneOf", "anyOf and oneOf together cannot be merged");
  // Objects: a key is checked by each side's own property schema, or its additionalProperties.
  auto object_part = [](const Json& s, const char* key, Json fallback) {
    return s.contains(key) ? s[key] : fallback;
  };
  if (a.contains("properties") || b.contains("properties") || a.contains("additionalProperties") ||
      b.contains("additionalProperties")) {
    const Json pa = object_part(a, "properties", Json::object()), pb = object_part(b, "properties", Json::object());
    const Json aa = object_part(a, "additionalProperties", Json(true));
    const Json ab = object_part(b, "additionalProperties", Json(true));
    if (!pa.is_object() || !pb.is_object()) return fail("properties", "must be an object");
    Json props = Json::object();
    for (const auto& [k, v] : pa.items()) props[k] = conjoin(v, pb.contains(k) ? pb[k] : ab);
    for (const auto& [k, v] : pb.items())
      if (!pa.contains(k)) props[k] = conjoin(aa, v);
    if (!props.empty()) a["properties"] = props;
    const Json extra = conjoin(aa, ab);
    if (is_true_schema(extra)) a.erase("additionalProperties");
    else a["additionalProperties"] = extra;
  }
  // Arrays: element i is checked by each side's prefixItems[i], or its items.
  if (a.contains("prefixItems") || b.contains("prefixItems") || a.contains("items") || b.contains("items")) {
    const Json pa = object_part(a, "prefixItems", Json::array()), pb = object_part(b, "prefixItems", Json::array());
    const Json ia = object_part(a, "items", Json(true)), ib = object_part(b, "items", Json(true));
    if (!pa.is_array() || !pb.is_array()) return fail("prefixItems", "must be an array");
    Json prefix = Json::array();
    for (size_t i = 0; i < std::max(pa.size(), pb.size()); ++i)
      prefix.push_back(conjoin(i < pa.size() ? pa[i] : ia, i < pb.size() ? pb[i] : ib));
    if (!prefix.empty()) a["prefixItems"] = prefix;
    const Json items = conjoin(ia, ib);
    if (is_true_schema(items)) a.erase("items");
    else a["items"] = items;
  }
  return a;
}

Result<Compiled> SchemaCompiler::compile_branches(const Json& schema, const std::string& pointer) {
  if (schema.contains("anyOf") && schema.contains("oneOf"))
    return schema_error("oneOf", pointer, "anyOf and oneOf in one schema are not supported");
  const std::string key = schema.contains("anyOf") ? "anyOf" : "oneOf";
  const std::string at = child_pointer(pointer, key);
  const Json& branches = schema[key];
  if (!branches.is_array() || branches.empty()) return schema_error(key, pointer, "must be a non-empty array");
  Json base = schema;
  base.erase(key);
  bool has_base = false;
  for (const auto& [k, v] : base.items())
    if (is_constraining(k)) has_base = true;
  std::vector<Json> merged;
  for (size_t i = 0; i < branches.size(); ++i) {
    const std::string bp = child_pointer(at, std::to_string(i));
    if (!has_base && key == "anyOf") {
      merged.push_back(branches[i]);
      continue;
    }
    // Siblings distribute over the branches: (S and (A or B)) = (S and A) or (S and B).
    PLLM_ASSIGN(Json flat, flatten(branches[i], bp, 0));
    if (flat.is_boolean()) {
      if (flat.get<bool>()) merged.push_back(base);
      continue;  // a false branch adds nothing
    }
    if (has_base) {
      if (flat.contains("anyOf") || flat.contains("oneOf"))
        return schema_error(key, bp, "nested anyOf/oneOf beside other keywords is not supported");
      PLLM_ASSIGN(Json m, merge(base, flat, pointer));
      merged.push_back(std::move(m));
    } else {
      merged.push_back(std::move(flat));
    }
  }
  if (key == "oneOf") {
    for (size_t i = 0; i < merged.size(); ++i)
      for (size_t j = i + 1; j < merged.size(); ++j) {
        PLLM_ASSIGN(bool disjoint, provably_disjoint(merged[i], merged[j]));
        if (!disjoint)
          return schema_error("oneOf", pointer, "branches " + std::to_string(i) + " and " + std::to_string(j) +
                                               " may overlap, and a grammar cannot enforce exactly one");
      }
  }
  std::string alts;
  for (size_t i = 0; i < merged.size(); ++i) {
    PLLM_ASSIGN(Compiled c, compile(merged[i], child_pointer(at, std::to_string(i))));
    if (c) alts += (alts.empty() ? "" : " | ") + *c;
  }
  if (alts.empty()) return Compiled();
  return Compiled(rules_.add(key, alts));
}

unsigned type_bit_of(const Json& v) {
  if (v.is_null()) return kNull;
  if (v.is_boolean()) return kBool;
  if (v.is_object()) return kObject;
  if (v.is_array()) return kArray;
  if (v.is_string()) return kString;
  if (v.is_number_integer()) return kInteger;
  const double d = v.get<double>();
  return std::isfinite(d) && std::floor(d) == d ? kInteger : kFraction;
}

Result<unsigned> type_mask(const Json& schema, const std::string& pointer) {
  if (!schema.is_object() || !schema.contains("type")) return unsigned(kAllTypes);
  const Json& t = schema["type"];
  const std::string at = child_pointer(pointer, "type");
  auto one = [&](const Json& name) -> Result<unsigned> {
    if (!name.is_string()) return schema_error("type", pointer, "must be a type name or an array of them");
    const std::string n = name.get<std::string>();
    if (n == "null") return unsigned(kNull);
    if (n == "boolean") return unsigned(kBool);
    if (n == "object") return unsigned(kObject);
    if (n == "array") return unsigned(kArray);
    if (n == "string") return unsigned(kString);
    if (n == "integer") return unsigned(kInteger);
    if (n == "number") return unsigned(kInteger | kFraction);
    return schema_error("type", pointer, "unknown type '" + n + "'");
  };
  if (!t.is_array()) return one(t);
  unsigned m = 0;
  for (const auto& n : t) {
    PLLM_ASSIGN(unsigned b, one(n));
    m |= b;
  }
  return m;
}

// Disjoint when no value can satisfy both: types that cannot overlap, enums with no common value,
// or objects that require one property with disjoint constant values (a discriminator).
Result<bool> SchemaCompiler::provably_disjoint(const Json& a, const Json& b) const {
  auto values_of = [](const Json& s) -> const Json* {
    if (!s.is_object()) return nullptr;
    if (s.contains("enum") && s["enum"].is_array()) return &s["enum"];
    return nullptr;
  };
  auto possible_types = [&](const Json& s) -> Result<unsigned> {
    if (is_false_schema(s)) return 0u;
    if (!s.is_object() || s.contains("anyOf") || s.contains("oneOf")) return unsigned(kAllTypes);
    PLLM_ASSIGN(unsigned m, type_mask(s, ""));
    if (s.contains("const")) m &= type_bit_of(s["const"]);
    if (const Json* e = values_of(s)) {
      unsigned em = 0;
      for (const auto& v : *e) em |= type_bit_of(v);
      m &= em;
    }
    return m;
  };
  PLLM_ASSIGN(unsigned ta, possible_types(a));
  PLLM_ASSIGN(unsigned tb, possible_types(b));
  if ((ta & tb) == 0) return true;
  auto constants = [&](const Json& s) -> Json {
    if (s.contains("const")) return Json::array({s["const"]});
    if (const Json* e = values_of(s)) return *e;
    return Json();
  };
  if (a.is_object() && b.is_object()) {
    Json ca = constants(a), cb = constants(b);
    if (ca.is_array() && cb.is_array()) {
      for (const auto& v : ca)
        if (std::find(cb.begin(), cb.end(), v) != cb.end()) return false;
      return true;
    }
    // Discriminator: both only objects, a property required by both with disjoint constants.
    if (ta == kObject && tb == kObject && a.contains("properties") && b.contains("properties") &&
        a.contains("required") && b.contains("required") && a["required"].is_array() && b["required"].is_array()) {
      for (const auto& [k, pa] : a["properties"].items()) {
        if (!b["properties"].contains(k)) continue;
        const Json& ra = a["required"];
        const Json& rb = b["required"];
        if (std::find(ra.begin(), ra.end(), k) == ra.end() || std::find(rb.begin(), rb.end(), k) == rb.end()) continue;
        const Json& pb = b["properties"][k];
        if (!pa.is_object() || !pb.is_object() || pa.contains("$ref") || pb.contains("$ref")) continue;
        Json va = constants(pa), vb = constants(pb);
        if (!va.is_array() || !vb.is_array()) continue;
        bool overlap = false;
        for (const auto& v : va)
          if (std::find(vb.begin(), vb.end(), v) != vb.end()) overlap = true;
        if (!overlap) return true;
      }
    }
  }
  return false;
}

Result<Compiled> SchemaCompiler::compile_plain(const Json& schema, const std::string& pointer) {
  PLLM_ASSIGN(unsigned types, type_mask(schema, pointer));
  if (schema.contains("enum") || schema.contains("const")) return enum_gbnf(schema, pointer, types);
  std::string alts;
  auto add = [&](const Compiled& c) {
    if (c) alts += (alts.empty() ? "" : " | ") + *c;
  };
  if (types & kNull) add(Compiled(null_gbnf()));
  if (types & kBool) add(Compiled(bool_gbnf()));
  if (types & (kInteger | kFraction)) {
    PLLM_ASSIGN(Compiled c, number_gbnf(schema, pointer, types));
    add(c);
  }
  if (types & kString) {
    PLLM_ASSIGN(Compiled c, string_gbnf(schema, pointer));
    add(c);
  }
  if (types & kArray) {
    PLLM_ASSIGN(Compiled c, array_gbnf(schema, pointer));
    add(c);
  }
  if (types & kObject) {
    PLLM_ASSIGN(Compiled c, object_gbnf(schema, pointer));
    add(c);
  }
  if (alts.empty()) return Compiled();
  if (alts == "value") return Compiled(alts);
  return Compiled(rules_.add(pointer.empty() ? "schema" : pointer.substr(pointer.rfind('/') + 1), alts));
}

}  // namespace schema_detail

std::string json_value_gbnf(const JsonSchemaOptions& opts) {
  const nlohmann::ordered_json any = true;
  schema_detail::SchemaCompiler c(any, opts);
  auto r = c.run();
  return r.ok() ? r.value() : std::string();
}

Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema, const JsonSchemaOptions& opts) {
  schema_detail::SchemaCompiler c(schema, opts);
  return c.run();
}

Result<std::string> json_schema_to_gbnf(std::string_view schema_text, const JsonSchemaOptions& opts) {
  if (schema_detail::text_deeper_than(schema_text, schema_detail::kMaxJsonDepth))
    return schema_detail::schema_error("schema", "", "nested deeper than " +
                                                         std::to_string(schema_detail::kMaxJsonDepth) + " levels");
  auto doc = nlohmann::ordered_json::parse(schema_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return make_error(Status::invalid_argument, "schema: not valid JSON");
  return json_schema_to_gbnf(doc, opts);
}

}  // namespace pllm
