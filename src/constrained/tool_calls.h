// Tool (function) calling: the definitions an app passes, how the model's family writes a call,
// the grammar that makes its calls valid, and the parser that reads them back.
//
// Each family writes calls its own way (ToolCallFormat). A request's tools give a grammar that
// is lazy under tool_choice "auto" (the model writes free text until it starts a call, the
// trigger, and the grammar holds from there), active from the first token under "required" or
// a named function, and absent under "none", where starting a call is refused instead. The
// reply is then parsed into content and calls, whole (parse_tool_reply) or as it streams
// (ToolCallStream: OpenAI's delta.tool_calls, the id and name once, then argument fragments).
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "constrained/grammar.h"
#include "tokenizer/chat_template.h"

namespace pllm {

class Tokenizer;

struct ToolDefinition {
  std::string name;
  std::string description;
  nlohmann::ordered_json parameters;  // a JSON Schema of the arguments object
};

// OpenAI's `tools`: [{"type": "function", "function": {"name", "description", "parameters",
// "strict"}}]. Errors name the entry ("tools[2].function.name: ...").
Result<std::vector<ToolDefinition>> parse_tool_definitions(const nlohmann::ordered_json& tools);
// The definitions as OpenAI's `tools` list (what a template's `tools` variable holds).
nlohmann::ordered_json tool_definitions_json(const std::vector<ToolDefinition>& tools);

enum class ToolChoiceMode { none, automatic, required, function };
struct ToolChoice {
  ToolChoiceMode mode = ToolChoiceMode::automatic;
  std::string function;  // mode == function
};
// "none" | "auto" | "required" | {"type": "function", "function": {"name": ...}}; a name not
// among the tools is an error.
Result<ToolChoice> parse_tool_choice(const nlohmann::ordered_json& choice, const std::vector<ToolDefinition>& tools);

// How a family writes its calls.
enum class ToolCallFormat {
  hermes,       // <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>: Qwen2.5/3, Hermes, Granite,
                // and every template without tools of its own (the generic prompt teaches it)
  llama3_json,  // {"name": ..., "parameters": {...}} as the whole reply (<|python_tag|> optional): Llama 3.x
  pythonic,     // <|tool_call_start|>[name(key=value, ...)]<|tool_call_end|>: LFM2
  phi4,         // <|tool_call|>[{"name": ..., "arguments": {...}}]<|/tool_call|>: Phi-4-mini
};
const char* tool_call_format_name(ToolCallFormat f);
// The formats' marker texts. A vocabulary that holds one as a control token spells it in the
// matcher's vocabulary (TokenVocab::build), so grammars and the parser can read it as text.
const std::vector<std::string>& tool_call_markers();

// What a model's chat template does with tools.
struct ToolCallStyle {
  ToolCallFormat format = ToolCallFormat::hermes;
  bool renders_tools = false;       // the template writes the `tools` variable into the prompt
  bool renders_tool_calls = false;  // ...and an assistant turn's tool_calls
  std::string unsupported;          // non-empty: a format not implemented (the reason)
};
// From the template source and the vocabulary (LFM2's markers are tokens; null: none known).
ToolCallStyle detect_tool_call_style(const std::string& chat_template, const Tokenizer* tok = nullptr);

struct ToolGrammar {
  std::shared_ptr<const Grammar> grammar;  // null under tool_choice none
  std::vector<GrammarTrigger> triggers;    // where a call starts; empty: the grammar holds from the first token
  bool refuse_triggers = false;            // tool_choice none: a trigger may never be written
};
// parallel: several calls in one reply (OpenAI's parallel_tool_calls); a named function is
// called once.
Result<ToolGrammar> tool_call_grammar(ToolCallFormat f, const std::vector<ToolDefinition>& tools,
                                      const ToolChoice& choice, bool parallel);

// The reply split into text and calls. A call that does not parse (a reply cut off by
// max_tokens) stays in the content as written.
struct ToolReply {
  std::string content;
  std::vector<ToolCall> calls;  // arguments: compact JSON text
};
// id_prefix + index names the calls ("call_7_0", ...).
ToolReply parse_tool_reply(ToolCallFormat f, std::string_view text, const std::string& id_prefix);

// OpenAI's message.tool_calls: [{"id", "type": "function", "function": {"name", "arguments"}}].
nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls);
// Compact JSON text that never throws: bytes that are not UTF-8 (a model may write any) become U+FFFD.
std::string json_text(const nlohmann::ordered_json& j);

// One streamed piece of a call (OpenAI's delta.tool_calls[i]): id and name only in the first
// piece of each call, then argument fragments that concatenate to the arguments' JSON text.
struct ToolCallDelta {
  int index = 0;
  std::string id, name;
  std::string arguments;
};
struct ToolStreamDelta {
  std::string content;
  std::vector<ToolCallDelta> calls;
};
class ToolCallStream {
 public:
  ToolCallStream(ToolCallFormat f, std::string id_prefix);
  ~ToolCallStream();
  ToolCallStream(ToolCallStream&&) noexcept;
  // The reply's next bytes; returns what can be sent now (text that may still turn into a
  // call's marker is held back).
  ToolStreamDelta push(std::string_view bytes);
  // The end of the reply: whatever was held back.
  ToolStreamDelta finish();
  const std::vector<ToolCall>& calls() const;  // the calls read whole so far (arguments compact JSON)
  // The reply so far as parse_tool_reply gives it: the content sent (trimmed beside calls) and the calls.
  ToolReply reply() const;

 private:
  struct State;
  std::unique_ptr<State> st_;
};

// A call written the way the format writes it (for an assistant turn in the history when the
// template does not render tool_calls itself). arguments: JSON text of an object.
Result<std::string> write_tool_calls(ToolCallFormat f, const std::vector<ToolCall>& calls);

// The conversation and `tools` variable a template is rendered with: templates that render
// tools get them as they are; for the others the tools and the call format are explained in
// the system turn, earlier calls are written into their assistant turns and tool results
// become user turns (<tool_response>). Errors: a tool turn that answers no earlier call.
struct ToolConversation {
  std::vector<ChatMessage> messages;
  nlohmann::ordered_json tools;  // the template's `tools` variable (null when it does not read it)
};
Result<ToolConversation> tool_conversation(const ToolCallStyle& style, std::vector<ChatMessage> messages,
                                           const std::vector<ToolDefinition>& tools);

}  // namespace pllm
