// Shared pieces of the JSON Schema compiler (json_schema*.cpp): the rule table it writes GBNF
// into, code point sets, and the string/number sub-compilers. Not part of the public interface.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "constrained/json_schema.h"

namespace pllm::schema_detail {

// GBNF rules being written, deduplicated by body so shared shapes cost one rule.
class RuleTable {
 public:
  // Adds `name_hint ::= body` (or returns the rule that already has this body).
  std::string add(std::string_view name_hint, const std::string& body);
  // Reserves a name whose body comes later (a recursive $ref refers to itself).
  std::string reserve(std::string_view name_hint);
  void define(const std::string& name, const std::string& body);
  // A rule under exactly this name (one of the shared JSON rules, never handed out otherwise).
  void add_fixed(const std::string& name, const std::string& body);
  std::string to_gbnf(const std::string& root_name, const std::string& root_body) const;
  // Names a caller keeps for its own rules (JsonSchemaOptions::root_name, reserved_names).
  void reserve_names(const std::vector<std::string>& names);
  // Repetition bounds summed over the grammar: the parser expands {m,n} into rules, so the
  // compiler refuses a schema whose grammar would exceed the parser's limits.
  Result<void> charge_repetition(int64_t count, std::string_view keyword, std::string_view pointer);

 private:
  std::string unique_name(std::string_view hint);
  std::vector<std::pair<std::string, std::string>> rules_;
  std::map<std::string, std::string> by_body_;
  std::map<std::string, int> used_names_ = {{"root", 1},   {"ws", 1},     {"value", 1}, {"object", 1},
                                           {"array", 1},  {"string", 1}, {"string-char", 1}, {"number", 1}};
  int64_t repetition_budget_ = 60000;
};

// A set of Unicode code points as sorted, disjoint, inclusive ranges.
struct CodePointSet {
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  void add(uint32_t lo, uint32_t hi);
  void add_set(const CodePointSet& other);
  CodePointSet complement() const;  // within [0, 0x10FFFF] minus the surrogates
  bool empty() const { return ranges.empty(); }
};

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;
inline constexpr int kMaxRepetition = 10000;  // matches GrammarLimits::max_repetition

// GBNF for a character of decoded string content drawn from `set`, as it appears inside a JSON
// string in canonical form: raw UTF-8, except `"` `\` and controls, which take JSON's short
// escapes (\" \\ \b \f \n \r \t) or \u00XX. Empty string if the set is empty.
std::string json_char_gbnf(const CodePointSet& set);
// Canonical JSON encoding of a decoded string, as a GBNF sequence (without the quotes).
std::string json_string_content_gbnf(std::string_view utf8);
// A GBNF string literal "..." for raw text (escapes everything outside printable ASCII).
std::string gbnf_literal(std::string_view text);
// The GBNF class of a code point set: [a-z...].
std::string gbnf_class(const CodePointSet& set);
// Decodes UTF-8; false on invalid input.
bool decode_utf8(std::string_view s, std::vector<uint32_t>& out);

// String content (between the quotes) matching an ECMAScript `pattern` with JSON Schema's
// search semantics (unanchored unless ^/$). Errors name "pattern at <pointer>".
Result<std::string> pattern_to_gbnf(std::string_view pattern, std::string_view pointer, RuleTable& rules);
// String content for a `format`; error (unsupported) for formats that cannot be enforced exactly.
Result<std::string> format_to_gbnf(std::string_view format, std::string_view pointer, RuleTable& rules);

// Canonical decimal integers in [lo, hi] (either bound may be absent), as a GBNF expression; a
// zero fraction (".0") is allowed too since draft 2020-12 counts 1.0 as an integer.
std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi, RuleTable& rules);

using Json = nlohmann::ordered_json;

// Instance types as bits; "number" is integer | fraction (a number with a nonzero fraction).
enum TypeBits : unsigned {
  kNull = 1, kBool = 2, kObject = 4, kArray = 8, kString = 16, kInteger = 32, kFraction = 64, kAllTypes = 127
};

// A compiled subschema: a GBNF expression, or nullopt when no JSON value satisfies it.
using Compiled = std::optional<std::string>;

// JSON pointer of a child: escapes ~ and / in the token.
std::string child_pointer(const std::string& parent, std::string_view token);
// "<keyword> at <pointer>: <why>" (the root pointer reads "/").
Error schema_error(std::string_view keyword, const std::string& pointer, const std::string& why);

// One compilation: walks the schema, resolving local $refs into (possibly recursive) rules.
// json_schema.cpp holds the walk, references and combinators; json_schema_types.cpp the
// per-type grammars (objects, arrays, strings, numbers, enum literals).
class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const JsonSchemaOptions& opts);
  Result<std::string> run();

  // Any subschema (boolean, $ref, allOf/anyOf/oneOf, or plain keywords).
  Result<Compiled> compile(const Json& schema, const std::string& pointer);

 private:
  Result<void> check_keywords(const Json& schema, const std::string& pointer) const;
  Result<Compiled> compile_ref(const std::string& ref, const std::string& pointer);
  Result<std::pair<const Json*, std::string>> resolve(const std::string& ref, const std::string& pointer) const;
  // The schema with its top-level $ref and allOf merged in (exactly, or an error).
  Result<Json> flatten(const Json& schema, const std::string& pointer, int depth);
  Result<Json> merge(Json a, const Json& b, const std::string& pointer) const;
  Result<Compiled> compile_branches(const Json& schema, const std::string& pointer);
  Result<Compiled> compile_plain(const Json& schema, const std::string& pointer);
  Result<bool> provably_disjoint(const Json& a, const Json& b) const;

  // Per-type grammars (json_schema_types.cpp).
  Result<Compiled> enum_gbnf(const Json& schema, const std::string& pointer, unsigned types);
  Result<std::string> literal_gbnf(const Json& value, const std::string& pointer, int depth);
  Result<Compiled> number_gbnf(const Json& schema, const std::string& pointer, unsigned types);
  Result<Compiled> string_gbnf(const Json& schema, const std::string& pointer);
  Result<Compiled> array_gbnf(const Json& schema, const std::string& pointer);
  Result<Compiled> object_gbnf(const Json& schema, const std::string& pointer);
  Result<std::string> key_excluding(const std::vector<std::string>& names, const std::string& pointer);
  Result<Compiled> child(const Json& schema, const std::string& pointer);  // inside [] or {}

 public:
  // Shared JSON rules (value, string, number, ...), added on first use.
  std::string value_rule();
  std::string string_rule();
  std::string ws() const { return ws_; }            // " ws " or " " (nothing allowed)
  std::string sep() const { return sep_; }          // a comma between whitespace
  // Literals in the output's language (JSON's, or Python's under JsonSchemaOptions::python).
  std::string null_gbnf() const { return opts_.python ? "\"None\"" : "\"null\""; }
  std::string bool_literal_gbnf(bool b) const {
    return opts_.python ? (b ? "\"True\"" : "\"False\"") : (b ? "\"true\"" : "\"false\"");
  }
  std::string bool_gbnf() const { return bool_literal_gbnf(true) + " | " + bool_literal_gbnf(false); }
  RuleTable& rules() { return rules_; }

 private:
  const Json& root_;
  JsonSchemaOptions opts_;
  RuleTable rules_;
  std::string ws_, sep_;
  bool value_rules_added_ = false;
  std::map<std::string, std::string> ref_rules_;          // target pointer -> rule name
  std::vector<std::pair<std::string, int>> active_refs_;  // refs being compiled, container depth
  int container_depth_ = 0;
  int depth_ = 0;
  size_t work_ = 0;
};

unsigned type_bit_of(const Json& value);
Result<unsigned> type_mask(const Json& schema, const std::string& pointer);

}  // namespace pllm::schema_detail
