// `pocketllm tokenize`: print token ids, each preceded by a space (the .out layout).
#include <cstdio>
#include <string>

#include "cli_common.h"
#include "commands.h"

namespace cli {

std::function<int()> add_tokenize(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "print the token ids of a text");
  struct Opts {
    std::string model, prompt, file;
    bool add_special = false, parse_special = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("-m,--model", o->model, "GGUF model or vocab file");
  auto* p = cmd->add_option("-p,--prompt", o->prompt, "text");
  auto* f = cmd->add_option("-f,--file", o->file, "tokenize this file's bytes exactly");
  p->excludes(f);
  cmd->add_flag("--add-special", o->add_special, "add BOS/EOS as the model specifies");
  cmd->add_flag("--parse-special", o->parse_special, "turn special-token text into its id");
  return [o, p, f]() {
    if (!*p && !*f) fail("no text: pass -p TEXT or -f FILE");
    const std::string text = *f ? read_file(o->file) : o->prompt;
    Model model(resolve_model_path(o->model), true);
    std::string line;
    for (pllm_token id : tokenize(model, text, o->add_special, o->parse_special)) line += " " + std::to_string(id);
    std::printf("%s\n", line.c_str());
    return 0;
  };
}

}  // namespace cli
