// `pocketllm info`: architecture, hyper-parameters, tokenizer and tensors of a GGUF file;
// `pocketllm info --backends`: what the GPU probe finds on this machine.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "commands.h"

namespace cli {

std::function<int()> add_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "describe a GGUF file");
  struct Opts {
    std::string model;
    bool json = false;
    bool backends = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("-m,--model", o->model, "GGUF file");
  cmd->add_flag("--json", o->json, "machine-readable output");
  cmd->add_flag("--backends", o->backends,
                "describe the compute backends of this machine (Vulkan devices and their features) instead of a "
                "file; exits 0 also when there is no device");
  return [o]() {
    if (o->backends) {
      const size_t n = pllm_backend_probe(o->json ? 1 : 0, nullptr, 0);
      std::string s(n + 1, '\0');
      pllm_backend_probe(o->json ? 1 : 0, s.data(), s.size());
      s.resize(n);
      std::printf("%s", s.c_str());
      return 0;
    }
    const std::string path = resolve_model_path(o->model);
    char* raw = nullptr;
    check(pllm_inspect_file(path.c_str(), &raw), "reading the file");
    const nlohmann::json j = nlohmann::json::parse(raw);
    pllm_string_free(raw);
    if (o->json) {
      std::printf("%s\n", j.dump(2).c_str());
      return 0;
    }
    std::printf("file:          %s (GGUF v%d)\n", path.c_str(), j["gguf_version"].get<int>());
    std::printf("architecture:  %s%s\n", j["architecture"].get<std::string>().c_str(),
                j["supported_architecture"].get<bool>() ? "" : " (not supported)");
    if (j.contains("hparams"))
      for (const auto& [k, v] : j["hparams"].items()) std::printf("  %-14s %s\n", k.c_str(), v.dump().c_str());
    const auto& t = j["tokenizer"];
    std::printf("tokenizer:     %s (pre: %s), %s tokens\n", t["model"].get<std::string>().c_str(),
                t["pre"].get<std::string>().c_str(), t.contains("n_tokens") ? t["n_tokens"].dump().c_str() : "0");
    std::printf("tensors:       %zu, %.1f MB, %.1f M parameters\n", j["tensors"].size(),
                j["tensor_bytes"].get<double>() / 1e6, j["n_params"].get<double>() / 1e6);
    for (const auto& x : j["tensors"])
      std::printf("  %-32s %-5s %-20s %10s bytes\n", x["name"].get<std::string>().c_str(),
                  x["type"].get<std::string>().c_str(), x["dims"].dump().c_str(), x["bytes"].dump().c_str());
    return 0;
  };
}

}  // namespace cli
