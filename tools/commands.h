// Subcommands of the pocketllm CLI; each registers its options on the CLI11 app.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace cli {

// Each returns the function to run when its subcommand is chosen.
std::function<int()> add_run(CLI::App& app);
std::function<int()> add_chat(CLI::App& app);
std::function<int()> add_tokenize(CLI::App& app);
std::function<int()> add_draft_calibrate(CLI::App& app);
std::function<int()> add_info(CLI::App& app);
std::function<int()> add_logits(CLI::App& app);
std::function<int()> add_bench(CLI::App& app);
std::function<int()> add_simulate(CLI::App& app);
std::function<int()> add_serve(CLI::App& app);
std::function<int()> add_perplexity(CLI::App& app);
std::function<int()> add_chat_bench(CLI::App& app);
std::function<int()> add_quantize(CLI::App& app);
std::function<int()> add_prune(CLI::App& app);
std::function<int()> add_calibrate_act(CLI::App& app);
std::function<int()> add_template(CLI::App& app);
std::function<int()> add_grammar(CLI::App& app);

}  // namespace cli
