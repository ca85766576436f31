// Rendering a model's own chat template (tokenizer.chat_template) with the variables Hugging
// Face's apply_chat_template passes: messages, tools, documents, add_generation_prompt, the
// special tokens and any extra variables (enable_thinking, ...); globals raise_exception and
// strftime_now. A template that cannot be rendered is one error, never a crash or a hang.
#pragma once
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/jinja/interpreter.h"

namespace pllm {

struct ChatContext {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // OpenAI-shaped message objects
  nlohmann::ordered_json tools;      // null (HF passes None) or a list of JSON schemas
  nlohmann::ordered_json documents;  // null or a list
  bool add_generation_prompt = false;
  std::string bos_token, eos_token;
  std::optional<bool> enable_thinking;  // unset: the template's own default
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // more variables, by name
  std::optional<std::time_t> now;  // strftime_now's clock (local time); unset: the current time
};

// Render `source` with `variables` (a JSON object: each key a template variable).
Result<std::string> render_template(const std::string& source, const nlohmann::ordered_json& variables,
                                    std::optional<std::time_t> now = std::nullopt,
                                    const jinja::Limits& limits = jinja::Limits{});

Result<std::string> render_chat_template(const std::string& source, const ChatContext& ctx);

// The engine's chat messages as a ChatContext's messages (OpenAI's shape: tool_calls with their
// arguments parsed, tool_call_id, name).
nlohmann::ordered_json chat_messages_json(const std::vector<ChatMessage>& messages);

}  // namespace pllm
