// Grammars for constrained generation: llama.cpp's GBNF syntax parsed into rules over Unicode
// code points. The JSON Schema compiler (json_schema.h) emits GBNF text, so one parser and one
// matcher serve both. Used by the sampler, never by the kernels.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace pllm {

// Limits that keep hostile grammars bounded (a clear error past them, never a crash).
struct GrammarLimits {
  size_t max_text_bytes = 4u << 20;  // GBNF source
  int max_nesting = 256;             // ( ... ) depth in the source
  size_t max_rules = 100000;         // after expanding groups and repetitions
  size_t max_elements = 2000000;
  int max_repetition = 10000;        // {m,n} bounds
};

// An immutable compiled grammar, shared by every matcher that uses it.
struct Grammar;

// Text that starts a lazy grammar: the generation is free until it writes a trigger, and the
// grammar holds from the trigger's first byte (tool calls under tool_choice "auto"). at_start:
// only when it is the first thing written (leading whitespace aside).
struct GrammarTrigger {
  std::string text;
  bool at_start = false;
};

// Parses GBNF. Errors (Status::invalid_argument) say line:column and what was expected;
// an undefined rule, a missing root, a left-recursive rule (which no stack machine can run) are
// errors too.
Result<std::shared_ptr<const Grammar>> parse_gbnf(std::string_view text, std::string_view root = "root",
                                                  const GrammarLimits& limits = {});

// The grammar written back as GBNF (normalised): for `pocketllm grammar --print` and tests.
std::string grammar_to_gbnf(const Grammar& g);

}  // namespace pllm
