// A conversation with tools made ready to generate from: the prompt as the model's template
// writes it (or the generic tool prompt), and the constraint that keeps the reply's calls valid.
// The one path the server and the C API take from a request with tools to a prompt and a grammar.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "constrained/tool_calls.h"
#include "model/chat_prompt.h"
#include "runtime/sampler.h"

namespace pllm {

class Model;

struct ToolRequest {
  std::vector<ToolDefinition> tools;
  ToolChoice choice;
  bool parallel = true;
};

// How this model writes calls (its template's format, or hermes through the generic prompt when
// the template has no tools of its own or the built-in layouts are asked for).
ToolCallStyle model_tool_style(const Model& m, ChatTemplateMode mode);

// What a reply with tools is held to and read back with.
struct ToolConstraint {
  GrammarConstraint grammar;             // the calls' grammar (lazy under auto)
  std::optional<ToolCallFormat> format;  // set when the reply is to be parsed for calls (not under none)
};
// The tools' constraint for this model. Errors start "tools" (an unsupported call format, a
// parameter keyword the schema compiler cannot enforce).
Result<ToolConstraint> tool_constraint(const Model& m, ChatTemplateMode mode, const ToolRequest& request,
                                       std::shared_ptr<const TokenVocab> vocab);

// The prompt of a conversation with tools (none: earlier calls and tool results still render).
// Errors that concern the tools start "tools"; the others concern the messages.
Result<std::string> tool_chat_prompt(const Model& m, std::vector<ChatMessage> messages,
                                     const std::vector<ToolDefinition>& tools, ChatTemplateMode mode,
                                     const ChatTemplateVars& vars, bool add_generation_prompt = true);

}  // namespace pllm
