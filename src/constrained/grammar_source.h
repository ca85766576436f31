// Where a grammar comes from: GBNF text, a JSON Schema, or "any JSON value". The one place the
// C API, the CLI and the server turn a request's constraint into a compiled grammar.
#pragma once
#include <memory>
#include <string_view>

#include "base/result.h"
#include "constrained/grammar.h"

namespace pllm {

enum class GrammarKind { gbnf, json_schema, json };

// text: the GBNF or schema source (ignored for json). Errors name the source kind first.
Result<std::shared_ptr<const Grammar>> compile_grammar(GrammarKind kind, std::string_view text);

}  // namespace pllm
