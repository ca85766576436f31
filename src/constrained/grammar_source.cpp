#include "constrained/grammar_source.h"

#include "constrained/json_schema.h"

namespace pllm {

Result<std::shared_ptr<const Grammar>> compile_grammar(GrammarKind kind, std::string_view text) {
  std::string gbnf;
  switch (kind) {
    case GrammarKind::gbnf: {
      auto g = parse_gbnf(text);
      if (!g.ok()) return make_error(g.error().code, "grammar: " + g.error().message);
      return g;
    }
    case GrammarKind::json_schema: {
      auto s = json_schema_to_gbnf(text);
      if (!s.ok()) return make_error(s.error().code, "JSON schema: " + s.error().message);
      gbnf = std::move(s).value();
      break;
    }
    case GrammarKind::json: gbnf = json_value_gbnf(); break;
  }
  auto g = parse_gbnf(gbnf);  // the compiler's own output: an error here is a bug in it
  if (!g.ok()) return make_error(Status::internal, "the JSON schema compiled to a grammar that does not parse: " +
                                                       g.error().message);
  return g;
}

}  // namespace pllm
