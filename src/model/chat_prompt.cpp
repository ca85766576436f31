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

Result<std::string> apply_chat_template(const Model& m, const std::vector<ChatMessage>& messages,
                                        bool add_generation_prompt, ChatTemplateMode mode) {
  return apply_chat_template(m.chat_template(), m.chat_family(), m.tokenizer(), messages, add_generation_prompt,
                             mode);
}

Result<std::string> apply_chat_template(const std::string& tmpl, ChatFamily family, const Tokenizer& tok,
                                        const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                        ChatTemplateMode mode) {
  if (mode == ChatTemplateMode::native || tmpl.empty())
    return render_chat(family, tmpl, messages, add_generation_prompt);
  ChatContext ctx;
  ctx.messages = chat_messages_json(messages);
  ctx.add_generation_prompt = add_generation_prompt;
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
