// JSON Schema (draft 2020-12 subset) compiled to GBNF. A keyword the compiler cannot enforce is
// an error naming the keyword and its JSON pointer — never skipped silently.
//
// Exact where it compiles: the grammar accepts a text iff it is the canonical serialisation of a
// valid value (any whitespace up to max_whitespace between tokens). A generator needs one form:
//  * object keys: `properties` in schema order, then keys `required` names without a property
//    schema, then additionalProperties' keys (any order). Through $ref and allOf (merged into
//    one schema) the schema's own properties come first, then the $ref target's, then each allOf
//    branch's; an anyOf/oneOf branch's after the keywords beside it.
//  * strings under pattern/format/minLength/maxLength, property names and enum strings: raw UTF-8
//    with JSON's short escapes (\" \\ \n \t ...) or \u00XX for controls; other strings take any
//    escape. Integers may carry a zero fraction (1.0 is an integer in 2020-12), not an exponent.
// Supported: type (and arrays of types), enum, const, properties, required, additionalProperties,
// items, prefixItems, minItems/maxItems, minLength/maxLength (code points), pattern (ECMAScript
// subset, search semantics), format (date, date-time, time, email, uuid, ipv4, ipv6), minimum/maximum/exclusive* on integers,
// anyOf, oneOf (provably disjoint branches), allOf (exact merges), local $ref/$defs/definitions
// (JSON pointers, recursion), boolean schemas; annotations and unknown keywords are ignored.
// Errors read "<keyword> at <pointer of the schema holding it>: <why>", the root being "/".
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace pllm {

struct JsonSchemaOptions {
  // Whitespace the grammar allows between tokens: none (compact), or up to this many
  // spaces/newlines per gap (so a model can indent without running forever).
  int max_whitespace = 20;
  // The grammar's start rule, and names its other rules must not take: a caller that embeds the
  // schema's grammar in a larger one (tool calls) writes its own rules under those names.
  std::string root_name = "root";
  std::vector<std::string> reserved_names;
  // Python literals instead of JSON's (True / False / None), and an object schema carrying the
  // key kPythonCallKey (a function name) written as a call with keyword arguments,
  // name(key=value, ...): the pythonic tool calls of LFM2. Off: the key is an ignored annotation.
  bool python = false;
};
inline constexpr const char* kPythonCallKey = "x-pocketllm-python-call";

// The grammar of any JSON value (response_format json_object, --json).
std::string json_value_gbnf(const JsonSchemaOptions& opts = {});
// Status::invalid_argument: "<keyword> at <json pointer>: <why>".
Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema, const JsonSchemaOptions& opts = {});
Result<std::string> json_schema_to_gbnf(std::string_view schema_text, const JsonSchemaOptions& opts = {});

}  // namespace pllm
