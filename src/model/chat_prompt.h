// The prompt text of a conversation: the model's own chat template (tokenizer.chat_template,
// rendered by the Jinja interpreter, tokenizer/jinja/render.h) by default; the built-in
// layouts of tokenizer/chat_template.h only when asked for, or when the file has no template.
#pragma once
#include <nlohmann/json.hpp>
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

// Variables a template reads besides the conversation, by name (Hugging Face's
// apply_chat_template **kwargs, llama.cpp's chat_template_kwargs): {"enable_thinking": false}
// for Qwen3, ... A JSON object; null or {} for none.
using ChatTemplateVars = nlohmann::ordered_json;
// An error naming the key when `vars` is not an object of variables a caller may set (the
// conversation's own names: messages, tools, add_generation_prompt, bos_token, ... are not).
Result<void> check_chat_template_vars(const ChatTemplateVars& vars);
// `text` (a JSON object) as template variables, checked.
Result<ChatTemplateVars> parse_chat_template_vars(std::string_view text);

// The conversation as the model sees it, ready for encode_chat_prompt. A file without a
// template takes the built-in layout of its family (ChatML, or Gemma's turns for gemma
// files) in either mode; the built-in layouts read no variables (asking them for some is an
// error). tools: the template's `tools` variable (OpenAI-shaped definitions) or null; a
// template that does not render tools gets them through constrained/tool_prompt.h instead.
Result<std::string> apply_chat_template(const Model& m, const std::vector<ChatMessage>& messages,
                                        bool add_generation_prompt, ChatTemplateMode mode = ChatTemplateMode::file,
                                        const ChatTemplateVars& vars = nullptr,
                                        const nlohmann::ordered_json& tools = nullptr);
// The same for a template source, the family it is recognised as, and the vocabulary whose
// BOS / EOS text the template may write.
Result<std::string> apply_chat_template(const std::string& tmpl, ChatFamily family, const Tokenizer& tok,
                                        const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                        ChatTemplateMode mode = ChatTemplateMode::file,
                                        const ChatTemplateVars& vars = nullptr,
                                        const nlohmann::ordered_json& tools = nullptr);

// Tokens of a rendered prompt: special tokens parsed; BOS added where the model wants one,
// once (a template that writes {{ bos_token }} itself does not get a second).
Result<std::vector<TokenId>> encode_chat_prompt(const Tokenizer& tok, std::string_view text);

}  // namespace pllm
