// Shared helpers of the pocketllm CLI over the public C API, which run, chat, logits, bench,
// perplexity, tokenize and info use alone. The commands that need the C++ API include
// cli_cpp_api.h instead (it says which and why).
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "pocketllm/pocketllm.h"

namespace cli {

inline constexpr const char* kDefaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";

// Thrown inside a subcommand; main() prints "error: <message>" once and exits non-zero.
struct Failure {
  std::string message;
  int exit_code = 1;
};

[[noreturn]] void fail(const std::string& message, int exit_code = 1);
// Turns a failed API status into a Failure carrying pllm_last_error().
void check(pllm_status s, const char* what);

// -m default: $POCKETLLM_MODELS/<default>, else ./models/<default>, else <exe>/../models/<default>.
std::string default_model_path();
std::string resolve_model_path(const std::string& given);

// Reads a whole file byte for byte (no trimming).
std::string read_file(const std::string& path);

// RAII owners for the C handles.
struct Model {
  pllm_model* p = nullptr;
  // repack: PLLM_REPACK_*; chat_template: PLLM_CHAT_TEMPLATE_*
  Model(const std::string& path, bool vocab_only, int repack = PLLM_REPACK_OFF,
        int chat_template = PLLM_CHAT_TEMPLATE_FILE);
  ~Model() { pllm_model_free(p); }
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
};
// The activation mode: --act int16|exact|int8|f16|static, or one of its older flags (--int8-act,
// --f16-act, --static-act, --int16-act, --exact), the words being the C API's
// (pllm_activations_name). Two flags that disagree are an error (static with int8 is static).
struct ActChoice {
  int32_t value = PLLM_ACT_DEFAULT;  // a pllm_activations
  std::string flag;                  // the flag that chose it
  const char* name() const { return pllm_activations_name(value); }
  void set(int32_t a, const std::string& from);
  void add_to(CLI::App* cmd);
};

struct SessionOptions {
  int n_ctx = 0;
  int threads = 0;
  ActChoice act;
  bool no_fuse = false;
  bool profile = false;
  std::string trace_out = "pocketllm-trace.json";
  std::string kv_type = "f16";
  int kv_window = 0;
  int kv_sinks = 4;
  int batch = 0;
  std::string backend = "cpu";  // --backend auto|cpu|vulkan
  std::string repack = "auto";  // --repack on|off|auto
  // PLLM_REPACK_*: --repack on|off, or what suits the activation mode (pllm_activations_repack).
  int repack_weights() const {
    if (repack != "auto") return repack == "on" ? PLLM_REPACK_ON : PLLM_REPACK_OFF;
    return pllm_activations_repack(act.value);
  }
  // Registers --act (ActChoice), --no-fuse, --profile, --trace-out and the KV options on a subcommand.
  void add_to(CLI::App* cmd);
};

// "cpu" | "auto" | "vulkan" as a pllm_backend.
int32_t backend_of(const std::string& name);
// With a device backend asked for: where the steps ran, one line on stderr.
void report_backend(const pllm_backend_stats& s, const std::string& asked);

struct Engine {
  pllm_engine* p = nullptr;
  explicit Engine(int threads, const std::string& backend = "cpu");
  void report_backend(const std::string& asked) const;
  ~Engine() { pllm_engine_free(p); }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
};

struct Session {
  pllm_session* p = nullptr;
  // engine: step on a shared engine (o.threads is then ignored); null: a private one.
  Session(Model& m, const SessionOptions& o, Engine* engine = nullptr);
  // With --profile: the per-op table to stderr and the Chrome trace to o.trace_out.
  void report_profile(const SessionOptions& o) const;
  // With --backend auto|vulkan: where the steps ran (stderr).
  void report_backend(const SessionOptions& o) const;
  ~Session() { pllm_session_free(p); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
};

// --cache-dir / --cache-ram / --cache-disk / --no-cache: the prefix cache of run, chat, bench.
// A cache is used when a directory (--cache-dir, else $POCKETLLM_CACHE_DIR) or --cache-ram
// is given, unless --no-cache.
struct CacheOptions {
  std::string dir;
  double ram_mb = -1;  // < 0: 256 MiB when a cache is used
  double disk_mb = 1024;
  bool no_cache = false;
  void add_to(CLI::App* cmd);
  std::string effective_dir() const;
  bool enabled() const;
};

// RAII owner of a prefix cache (null p when the options disable it).
struct PrefixCache {
  pllm_prefix_cache* p = nullptr;
  PrefixCache(Model& m, const CacheOptions& o);
  void attach(Session& s) const;
  pllm_prefix_cache_counters stats() const;
  ~PrefixCache() { pllm_prefix_cache_free(p); }
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;
};

// The prefix-cache counters as (name, value) pairs, for --json output.
std::vector<std::pair<const char*, uint64_t>> counter_fields(const pllm_prefix_cache_counters& c);

// Calls fill(out, capacity, &n) once more with the size it asked for when the first guess was
// short (the C API's capacity rules); any other failure is fatal, saying `what`.
template <typename Fill>
std::vector<pllm_token> grow_tokens(size_t guess, Fill fill, const char* what = "tokenizing") {
  size_t n = 0;
  std::vector<pllm_token> ids(guess);
  pllm_status s = fill(ids.data(), ids.size(), &n);
  if (s == PLLM_ERR_OUT_OF_RANGE && n > ids.size()) {
    ids.resize(n);
    s = fill(ids.data(), ids.size(), &n);
  }
  check(s, what);
  ids.resize(n);
  return ids;
}

std::vector<pllm_token> tokenize(const Model& m, const std::string& text, bool add_special, bool parse_special);
// A prompt's tokens (pllm_tokenize_prompt: specials parsed, one BOS).
std::vector<pllm_token> tokenize_prompt(const Model& m, const std::string& text);
// vars_json: the template's extra variables as a JSON object (--chat-template-kwargs), or "".
std::string apply_template(const Model& m, const std::vector<std::pair<std::string, std::string>>& messages,
                           const std::string& vars_json = "");

}  // namespace cli
