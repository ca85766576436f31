#include "runtime/tool_chat.h"

#include "model/model.h"

namespace pllm {

ToolCallStyle model_tool_style(const Model& m, ChatTemplateMode mode) {
  ToolCallStyle style = detect_tool_call_style(m.chat_template(), &m.tokenizer());
  if (mode == ChatTemplateMode::native) style.renders_tools = style.renders_tool_calls = false;
  if (!style.renders_tools) style.format = ToolCallFormat::hermes;  // what the generic tool prompt teaches
  return style;
}

Result<ToolConstraint> tool_constraint(const Model& m, ChatTemplateMode mode, const ToolRequest& request,
                                       std::shared_ptr<const TokenVocab> vocab) {
  const ToolCallStyle style = model_tool_style(m, mode);
  if (!style.unsupported.empty()) return make_error(Status::unsupported, "tools: " + style.unsupported);
  PLLM_ASSIGN(ToolGrammar g, tool_call_grammar(style.format, request.tools, request.choice, request.parallel));
  ToolConstraint out;
  out.grammar = {std::move(g.grammar), std::move(vocab), std::move(g.triggers), g.refuse_triggers};
  if (request.choice.mode != ToolChoiceMode::none) out.format = style.format;
  return out;
}

Result<std::string> tool_chat_prompt(const Model& m, std::vector<ChatMessage> messages,
                                     const std::vector<ToolDefinition>& tools, ChatTemplateMode mode,
                                     const ChatTemplateVars& vars, bool add_generation_prompt) {
  PLLM_ASSIGN(ToolConversation conv, tool_conversation(model_tool_style(m, mode), std::move(messages), tools));
  return apply_chat_template(m, conv.messages, add_generation_prompt, mode, vars, conv.tools);
}

}  // namespace pllm
