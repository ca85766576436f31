// JSON Schema (draft 2020-12 subset) compiled to GBNF. A keyword the compiler cannot enforce is
// an error naming the keyword and its JSON pointer — never skipped silently.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/result.h"

namespace pllm {

struct JsonSchemaOptions {
  // Whitespace the grammar allows between tokens: none (compact), or up to this many
  // spaces/newlines per gap (so a model can indent without running forever).
  int max_whitespace = 20;
};

// The grammar of any JSON value (response_format json_object, --json).
std::string json_value_gbnf(const JsonSchemaOptions& opts = {});
// Status::invalid_argument: "<keyword> at <json pointer>: <why>".
Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema, const JsonSchemaOptions& opts = {});
Result<std::string> json_schema_to_gbnf(std::string_view schema_text, const JsonSchemaOptions& opts = {});

}  // namespace pllm
