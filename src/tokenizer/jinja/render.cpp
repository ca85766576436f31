#include "tokenizer/jinja/render.h"

#include <new>

#include "tokenizer/jinja/json.h"
#include "tokenizer/jinja/parser.h"

namespace pllm {

namespace {

// raise_exception(): the template's own message, told apart from interpreter errors.
struct RaisedByTemplate : jinja::TemplateError {
  using jinja::TemplateError::TemplateError;
};

jinja::Value callable(const char* name, std::function<jinja::Value(jinja::Interpreter&, const jinja::Args&)> fn) {
  auto c = std::make_shared<jinja::Callable>();
  c->name = name;
  c->fn = std::move(fn);
  return jinja::Value{c};
}

}  // namespace

Result<std::string> render_template(const std::string& source, const nlohmann::ordered_json& variables,
                                    std::optional<std::time_t> now, const jinja::Limits& limits) {
  if (!variables.is_object()) return make_error(Status::invalid_argument, "chat template: variables must be a JSON object");
  try {
    const jinja::Body body = jinja::parse(source);
    jinja::ValueDict globals;
    globals.set("raise_exception", callable("raise_exception", [](jinja::Interpreter&, const jinja::Args& a) -> jinja::Value {
                  const jinja::Value* msg = a.get(0, "message");
                  throw RaisedByTemplate(msg ? jinja::to_str(*msg) : std::string());
                }));
    globals.set("strftime_now", callable("strftime_now", [now](jinja::Interpreter&, const jinja::Args& a) {
                  const jinja::Value* fmt = a.get(0, "format");
                  if (!fmt || !fmt->is_string()) jinja::fail("strftime_now needs a format string");
                  const std::time_t t = now ? *now : std::time(nullptr);
                  std::tm tm{};
                  localtime_r(&t, &tm);
                  char buf[512];
                  const size_t n = std::strftime(buf, sizeof buf, fmt->as_string().c_str(), &tm);
                  return jinja::Value::string(std::string(buf, n));
                }));
    for (auto it = variables.begin(); it != variables.end(); ++it) globals.set(it.key(), jinja::from_json(it.value()));
    jinja::Interpreter interp(limits, std::move(globals));
    return interp.render(body);
  } catch (const RaisedByTemplate& e) {
    return make_error(Status::invalid_argument, std::string("chat template raised an exception: ") + e.what());
  } catch (const jinja::TemplateError& e) {
    return make_error(Status::invalid_argument, std::string("chat template: ") + e.what());
  } catch (const std::bad_alloc&) {
    return make_error(Status::out_of_memory, "chat template: out of memory");
  } catch (const std::exception& e) {
    return make_error(Status::internal, std::string("chat template: ") + e.what());
  }
}

Result<std::string> render_chat_template(const std::string& source, const ChatContext& ctx) {
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  vars["messages"] = ctx.messages;
  vars["tools"] = ctx.tools;
  vars["documents"] = ctx.documents;
  vars["add_generation_prompt"] = ctx.add_generation_prompt;
  vars["bos_token"] = ctx.bos_token;
  vars["eos_token"] = ctx.eos_token;
  if (ctx.enable_thinking) vars["enable_thinking"] = *ctx.enable_thinking;
  if (ctx.extra.is_object())
    for (auto it = ctx.extra.begin(); it != ctx.extra.end(); ++it) vars[it.key()] = it.value();
  return render_template(source, vars, ctx.now);
}

nlohmann::ordered_json chat_messages_json(const std::vector<ChatMessage>& messages) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& m : messages) {
    nlohmann::ordered_json j = {{"role", m.role}, {"content", m.content}};
    if (!m.tool_calls.empty()) {
      nlohmann::ordered_json calls = nlohmann::ordered_json::array();
      for (const ToolCall& c : m.tool_calls) {
        // Templates read the arguments as a mapping (Hugging Face's convention), so JSON text
        // is passed parsed; text that is not JSON stays a string.
        auto args = nlohmann::ordered_json::parse(c.arguments, nullptr, /*allow_exceptions=*/false);
        if (args.is_discarded()) args = c.arguments;
        calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", args}}}});
      }
      j["tool_calls"] = std::move(calls);
    }
    if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
    if (!m.name.empty()) j["name"] = m.name;
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace pllm
