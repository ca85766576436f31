#include "server/openai_request.h"

#include "runtime/image_rows.h"
#include "tokenizer/chat_messages.h"

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

void parse_messages(const json& j, CompletionRequest& r) {
  if (!j.contains("messages")) bad("messages", "'messages' is required");
  ImageParts images{std::string(kImageMarker), {}};
  auto ms = parse_chat_messages(j["messages"], &images);
  if (!ms.ok()) {  // "<field>: <why>"
    const std::string& e = ms.error().message;
    const size_t colon = e.find(": ");
    bad(colon == std::string::npos ? "messages" : e.substr(0, colon), e);
  }
  r.messages = std::move(ms).value();
  r.image_urls = std::move(images.urls);
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
  if (j.contains("speculative") && !j["speculative"].is_null()) {
    const json& sp = j["speculative"];
    if (!sp.is_object()) bad("speculative", "'speculative' must be an object, e.g. {\"n_max\": 8}");
    for (const auto& [key, v] : sp.items())
      if (key != "n_max") bad("speculative", "'speculative' takes only n_max, not '" + key + "'");
    if (sp.contains("n_max")) r.draft_max = int(integer(sp, "n_max", 0, 32));
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
