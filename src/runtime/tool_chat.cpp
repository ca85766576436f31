#include "runtime/tool_chat.h"

#include "model/model.h"

namespace pllm {

ToolCallStyle model_tool_style(const Model& m, ChatTemplateMode mode) {
  ToolCallStyle style = detect_tool_call_style(m.chat_template(), &m.tokenizer());
  if (mode == ChatTemplateMode::native) style.renders_tools = style.renders_tool_calls = false;
  if (!style.renders_tools) style.format = ToolCallFormat::hermes;  // what the generic tool prompt teaches
  return style;
}

Result<ToolChatPrompt> render_tool_chat(const Model& m, std::vector<ChatMessage> messages, const ToolRequest& request,
                                        ChatTemplateMode mode, const ChatTemplateVars& vars,
                                        std::shared_ptr<const TokenVocab> vocab, bool add_generation_prompt) {
  const ToolCallStyle style = model_tool_style(m, mode);
  PLLM_ASSIGN(ToolConversation conv, tool_conversation(style, std::move(messages), request.tools));
  ToolChatPrompt out;
  if (!request.tools.empty()) {
    PLLM_ASSIGN(ToolGrammar g, tool_call_grammar(style.format, request.tools, request.choice, request.parallel));
    out.grammar = {std::move(g.grammar), std::move(vocab), std::move(g.triggers), g.refuse_triggers};
    if (request.choice.mode != ToolChoiceMode::none) out.format = style.format;
  }
  PLLM_ASSIGN(out.text, apply_chat_template(m, conv.messages, add_generation_prompt, mode, vars, conv.tools));
  return out;
}

}  // namespace pllm
