#include "tokenizer/chat_messages.h"

namespace pllm {
namespace {

using json = nlohmann::json;

struct MessageError {
  std::string field, why;
};

[[noreturn]] void fail(std::string field, std::string why) { throw MessageError{std::move(field), std::move(why)}; }

// "content": a string, or an array of {"type": "text", "text": ...} parts (concatenated) and,
// in a user turn when the caller takes them, image parts {"type": "image_url", "image_url":
// {"url": ...}} (or "image_url": "..."): images->marker in the text, the url in images->urls.
std::string content_text(const json& c, const std::string& where, ImageParts* images) {
  if (c.is_string()) return c.get<std::string>();
  if (c.is_null()) return "";
  if (!c.is_array()) fail(where, "'" + where + "' must be a string or an array of content parts");
  std::string out;
  for (size_t i = 0; i < c.size(); ++i) {
    const json& part = c[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    const std::string type = part.is_object() && part.contains("type") && part["type"].is_string()
                                 ? part["type"].get<std::string>() : "";
    if (type == "image_url") {
      if (!images) fail(at, "image parts are not taken here (no vision encoder is loaded, or not a user turn)");
      const json* u = part.contains("image_url") ? &part["image_url"] : nullptr;
      if (u && u->is_object() && u->contains("url")) u = &(*u)["url"];
      if (!u || !u->is_string()) fail(at + ".image_url", "an image part needs 'image_url': {\"url\": \"data:...\"}");
      images->urls.push_back(u->get<std::string>());
      out += images->marker;
      continue;
    }
    if (type != "text" || !part.contains("text") || !part["text"].is_string())
      fail(at, "content parts are {\"type\": \"text\", \"text\": ...} or {\"type\": \"image_url\", ...}");
    out += part["text"].get<std::string>();
  }
  return out;
}

// An assistant turn's tool_calls: [{"id", "type": "function", "function": {"name", "arguments"}}],
// arguments JSON text of an object (as OpenAI sends them; an object is taken too).
std::vector<ToolCall> tool_calls_of(const json& calls, const std::string& where) {
  if (!calls.is_array()) fail(where, "'" + where + "' must be an array");
  std::vector<ToolCall> out;
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    const json& c = calls[i];
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
      fail(at, "'" + at + "' must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}");
    if (c.contains("type") && c["type"] != "function") fail(at + ".type", "'" + at + ".type' must be \"function\"");
    const json& f = c["function"];
    if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty())
      fail(at + ".function.name", "'" + at + ".function.name' must be a non-empty string");
    ToolCall call;
    call.name = f["name"].get<std::string>();
    if (c.contains("id") && !c["id"].is_null()) {
      if (!c["id"].is_string()) fail(at + ".id", "'" + at + ".id' must be a string");
      call.id = c["id"].get<std::string>();
    }
    const json& a = f.contains("arguments") ? f["arguments"] : json();
    json args = a.is_string() ? json::parse(a.get<std::string>(), nullptr, false) : a;
    if (args.is_discarded() || !args.is_object())
      fail(at + ".function.arguments", "'" + at + ".function.arguments' must be a JSON object (as text)");
    call.arguments = a.is_string() ? a.get<std::string>() : a.dump();
    out.push_back(std::move(call));
  }
  return out;
}

std::vector<ChatMessage> messages_of(const json& ms, ImageParts* images) {
  std::vector<ChatMessage> out;
  if (!ms.is_array() || ms.empty()) fail("messages", "'messages' must be a non-empty array");
  for (size_t i = 0; i < ms.size(); ++i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    const json& m = ms[i];
    if (!m.is_object()) fail(where, "'" + where + "' must be an object");
    if (!m.contains("role") || !m["role"].is_string()) fail(where + ".role", "'" + where + ".role' must be a string");
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";  // OpenAI's newer name for the system role
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      fail(where + ".role", "role '" + role + "' is not supported (system, developer, user, assistant, tool)");
    ChatMessage msg{role, "", {}, {}, {}};
    const bool calls = role == "assistant" && m.contains("tool_calls") && !m["tool_calls"].is_null();
    if (!m.contains("content") && !calls) fail(where + ".content", "'" + where + ".content' is required");
    if (m.contains("content")) msg.content = content_text(m["content"], where + ".content", role == "user" ? images : nullptr);
    if (calls) msg.tool_calls = tool_calls_of(m["tool_calls"], where + ".tool_calls");
    if (role == "tool") {
      if (!m.contains("tool_call_id") || !m["tool_call_id"].is_string())
        fail(where + ".tool_call_id", "a tool message needs 'tool_call_id' (the id of the call it answers)");
      msg.tool_call_id = m["tool_call_id"].get<std::string>();
      if (m.contains("name") && m["name"].is_string()) msg.name = m["name"].get<std::string>();
    }
    out.push_back(std::move(msg));
  }
  return out;
}


}  // namespace

Result<std::vector<ChatMessage>> parse_chat_messages(const json& messages, ImageParts* images) {
  try {
    return messages_of(messages, images);
  } catch (const MessageError& e) {
    return make_error(Status::invalid_argument, e.field + ": " + e.why);
  } catch (const json::exception& e) {
    return make_error(Status::invalid_argument, std::string("messages: ") + e.what());
  }
}

}  // namespace pllm
