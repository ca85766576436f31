// pocketllm: command-line client of the PocketLLM C API.
#include <cstdio>
#include <map>
#include <string>

#include "cli_common.h"
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"PocketLLM: run small language models on the CPU"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("pocketllm ") + pllm_version());
  std::map<CLI::App*, std::function<int()>> actions;
  auto reg = [&](std::function<int()> fn) { actions[app.get_subcommands([](CLI::App*) { return true; }).back()] = std::move(fn); };
  reg(cli::add_run(app));
  reg(cli::add_chat(app));
  reg(cli::add_tokenize(app));
  reg(cli::add_draft_calibrate(app));
  reg(cli::add_info(app));
  reg(cli::add_logits(app));
  reg(cli::add_bench(app));
  reg(cli::add_perplexity(app));
  reg(cli::add_chat_bench(app));
  reg(cli::add_quantize(app));
  reg(cli::add_prune(app));
  reg(cli::add_calibrate_act(app));
  reg(cli::add_simulate(app));
  reg(cli::add_serve(app));
  reg(cli::add_template(app));
  reg(cli::add_grammar(app));
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help / --version
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    if (msg.empty()) msg = e.get_name();
    std::fprintf(stderr, "error: %s (see --help)\n", msg.c_str());
    return 2;
  }
  try {
    for (auto& [sub, fn] : actions)
      if (sub->parsed()) return fn();
    std::fprintf(stderr, "error: no subcommand given (see --help)\n");
    return 2;
  } catch (const cli::Failure& f) {
    std::fprintf(stderr, "error: %s\n", f.message.c_str());
    return f.exit_code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
