// Tool definitions and tool_choice as OpenAI sends them, and which call format a model uses.
#include "constrained/tool_calls.h"
#include "tokenizer/tokenizer.h"

namespace pllm {
namespace {

using Json = nlohmann::ordered_json;

Error bad(const std::string& where, const std::string& why) {
  return make_error(Status::invalid_argument, where + ": " + why);
}

bool contains(const std::string& s, std::string_view needle) { return s.find(needle) != std::string::npos; }

}  // namespace

Result<std::vector<ToolDefinition>> parse_tool_definitions(const Json& tools) {
  if (!tools.is_array()) return bad("tools", "must be an array of {\"type\": \"function\", \"function\": {...}}");
  std::vector<ToolDefinition> out;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string at = "tools[" + std::to_string(i) + "]";
    const Json& t = tools[i];
    if (!t.is_object()) return bad(at, "must be an object");
    if (!t.contains("type") || t["type"] != "function") return bad(at + ".type", "must be \"function\"");
    if (!t.contains("function") || !t["function"].is_object()) return bad(at + ".function", "must be an object");
    const Json& f = t["function"];
    ToolDefinition d;
    if (!f.contains("name") || !f["name"].is_string()) return bad(at + ".function.name", "must be a string");
    d.name = f["name"].get<std::string>();
    // OpenAI's rule: letters, digits, '_' and '-', at most 64 (the name is written into prompts
    // and grammars, so it is checked, not trusted).
    if (d.name.empty() || d.name.size() > 64) return bad(at + ".function.name", "must be 1 to 64 characters");
    for (char c : d.name)
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
        return bad(at + ".function.name", "'" + d.name + "' may hold only letters, digits, '_' and '-'");
    for (const auto& prev : out)
      if (prev.name == d.name) return bad(at + ".function.name", "'" + d.name + "' is defined twice");
    if (f.contains("description") && !f["description"].is_null()) {
      if (!f["description"].is_string()) return bad(at + ".function.description", "must be a string");
      d.description = f["description"].get<std::string>();
    }
    if (f.contains("strict") && !f["strict"].is_null() && !f["strict"].is_boolean())
      return bad(at + ".function.strict", "must be true or false");
    if (f.contains("parameters") && !f["parameters"].is_null()) {
      d.parameters = f["parameters"];
      if (!d.parameters.is_object()) return bad(at + ".function.parameters", "must be a JSON Schema object");
      if (d.parameters.contains("type") && d.parameters["type"] != "object")
        return bad(at + ".function.parameters", "the arguments' schema must have type \"object\"");
    } else {
      d.parameters = Json{{"type", "object"}, {"properties", Json::object()}, {"additionalProperties", false}};
    }
    out.push_back(std::move(d));
  }
  return out;
}

Json tool_definitions_json(const std::vector<ToolDefinition>& tools) {
  Json out = Json::array();
  for (const auto& t : tools) {
    Json f = Json::object();
    f["name"] = t.name;
    if (!t.description.empty()) f["description"] = t.description;
    f["parameters"] = t.parameters;
    out.push_back(Json{{"type", "function"}, {"function", std::move(f)}});
  }
  return out;
}

Result<ToolChoice> parse_tool_choice(const Json& choice, const std::vector<ToolDefinition>& tools) {
  ToolChoice c;
  if (choice.is_null()) return c;
  if (choice.is_string()) {
    const std::string s = choice.get<std::string>();
    if (s == "none") c.mode = ToolChoiceMode::none;
    else if (s == "auto") c.mode = ToolChoiceMode::automatic;
    else if (s == "required") c.mode = ToolChoiceMode::required;
    else return bad("tool_choice", "'" + s + "' is not one of none, auto, required or a function object");
  } else if (choice.is_object()) {
    if (!choice.contains("type") || choice["type"] != "function")
      return bad("tool_choice", "an object tool_choice must have \"type\": \"function\"");
    if (!choice.contains("function") || !choice["function"].is_object() || !choice["function"].contains("name") ||
        !choice["function"]["name"].is_string())
      return bad("tool_choice", "an object tool_choice needs \"function\": {\"name\": ...}");
    c.mode = ToolChoiceMode::function;
    c.function = choice["function"]["name"].get<std::string>();
    bool known = false;
    for (const auto& t : tools) known = known || t.name == c.function;
    if (!known) return bad("tool_choice", "the function '" + c.function + "' is not among the tools");
  } else {
    return bad("tool_choice", "must be a string or a function object");
  }
  if (c.mode != ToolChoiceMode::none && tools.empty())
    return bad("tool_choice", "needs 'tools' (there is nothing to call)");
  return c;
}

const char* tool_call_format_name(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::hermes: return "hermes";
    case ToolCallFormat::llama3_json: return "llama3-json";
    case ToolCallFormat::pythonic: return "pythonic";
    case ToolCallFormat::phi4: return "phi4";
  }
  return "?";
}

const std::vector<std::string>& tool_call_markers() {
  static const std::vector<std::string> markers = {"<tool_call>",         "</tool_call>",      "<|python_tag|>",
                                                   "<|tool_call_start|>", "<|tool_call_end|>", "<|tool_call|>",
                                                   "<|/tool_call|>"};
  return markers;
}

ToolCallStyle detect_tool_call_style(const std::string& t, const Tokenizer* tok) {
  ToolCallStyle s;
  s.renders_tools = contains(t, "tools");
  s.renders_tool_calls = contains(t, "tool_calls");
  auto has_token = [&](std::string_view text) { return tok && tok->find_token(text) >= 0; };
  if (contains(t, "<function=") || contains(t, "<function name=")) {
    s.unsupported = "this template's XML tool-call format (<function=...>) is not implemented yet";
  } else if (contains(t, "<|tool_call>")) {
    s.unsupported = "Gemma 4's tool-call format is not implemented yet";
  } else if (contains(t, "<tool_call>")) {
    s.format = ToolCallFormat::hermes;
  } else if (contains(t, "<|python_tag|>") || (contains(t, "<|start_header_id|>") && s.renders_tools)) {
    s.format = ToolCallFormat::llama3_json;
  } else if (contains(t, "<|tool_call_start|>") || has_token("<|tool_call_start|>")) {
    s.format = ToolCallFormat::pythonic;
  } else if (contains(t, "<|tool|>") || has_token("<|/tool_call|>")) {
    s.format = ToolCallFormat::phi4;
  } else {
    // No tools of its own (SmolLM2, Gemma 2/3, Phi-3.5, ...): the generic prompt teaches the
    // hermes format, and the grammar keeps the model to it.
    s.format = ToolCallFormat::hermes;
    s.renders_tools = s.renders_tool_calls = false;
  }
  return s;
}

}  // namespace pllm
