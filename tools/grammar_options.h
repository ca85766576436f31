// --grammar-file / --json-schema / --json-object: the constraint of `run`, `chat` and `grammar`,
// compiled for a model through pllm_grammar_create.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "cli_common.h"

namespace cli {

struct GrammarOptions {
  std::string grammar_file;      // GBNF
  std::string json_schema_file;  // a JSON Schema
  bool json_object = false;      // any JSON value

  void add_to(CLI::App* cmd);
  bool given() const { return !grammar_file.empty() || !json_schema_file.empty() || json_object; }
};

// The compiled grammar (p null when no flag was given). Fails with the compiler's message.
struct Grammar {
  pllm_grammar* p = nullptr;
  Grammar(const Model& model, const GrammarOptions& o);
  ~Grammar() { pllm_grammar_free(p); }
  Grammar(const Grammar&) = delete;
  Grammar& operator=(const Grammar&) = delete;
};

}  // namespace cli
