// pllm_tools_*: a request's tools (runtime/tool_chat.h) behind the C API: the grammar its reply
// follows, the conversation rendered with them, and the reply's calls read back.
#include <atomic>

#include "api/api_internal.h"
#include "runtime/tool_chat.h"
#include "tokenizer/chat_messages.h"

using pllm_api::dup_string;
using pllm_api::fail;
using pllm_api::guarded;

struct pllm_tools {
  pllm::ToolRequest request;
  std::optional<pllm::ToolCallFormat> format;  // set unless tool_choice is none
  pllm_grammar grammar;
  std::shared_ptr<const pllm::TokenVocab> vocab;
  mutable std::atomic<uint64_t> next_reply{0};  // names the calls of each parsed reply apart
};

struct pllm_tools_stream {
  const pllm_tools* tools;
  pllm::ToolCallStream calls;
};

namespace {

template <class T>
pllm_status json_arg(const char* text, const char* fn, const char* what, T& out) {
  out = T::parse(text, nullptr, /*allow_exceptions=*/false);
  if (out.is_discarded()) return fail(PLLM_ERR_INVALID_ARGUMENT, std::string(fn) + ": " + what + " is not valid JSON");
  return PLLM_OK;
}

}  // namespace

extern "C" {

pllm_status pllm_tools_create(const pllm_model* m, const char* tools_json, const char* tool_choice_json,
                              int parallel_tool_calls, pllm_tools** out) {
  return guarded([&] {
    if (out) *out = nullptr;
    if (!m || !tools_json || !out) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_tools_create: null argument");
    nlohmann::ordered_json tools, choice;  // ordered: a schema's property order is the call's
    if (pllm_status st = json_arg(tools_json, "pllm_tools_create", "tools_json", tools); st != PLLM_OK) return st;
    if (tool_choice_json)
      if (pllm_status st = json_arg(tool_choice_json, "pllm_tools_create", "tool_choice_json", choice); st != PLLM_OK)
        return st;
    auto h = std::make_unique<pllm_tools>();
    auto defs = pllm::parse_tool_definitions(tools);
    if (!defs.ok()) return fail(defs.error());
    h->request.tools = std::move(defs).value();
    auto c = pllm::parse_tool_choice(choice, h->request.tools);
    if (!c.ok()) return fail(c.error());
    h->request.choice = *c;
    h->request.parallel = parallel_tool_calls != 0;
    h->vocab = m->vocab.get(m->model->tokenizer());
    auto constraint = pllm::tool_constraint(*m->model, m->chat_template, h->request, h->vocab);
    if (!constraint.ok()) return fail(constraint.error());
    h->grammar.constraint = std::move(constraint->grammar);
    h->grammar.model = m->model.get();
    h->format = constraint->format;
    *out = h.release();
    return PLLM_OK;
  });
}

void pllm_tools_free(pllm_tools* tools) { delete tools; }

const pllm_grammar* pllm_tools_grammar(const pllm_tools* tools) { return tools ? &tools->grammar : nullptr; }

pllm_status pllm_chat_apply_template_json(const pllm_model* m, const char* messages_json, const pllm_tools* tools,
                                          int add_generation_prompt, const char* variables_json, char** text_out) {
  return guarded([&] {
    if (!m || !messages_json || !text_out)
      return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_chat_apply_template_json: null argument");
    *text_out = nullptr;
    nlohmann::json messages;
    if (pllm_status st = json_arg(messages_json, "pllm_chat_apply_template_json", "messages_json", messages);
        st != PLLM_OK)
      return st;
    auto msgs = pllm::parse_chat_messages(messages);
    if (!msgs.ok()) return fail(msgs.error());
    pllm::ChatTemplateVars vars;
    if (variables_json) {
      auto v = pllm::parse_chat_template_vars(variables_json);
      if (!v.ok()) return fail(v.error());
      vars = std::move(*v);
    }
    if (tools && tools->grammar.model != m->model.get())
      return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_chat_apply_template_json: the tools were made for another model");
    auto p = pllm::tool_chat_prompt(*m->model, std::move(msgs).value(),
                                    tools ? tools->request.tools : std::vector<pllm::ToolDefinition>{},
                                    m->chat_template, vars, add_generation_prompt != 0);
    if (!p.ok()) return fail(p.error());
    const std::string& text = *p;
    *text_out = dup_string(text);
    return PLLM_OK;
  });
}

pllm_status pllm_tools_parse(const pllm_tools* tools, const pllm_token* tokens, size_t n_tokens, char** json_out) {
  return guarded([&] {
    if (!tools || !json_out || (!tokens && n_tokens))
      return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_tools_parse: null argument");
    *json_out = nullptr;
    std::string text;  // the tokens' bytes, call markers spelled out
    for (size_t i = 0; i < n_tokens; ++i) {
      if (tokens[i] < 0 || tokens[i] >= tools->vocab->n_vocab())
        return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_tools_parse: token " + std::to_string(tokens[i]) + " out of range");
      text += tools->vocab->piece(tokens[i]);
    }
    nlohmann::json out;
    if (!tools->format) {
      out = {{"content", text}, {"tool_calls", nlohmann::json::array()}};
    } else {
      const std::string prefix = "call_" + std::to_string(tools->next_reply++) + "_";
      const pllm::ToolReply r = pllm::parse_tool_reply(*tools->format, text, prefix);
      out = {{"content", r.content.empty() && !r.calls.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.content)},
             {"tool_calls", pllm::tool_calls_json(r.calls)}};
    }
    *json_out = dup_string(out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return PLLM_OK;
  });
}

pllm_status pllm_tools_stream_create(const pllm_tools* tools, pllm_tools_stream** out) {
  return guarded([&] {
    if (out) *out = nullptr;
    if (!tools || !out) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_tools_stream_create: null argument");
    // Under tool_choice none nothing is a call, but the stream still holds back half characters:
    // any format's stream does that, and no call marker can be written.
    const std::string prefix = "call_" + std::to_string(tools->next_reply++) + "_";
    *out = new pllm_tools_stream{tools, pllm::ToolCallStream(tools->format.value_or(pllm::ToolCallFormat::hermes), prefix)};
    return PLLM_OK;
  });
}

void pllm_tools_stream_free(pllm_tools_stream* stream) { delete stream; }

pllm_status pllm_tools_stream_push(pllm_tools_stream* stream, pllm_token token, char** json_out) {
  return guarded([&] {
    if (!stream || !json_out) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_tools_stream_push: null argument");
    *json_out = nullptr;
    if (token >= stream->tools->vocab->n_vocab())
      return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_tools_stream_push: token " + std::to_string(token) + " out of range");
    const pllm::ToolStreamDelta d =
        token < 0 ? stream->calls.finish() : stream->calls.push(stream->tools->vocab->piece(token));
    nlohmann::json calls = nlohmann::json::array();
    for (const pllm::ToolCallDelta& c : d.calls) {
      nlohmann::json j = {{"index", c.index}, {"arguments", c.arguments}};
      if (!c.id.empty()) {
        j["id"] = c.id;
        j["name"] = c.name;
      }
      calls.push_back(std::move(j));
    }
    const nlohmann::json out = {{"content", d.content}, {"tool_calls", std::move(calls)}};
    *json_out = dup_string(out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return PLLM_OK;
  });
}

}  // extern "C"
