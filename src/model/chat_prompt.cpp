#include "model/chat_prompt.h"

#include "model/model.h"
#include "tokenizer/jinja/render.h"

namespace pllm {

std::string_view chat_template_mode_name(ChatTemplateMode m) {
  return m == ChatTemplateMode::native ? "native" : "file";
}

std::optional<ChatTemplateMode> parse_chat_template_mode(std::string_view word) {
  if (word == "file") return ChatTemplateMode::file;
  if (word == "native") return ChatTemplateMode::native;
  return std::nullopt;
}

Result<void> check_chat_template_vars(const ChatTemplateVars& vars) {
  if (vars.is_null()) return {};
  if (!vars.is_object()) return make_error(Status::invalid_argument, "chat template variables must be a JSON object");
  for (const char* own : {"messages", "tools", "documents", "add_generation_prompt", "bos_token", "eos_token",
                          "raise_exception", "strftime_now"})
    if (vars.contains(own))
      return make_error(Status::invalid_argument, std::string("chat template variable '") + own +
                                                      "' is set by the engine, not by the caller");
  return {};
}

Result<ChatTemplateVars> parse_chat_template_vars(std::string_view text) {
  ChatTemplateVars v = ChatTemplateVars::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return make_error(Status::invalid_argument, "chat template variables are not valid JSON");
  PLLM_TRY(check_chat_template_vars(v));
  return v;
}

Result<std::string> apply_chat_template(const Model& m, const std::vector<ChatMessage>& messages,
                                        bool add_generation_prompt, ChatTemplateMode mode, const ChatTemplateVars& vars,
                                        const nlohmann::ordered_json& tools) {
  return apply_chat_template(m.chat_template(), m.chat_family(), m.tokenizer(), messages, add_generation_prompt,
                             mode, vars, tools);
}

Result<std::string> apply_chat_template(const std::string& tmpl, ChatFamily family, const Tokenizer& tok,
                                        const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                        ChatTemplateMode mode, const ChatTemplateVars& vars,
                                        const nlohmann::ordered_json& tools) {
  PLLM_TRY(check_chat_template_vars(vars));
  const bool has_vars = vars.is_object() && !vars.empty();
  if (mode == ChatTemplateMode::native || tmpl.empty()) {
    if (has_vars)
      return make_error(Status::unsupported, std::string("chat template variables need the model's own template; the "
                                                         "built-in ") + chat_family_name(family) +
                                                 " layout " + (tmpl.empty() ? "(this file has no template) " : "") +
                                                 "reads none");
    if (!tools.is_null())
      return make_error(Status::unsupported, "tools need the model's own template; the built-in layout renders them "
                                             "only as the tool prompt (constrained/tool_prompt.h) writes them");
    return render_chat(family, tmpl, messages, add_generation_prompt);
  }
  ChatContext ctx;
  ctx.messages = chat_messages_json(messages);
  ctx.add_generation_prompt = add_generation_prompt;
  ctx.tools = tools;
  if (has_vars) ctx.extra = vars;
  // As Hugging Face passes them: the tokens' text (encode_chat_prompt keeps one BOS).
  if (tok.bos() >= 0) ctx.bos_token = tok.token_to_piece(tok.bos(), /*render_special=*/true);
  if (tok.eos() >= 0) ctx.eos_token = tok.token_to_piece(tok.eos(), /*render_special=*/true);
  Result<std::string> text = render_chat_template(tmpl, ctx);
  if (!text.ok())
    return make_error(text.error().code, "the model's chat template: " + text.error().message +
                                             " (--chat-template native renders the built-in " +
                                             chat_family_name(family) + " layout instead)");
  return text;
}

Result<std::vector<TokenId>> encode_chat_prompt(const Tokenizer& tok, std::string_view text) {
  PLLM_ASSIGN(std::vector<TokenId> ids, tok.encode(text, /*add_special=*/true, /*parse_special=*/true));
  if (ids.size() >= 2 && tok.bos() >= 0 && ids[0] == tok.bos() && ids[1] == tok.bos()) ids.erase(ids.begin());
  return ids;
}

}  // namespace pllm
