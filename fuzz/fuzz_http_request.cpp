// The body of a completion request (POST /v1/chat/completions and /v1/completions), as a
// client sends it: JSON of any shape, types and sizes, or not JSON at all. The parser must
// answer every input with a request or one 4xx error, never throw or crash; an accepted chat
// request must then render with every chat template, and an error body must serialise (its
// message may quote bytes that are not UTF-8); its image parts' urls go through the data: URI
// decoder (base64), which answers bytes or one invalid_argument.
// Input: the first byte picks chat or completions; the rest is the body.
#include <cstdint>
#include <string_view>

#include "server/image_input.h"
#include "server/openai_request.h"
#include "server/server_impl.h"
#include "tokenizer/chat_template.h"

using namespace pllm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool chat = (data[0] & 1) == 0;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  const server::ParseResult r = server::parse_completion_request(body, chat, SamplingConfig{});
  if (!r.request) {
    if (r.error.http_status < 400 || r.error.http_status > 499 || r.error.message.empty()) __builtin_trap();
    (void)server::dump(server::error_body(r.error));
    return 0;
  }
  const server::CompletionRequest& req = *r.request;
  if (req.chat != chat || req.stop.size() > 4 || req.top_logprobs > 20) __builtin_trap();
  for (const std::string& url : req.image_urls) {
    auto bytes = server::data_uri_bytes(url);
    if (!bytes.ok() && (bytes.error().code != Status::invalid_argument || bytes.error().message.empty())) __builtin_trap();
  }
  if (chat) {
    for (const ChatFamily f : {ChatFamily::chatml, ChatFamily::llama3, ChatFamily::gemma})
      (void)render_chat(f, "", req.messages, /*add_generation_prompt=*/true);
  }
  return 0;
}
