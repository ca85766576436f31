// Chat templates: recognise the family from tokenizer.chat_template and render turns.
#pragma once
#include <string>
#include <vector>

#include "base/result.h"

namespace pllm {

// A function call the assistant made (OpenAI's tool_calls[i]): arguments is JSON text.
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;
};

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string role_, std::string content_, std::vector<ToolCall> tool_calls_ = {},
              std::string tool_call_id_ = {}, std::string name_ = {})
      : role(std::move(role_)), content(std::move(content_)), tool_calls(std::move(tool_calls_)),
        tool_call_id(std::move(tool_call_id_)), name(std::move(name_)) {}
  std::string role;  // "system" | "user" | "assistant" | "tool"
  std::string content;
  std::vector<ToolCall> tool_calls;  // assistant turns that called tools
  std::string tool_call_id;          // a "tool" turn: the call it answers
  std::string name;                  // a "tool" turn: the function's name (when known)
};

// gemma: Gemma 2 / 3 (<start_of_turn>); gemma4: Gemma 4 (<|turn>, a system turn, thinking channels).
enum class ChatFamily { chatml, llama3, llama2, deepseek_r1, gemma, gemma4, zephyr, unknown };

// Detect the family from the Jinja source stored in the GGUF (empty -> chatml).
ChatFamily detect_chat_family(const std::string& jinja_template);
const char* chat_family_name(ChatFamily f);

// Render messages; add_generation_prompt appends the assistant header.
// The default system prompt of a template (e.g. SmolLM2's) is applied when the
// template declares one and no system message is given.
Result<std::string> render_chat(ChatFamily family, const std::string& jinja_template,
                                const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt);

// Text markers after which generation stops for this family (e.g. "<|im_end|>").
std::vector<std::string> chat_stop_strings(ChatFamily family);

}  // namespace pllm
