// `pocketllm perplexity`: perplexity of a model over a text file, measured the way llama.cpp's
// llama-perplexity does, plus KL divergence and top-1 agreement against a saved baseline run.
//
// The whole file is tokenized once (with BOS when the model adds one) and cut into non-overlapping
// chunks of -c tokens; a tail shorter than a chunk is dropped. Each chunk is evaluated from an empty
// KV cache, fed to the session in calls of at most -b tokens (one call ends where scoring starts;
// calls before it request no logits, the others every position's); when the model adds BOS, the
// chunk's first token is replaced by BOS. Position j (first <= j <= ctx-2) is scored against
// token j+1: NLL = logsumexp(logits[j]) - logits[j][tok[j+1]], in double. first is ctx/2 (only
// positions that see at least half a chunk of context, as llama.cpp does) or 0 with --score-all
// (every token after the first). PPL = exp(mean NLL); its ± is llama.cpp's:
// PPL * sqrt(var(NLL) / (N-1)). Bits per byte = sum NLL / ln 2 / the bytes of the scored tokens'
// text: unlike PPL it compares models whose tokenizers cut the text differently (a pruned
// vocabulary needs more tokens for the same bytes).
//
// Memory: the KV cache of one chunk plus the logits of one -b call (b * n_vocab floats); scored
// rows are consumed call by call, so a chunk of 10,000+ tokens needs no more logits memory than
// one of 512. Long-context runs score the whole text as ONE chunk: -c <all tokens> --chunks 1
// --score-all (--allow-long past the training context); with a windowed KV cache (--kv-window)
// the cache stays flat as well.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli_common.h"
#include "commands.h"
#include "perplexity_file.h"

namespace cli {

namespace {

using Clock = std::chrono::steady_clock;

// Sum and sum of squares of the per-token NLLs.
struct NllStats {
  double sum = 0, sum2 = 0;
  size_t n = 0;
  void add(double v) { sum += v, sum2 += v * v, ++n; }
  double mean() const { return n ? sum / double(n) : 0.0; }
  double ppl() const { return std::exp(mean()); }
  // llama.cpp's uncertainty of the PPL: ppl * standard error of the mean NLL.
  double ppl_err() const {
    if (n < 2) return 0.0;
    const double m = mean(), var = sum2 / double(n) - m * m;
    return var > 0 ? ppl() * std::sqrt(var / double(n - 1)) : 0.0;
  }
};

// log(sum(exp(row))) in double, and the row's argmax.
double logsumexp(const float* row, int n, int32_t* argmax = nullptr) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i)
    if (row[i] > row[best]) best = i;
  const double mx = row[best];
  double s = 0;
  for (int i = 0; i < n; ++i) s += std::exp(double(row[i]) - mx);
  if (argmax) *argmax = best;
  return mx + std::log(s);
}

// KL(base || current) for one position. base: the saved log-probs (half precision, so they are
// renormalised first); cur: this run's logits with their logsumexp.
double kl_divergence(const float* base, double base_lse, const float* cur, double cur_lse, int n) {
  double kl = 0;
  for (int i = 0; i < n; ++i) {
    const double lb = double(base[i]) - base_lse;
    kl += std::exp(lb) * (lb - (double(cur[i]) - cur_lse));
  }
  return std::max(kl, 0.0);
}

std::string duration(double s) {
  char b[32];
  if (s < 60) std::snprintf(b, sizeof b, "%.0fs", s);
  else std::snprintf(b, sizeof b, "%dm%02ds", int(s / 60), int(s) % 60);
  return b;
}

}  // namespace

std::function<int()> add_perplexity(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("perplexity", "perplexity of a text (llama-perplexity's method), KL against a baseline");
  struct Opts {
    std::string model, file, save_logits, kl_base;
    int ctx = 512, chunks = 0, buckets = 0;
    bool score_all = false, json = false, allow_long = false;
    SessionOptions sess;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("-m,--model", o->model, "GGUF model");
  cmd->add_option("-f,--file", o->file, "text file to score")->required();
  cmd->add_option("-c,--ctx-size", o->ctx, "tokens per chunk (default 512)");
  cmd->add_option("--buckets", o->buckets,
                  "also report the perplexity of every N consecutive scored tokens (flatness over a long window)");
  cmd->add_option("--chunks", o->chunks, "score at most N chunks (default all)");
  cmd->add_flag("--score-all", o->score_all,
                "score every token after the first of a chunk (default: the second half, as llama.cpp)");
  cmd->add_option("--save-logits", o->save_logits, "write the scored positions' log-probs (fp16) as a KL baseline");
  cmd->add_option("--kl-base", o->kl_base, "compare with a --save-logits file: KL divergence, top-1 agreement");
  cmd->add_flag("--allow-long", o->allow_long, "allow -c beyond the model's training context");
  cmd->add_flag("--json", o->json, "print one JSON object on stdout (progress stays on stderr)");
  cmd->add_option("-t,--threads", o->sess.threads, "threads (default: physical performance cores)");
  o->sess.add_to(cmd);
  return [o]() {
    const int ctx = o->ctx;
    if (ctx < 16 || ctx > (1 << 20)) fail("-c must be between 16 and 1048576 tokens (got " + std::to_string(ctx) + ")");
    // -b (SessionOptions): tokens per evaluation call, which is also the session's batch.
    const int batch = o->sess.batch == 0 ? std::min(ctx, 512) : o->sess.batch;
    if (batch < 1 || batch > ctx) fail("-b must be between 1 and -c (" + std::to_string(ctx) + ")");
    if (o->buckets < 0) fail("--buckets must be 0 (off) or more");
    if (o->chunks < 0) fail("--chunks must be 0 (all) or more");
    if (o->sess.threads < 0 || o->sess.threads > 256) fail("-t must be between 0 and 256");
    if (!o->save_logits.empty() && o->save_logits == o->kl_base)
      fail("--save-logits and --kl-base name the same file");

    const std::string text = read_file(o->file);
    if (text.empty()) fail("the text file " + o->file + " is empty");
    const std::string model_path = resolve_model_path(o->model);
    Model model(model_path, false, o->sess.repack_weights());
    const int n_vocab = pllm_model_n_vocab(model.p);
    const int n_ctx_train = pllm_model_n_ctx_train(model.p);
    // A sliding window (--kv-window) keeps every attention span within it: no limit then.
    if (n_ctx_train > 0 && ctx > n_ctx_train && !o->allow_long && o->sess.kv_window == 0)
      fail("-c " + std::to_string(ctx) + " exceeds the model's training context of " + std::to_string(n_ctx_train) +
           " (pass --allow-long to score past it, or use --kv-window)");
    const bool add_bos = pllm_model_add_bos(model.p) != 0;
    const pllm_token bos = pllm_model_bos(model.p);
    const std::vector<pllm_token> tokens = tokenize(model, text, true, false);
    // Bytes of every token's text, for bits per byte (control tokens: none).
    std::vector<uint32_t> piece_bytes(size_t(n_vocab), 0);
    for (pllm_token id = 0; id < n_vocab; ++id) {
      char buf[256];
      size_t n = 0;
      const pllm_status st = pllm_detokenize(model.p, &id, 1, 0, buf, sizeof buf, &n);
      if (st != PLLM_OK && st != PLLM_ERR_OUT_OF_RANGE) check(st, "measuring the tokens' text");
      piece_bytes[size_t(id)] = uint32_t(n);
    }
    if (tokens.size() < size_t(ctx))
      fail(o->file + " has " + std::to_string(tokens.size()) + " tokens; -c " + std::to_string(ctx) +
           " needs at least " + std::to_string(ctx) + " (one chunk): use a longer text or a smaller -c");
    const size_t max_chunks = tokens.size() / size_t(ctx);
    const size_t n_chunks = o->chunks > 0 ? std::min(size_t(o->chunks), max_chunks) : max_chunks;
    const int first = o->score_all ? 0 : ctx / 2;
    const size_t per_chunk = size_t(ctx - 1 - first);

    // The tokens each chunk evaluates (BOS in front when the model adds one).
    auto chunk_tokens = [&](size_t c, std::vector<pllm_token>& out) {
      out.assign(tokens.begin() + ptrdiff_t(c * size_t(ctx)), tokens.begin() + ptrdiff_t((c + 1) * size_t(ctx)));
      if (add_bos) out[0] = bos;
    };
    LogitsHeader header;
    header.n_vocab = uint32_t(n_vocab);
    header.n_ctx = uint32_t(ctx);
    header.first = uint32_t(first);
    header.n_chunks = uint32_t(n_chunks);
    header.flags = add_bos ? LogitsHeader::kFlagBos : 0;
    header.n_rows = uint64_t(n_chunks) * per_chunk;
    std::vector<pllm_token> chunk;
    uint64_t hash = 0xcbf29ce484222325ull;
    for (size_t c = 0; c < n_chunks; ++c) {
      chunk_tokens(c, chunk);
      hash = fnv1a64(chunk.data(), chunk.size(), hash);
    }
    header.tokens_hash = hash;
    std::optional<LogitsReader> base;
    if (!o->kl_base.empty()) base.emplace(o->kl_base, header);
    std::optional<LogitsWriter> saver;
    if (!o->save_logits.empty()) saver.emplace(o->save_logits, header);

    SessionOptions so = o->sess;
    so.n_ctx = ctx;
    so.batch = batch;
    Session session(model, so);
    std::vector<float> logits;
    try {
      logits.resize(size_t(batch) * size_t(n_vocab));
    } catch (const std::bad_alloc&) {
      fail("not enough memory for the logits of -b " + std::to_string(batch) + " (" +
           std::to_string(size_t(batch) * size_t(n_vocab) * 4 >> 20) + " MiB): use a smaller -b");
    }
    std::vector<float> base_row(base ? size_t(n_vocab) : 0);

    const bool tty = isatty(STDERR_FILENO) != 0;
    std::fprintf(stderr,
                 "perplexity: %s: %zu tokens, %zu of %zu chunks of %d, scoring positions %d..%d of each "
                 "(%zu tokens), batch %d%s\n",
                 o->file.c_str(), tokens.size(), n_chunks, max_chunks, ctx, first, ctx - 2,
                 per_chunk, batch, add_bos ? ", BOS first" : "");

    NllStats nll, base_nll;
    std::vector<double> kls, chunk_ppl;
    std::vector<NllStats> bucket;  // --buckets: NLL of each run of N consecutive scored tokens
    size_t top1 = 0;
    uint64_t scored_bytes = 0;
    const size_t total_tokens = n_chunks * size_t(ctx);
    const auto t0 = Clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    auto progress = [&](size_t done) {
      const double s = elapsed(), frac = double(done) / double(total_tokens);
      const int width = 30, fill = int(frac * width);
      std::fprintf(stderr, "\r[%s%s] %zu/%zu tokens, ppl %.4f, %.0f tok/s, ETA %s   ",
                   std::string(size_t(fill), '#').c_str(), std::string(size_t(width - fill), '.').c_str(), done,
                   total_tokens, nll.n ? nll.ppl() : 0.0, s > 0 ? double(done) / s : 0.0,
                   frac > 0 ? duration(s / frac - s).c_str() : "?");
      std::fflush(stderr);
    };

    for (size_t c = 0; c < n_chunks; ++c) {
      chunk_tokens(c, chunk);
      pllm_session_reset(session.p);
      // Calls of at most -b tokens; one ends at `first` so the unscored head runs without the
      // output head (no logits requested).
      for (int start = 0, n = 0; start < ctx; start += n) {
        n = std::min(batch, ctx - start);
        if (start < first && start + n > first) n = first - start;
        const int lo = std::max(start, first), hi = std::min(start + n, ctx - 1);  // scored j in [lo, hi)
        check(pllm_session_eval(session.p, chunk.data() + start, size_t(n), lo < hi ? logits.data() : nullptr),
              "evaluating the chunk");
        for (int j = lo; j < hi; ++j) {
          const float* row = logits.data() + size_t(j - start) * size_t(n_vocab);
          const pllm_token target = chunk[size_t(j) + 1];
          int32_t am = 0;
          const double lse = logsumexp(row, n_vocab, &am);
          if (o->buckets > 0) {
            if (nll.n % size_t(o->buckets) == 0) bucket.emplace_back();
            bucket.back().add(lse - double(row[target]));
          }
          nll.add(lse - double(row[target]));
          scored_bytes += piece_bytes[size_t(target)];
          if (saver) saver->write_row(target, am, row, lse);
          if (base) {
            int32_t b_target = 0, b_am = 0;
            base->read_row(b_target, b_am, base_row.data());
            if (b_target != target) fail("base logits file " + o->kl_base + " scores other tokens");
            const double b_lse = logsumexp(base_row.data(), n_vocab);
            base_nll.add(b_lse - double(base_row[size_t(target)]));
            kls.push_back(kl_divergence(base_row.data(), b_lse, row, lse, n_vocab));
            top1 += b_am == am;
          }
        }
        if (tty) progress(c * size_t(ctx) + size_t(start + n));
      }
      chunk_ppl.push_back(nll.ppl());
      if (!tty) {
        std::fprintf(stderr, "[%zu]%.4f\n", c + 1, nll.ppl());
        if (c == 0 && n_chunks > 1)
          std::fprintf(stderr, "perplexity: %.2f s per chunk, ETA %s\n", elapsed(),
                       duration(elapsed() * double(n_chunks - 1)).c_str());
      }
    }
    const double seconds = elapsed();
    if (tty) std::fprintf(stderr, "\n");
    if (saver) saver->finish();

    double kl_mean = 0, kl_sd = 0, kl_p99 = 0, kl_max = 0;
    if (!kls.empty()) {
      for (double k : kls) kl_mean += k;
      kl_mean /= double(kls.size());
      for (double k : kls) kl_sd += (k - kl_mean) * (k - kl_mean);
      kl_sd = kls.size() > 1 ? std::sqrt(kl_sd / double(kls.size() - 1)) : 0.0;
      std::vector<double> sorted = kls;
      std::sort(sorted.begin(), sorted.end());
      const size_t k = size_t(std::ceil(0.99 * double(sorted.size()))) - 1;
      kl_p99 = sorted[std::min(k, sorted.size() - 1)];
      kl_max = sorted.back();
    }
    const double top1_agree = kls.empty() ? 0.0 : double(top1) / double(kls.size());
    const double eval_tps = seconds > 0 ? double(total_tokens) / seconds : 0.0;
    const double bits_per_byte = scored_bytes ? nll.sum / std::log(2.0) / double(scored_bytes) : 0.0;

    session.report_profile(o->sess);
    session.report_backend(o->sess);
    if (o->json) {
      nlohmann::ordered_json j = {{"model", model_path},
                                  {"file", o->file},
                                  {"ppl", nll.ppl()},
                                  {"ppl_sd", nll.ppl_err()},
                                  {"nll_mean", nll.mean()},
                                  {"tokens", nll.n},
                                  {"bytes", scored_bytes},
                                  {"bits_per_byte", bits_per_byte},
                                  {"chunks", n_chunks},
                                  {"ctx", ctx},
                                  {"batch", batch},
                                  {"first", first},
                                  {"score_all", o->score_all},
                                  {"bos", add_bos},
                                  {"file_tokens", tokens.size()},
                                  {"act", o->sess.act.name()},
                                  {"kv_type", o->sess.kv_type},
                                  {"kv_window", o->sess.kv_window},
                                  {"kv_sinks", o->sess.kv_window > 0 ? o->sess.kv_sinks : 0},
                                  {"seconds", seconds},
                                  {"eval_tps", eval_tps},
                                  {"chunk_ppl", chunk_ppl}};
      if (o->buckets > 0) {
        std::vector<double> b;
        for (const NllStats& s : bucket) b.push_back(s.ppl());
        j["bucket_tokens"] = o->buckets;
        j["ppl_buckets"] = b;
      }
      if (base) {
        j["ppl_base"] = base_nll.ppl();
        j["kl_mean"] = kl_mean;
        j["kl_sd"] = kl_sd;
        j["kl_p99"] = kl_p99;
        j["kl_max"] = kl_max;
        j["top1_agree"] = top1_agree;
      }
      std::printf("%s\n", j.dump(2).c_str());
      return 0;
    }
    std::printf("Final estimate: PPL = %.4f +/- %.5f\n", nll.ppl(), nll.ppl_err());
    std::printf("bits per byte: %.4f (%llu bytes in the scored tokens)\n", bits_per_byte,
                (unsigned long long)scored_bytes);
    for (size_t i = 0; i < bucket.size(); ++i)
      std::printf("  scored tokens %zu..%zu: PPL %.4f\n", i * size_t(o->buckets),
                  i * size_t(o->buckets) + bucket[i].n - 1, bucket[i].ppl());
    std::printf("scored %zu tokens in %zu chunk%s of %d; %.1f s, %.1f tokens/s evaluated\n", nll.n, n_chunks,
                n_chunks == 1 ? "" : "s", ctx, seconds, eval_tps);
    if (base)
      std::printf("vs base: PPL(base) = %.4f; KL(base || this) mean %.6f (sd %.6f), p99 %.6f, max %.6f; "
                  "top-1 agreement %.4f%%\n",
                  base_nll.ppl(), kl_mean, kl_sd, kl_p99, kl_max, 100.0 * top1_agree);
    return 0;
  };
}

}  // namespace cli
