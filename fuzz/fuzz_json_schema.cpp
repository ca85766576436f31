// The JSON Schema compiler on outside input: every schema text compiles or fails with one error,
// within the bounds (no crash, hang, deep recursion or runaway memory), and a compiled grammar
// always parses (a grammar the GBNF parser refuses is a compiler bug). A valid instance check
// rides along: the grammar of a compiled schema is walked over a few fixed JSON texts.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "constrained/grammar.h"
#include "constrained/grammar_matcher.h"
#include "constrained/json_schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view schema(reinterpret_cast<const char*>(data), size);
  pllm::JsonSchemaOptions opts;
  opts.max_whitespace = 2;
  auto gbnf = pllm::json_schema_to_gbnf(schema, opts);
  if (!gbnf.ok()) {
    if (gbnf.error().message.empty()) std::abort();
    return 0;
  }
  auto g = pllm::parse_gbnf(gbnf.value());
  if (!g.ok()) std::abort();
  pllm::GrammarMatcher m(g.value(), pllm::TokenVocab::from_pieces({}, {}));
  for (std::string_view text : {"null", "{\"a\": [1, \"x\"]}", "\"2024-02-29\"", "-12.5e3", "[]"}) {
    m.reset();
    (void)(m.accept_text(text) && m.is_complete());
  }
  return 0;
}
