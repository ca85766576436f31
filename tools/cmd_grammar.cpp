// `pocketllm grammar`: compile a JSON Schema (or read GBNF, or take the any-JSON grammar), print
// it, and check candidate texts against it. Uses the C++ API (constrained/): the grammar engine
// has no C surface of its own.
//
//   pocketllm grammar --json-schema schema.json --print
//   pocketllm grammar --json-schema schema.json --check candidates.jsonl
// --check reads one JSON string per line (the candidate text) and prints one line per candidate:
// 1 when the whole text is a complete sentence of the grammar, else 0.
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_cpp_api.h"
#include "commands.h"
#include "constrained/grammar.h"
#include "constrained/grammar_matcher.h"
#include "constrained/json_schema.h"

namespace cli {

std::function<int()> add_grammar(CLI::App& app) {
  auto* cmd = app.add_subcommand("grammar", "compile a JSON Schema or GBNF grammar; print it or check texts against it");
  struct Opts {
    std::string schema_file, grammar_file, check_file;
    bool any_json = false, print = false;
    int max_whitespace = pllm::JsonSchemaOptions{}.max_whitespace;
  };
  auto o = std::make_shared<Opts>();
  auto* s = cmd->add_option("--json-schema", o->schema_file, "JSON Schema file (draft 2020-12 subset)");
  auto* g = cmd->add_option("--grammar-file", o->grammar_file, "GBNF grammar file");
  auto* j = cmd->add_flag("--json", o->any_json, "the grammar of any JSON value");
  s->excludes(g)->excludes(j);
  g->excludes(j);
  cmd->add_flag("--print", o->print, "write the GBNF to stdout");
  cmd->add_option("--check", o->check_file, "JSONL of candidate texts (one JSON string per line); prints 1/0 each");
  cmd->add_option("--max-whitespace", o->max_whitespace, "whitespace characters allowed between JSON tokens")
      ->check(CLI::Range(0, 10000));
  return [o, s, g, j]() {
    if (!*s && !*g && !*j) fail("no grammar: pass one of --json-schema FILE, --grammar-file FILE, --json");
    if (!o->print && o->check_file.empty()) fail("nothing to do: pass --print and/or --check FILE");
    pllm::JsonSchemaOptions opts;
    opts.max_whitespace = o->max_whitespace;
    std::string gbnf;
    if (*s) {
      const std::string text = read_file(o->schema_file);
      gbnf = unwrap(pllm::json_schema_to_gbnf(std::string_view(text), opts));
    } else if (*g) {
      gbnf = read_file(o->grammar_file);
    } else {
      gbnf = pllm::json_value_gbnf(opts);
    }
    auto grammar = pllm::parse_gbnf(gbnf);
    if (!grammar.ok()) fail("grammar: " + grammar.error().message);
    if (o->print) std::fwrite(gbnf.data(), 1, gbnf.size(), stdout);
    if (o->check_file.empty()) return 0;
    const std::string lines = read_file(o->check_file);
    // accept_text needs no vocabulary: an empty one serves.
    auto vocab = pllm::TokenVocab::from_pieces({}, {});
    pllm::GrammarMatcher matcher(grammar.value(), vocab);
    std::istringstream in(lines);
    std::string line, out;
    for (int n = 1; std::getline(in, line); ++n) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      auto doc = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (doc.is_discarded() || !doc.is_string())
        fail(o->check_file + ":" + std::to_string(n) + ": each line must be a JSON string");
      matcher.reset();
      const bool ok = matcher.accept_text(doc.get_ref<const std::string&>()) && matcher.is_complete();
      out += ok ? "1\n" : "0\n";
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  };
}

}  // namespace cli
