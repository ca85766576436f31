// The grammar of a reply's tool calls: the tools' argument schemas (JSON Schema, compiled by
// json_schema.h) inside the family's call syntax.
#include "constrained/json_schema.h"
#include "constrained/tool_calls.h"

namespace pllm {
namespace {

using Json = nlohmann::ordered_json;

// Rewrites the schema's local references ("#/$defs/x") to where it now sits ("#" + base).
void rebase_refs(Json& j, const std::string& base) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "$ref" && it.value().is_string()) {
        const std::string ref = it.value().get<std::string>();
        if (!ref.empty() && ref[0] == '#') it.value() = "#" + base + ref.substr(1);
      } else {
        rebase_refs(it.value(), base);
      }
    }
  } else if (j.is_array()) {
    for (auto& x : j) rebase_refs(x, base);
  }
}

Json arguments_schema(const ToolDefinition& t, const std::string& base) {
  Json p = t.parameters;
  p.erase("$schema");
  p.erase("$id");
  rebase_refs(p, base);
  return p;
}

const char* arguments_key(ToolCallFormat f) { return f == ToolCallFormat::llama3_json ? "parameters" : "arguments"; }

// One call of any allowed tool, as the anyOf of one schema per tool.
Json calls_schema(ToolCallFormat f, const std::vector<const ToolDefinition*>& tools) {
  Json any = Json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ToolDefinition& t = *tools[i];
    const std::string at = "/anyOf/" + std::to_string(i);
    if (f == ToolCallFormat::pythonic) {
      Json call = arguments_schema(t, at);
      call["type"] = "object";
      call[kPythonCallKey] = t.name;
      any.push_back(std::move(call));
      continue;
    }
    const char* key = arguments_key(f);
    Json props = Json::object();
    props["name"] = Json{{"const", t.name}};
    props[key] = arguments_schema(t, at + "/properties/" + key);
    any.push_back(Json{{"type", "object"},
                       {"properties", std::move(props)},
                       {"required", Json::array({"name", key})},
                       {"additionalProperties", false}});
  }
  return Json{{"anyOf", std::move(any)}};
}

// The call syntax around the calls ("tc-call"); repeated when parallel.
std::string syntax_gbnf(ToolCallFormat f, bool parallel) {
  std::string g = "tc-ws ::= [ \\t\\n]{0,4}\n";
  switch (f) {
    case ToolCallFormat::hermes:
      g += "tc-block ::= \"<tool_call>\" tc-ws tc-call tc-ws \"</tool_call>\"\n";
      g += std::string("root ::= tc-ws tc-block") + (parallel ? " (tc-ws tc-block)*" : "") + "\n";
      break;
    case ToolCallFormat::llama3_json:  // Llama 3.x writes one call per reply
      g += "root ::= tc-ws \"<|python_tag|>\"? tc-call\n";
      break;
    case ToolCallFormat::pythonic:
      g += std::string("root ::= tc-ws \"<|tool_call_start|>[\" tc-call") + (parallel ? " (\",\" tc-ws tc-call)*" : "") +
           " \"]<|tool_call_end|>\"\n";
      break;
    case ToolCallFormat::phi4:
      g += std::string("root ::= tc-ws \"<|tool_call|>[\" tc-ws tc-call") +
           (parallel ? " (tc-ws \",\" tc-ws tc-call)*" : "") + " tc-ws \"]<|/tool_call|>\"\n";
      break;
  }
  return g;
}

std::vector<GrammarTrigger> triggers(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::hermes: return {{"<tool_call>", false}};
    case ToolCallFormat::llama3_json: return {{"<|python_tag|>", true}, {"{", true}};
    case ToolCallFormat::pythonic: return {{"<|tool_call_start|>", false}};
    case ToolCallFormat::phi4: return {{"<|tool_call|>", false}};
  }
  return {};
}

}  // namespace

Result<ToolGrammar> tool_call_grammar(ToolCallFormat f, const std::vector<ToolDefinition>& tools,
                                      const ToolChoice& choice, bool parallel) {
  ToolGrammar out;
  out.triggers = triggers(f);
  if (choice.mode == ToolChoiceMode::none) {
    out.refuse_triggers = true;
    return out;
  }
  std::vector<const ToolDefinition*> allowed;
  for (const auto& t : tools)
    if (choice.mode != ToolChoiceMode::function || t.name == choice.function) allowed.push_back(&t);
  if (allowed.empty()) return make_error(Status::invalid_argument, "tools: there is no tool to call");
  JsonSchemaOptions opts;
  opts.max_whitespace = 1;  // one space or newline between tokens: a call stays short (a small model pads otherwise)
  opts.root_name = "tc-call";
  opts.reserved_names = {"tc-ws", "tc-block"};
  opts.python = f == ToolCallFormat::pythonic;
  auto gbnf = json_schema_to_gbnf(calls_schema(f, allowed), opts);
  if (!gbnf.ok()) {
    // Name the tool whose schema failed, and the pointer within its parameters (the compiled
    // schema holds them at /anyOf/<i>/properties/<arguments key>, or /anyOf/<i> for pythonic).
    std::string msg = gbnf.error().message;
    const size_t at = msg.find(" at /anyOf/");
    if (at != std::string::npos) {
      char* end = nullptr;
      const size_t i = std::strtoul(msg.c_str() + at + 11, &end, 10);
      std::string rest = end ? std::string(end) : std::string();
      const std::string inner = std::string("/properties/") + arguments_key(f);
      if (f != ToolCallFormat::pythonic && rest.rfind(inner, 0) == 0) rest = rest.substr(inner.size());
      if (i < allowed.size())
        msg = "tool '" + allowed[i]->name + "': " + msg.substr(0, at) + " at parameters" +
              (rest.empty() || rest[0] == ':' ? "/" + rest : rest);
    }
    return make_error(gbnf.error().code, "tools: " + msg);
  }
  // Naming one function asks for one call of it (as OpenAI answers such a request).
  PLLM_ASSIGN(out.grammar, parse_gbnf(*gbnf + syntax_gbnf(f, parallel && choice.mode != ToolChoiceMode::function)));
  if (choice.mode != ToolChoiceMode::automatic) out.triggers.clear();  // a call from the first token
  return out;
}

}  // namespace pllm
