// Chat messages as OpenAI's API writes them (JSON): roles system/developer/user/assistant/tool,
// content as a string or text parts, an assistant's tool_calls, a tool turn's tool_call_id. The
// one reader of that shape, for the server's requests and the C API's JSON conversations.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"
#include "tokenizer/chat_template.h"

namespace pllm {

// Image content parts of user turns, for a caller with a vision encoder: each part is `marker`
// in the message's text (where the image goes), its url (as sent: a data: URI, or a remote URL
// the caller refuses) appended to urls. Without one, an image part is an error.
struct ImageParts {
  std::string marker;
  std::vector<std::string> urls;
};

// Status::invalid_argument reading "<field>: <why>" (e.g. "messages[2].tool_call_id: ..."),
// the field first so an API can name it.
Result<std::vector<ChatMessage>> parse_chat_messages(const nlohmann::json& messages, ImageParts* images = nullptr);

}  // namespace pllm
