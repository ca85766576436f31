// `pocketllm bench`: prompt-processing and generation throughput, time to first token, peak memory
// and the memory-bandwidth roofline for one model file.
//
// Each repetition resets the session, evaluates a P-token prompt in one pllm_session_eval call (no
// logits requested, as in a real prefill), then decodes N tokens one call at a time, each asking for
// the logits and feeding back their argmax. With --tg-empty each repetition also decodes N tokens
// from an empty context, which is what llama-bench's tg test measures. One untimed warm-up pass runs first so the weights are
// paged in and the thread pool is awake. The machine's read bandwidth is measured afterwards (so the
// buffer does not count towards peak RSS) with the same thread count.
#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench_parallel.h"
#include "cli_common.h"
#include "commands.h"

namespace cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct MeanSd {
  double mean = 0, sd = 0;
};

MeanSd mean_sd(const std::vector<double>& v) {
  MeanSd r;
  if (v.empty()) return r;
  for (double x : v) r.mean += x;
  r.mean /= double(v.size());
  if (v.size() > 1) {
    double ss = 0;
    for (double x : v) ss += (x - r.mean) * (x - r.mean);
    r.sd = std::sqrt(ss / double(v.size() - 1));
  }
  return r;
}

// splitmix64: a small seeded generator so every run evaluates the same prompt.
struct SplitMix {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

// A random id that is neither BOS/EOS nor an end-of-generation token.
pllm_token random_token(const Model& m, SplitMix& rng) {
  const int32_t n_vocab = pllm_model_n_vocab(m.p);
  const pllm_token bos = pllm_model_bos(m.p), eos = pllm_model_eos(m.p);
  for (;;) {
    const auto t = pllm_token(rng.next() % uint64_t(n_vocab));
    if (t != bos && t != eos && !pllm_model_is_eog(m.p, t)) return t;
  }
}

// Peak resident set size in MiB: VmHWM from /proc/self/status, else getrusage.
double peak_rss_mb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;  // kB
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) / 1024.0;  // kB on Linux
}

// Read bandwidth in GB/s (1e9 bytes/s): n_threads threads each sum their slice of a buffer of
// `bytes`; the best of `runs` passes. The buffer is first touched by the thread that later reads
// the slice, so pages land on that thread's memory node. It asks for transparent huge pages, as
// the weights' arena does (model/repack.h): on 4 KiB pages the same loop read 5 % slower on a
// 2-vCPU Zen 4, which would have made a decode step look closer to the limit than it is.
double measure_read_bandwidth(int n_threads, size_t bytes, int runs) {
  const size_t n_words = bytes / sizeof(uint64_t);
  void* mem = ::mmap(nullptr, n_words * sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) fail("cannot map " + std::to_string(bytes >> 20) + " MiB for the bandwidth measurement");
  ::madvise(mem, n_words * sizeof(uint64_t), MADV_HUGEPAGE);  // advisory
  struct Unmap {
    size_t n;
    void operator()(uint64_t* p) const { ::munmap(p, n); }
  };
  std::unique_ptr<uint64_t, Unmap> buf(static_cast<uint64_t*>(mem), Unmap{n_words * sizeof(uint64_t)});
  const size_t per = (n_words / size_t(n_threads)) & ~size_t(7);
  std::atomic<uint64_t> sink{0};
  auto slice_begin = [&](int i) { return per * size_t(i); };
  auto slice_end = [&](int i) { return i == n_threads - 1 ? n_words : per * size_t(i + 1); };
  auto run_threads = [&](auto&& body) {
    std::vector<std::thread> th;
    for (int i = 1; i < n_threads; ++i) th.emplace_back(body, i);
    body(0);
    for (auto& t : th) t.join();
  };
  run_threads([&](int i) {
    for (size_t k = slice_begin(i); k < slice_end(i); ++k) buf.get()[k] = k * 0x9E3779B97F4A7C15ull;
  });
  double best = 0;
  for (int r = 0; r < runs; ++r) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<double> start_end(2);
    auto body = [&](int i) {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      const uint64_t* p = buf.get();
      // Eight independent accumulators so the sum is limited by loads, not by add latency.
      uint64_t a[8] = {};
      size_t k = slice_begin(i);
      const size_t e = slice_end(i);
      for (; k + 8 <= e; k += 8)
        for (int j = 0; j < 8; ++j) a[j] += p[k + size_t(j)];
      for (; k < e; ++k) a[0] += p[k];
      uint64_t s = 0;
      for (uint64_t x : a) s += x;
      sink.fetch_add(s, std::memory_order_relaxed);
    };
    std::vector<std::thread> th;
    for (int i = 1; i < n_threads; ++i) th.emplace_back(body, i);
    while (ready.load() < n_threads - 1) std::this_thread::yield();
    const auto t0 = Clock::now();
    go.store(true, std::memory_order_release);
    ready.fetch_add(1);
    body(0);
    for (auto& t : th) t.join();
    const double s = seconds_since(t0);
    best = std::max(best, double(n_words * sizeof(uint64_t)) / s / 1e9);
  }
  if (sink.load() == 42) std::fprintf(stderr, " ");  // keep the sums observable
  return best;
}

pllm_token argmax(const std::vector<float>& v) {
  return pllm_token(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace

std::function<int()> add_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "measure prefill and decode speed, TTFT, memory and the bandwidth roofline");
  struct Opts {
    std::string model;
    int n_prompt = 512, n_gen = 128, threads = 0, reps = 3;
    bool json = false, tg_empty = false;
    SessionOptions sess;  // --int8-act, --no-fuse, --profile
    CacheOptions cache;   // with a prefix cache: also time restoring the prompt vs computing it
    int bw_mib = 1024;
    int parallel = 0;  // > 0: N sequences advanced together (bench_parallel.h)
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("-m,--model", o->model, "GGUF file");
  cmd->add_option("-p,--n-prompt", o->n_prompt, "prompt tokens per repetition (default 512)");
  cmd->add_option("-n,--n-gen", o->n_gen, "generated tokens per repetition (default 128)");
  cmd->add_option("-t,--threads", o->threads, "threads (default: physical performance cores)");
  cmd->add_option("-r,--reps", o->reps, "repetitions (default 3)");
  o->sess.add_to(cmd);
  o->cache.add_to(cmd);
  cmd->add_flag("--tg-empty", o->tg_empty,
                "also time N decoded tokens from an empty context, as llama-bench's tg test does (tg0_tps)");
  cmd->add_option("--parallel", o->parallel,
                  "N sequences of -p prompt tokens then -n decode steps each, all advanced together in one "
                  "forward pass per step (adds parallel, pp_agg_tps, tg_agg_tps, tg_step_ms)");
  cmd->add_option("--bw-mib", o->bw_mib, "buffer for the bandwidth measurement in MiB (default 1024, 0 = skip)");
  cmd->add_flag("--json", o->json, "print one JSON object");
  return [o]() {
    if (o->n_prompt < 1 || o->n_prompt > (1 << 20)) fail("-p must be between 1 and 1048576");
    if (o->n_gen < 1 || o->n_gen > (1 << 20)) fail("-n must be between 1 and 1048576");
    if (o->reps < 1 || o->reps > 1000) fail("-r must be between 1 and 1000");
    if (o->threads < 0 || o->threads > 256) fail("-t must be between 0 and 256");
    if (o->bw_mib < 0 || o->bw_mib > (1 << 16)) fail("--bw-mib must be between 0 and 65536");
    if (o->parallel < 0 || o->parallel > 64) fail("--parallel must be between 1 and 64");
    if (o->parallel > 0 && (o->cache.enabled() || o->tg_empty || o->sess.profile))
      fail("--parallel does not combine with a prefix cache, --tg-empty or --profile");
    int threads = o->threads;
    if (threads == 0) threads = pllm_default_threads();

    const std::string path = resolve_model_path(o->model);
    double pp_mean = 0, pp_sd = 0, tg_mean = 0, tg_sd = 0, ttft_mean = 0, rss = 0;
    uint64_t weight_bytes = 0, token_bytes = 0, kv_bytes = 0;
    double tg0_mean = 0, tg0_sd = 0;
    double cold_ttft = 0, warm_ttft = 0;
    int cached_tokens = 0;
    int repacked = 0, copied = 0;
    pllm_prefix_cache_counters counters{};
    std::vector<double> pp, tg, ttft, tg0;
    ParallelBench par;
    {
      Model model(path, false, o->sess.repack_weights());
      weight_bytes = pllm_model_weight_bytes(model.p);
      token_bytes = pllm_model_weight_bytes_per_token(model.p);
      repacked = pllm_model_n_repacked(model.p);
      copied = pllm_model_n_copied(model.p);
      const int32_t n_vocab = pllm_model_n_vocab(model.p);
      const int n_ctx_train = pllm_model_n_ctx_train(model.p);
      const long need = long(o->n_prompt) + long(o->n_gen);
      if (n_ctx_train > 0 && need > n_ctx_train)
        fail("-p + -n = " + std::to_string(need) + " exceeds the model's training context of " +
             std::to_string(n_ctx_train));
      SessionOptions so = o->sess;
      so.n_ctx = int(need);
      so.threads = threads;
      SplitMix rng{0x5EED};
      if (o->parallel > 0) {
        std::vector<std::vector<pllm_token>> prompts(size_t(o->parallel), std::vector<pllm_token>(size_t(o->n_prompt)));
        for (auto& p : prompts)
          for (auto& t : p) t = random_token(model, rng);
        auto next = [&](pllm_token t) { return pllm_model_is_eog(model.p, t) ? random_token(model, rng) : t; };
        par = bench_parallel(model, so, threads, prompts, o->n_gen, o->reps, next);
        for (size_t r = 0; r < par.tg_agg.size(); ++r) {  // per sequence
          pp.push_back(par.pp_agg[r] / o->parallel);
          tg.push_back(par.tg_agg[r] / o->parallel);
          ttft.push_back(par.ttft_ms[r]);
        }
      }
      Session session(model, so);
      kv_bytes = pllm_session_kv_bytes(session.p);

      std::vector<pllm_token> prompt(size_t(o->n_prompt));
      for (auto& t : prompt) t = random_token(model, rng);
      std::vector<float> logits(static_cast<size_t>(n_vocab));

      // One decode step: evaluate `tok`, return the next input (greedy, EOG replaced).
      auto step = [&](pllm_token tok) {
        check(pllm_session_eval(session.p, &tok, 1, logits.data()), "decoding");
        pllm_token next = argmax(logits);
        if (pllm_model_is_eog(model.p, next)) next = random_token(model, rng);
        return next;
      };

      // Warm-up: page the weights in and wake the threads (not timed).
      check(pllm_session_eval(session.p, prompt.data(), std::min<size_t>(prompt.size(), 32), nullptr), "warm-up");
      {
        pllm_token t = prompt[0];
        for (int i = 0; i < std::min(o->n_gen, 4); ++i) t = step(t);
      }

      for (int r = 0; r < (o->parallel > 0 ? 0 : o->reps); ++r) {
        pllm_session_reset(session.p);
        const auto t0 = Clock::now();
        check(pllm_session_eval(session.p, prompt.data(), prompt.size(), nullptr), "prefill");
        const double prefill_s = seconds_since(t0);
        pllm_token tok = prompt.back();
        const auto t1 = Clock::now();
        tok = step(tok);
        const double first_s = seconds_since(t1);
        for (int i = 1; i < o->n_gen; ++i) tok = step(tok);
        const double decode_s = seconds_since(t1);
        pp.push_back(double(o->n_prompt) / prefill_s);
        tg.push_back(double(o->n_gen) / decode_s);
        ttft.push_back((prefill_s + first_s) * 1e3);
        if (o->tg_empty) {
          pllm_session_reset(session.p);
          tok = prompt.back();
          const auto t2 = Clock::now();
          for (int i = 0; i < o->n_gen; ++i) tok = step(tok);
          tg0.push_back(double(o->n_gen) / seconds_since(t2));
        }
      }
      const MeanSd p = mean_sd(pp), g = mean_sd(tg), f = mean_sd(ttft);
      pp_mean = p.mean, pp_sd = p.sd, tg_mean = g.mean, tg_sd = g.sd, ttft_mean = f.mean;
      const MeanSd g0 = mean_sd(tg0);
      tg0_mean = g0.mean, tg0_sd = g0.sd;
      if (o->cache.enabled()) {
        // TTFT of the prompt computed (and inserted), then restored by a fresh session
        // state: what a cached prefix saves.
        PrefixCache cache(model, o->cache);
        cache.attach(session);
        pllm_sampling_params sp = pllm_sampling_default_params();
        sp.temperature = 0;
        sp.max_tokens = 1;
        pllm_generation_stats st{};
        pllm_session_reset(session.p);
        check(pllm_generate(session.p, prompt.data(), prompt.size(), &sp, nullptr, nullptr, &st), "cache cold run");
        cold_ttft = st.ttft_ms;
        pllm_session_reset(session.p);
        check(pllm_generate(session.p, prompt.data(), prompt.size(), &sp, nullptr, nullptr, &st), "cache warm run");
        warm_ttft = st.ttft_ms;
        cached_tokens = st.n_cached_tokens;
        counters = cache.stats();
        check(pllm_session_set_prefix_cache(session.p, nullptr), "detaching the prefix cache");
      }
      rss = peak_rss_mb();
      session.report_profile(o->sess);
      session.report_backend(o->sess);
    }

    const double bw = o->bw_mib > 0 ? measure_read_bandwidth(threads, size_t(o->bw_mib) << 20, 5) : 0.0;
    const double roofline = token_bytes && bw > 0 ? bw * 1e9 / double(token_bytes) : 0.0;
    const double achieved = tg_mean * double(token_bytes) / 1e9;

    if (o->json) {
      nlohmann::json j = {{"model", path},
                          {"isa", pllm_isa()},
                          {"threads", threads},
                          {"n_prompt", o->n_prompt},
                          {"n_gen", o->n_gen},
                          {"reps", o->reps},
                          {"act", o->sess.act.name()},
                          {"repacked_tensors", repacked},
                          {"copied_tensors", copied},
                          {"fuse", !o->sess.no_fuse},
                          {"kv_type", o->sess.kv_type},
                          {"kv_window", o->sess.kv_window},
                          {"kv_sinks", o->sess.kv_window > 0 ? o->sess.kv_sinks : 0},
                          {"kv_mb", double(kv_bytes) / 1e6},
                          {"pp_tps", pp_mean},
                          {"pp_sd", pp_sd},
                          {"tg_tps", tg_mean},
                          {"tg_sd", tg_sd},
                          {"ttft_ms", ttft_mean},
                          {"peak_rss_mb", rss},
                          {"weights_mb", double(weight_bytes) / 1e6},
                          {"bytes_per_token_mb", double(token_bytes) / 1e6},
                          {"bandwidth_gbs", bw},
                          {"achieved_gbs", achieved},
                          {"roofline_tps", roofline},
                          {"roofline_fraction", roofline > 0 ? tg_mean / roofline : 0.0},
                          {"pp_runs", pp},
                          {"tg_runs", tg},
                          {"ttft_runs", ttft}};
      if (o->cache.enabled()) {
        j["cache"] = {{"cold_ttft_ms", cold_ttft}, {"warm_ttft_ms", warm_ttft}, {"cached_tokens", cached_tokens}};
        for (const auto& [name, value] : counter_fields(counters)) j["cache"][name] = value;
      }
      if (o->parallel > 0) {
        j["parallel"] = o->parallel;
        j["pp_agg_tps"] = mean_sd(par.pp_agg).mean;
        j["tg_agg_tps"] = mean_sd(par.tg_agg).mean;
        j["tg_agg_sd"] = mean_sd(par.tg_agg).sd;
        j["tg_step_ms"] = mean_sd(par.tg_step_ms).mean;
        j["tg_agg_runs"] = par.tg_agg;
      }
      if (o->tg_empty) {
        j["tg0_tps"] = tg0_mean;
        j["tg0_sd"] = tg0_sd;
        j["tg0_runs"] = tg0;
      }
      std::printf("%s\n", j.dump(2).c_str());
      return 0;
    }
    std::printf("model            %s\n", path.c_str());
    const std::string act = std::string(" (") + o->sess.act.name() + " activations)";
    std::printf("isa / threads    %s / %d%s%s%s\n", pllm_isa(), threads, act.c_str(),
                repacked ? (", " + std::to_string(repacked) + " tensors repacked").c_str() : "",
                copied ? (", " + std::to_string(copied) + " copied to huge pages").c_str() : "");
    std::printf("reps             %d (after one warm-up)\n", o->reps);
    std::printf("%-16s %12s %10s\n", "test", "tok/s", "sd");
    std::printf("%-16s %12.2f %10.2f\n", ("pp" + std::to_string(o->n_prompt)).c_str(), pp_mean, pp_sd);
    std::printf("%-16s %12.2f %10.2f\n", ("tg" + std::to_string(o->n_gen)).c_str(), tg_mean, tg_sd);
    if (o->tg_empty)
      std::printf("%-16s %12.2f %10.2f   (from an empty context)\n", ("tg" + std::to_string(o->n_gen) + "@0").c_str(),
                  tg0_mean, tg0_sd);
    if (o->parallel > 0)
      std::printf("parallel         %d sequences: pp %.2f tok/s, tg %.2f tok/s summed; %.2f ms per decode step\n",
                  o->parallel, mean_sd(par.pp_agg).mean, mean_sd(par.tg_agg).mean, mean_sd(par.tg_step_ms).mean);
    std::printf("TTFT             %.1f ms (prefill of %d tokens + first token)\n", ttft_mean, o->n_prompt);
    if (o->cache.enabled())
      std::printf("prefix cache     TTFT %.1f ms computed, %.1f ms with %d tokens restored; RAM hits %llu/%llu, "
                  "disk hits %llu/%llu\n",
                  cold_ttft, warm_ttft, cached_tokens, (unsigned long long)counters.ram_hits,
                  (unsigned long long)(counters.ram_hits + counters.ram_misses), (unsigned long long)counters.disk_hits,
                  (unsigned long long)(counters.disk_hits + counters.disk_misses));
    std::printf("peak RSS         %.1f MiB\n", rss);
    std::printf("KV cache         %.1f MB (%s%s)\n", double(kv_bytes) / 1e6, o->sess.kv_type.c_str(),
                o->sess.kv_window > 0 ? (", window " + std::to_string(o->sess.kv_window) + " + " +
                                         std::to_string(o->sess.kv_sinks) + " sinks").c_str()
                                      : "");
    std::printf("weights          %.1f MB (%.1f MB read per decoded token)\n", double(weight_bytes) / 1e6,
                double(token_bytes) / 1e6);
    if (bw > 0) {
      std::printf("read bandwidth   %.1f GB/s (%d threads, best of 5 over %d MiB)\n", bw, threads, o->bw_mib);
      std::printf("roofline         %.1f tok/s; decode reached %.1f GB/s = %.0f%% of it\n", roofline, achieved,
                  100.0 * tg_mean / roofline);
    }
    return 0;
  };
}

}  // namespace cli
