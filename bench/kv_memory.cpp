// KV memory benchmark (not a test): peak resident memory of N sessions, each holding the same
// number of tokens, through the C API. bench/kv_memory.py runs it at several contexts.
//   kv_memory MODEL N_CTX N_SESSIONS N_TOKENS [f16|f32|q8|q4]
// Prints one JSON line: VmHWM / VmRSS (KiB, from /proc/self/status) after the model load and
// after the sessions were filled, and the sessions' reserved and committed KV bytes.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "pocketllm/pocketllm.h"

namespace {

// A "Vm...:  123 kB" line of /proc/self/status, in KiB; -1 where there is none (not Linux).
long status_kib(const char* key) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long v = -1;
  const size_t n = std::strlen(key);
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, key, n) == 0 && line[n] == ':') {
      v = std::strtol(line + n + 1, nullptr, 10);
      break;
    }
  std::fclose(f);
  return v;
}

int usage() {
  std::fprintf(stderr, "usage: kv_memory MODEL N_CTX N_SESSIONS N_TOKENS [f16|f32|q8|q4]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5 || argc > 6) return usage();
  const int n_ctx = std::atoi(argv[2]), n_sessions = std::atoi(argv[3]), n_tokens = std::atoi(argv[4]);
  if (n_ctx <= 0 || n_sessions <= 0 || n_sessions > 256 || n_tokens <= 0 || n_tokens > n_ctx) return usage();
  const std::string kv = argc == 6 ? argv[5] : "f16";
  pllm_session_params sp = pllm_session_default_params();
  sp.n_ctx = n_ctx;
  sp.n_threads = 2;
  if (kv == "f16") sp.kv_type = PLLM_KV_F16;
  else if (kv == "f32") sp.kv_type = PLLM_KV_F32;
  else if (kv == "q8") sp.kv_type = PLLM_KV_Q8;
  else if (kv == "q4") sp.kv_type = PLLM_KV_Q4;
  else return usage();

  pllm_model_params mp = pllm_model_default_params();
  pllm_model* model = nullptr;
  if (pllm_model_load(argv[1], &mp, &model) != PLLM_OK) {
    std::fprintf(stderr, "kv_memory: cannot load %s: %s\n", argv[1], pllm_last_error());
    return 1;
  }
  const long hwm_model = status_kib("VmHWM");
  // Token ids spread over the vocabulary (the content does not change the memory).
  const int32_t n_vocab = pllm_model_n_vocab(model);
  std::vector<pllm_token> tokens(static_cast<size_t>(n_tokens));
  for (int i = 0; i < n_tokens; ++i) tokens[size_t(i)] = pllm_token((1000 + 37 * i) % n_vocab);

  std::vector<pllm_session*> sessions(size_t(n_sessions), nullptr);
  uint64_t reserved = 0, committed = 0;
  int rc = 0;
  for (pllm_session*& s : sessions) {
    if (pllm_session_create(model, &sp, &s) != PLLM_OK ||
        pllm_session_eval(s, tokens.data(), tokens.size(), nullptr) != PLLM_OK) {
      std::fprintf(stderr, "kv_memory: %s\n", pllm_last_error());
      rc = 1;
      break;
    }
    reserved += pllm_session_kv_bytes(s);
    committed += pllm_session_kv_committed_bytes(s);
  }
  if (rc == 0)
    std::printf(
        "{\"n_ctx\": %d, \"sessions\": %d, \"tokens\": %d, \"kv\": \"%s\", \"hwm_model_kib\": %ld, "
        "\"hwm_kib\": %ld, \"rss_kib\": %ld, \"kv_reserved_bytes\": %llu, \"kv_committed_bytes\": %llu}\n",
        n_ctx, n_sessions, n_tokens, kv.c_str(), hwm_model, status_kib("VmHWM"), status_kib("VmRSS"),
        (unsigned long long)reserved, (unsigned long long)committed);
  for (pllm_session* s : sessions) pllm_session_free(s);
  pllm_model_free(model);
  return rc;
}
