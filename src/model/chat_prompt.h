// The prompt text of a conversation: the model's own chat template (tokenizer.chat_template,
// rendered by the Jinja interpreter, tokenizer/jinja/render.h) by default; the built-in
// layouts of tokenizer/chat_template.h only when asked for, or when the file has no template.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace pllm {

class Model;


enum class ChatTemplateMode : uint8_t {
  file,    // the file's template, rendered; an error if it cannot be
  native,  // the built-in layout of the family the template is recognised as
};
std::string_view chat_template_mode_name(ChatTemplateMode m);  // "file" | "native"
std::optional<ChatTemplateMode> parse_chat_template_mode(std::string_view word);

// The conversation as the model sees it, ready for encode_chat_prompt. A file without a
// template takes the built-in layout of its family (ChatML, or Gemma's turns for gemma
// files) in either mode.
Result<std::string> apply_chat_template(const Model& m, const std::vector<ChatMessage>& messages,
                                        bool add_generation_prompt, ChatTemplateMode mode = ChatTemplateMode::file);
// The same for a template source, the family it is recognised as, and the vocabulary whose
// BOS / EOS text the template may write.
Result<std::string> apply_chat_template(const std::string& tmpl, ChatFamily family, const Tokenizer& tok,
                                        const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                        ChatTemplateMode mode = ChatTemplateMode::file);

// Tokens of a rendered prompt: special tokens parsed; BOS added where the model wants one,
// once (a template that writes {{ bos_token }} itself does not get a second).
Result<std::vector<TokenId>> encode_chat_prompt(const Tokenizer& tok, std::string_view text);

}  // namespace pllm
