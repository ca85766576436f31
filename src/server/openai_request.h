// The body of an OpenAI-style `POST /v1/chat/completions` or `/v1/completions`, parsed and
// checked before any work starts: a bad request is one 4xx with an OpenAI error body naming
// the parameter, never a silently dropped field or a truncated prompt. Pure (no I/O), so the
// fuzzer and the unit tests drive it directly.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "constrained/grammar_source.h"
#include "constrained/tool_calls.h"
#include "model/chat_prompt.h"
#include "model/sampling_config.h"
#include "tokenizer/chat_template.h"

namespace pllm::server {

struct ApiError {
  int http_status = 400;
  std::string type = "invalid_request_error";  // OpenAI's error.type
  std::string param;                           // the offending field, or ""
  std::string code;                            // e.g. "model_not_found", "context_length_exceeded"
  std::string message;
};

struct CompletionRequest {
  bool chat = true;
  std::string model;                  // as sent ("" when absent)
  std::vector<ChatMessage> messages;  // chat
  // The user turns' image parts in order (a kImageMarker in the content for each): their urls
  // as sent (server/image_input.h decodes data: URIs and refuses the rest).
  std::vector<std::string> image_urls;
  std::string prompt;                 // completions
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  int max_tokens = 0;                 // 0: until the context is full or the model stops
  SamplingConfig sampling;            // the model's defaults, overridden by the request
  std::vector<std::string> stop;      // at most 4
  int top_logprobs = -1;              // -1: no logprobs; else 0..20 alternatives per token
  // speculative.n_max (llama.cpp's field): guesses per verify pass with the server's drafter
  // (serve --draft); -1: the server's, 0: none for this request.
  int draft_max = -1;
  ChatTemplateVars template_vars;     // chat_template_kwargs (llama.cpp's name), e.g. enable_thinking
  // response_format json_object / json_schema, or `grammar` (GBNF, llama.cpp's field): the
  // source of the grammar the reply follows; compiled where the model's vocabulary is at hand.
  std::optional<GrammarKind> grammar_kind;
  std::string grammar_text;   // the GBNF, or the schema as JSON text
  std::string grammar_param;  // the request field it came from (errors name it)
  // Function calling: the tools (schemas with their key order), tool_choice, parallel_tool_calls.
  std::vector<ToolDefinition> tools;
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;
  bool uses_tools() const;  // tools given, or calls / results in the history
};

// defaults: the model's sampling defaults (seed included). Limits: at most 4 stop strings of
// <= 256 bytes, max_tokens >= 1, temperature in [0, 2], top_p in (0, 1], n == 1.
struct ParseResult {
  std::optional<CompletionRequest> request;
  ApiError error;  // when !request
};
ParseResult parse_completion_request(std::string_view body, bool chat, const SamplingConfig& defaults);

}  // namespace pllm::server
