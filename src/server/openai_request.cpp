#include "server/openai_request.h"

#include <cmath>

#include <nlohmann/json.hpp>

namespace pllm::server {
namespace {

using json = nlohmann::json;

struct Bad {
  ApiError e;
};

[[noreturn]] void bad(std::string param, std::string message, std::string code = "") {
  throw Bad{ApiError{400, "invalid_request_error", std::move(param), std::move(code), std::move(message)}};
}

double number(const json& j, const char* key, double lo, double hi, bool lo_open = false) {
  const json& v = j.at(key);
  if (!v.is_number()) bad(key, std::string("'") + key + "' must be a number");
  const double x = v.get<double>();
  if (!std::isfinite(x) || x > hi || x < lo || (lo_open && x == lo))
    bad(key, std::string("'") + key + "' is out of range");
  return x;
}

int64_t integer(const json& j, const char* key, int64_t lo, int64_t hi) {
  const json& v = j.at(key);
  if (!v.is_number_integer()) bad(key, std::string("'") + key + "' must be an integer");
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) bad(key, std::string("'") + key + "' must be in [" + std::to_string(lo) + ", " +
                                     std::to_string(hi) + "]");
  return x;
}

bool boolean(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_boolean()) bad(key, std::string("'") + key + "' must be true or false");
  return v.get<bool>();
}

// "content": a string, or an array of {"type": "text", "text": ...} parts (concatenated).
std::string content_text(const json& c, const std::string& where) {
  if (c.is_string()) return c.get<std::string>();
  if (c.is_null()) return "";
  if (!c.is_array()) bad(where, "'" + where + "' must be a string or an array of text parts");
  std::string out;
  for (const json& part : c) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
      bad(where, "only text content parts ({\"type\": \"text\", \"text\": ...}) are supported");
    out += part["text"].get<std::string>();
  }
  return out;
}

// An assistant turn's tool_calls: [{"id", "type": "function", "function": {"name", "arguments"}}],
// arguments JSON text of an object (as OpenAI sends them; an object is taken too).
std::vector<ToolCall> tool_calls_of(const json& calls, const std::string& where) {
  if (!calls.is_array()) bad(where, "'" + where + "' must be an array");
  std::vector<ToolCall> out;
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    const json& c = calls[i];
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
      bad(at, "'" + at + "' must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}");
    if (c.contains("type") && c["type"] != "function") bad(at + ".type", "'" + at + ".type' must be \"function\"");
    const json& f = c["function"];
    if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty())
      bad(at + ".function.name", "'" + at + ".function.name' must be a non-empty string");
    ToolCall call;
    call.name = f["name"].get<std::string>();
    if (c.contains("id") && !c["id"].is_null()) {
      if (!c["id"].is_string()) bad(at + ".id", "'" + at + ".id' must be a string");
      call.id = c["id"].get<std::string>();
    }
    const json& a = f.contains("arguments") ? f["arguments"] : json();
    json args = a.is_string() ? json::parse(a.get<std::string>(), nullptr, false) : a;
    if (args.is_discarded() || !args.is_object())
      bad(at + ".function.arguments", "'" + at + ".function.arguments' must be a JSON object (as text)");
    call.arguments = a.is_string() ? a.get<std::string>() : a.dump();
    out.push_back(std::move(call));
  }
  return out;
}

void parse_messages(const json& j, CompletionRequest& r) {
  if (!j.contains("messages")) bad("messages", "'messages' is required");
  const json& ms = j["messages"];
  if (!ms.is_array() || ms.empty()) bad("messages", "'messages' must be a non-empty array");
  for (size_t i = 0; i < ms.size(); ++i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    const json& m = ms[i];
    if (!m.is_object()) bad(where, "'" + where + "' must be an object");
    if (!m.contains("role") || !m["role"].is_string()) bad(where + ".role", "'" + where + ".role' must be a string");
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";  // OpenAI's newer name for the system role
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      bad(where + ".role", "role '" + role + "' is not supported (system, developer, user, assistant, tool)");
    ChatMessage msg{role, "", {}, {}, {}};
    const bool calls = role == "assistant" && m.contains("tool_calls") && !m["tool_calls"].is_null();
    if (!m.contains("content") && !calls) bad(where + ".content", "'" + where + ".content' is required");
    if (m.contains("content")) msg.content = content_text(m["content"], where + ".content");
    if (calls) msg.tool_calls = tool_calls_of(m["tool_calls"], where + ".tool_calls");
    if (role == "tool") {
      if (!m.contains("tool_call_id") || !m["tool_call_id"].is_string())
        bad(where + ".tool_call_id", "a tool message needs 'tool_call_id' (the id of the call it answers)");
      msg.tool_call_id = m["tool_call_id"].get<std::string>();
      if (m.contains("name") && m["name"].is_string()) msg.name = m["name"].get<std::string>();
    }
    r.messages.push_back(std::move(msg));
  }
}

void parse_prompt(const json& j, CompletionRequest& r) {
  if (!j.contains("prompt")) bad("prompt", "'prompt' is required");
  const json& p = j["prompt"];
  if (p.is_string()) {
    r.prompt = p.get<std::string>();
  } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
    r.prompt = p[0].get<std::string>();
  } else {
    bad("prompt", "'prompt' must be a string (or an array of one string)");
  }
  if (r.prompt.empty()) bad("prompt", "'prompt' must not be empty");
  if (j.contains("echo") && !j["echo"].is_null() && boolean(j, "echo")) bad("echo", "'echo' is not supported");
  if (j.contains("suffix") && !j["suffix"].is_null()) bad("suffix", "'suffix' is not supported");
}

void parse_stop(const json& j, CompletionRequest& r) {
  const json& s = j["stop"];
  if (s.is_null()) return;
  std::vector<json> items;
  if (s.is_string()) items.push_back(s);
  else if (s.is_array()) items.assign(s.begin(), s.end());
  else bad("stop", "'stop' must be a string or an array of strings");
  if (items.size() > 4) bad("stop", "at most 4 stop sequences");
  for (const json& x : items) {
    if (!x.is_string()) bad("stop", "'stop' must be a string or an array of strings");
    std::string v = x.get<std::string>();
    if (v.empty() || v.size() > 256) bad("stop", "stop sequences must be 1..256 bytes");
    r.stop.push_back(std::move(v));
  }
}

// response_format: {"type": "text" | "json_object"} or {"type": "json_schema", "json_schema":
// {"name": ..., "schema": {...}, "strict": ...}}. The grammar enforces the schema whether or
// not strict is set (a schema keyword it cannot enforce is an error either way, never ignored).
void response_format(const json& f, CompletionRequest& r) {
  if (!f.is_object() || !f.contains("type") || !f["type"].is_string())
    bad("response_format", "'response_format' must be an object with a 'type'");
  const std::string type = f["type"].get<std::string>();
  if (type == "text") return;
  r.grammar_param = "response_format";
  if (type == "json_object") {  // OpenAI's JSON mode: one JSON object
    r.grammar_kind = GrammarKind::json_schema;
    r.grammar_text = R"({"type": "object"})";
    return;
  }
  if (type != "json_schema")
    bad("response_format", "response_format type '" + type + "' is not one of text, json_object, json_schema");
  if (!f.contains("json_schema") || !f["json_schema"].is_object())
    bad("response_format", "response_format json_schema needs a 'json_schema' object");
  const json& js = f["json_schema"];
  if (!js.contains("name") || !js["name"].is_string() || js["name"].get<std::string>().empty())
    bad("response_format", "response_format json_schema needs a 'name'");
  if (js.contains("strict") && !js["strict"].is_null() && !js["strict"].is_boolean())
    bad("response_format", "response_format json_schema 'strict' must be true or false");
  if (!js.contains("schema") || !(js["schema"].is_object() || js["schema"].is_boolean()))
    bad("response_format", "response_format json_schema needs a 'schema' (a JSON Schema object)");
  r.grammar_kind = GrammarKind::json_schema;  // grammar_text: the schema with its key order (below)
}

CompletionRequest parse(const json& j, bool chat, const SamplingConfig& defaults) {
  if (!j.is_object()) bad("", "the request body must be a JSON object");
  CompletionRequest r;
  r.chat = chat;
  r.sampling = defaults;
  if (j.contains("model") && !j["model"].is_null()) {
    if (!j["model"].is_string()) bad("model", "'model' must be a string");
    r.model = j["model"].get<std::string>();
  }
  if (chat) parse_messages(j, r);
  else parse_prompt(j, r);
  if (j.contains("stream") && !j["stream"].is_null()) r.stream = boolean(j, "stream");
  if (j.contains("stream_options") && !j["stream_options"].is_null()) {
    const json& so = j["stream_options"];
    if (!so.is_object()) bad("stream_options", "'stream_options' must be an object");
    if (!r.stream) bad("stream_options", "'stream_options' is only allowed with 'stream': true");
    if (so.contains("include_usage")) r.include_usage = boolean(so, "include_usage");
  }
  for (const char* key : {"max_tokens", "max_completion_tokens"})
    if (j.contains(key) && !j[key].is_null()) r.max_tokens = int(integer(j, key, 1, 1 << 24));
  if (j.contains("temperature") && !j["temperature"].is_null())
    r.sampling.temperature = float(number(j, "temperature", 0, 2));
  if (j.contains("top_p") && !j["top_p"].is_null()) r.sampling.top_p = float(number(j, "top_p", 0, 1, true));
  if (j.contains("seed") && !j["seed"].is_null())
    r.sampling.seed = uint64_t(integer(j, "seed", INT64_MIN, INT64_MAX));
  if (j.contains("n") && !j["n"].is_null() && integer(j, "n", 1, 128) != 1) bad("n", "only n = 1 is supported");
  for (const char* key : {"presence_penalty", "frequency_penalty"})  // accepted, not applied (documented)
    if (j.contains(key) && !j[key].is_null()) (void)number(j, key, -2, 2);
  if (j.contains("stop")) parse_stop(j, r);
  const bool logprobs = chat ? (j.contains("logprobs") && !j["logprobs"].is_null() && boolean(j, "logprobs"))
                             : (j.contains("logprobs") && !j["logprobs"].is_null());
  if (chat) {
    if (j.contains("top_logprobs") && !j["top_logprobs"].is_null()) {
      if (!logprobs) bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
      r.top_logprobs = int(integer(j, "top_logprobs", 0, 20));
    } else if (logprobs) {
      r.top_logprobs = 0;
    }
  } else if (logprobs) {
    r.top_logprobs = int(integer(j, "logprobs", 0, 5));  // completions: logprobs is the count
  }
  if (j.contains("chat_template_kwargs") && !j["chat_template_kwargs"].is_null()) {
    if (!chat) bad("chat_template_kwargs", "'chat_template_kwargs' is for chat completions");
    r.template_vars = j["chat_template_kwargs"];
    if (auto ok = check_chat_template_vars(r.template_vars); !ok.ok()) bad("chat_template_kwargs", ok.error().message);
  }
  for (const char* key : {"functions", "function_call"})  // the deprecated forms of tools / tool_choice
    if (j.contains(key) && !j[key].is_null()) bad(key, std::string("'") + key + "' is not supported (use tools)");
  if (!chat)
    for (const char* key : {"tools", "tool_choice", "parallel_tool_calls"})
      if (j.contains(key) && !j[key].is_null()) bad(key, std::string("'") + key + "' is for chat completions");
  if (j.contains("parallel_tool_calls") && !j["parallel_tool_calls"].is_null())
    r.parallel_tool_calls = boolean(j, "parallel_tool_calls");
  if (j.contains("response_format") && !j["response_format"].is_null()) response_format(j["response_format"], r);
  if (j.contains("grammar") && !j["grammar"].is_null()) {
    if (r.grammar_kind) bad("grammar", "'grammar' and a JSON 'response_format' exclude each other");
    if (!j["grammar"].is_string()) bad("grammar", "'grammar' must be a string (GBNF)");
    r.grammar_kind = GrammarKind::gbnf;
    r.grammar_text = j["grammar"].get<std::string>();
    r.grammar_param = "grammar";
  }
  return r;
}

}  // namespace

bool CompletionRequest::uses_tools() const {
  if (!tools.empty()) return true;
  for (const ChatMessage& m : messages)
    if (!m.tool_calls.empty() || m.role == "tool") return true;
  return false;
}

ParseResult parse_completion_request(std::string_view body, bool chat, const SamplingConfig& defaults) {
  ParseResult out;
  const json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    out.error = ApiError{400, "invalid_request_error", "", "", "the request body is not valid JSON"};
    return out;
  }
  try {
    out.request = parse(j, chat, defaults);
    CompletionRequest& r = *out.request;
    const bool schema_later = r.grammar_kind == GrammarKind::json_schema && r.grammar_text.empty();
    if (schema_later || (j.contains("tools") && !j["tools"].is_null()) || j.contains("tool_choice")) {
      // Again with the keys in their order: a schema's property order is the reply's.
      const auto o = nlohmann::ordered_json::parse(body.begin(), body.end(), nullptr, false);
      if (schema_later) r.grammar_text = o["response_format"]["json_schema"]["schema"].dump();
      if (o.contains("tools") && !o["tools"].is_null()) {
        auto tools = parse_tool_definitions(o["tools"]);
        if (!tools.ok()) bad("tools", tools.error().message);
        r.tools = std::move(tools).value();
      }
      if (o.contains("tool_choice") && !o["tool_choice"].is_null()) {
        auto choice = parse_tool_choice(o["tool_choice"], r.tools);
        if (!choice.ok()) bad("tool_choice", choice.error().message);
        r.tool_choice = *choice;
      }
      if (r.grammar_kind && !r.tools.empty() && r.tool_choice.mode != ToolChoiceMode::none)
        bad(r.grammar_param, "'" + r.grammar_param + "' and 'tools' together are not supported (tool_choice none allows it)");
    }
  } catch (const Bad& b) {
    out.request.reset();
    out.error = b.e;
  } catch (const json::exception& e) {  // a type nlohmann refuses to convert (caught above too)
    out.request.reset();
    out.error = ApiError{400, "invalid_request_error", "", "", std::string("bad request: ") + e.what()};
  }
  return out;
}

}  // namespace pllm::server
