// pllm_grammar_*: grammars compiled for a model's vocabulary (constrained/), and the grammar of
// pllm_sampling_params as the runtime's constraint.
#include <cstring>

#include "api/api_internal.h"
#include "constrained/grammar_source.h"

using pllm_api::fail;
using pllm_api::guarded;

namespace pllm_api {

pllm_status grammar_constraint(const pllm_sampling_params& sp, const pllm::Model& m, const char* fn,
                               pllm::GrammarConstraint& out) {
  out = {};
  if (!sp.grammar) return PLLM_OK;
  if (sp.grammar->model != &m)
    return fail(PLLM_ERR_INVALID_ARGUMENT, std::string(fn) + ": the grammar was made for another model");
  out = sp.grammar->constraint;
  return PLLM_OK;
}

}  // namespace pllm_api

extern "C" {

pllm_status pllm_grammar_create(const pllm_model* m, pllm_grammar_kind kind, const char* text, pllm_grammar** out) {
  return guarded([&] {
    if (out) *out = nullptr;
    if (!m || !out) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_grammar_create: null argument");
    pllm::GrammarKind k;
    switch (kind) {
      case PLLM_GRAMMAR_GBNF: k = pllm::GrammarKind::gbnf; break;
      case PLLM_GRAMMAR_JSON_SCHEMA: k = pllm::GrammarKind::json_schema; break;
      case PLLM_GRAMMAR_JSON: k = pllm::GrammarKind::json; break;
      default:
        return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_grammar_create: unknown grammar kind " + std::to_string(int(kind)));
    }
    if ((k == pllm::GrammarKind::json) != (text == nullptr))
      return fail(PLLM_ERR_INVALID_ARGUMENT, k == pllm::GrammarKind::json
                                                 ? "pllm_grammar_create: PLLM_GRAMMAR_JSON takes no text (pass NULL)"
                                                 : "pllm_grammar_create: null text");
    auto g = pllm::compile_grammar(k, text ? std::string_view(text) : std::string_view());
    if (!g.ok()) return fail(g.error());
    auto* h = new pllm_grammar;
    h->constraint = {std::move(g).value(), m->vocab.get(m->model->tokenizer())};
    h->model = m->model.get();
    *out = h;
    return PLLM_OK;
  });
}

void pllm_grammar_free(pllm_grammar* g) { delete g; }

pllm_status pllm_grammar_gbnf(const pllm_grammar* g, char* out, size_t capacity, size_t* n_written) {
  return guarded([&] {
    if (!g || !n_written || (!out && capacity)) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_grammar_gbnf: null argument");
    if (!g->constraint.grammar)  // tool_choice none: nothing but refused call markers
      return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_grammar_gbnf: this constraint has no grammar (tool_choice none)");
    const std::string text = pllm::grammar_to_gbnf(*g->constraint.grammar);
    *n_written = text.size();
    if (text.size() + 1 > capacity)
      return fail(PLLM_ERR_OUT_OF_RANGE, "pllm_grammar_gbnf: " + std::to_string(text.size() + 1) +
                                             " bytes needed, " + std::to_string(capacity) + " given");
    std::memcpy(out, text.c_str(), text.size() + 1);
    return PLLM_OK;
  });
}

}  // extern "C"
