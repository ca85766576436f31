// The prompt side of tool calling: a conversation with tools and earlier calls made ready for a
// template, and calls written the way each format writes them.
#include <algorithm>

#include "constrained/tool_calls.h"

namespace pllm {
namespace {

using Json = nlohmann::ordered_json;

// A JSON value as a Python literal (JSON strings are Python strings; the keywords differ).
std::string python_literal(const Json& v) {
  if (v.is_null()) return "None";
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + python_literal(v[i]);
    return s + "]";
  }
  if (v.is_object()) {
    std::string s = "{";
    bool first = true;
    for (const auto& [k, x] : v.items()) {
      s += (first ? "" : ", ") + json_text(Json(k)) + ": " + python_literal(x);
      first = false;
    }
    return s + "}";
  }
  return json_text(v);
}

Result<Json> arguments_of(const ToolCall& c) {
  auto a = Json::parse(c.arguments, nullptr, false);
  if (a.is_discarded() || !a.is_object())
    return make_error(Status::invalid_argument, "the arguments of the call to '" + c.name + "' are not a JSON object");
  return a;
}

constexpr const char* kGenericInstructions =
    "You can call functions. Their signatures, as JSON Schema, are within <tools></tools>:\n<tools>\n";
constexpr const char* kGenericUsage =
    "</tools>\nTo call a function, reply with one JSON object per call within <tool_call></tool_call> tags:\n"
    "<tool_call>\n{\"name\": <function name>, \"arguments\": <the arguments as a JSON object>}\n</tool_call>\n"
    "When no function fits, answer normally.";

}  // namespace

Result<std::string> write_tool_calls(ToolCallFormat f, const std::vector<ToolCall>& calls) {
  std::string out;
  if (f == ToolCallFormat::pythonic) {
    out = "<|tool_call_start|>[";
    for (size_t i = 0; i < calls.size(); ++i) {
      PLLM_ASSIGN(Json args, arguments_of(calls[i]));
      out += (i ? ", " : "") + calls[i].name + "(";
      bool first = true;
      for (const auto& [k, v] : args.items()) {
        out += (first ? "" : ", ") + k + "=" + python_literal(v);
        first = false;
      }
      out += ")";
    }
    return out + "]<|tool_call_end|>";
  }
  const char* key = f == ToolCallFormat::llama3_json ? "parameters" : "arguments";
  std::vector<std::string> objs;
  for (const ToolCall& c : calls) {
    PLLM_ASSIGN(Json args, arguments_of(c));
    Json o = Json::object();
    o["name"] = c.name;
    o[key] = std::move(args);
    objs.push_back(json_text(o));
  }
  switch (f) {
    case ToolCallFormat::hermes:
      for (size_t i = 0; i < objs.size(); ++i) out += (i ? "\n" : "") + std::string("<tool_call>\n") + objs[i] + "\n</tool_call>";
      return out;
    case ToolCallFormat::llama3_json:
      for (size_t i = 0; i < objs.size(); ++i) out += (i ? "\n" : "") + objs[i];
      return out;
    case ToolCallFormat::phi4:
      out = "<|tool_call|>[";
      for (size_t i = 0; i < objs.size(); ++i) out += (i ? ", " : "") + objs[i];
      return out + "]<|/tool_call|>";
    case ToolCallFormat::pythonic: break;
  }
  return out;
}

Result<ToolConversation> tool_conversation(const ToolCallStyle& style, std::vector<ChatMessage> messages,
                                           const std::vector<ToolDefinition>& tools) {
  if (!style.unsupported.empty()) return make_error(Status::unsupported, "tools: " + style.unsupported);
  // Every tool turn answers a call made before it (by id when the calls carry ids).
  std::vector<std::string> open_ids;
  bool calls_seen = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (!m.tool_calls.empty()) {
      calls_seen = true;
      for (const ToolCall& c : m.tool_calls) {
        PLLM_TRY(arguments_of(c));
        if (!c.id.empty()) open_ids.push_back(c.id);
      }
    }
    if (m.role == "tool") {
      const std::string at = "messages[" + std::to_string(i) + "]";
      if (!calls_seen) return make_error(Status::invalid_argument, at + ": a tool result with no tool call before it");
      if (!m.tool_call_id.empty() && std::find(open_ids.begin(), open_ids.end(), m.tool_call_id) == open_ids.end())
        return make_error(Status::invalid_argument, at + ": tool_call_id '" + m.tool_call_id + "' answers no earlier call");
    }
  }
  ToolConversation out;
  if (style.renders_tools) {
    if (!tools.empty()) out.tools = tool_definitions_json(tools);
    if (!style.renders_tool_calls)
      for (ChatMessage& m : messages)
        if (!m.tool_calls.empty()) {
          PLLM_ASSIGN(std::string written, write_tool_calls(style.format, m.tool_calls));
          m.content += (m.content.empty() ? "" : "\n") + written;
          m.tool_calls.clear();
        }
    out.messages = std::move(messages);
    return out;
  }
  // A template with no tools of its own: the system turn explains them, calls and results
  // become text in the generic (hermes) format.
  for (ChatMessage& m : messages) {
    if (!m.tool_calls.empty()) {
      PLLM_ASSIGN(std::string written, write_tool_calls(ToolCallFormat::hermes, m.tool_calls));
      m.content += (m.content.empty() ? "" : "\n") + written;
      m.tool_calls.clear();
    } else if (m.role == "tool") {
      m.role = "user";
      m.content = "<tool_response>\n" + m.content + "\n</tool_response>";
      m.tool_call_id.clear();
      m.name.clear();
    }
  }
  if (!tools.empty()) {
    std::string text = kGenericInstructions;
    for (const Json& t : tool_definitions_json(tools)) text += json_text(t["function"]) + "\n";
    text += kGenericUsage;
    if (!messages.empty() && messages[0].role == "system") messages[0].content += "\n\n" + text;
    else messages.insert(messages.begin(), ChatMessage{"system", text, {}, {}, {}});
  }
  out.messages = std::move(messages);
  return out;
}

}  // namespace pllm
