#include "grammar_options.h"

namespace cli {

void GrammarOptions::add_to(CLI::App* cmd) {
  auto* g = cmd->add_option("--grammar-file", grammar_file, "constrain the output to a GBNF grammar (root rule: root)")
                ->check(CLI::ExistingFile);
  auto* s = cmd->add_option("--json-schema", json_schema_file, "constrain the output to a JSON Schema (a file)")
                ->check(CLI::ExistingFile);
  auto* j = cmd->add_flag("--json-object", json_object, "constrain the output to one JSON value");
  g->excludes(s)->excludes(j);
  s->excludes(j);
}

Grammar::Grammar(const Model& model, const GrammarOptions& o) {
  if (!o.given()) return;
  if (o.json_object) {
    check(pllm_grammar_create(model.p, PLLM_GRAMMAR_JSON, nullptr, &p), "grammar");
    return;
  }
  const bool gbnf = !o.grammar_file.empty();
  const std::string text = read_file(gbnf ? o.grammar_file : o.json_schema_file);
  check(pllm_grammar_create(model.p, gbnf ? PLLM_GRAMMAR_GBNF : PLLM_GRAMMAR_JSON_SCHEMA, text.c_str(), &p),
        gbnf ? o.grammar_file.c_str() : o.json_schema_file.c_str());
}

}  // namespace cli
