#include "cli_common.h"

#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace cli {

void fail(const std::string& message, int exit_code) { throw Failure{message, exit_code}; }

void check(pllm_status s, const char* what) {
  if (s != PLLM_OK) {
    std::string msg = pllm_last_error();
    fail(msg.empty() ? std::string(what) + ": " + pllm_status_string(s) : msg);
  }
}

namespace {
bool exists(const std::string& p) { return access(p.c_str(), R_OK) == 0; }
}  // namespace

std::string default_model_path() {
  if (const char* env = std::getenv("POCKETLLM_MODELS"); env && *env)
    return std::string(env) + "/" + kDefaultModelFile;
  const std::string local = std::string("models/") + kDefaultModelFile;
  if (exists(local)) return local;
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    std::string dir(exe, size_t(n));
    dir = dir.substr(0, dir.find_last_of('/'));
    const std::string beside = dir + "/../models/" + kDefaultModelFile;
    if (exists(beside)) return beside;
  }
  return local;
}

std::string resolve_model_path(const std::string& given) {
  const std::string path = given.empty() ? default_model_path() : given;
  if (!exists(path)) {
    std::string msg = "model file not found: " + path;
    if (given.empty()) msg += " (fetch the default model with scripts/fetch_model.sh, or pass -m)";
    fail(msg);
  }
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read file: " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("cannot read file: " + path);
  return ss.str();
}

Model::Model(const std::string& path, bool vocab_only, int repack, int chat_template) {
  pllm_model_params mp = pllm_model_default_params();
  mp.vocab_only = vocab_only ? 1 : 0;
  mp.repack_weights = repack;
  mp.chat_template = chat_template;
  check(pllm_model_load(path.c_str(), &mp, &p), "loading the model");
}

void ActChoice::set(int32_t a, const std::string& from) {
  const bool int8_pair = (value == PLLM_ACT_INT8 && a == PLLM_ACT_STATIC) || (value == PLLM_ACT_STATIC && a == PLLM_ACT_INT8);
  if (!flag.empty() && value != a && !int8_pair)  // during parsing: a parse error, not fail()
    throw CLI::ValidationError(flag + " and " + from + " ask for different activation modes (" + name() + ", " + pllm_activations_name(a) +
         ")");
  if (!int8_pair || a == PLLM_ACT_STATIC) value = a;  // static implies int8
  flag = from;
}

void ActChoice::add_to(CLI::App* cmd) {
  cmd->add_option_function<std::string>(
      "--act",
      [this](const std::string& word) {
        int32_t a = PLLM_ACT_DEFAULT;
        if (pllm_activations_parse(word.c_str(), &a) != PLLM_OK)
          throw CLI::ValidationError(std::string("--act: ") + pllm_last_error());
        set(a, "--act " + word);
      },
      "how activations meet quantised weights: int16 (default: rounded to int16 per 32 values, exact integer "
      "products; a prompt's rows exact where the ISA has no int16 GEMM), exact (f32, matches a float reference "
      "up to summation order), int8 (W4A8, faster, can flip near-tied tokens), f16 (W4A16 for Q4_0/Q4_1/Q8_0), "
      "static (int8 with the file's calibrated scales, pocketllm calibrate-act)");
  const struct {
    const char* flag;
    int32_t act;
  } older[] = {{"--int8-act", PLLM_ACT_INT8},
               {"--f16-act", PLLM_ACT_F16},
               {"--static-act", PLLM_ACT_STATIC},
               {"--int16-act", PLLM_ACT_INT16},
               {"--exact", PLLM_ACT_EXACT}};
  for (const auto& o : older)
    cmd->add_flag_callback(o.flag, [this, o] { set(o.act, o.flag); },
                           std::string("same as --act ") + pllm_activations_name(o.act));
}

void SessionOptions::add_to(CLI::App* cmd) {
  act.add_to(cmd);
  cmd->add_flag("--no-fuse", no_fuse, "run Q/K/V and gate/up as separate jobs (to measure fusion)");
  cmd->add_flag("--profile", profile, "per-op time table on stderr and a Chrome trace (see --trace-out)");
  cmd->add_option("--trace-out", trace_out, "Chrome trace file written by --profile (opens in Perfetto)");
  cmd->add_option("--kv-type", kv_type, "KV cache storage: f16 (default), q8 (int8 per 64), q4 (4-bit), f32")
      ->check(CLI::IsMember({"f16", "q8", "q4", "f32"}));
  cmd->add_option("--kv-window", kv_window,
                  "sliding window in tokens: keep the sinks plus the most recent N - sinks (0: off)")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--kv-sinks", kv_sinks, "tokens at the start kept forever with --kv-window (default 4)")
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--repack", repack,
                  "hold Q4_0/Q4_1/Q8_0 (int16 kernels: also Q4_K, Q5_K, Q6_K) weights as 16-row panels for the x86 kernels "
                  "that read them: on, off, auto (default: for the int16 kernels; for the int8 ones with --act "
                  "int8 or static; off with --act exact or f16)")
      ->check(CLI::IsMember({"on", "off", "auto"}));
  cmd->add_option("--backend", backend,
                  "what runs the model: cpu (default), vulkan (the Vulkan device, CPU ones included), auto (a GPU "
                  "when there is one, per phase where measured faster); unsupported steps and a failing device "
                  "fall back to the CPU with the same output")
      ->check(CLI::IsMember({"cpu", "auto", "vulkan"}));
  cmd->add_option("-b,--batch", batch, "tokens per forward pass in prefill (default 64)")->check(CLI::Range(1, 4096));
}

int32_t backend_of(const std::string& name) {
  return name == "vulkan" ? PLLM_BACKEND_VULKAN : name == "auto" ? PLLM_BACKEND_AUTO : PLLM_BACKEND_CPU;
}

void report_backend(const pllm_backend_stats& s, const std::string& asked) {
  if (asked == "cpu") return;
  std::string line = "backend " + asked + ": ";
  line += s.device[0] ? std::string(s.device) : "no device (" + std::string(s.device_error) + ")";
  line += "; " + std::to_string(s.device_steps) + " steps on the device, " + std::to_string(s.cpu_steps) + " on the CPU";
  if (s.fallbacks) line += ", " + std::to_string(s.fallbacks) + " fell back";
  if (s.last_fallback[0]) line += " (last CPU step: " + std::string(s.last_fallback) + ")";
  if (s.validation_messages >= 0) line += "; validation layer: " + std::to_string(s.validation_messages) + " messages";
  std::fprintf(stderr, "%s\n", line.c_str());
}

Engine::Engine(int threads, const std::string& backend) {
  pllm_engine_params ep = pllm_engine_default_params();
  ep.n_threads = threads;
  ep.backend = backend_of(backend);
  check(pllm_engine_create(&ep, &p), "creating the engine");
}

Session::Session(Model& m, const SessionOptions& o, Engine* engine) {
  pllm_session_params sp = pllm_session_default_params();
  sp.n_ctx = o.n_ctx;
  sp.n_threads = o.threads;
  sp.activations = o.act.value;
  sp.no_fuse = o.no_fuse ? 1 : 0;
  sp.profile = o.profile ? 1 : 0;
  sp.kv_type = o.kv_type == "q8"    ? PLLM_KV_Q8
               : o.kv_type == "q4"  ? PLLM_KV_Q4
               : o.kv_type == "f32" ? PLLM_KV_F32
                                    : PLLM_KV_F16;
  sp.kv_window = o.kv_window;
  sp.n_batch = o.batch;
  sp.kv_sinks = o.kv_sinks;
  sp.backend = backend_of(o.backend);
  if (engine) {
    check(pllm_session_create_on(engine->p, m.p, &sp, &p), "creating the session");
  } else {
    check(pllm_session_create(m.p, &sp, &p), "creating the session");
  }
  if (o.act.value == PLLM_ACT_STATIC) {
    int32_t n_static = 0, n_dynamic = 0;
    pllm_model_act_scale_counts(m.p, &n_static, &n_dynamic);
    std::fprintf(stderr, "static activations: %d matrix products with a calibrated scale, %d dynamic (no scale)\n",
                 n_static, n_dynamic);
  }
}

void Engine::report_backend(const std::string& asked) const {
  pllm_backend_stats s;
  check(pllm_engine_backend_stats(p, &s), "reading the backend stats");
  cli::report_backend(s, asked);
}

void Session::report_backend(const SessionOptions& o) const {
  pllm_backend_stats s;
  check(pllm_session_backend_stats(p, &s), "reading the backend stats");
  cli::report_backend(s, o.backend);
}

void Session::report_profile(const SessionOptions& o) const {
  if (!o.profile) return;
  char* trace = nullptr;
  char* summary = nullptr;
  check(pllm_session_profile(p, &trace, &summary), "reading the profile");
  std::fprintf(stderr, "%s", summary);
  FILE* f = std::fopen(o.trace_out.c_str(), "wb");
  const size_t len = std::strlen(trace);
  const bool ok = f && std::fwrite(trace, 1, len, f) == len;
  if (f && std::fclose(f) != 0) f = nullptr;
  pllm_string_free(trace);
  pllm_string_free(summary);
  if (!ok || !f) fail("cannot write the trace to " + o.trace_out);
  std::fprintf(stderr, "Chrome trace written to %s (open it in https://ui.perfetto.dev)\n", o.trace_out.c_str());
}

void CacheOptions::add_to(CLI::App* cmd) {
  cmd->add_option("--cache-dir", dir,
                  "prefix cache directory: prompts that start like an earlier one restore that part of the KV "
                  "cache instead of computing it (default: $POCKETLLM_CACHE_DIR)");
  cmd->add_option("--cache-ram", ram_mb, "prefix cache RAM budget in MB (default 256 when a cache is used)")
      ->check(CLI::Range(0.0, 1e7));
  cmd->add_option("--cache-disk", disk_mb, "prefix cache disk budget in MB (default 1024)")->check(CLI::Range(0.0, 1e9));
  cmd->add_flag("--no-cache", no_cache, "do not use a prefix cache");
}

std::string CacheOptions::effective_dir() const {
  if (!dir.empty()) return dir;
  const char* env = std::getenv("POCKETLLM_CACHE_DIR");
  return env ? env : "";
}

bool CacheOptions::enabled() const { return !no_cache && (!effective_dir().empty() || ram_mb >= 0); }

PrefixCache::PrefixCache(Model& m, const CacheOptions& o) {
  if (!o.enabled()) return;
  pllm_prefix_cache_params cp = pllm_prefix_cache_default_params();
  if (o.ram_mb >= 0) cp.ram_bytes = uint64_t(o.ram_mb * 1024 * 1024);
  const std::string dir = o.effective_dir();
  cp.dir = dir.empty() ? nullptr : dir.c_str();
  cp.disk_bytes = uint64_t(o.disk_mb * 1024 * 1024);
  check(pllm_prefix_cache_create(m.p, &cp, &p), "creating the prefix cache");
}

void PrefixCache::attach(Session& s) const {
  if (p) check(pllm_session_set_prefix_cache(s.p, p), "attaching the prefix cache");
}

std::vector<std::pair<const char*, uint64_t>> counter_fields(const pllm_prefix_cache_counters& c) {
  return {{"ram_hits", c.ram_hits},         {"ram_misses", c.ram_misses},
          {"disk_hits", c.disk_hits},       {"disk_misses", c.disk_misses},
          {"inserts", c.inserts},           {"ram_entries", c.ram_entries},
          {"ram_bytes", c.ram_bytes},       {"disk_writes", c.disk_writes},
          {"disk_write_bytes", c.disk_write_bytes}, {"disk_evictions", c.disk_evictions},
          {"disk_bad_files", c.disk_bad_files},     {"restored_tokens", c.restored_tokens},
          {"computed_tokens", c.computed_tokens}};
}

pllm_prefix_cache_counters PrefixCache::stats() const {
  pllm_prefix_cache_counters st{};
  if (p) check(pllm_prefix_cache_stats(p, &st), "reading prefix cache counters");
  return st;
}


std::vector<pllm_token> tokenize(const Model& m, const std::string& text, bool add_special, bool parse_special) {
  return grow_tokens(text.size() + 8, [&](pllm_token* out, size_t cap, size_t* n) {
    return pllm_tokenize(m.p, text.data(), text.size(), add_special, parse_special, out, cap, n);
  });
}

std::vector<pllm_token> tokenize_prompt(const Model& m, const std::string& text) {
  return grow_tokens(text.size() + 8, [&](pllm_token* out, size_t cap, size_t* n) {
    return pllm_tokenize_prompt(m.p, text.data(), text.size(), out, cap, n);
  });
}

std::string apply_template(const Model& m, const std::vector<std::pair<std::string, std::string>>& messages,
                           const std::string& vars_json) {
  std::vector<pllm_chat_message> msgs;
  for (const auto& [role, content] : messages) msgs.push_back({role.c_str(), content.c_str()});
  char* out = nullptr;
  check(pllm_chat_apply_template_vars(m.p, msgs.data(), msgs.size(), 1, vars_json.empty() ? nullptr : vars_json.c_str(),
                                      &out),
        "applying the chat template");
  std::string s(out);
  pllm_string_free(out);
  return s;
}

}  // namespace cli
