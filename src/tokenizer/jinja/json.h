// JSON in and out of template values: the context arrives as JSON; `tojson` writes what Python's
// json.dumps writes (Hugging Face's tojson: ensure_ascii off by default, no HTML escaping).
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tokenizer/jinja/value.h"

namespace pllm::jinja {

struct JsonDumpOptions {
  std::optional<std::string> indent;  // json.dumps(indent=...): spaces per level (an int becomes spaces)
  bool ensure_ascii = false;
  bool sort_keys = false;
  std::string item_separator, key_separator;  // empty: json.dumps's defaults for the indent
};

// Throws TemplateError for values JSON cannot hold (Undefined, callables, namespaces).
std::string to_json(const Value& v, const JsonDumpOptions& opts);

// Objects keep their key order (ordered_json), as Python's json.loads does.
Value from_json(const nlohmann::ordered_json& j);

}  // namespace pllm::jinja
