// `pocketllm template`: render a chat template (a .jinja file) with variables from a JSON object,
// as Hugging Face's apply_chat_template would (the conformance tests compare it with jinja2).
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_cpp_api.h"
#include "commands.h"
#include "tokenizer/jinja/render.h"

namespace cli {

std::function<int()> add_template(CLI::App& app) {
  auto* cmd = app.add_subcommand("template", "render a Jinja chat template with variables from JSON");
  struct Opts {
    std::string file, context = "-";
    long long now = -1;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("template", o->file, "the template file (a model's tokenizer.chat_template)")->required();
  cmd->add_option("-c,--context", o->context, "a JSON object of variables (messages, tools, ...); - reads stdin");
  cmd->add_option("--now", o->now, "strftime_now's clock, seconds since the epoch (default: now)");
  return [o]() {
    const std::string source = read_file(o->file);
    std::string text;
    if (o->context == "-") {
      text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    } else {
      text = read_file(o->context);
    }
    const auto vars = nlohmann::ordered_json::parse(text, nullptr, false);
    if (vars.is_discarded() || !vars.is_object()) fail("the context is not a JSON object");
    std::optional<std::time_t> now;
    if (o->now >= 0) now = static_cast<std::time_t>(o->now);
    const std::string out = unwrap(pllm::render_template(source, vars, now));
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  };
}

}  // namespace cli
