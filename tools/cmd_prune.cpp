// `pocketllm prune IN OUT --ffn R [--heads R] [--output-type T] [--calib FILE | --stats FILE]`: structured
// pruning into a smaller standard GGUF (quantizer/prune.h). Like `quantize`, an offline
// tool on the C++ libraries, not the C API.
#include <cstdio>
#include <unistd.h>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "cli_cpp_api.h"
#include "commands.h"
#include "prune_vocab_report.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "quantizer/act_stats.h"
#include "quantizer/calibration.h"
#include "quantizer/prune.h"
#include "quantizer/prune_plan.h"
#include "quantizer/prune_vocab.h"
#include "quantizer/row_quant.h"

namespace cli {
namespace {

// Calibration tokens by default: for the statistics alone, and when the compensation fits
// n_ff unknowns per output row on them (SmolLM2 at 25 %: 8192 tokens PPL 13.71, 16384 13.04).
constexpr int64_t kCalibTokens = 8192, kCompensateTokens = 32768;

struct PruneOpts {
  std::string in, out;
  double ffn = 0.0, heads = 0.0;
  std::string calib, stats, save_stats, requant, output_type, compensate = "auto", ffn_plan = "uniform";
  std::string gram, save_gram, sens_text;
  double ridge = pllm::kDefaultRidge, shrink = pllm::kDefaultShrink;
  int64_t sens_tokens = 512;
  int64_t calib_tokens = 0;  // 0: kCalibTokens, or kCompensateTokens when the fit needs activations
  int calib_ctx = 512;
  int threads = 0;
  bool weights_only = false;
  std::string vocab_keep;  // --vocab-keep FILE|N (quantizer/prune_vocab.h)
};


void check_ratio(double r, const char* flag) {
  if (!(r >= 0.0 && r <= 0.9)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", r);
    fail(std::string(flag) + " " + buf + " is out of range: give the fraction to remove, in [0, 0.9]");
  }
}

// Statistics of the activations feeding every weight: read from --stats (they must come
// from this very model) or gathered now by running --calib text through it.
// Both observers of one calibration run.
struct FanOut final : pllm::ActObserver {
  std::vector<pllm::ActObserver*> to;
  void observe(const pllm::Matrix& W, const float* X, int n_tok) override {
    for (auto* o : to) o->observe(W, X, n_tok);
  }
};

pllm::ActStats activation_stats(const PruneOpts& o, const std::shared_ptr<const pllm::Model>& model,
                                const std::vector<int32_t>& text, pllm::GramStats* gram) {
  if (!o.stats.empty()) {
    pllm::ActStats s = unwrap(pllm::ActStats::load(o.stats));
    unwrap(s.check_matches(model->file(), model->identity()));
    return s;
  }
  pllm::CalibrationOptions co;
  co.n_ctx = o.calib_ctx;
  co.max_tokens = o.calib_tokens;
  co.n_threads = o.threads;
  auto cal = unwrap(pllm::Calibrator::create(model, co));
  pllm::ActStats s;
  s.model_identity = model->identity();
  s.model_name = unwrap(model->file().get_string_or("general.name", std::filesystem::path(o.in).filename().string()));
  s.source = std::filesystem::path(o.calib).filename().string();
  std::printf("calibrating on %lld tokens of %s\n", (long long)cal->planned_tokens(text.size()),
               o.calib.c_str());
  FanOut both;
  both.to = {&s};
  if (gram) both.to.push_back(gram);
  s.n_tokens = uint64_t(unwrap(cal->run(text, &both, {})));
  if (gram) gram->finish();
  if (!o.save_stats.empty()) {
    unwrap(s.save(o.save_stats));
    std::printf("saved activation statistics to %s (reuse them with --stats)\n", o.save_stats.c_str());
  }
  return s;
}

pllm::Compensate choose_compensation(const PruneOpts& o, const pllm::Model& model) {
  const pllm::Compensate asked = o.compensate != "auto" ? unwrap(pllm::parse_compensate(o.compensate))
                                                          : pllm::Compensate::none;
  // No channel or head removed (--output-type / --vocab-keep alone): nothing to make up for.
  if (o.ffn == 0.0 && o.heads == 0.0) return pllm::Compensate::none;
  if (o.compensate != "auto") return asked;
  if (o.calib.empty()) return pllm::Compensate::none;  // --stats / --weights-only: nothing to fit on
  const std::string& arch = model.config().arch;
  return arch == "llama" || arch == "deci" ? pllm::Compensate::lsq_bias : pllm::Compensate::lsq;
}

// The Gram matrices the fit needs: ffn_down's input when FFN channels go, attn_output's when
// heads go. They are (n + 1)² doubles per layer, so say what that costs.
std::unique_ptr<pllm::GramStats> gram_stats_for(const PruneOpts& o, const pllm::Model& model) {
  const pllm::ModelConfig& c = model.config();
  std::vector<std::string> names;
  std::vector<int64_t> cols;
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    if (o.ffn > 0.0) names.push_back(p + "ffn_down.weight"), cols.push_back(c.n_ff_at(l));
    if (o.heads > 0.0) names.push_back(p + "attn_output.weight"), cols.push_back(c.q_dim());
  }
  const double mib = double(pllm::GramStats::bytes_for(cols)) / (1024.0 * 1024.0);
  std::printf("compensation: collecting the input Gram matrices of %zu weights (%.0f MiB)\n", names.size(),
               mib);
  return std::make_unique<pllm::GramStats>(std::move(names));
}

// --ffn-plan sensitivity: per-layer sizes from each layer's measured KL (quantizer/prune_plan.h).
std::vector<int> sensitivity_plan(const PruneOpts& o, const std::shared_ptr<pllm::Model>& model,
                                  const pllm::PruneOptions& po, const std::vector<int32_t>& text) {
  pllm::CalibrationOptions kl;
  kl.n_ctx = o.calib_ctx;
  kl.max_tokens = o.sens_tokens;
  kl.n_threads = o.threads;
  std::fflush(stdout);
  const bool tty = isatty(fileno(stderr));  // a progress line for people, nothing for pipes
  const auto plan = unwrap(pllm::plan_ffn_sensitivity(model, po, text, kl, [tty](int l, int n) {
    if (!tty) return;
    if (l < n) std::fprintf(stderr, "\rsensitivity: layer %d/%d", l + 1, n);
    else std::fprintf(stderr, "\n");
  }));
  std::printf("ffn plan: sensitivity (KL of each layer cut alone to the uniform size, %lld tokens)\n",
              (long long)plan.tokens);
  for (size_t l = 0; l < plan.layers.size(); ++l) {
    const auto& L = plan.layers[l];
    std::printf("  layer %3zu: uniform %5d  probe KL %.5f  ->  keep %5d  predicted KL %.5f\n", l, L.uniform_keep,
                L.probe_kl, L.keep, L.predicted_kl);
  }
  return plan.keep();
}

// The least-squares fit estimates each pruned layer's channel correlations from the
// calibration tokens; with few tokens per channel the shrinkage keeps it from chasing the text,
// but it still fits worse than with more text, so say so (on stderr, once the fit succeeded:
// a failed run's one line is its error).
void warn_short_calibration(const pllm::GramStats& gram, pllm::Compensate comp) {
  if (comp != pllm::Compensate::lsq && comp != pllm::Compensate::lsq_bias) return;
  uint64_t tokens = 0;
  int channels = 0;
  if (!gram.short_calibration(tokens, channels)) return;
  std::fflush(stdout);
  std::fprintf(stderr,
               "warning: the compensation is fitted on %llu calibration tokens, %.1f per input channel of the "
               "widest pruned layer (%d); below %d per channel (%llu tokens here) the fit is noticeably worse "
               "(docs/QUANTIZATION.md, \"Short calibration\"): give --calib more text\n",
               (unsigned long long)tokens, double(tokens) / double(channels), channels,
               pllm::kShortCalibTokensPerChannel,
               (unsigned long long)(uint64_t(pllm::kShortCalibTokensPerChannel) * uint64_t(channels)));
}

void report(const PruneOpts& o, const pllm::Model& model, const pllm::PrunePlan& plan, pllm::Compensate comp) {
  const pllm::ModelConfig& c = model.config();
  const char* importance =
      comp == pllm::Compensate::bias ? "||W_down[:,j]||^2 * Var(x_j): what the bias cannot absorb (calibration)"
      : comp != pllm::Compensate::none
          ? "the least-squares fit's error growth (greedy Optimal Brain Surgeon on the calibration activations)"
      : plan.from_activations ? "||W_down[:,j]|| * sqrt(mean x_j^2) (activation statistics)"
                              : "||W_gate[j,:]*ffn_norm|| * ||W_up[j,:]*ffn_norm|| * ||W_down[:,j]|| (weights only)";
  std::printf("importance: %s\n", importance);
  if (!plan.from_activations)
    std::printf("note: importance from weights alone cannot see which channels the activations use "
                "and can remove ones the model depends on\n");
  for (int l = 0; l < c.n_layer; ++l) {
    const pllm::LayerPrunePlan& P = plan.layers[size_t(l)];
    std::printf("layer %3d: ffn %5d -> %5zu (multiple of %d)", l, P.n_ff, P.keep_ff.size(),
                plan.ffn_align[size_t(l)]);
    if (P.ffn_error > 0.0) std::printf("  fit error %.3g", P.ffn_error);
    if (o.heads > 0.0) std::printf("  kv heads %d -> %zu", P.n_kv, P.keep_kv.size());
    std::printf("\n");
  }
  if (o.ffn > 0.0) {
    int64_t before = 0, after = 0;
    for (const auto& P : plan.layers) before += P.n_ff, after += int64_t(P.keep_ff.size());
    std::printf("ffn channels: %lld -> %lld (%.1f%% removed; asked %.1f%%, kept counts rounded to whole blocks)\n",
                (long long)before, (long long)after, 100.0 * double(before - after) / double(before), 100.0 * o.ffn);
  }
  const std::string arch = pllm::pruned_architecture(c, plan);
  if (arch != c.arch)
    std::printf("note: layers differ in FFN size; written as architecture '%s' (llama.cpp's llama reads one size "
                "for every layer, its deci reads them per layer)\n", arch.c_str());
  else if (!pllm::plan_ffn_uniform(plan))
    std::printf("note: layers differ in FFN size; llama.cpp reads one size for every %s layer, so only pocketllm "
                "runs this file\n", arch.c_str());
  if (!o.output_type.empty()) {
    const std::string head = pllm::output_head_name(model.file());
    const pllm::TensorInfo* t = model.file().tensor(head);
    std::printf("output head: %s %s -> %s%s\n", head.c_str(), t ? pllm::type_traits(t->type)->name : "?",
                o.output_type.c_str(), head == "token_embd.weight" ? " (tied: the embedding changes with it)" : "");
  }
  if (o.heads > 0.0 && plan.layers.front().keep_kv.size() == size_t(c.n_head_kv))
    std::printf("kv heads: none removed (%d per layer; %.0f%% rounds to zero groups)\n", c.n_head_kv, 100.0 * o.heads);
}

}  // namespace

std::function<int()> add_prune(CLI::App& app) {
  auto* cmd = app.add_subcommand("prune", "remove the least important FFN channels (and KV groups) per layer, "
                                          "writing a smaller GGUF");
  auto o = std::make_shared<PruneOpts>();
  cmd->add_option("input", o->in, "GGUF model to prune")->required();
  cmd->add_option("output", o->out, "GGUF file to write")->required();
  cmd->add_option("--ffn", o->ffn, "fraction of each layer's FFN channels to remove, in [0, 0.9]");
  cmd->add_option("--heads", o->heads, "fraction of each layer's KV groups (a kv head with its query heads) "
                                       "to remove, in [0, 0.9]");
  auto* calib = cmd->add_option("--calib", o->calib, "text file: importance from the activations it produces (recommended)");
  auto* stats = cmd->add_option("--stats", o->stats, "activation statistics of this model (from `quantize`'s calibration)");
  calib->excludes(stats);
  cmd->add_flag("--weights-only", o->weights_only,
                "rank channels by weight norms alone, without activation statistics (much worse: see "
                "docs/QUANTIZATION.md)")
      ->excludes(calib)
      ->excludes(stats);
  cmd->add_option("--save-stats", o->save_stats, "with --calib: also save the statistics to this file")->needs(calib);
  cmd->add_option("--calib-tokens", o->calib_tokens, "with --calib: tokens to run (default 8192; 32768 when a "
                                                     "compensation fits on them: the fit has n_ff unknowns per row)");
  cmd->add_option("--calib-ctx", o->calib_ctx, "with --calib: tokens per chunk (default 512)");
  cmd->add_option("--requant", o->requant, "how rows that lose columns (ffn_down, attn_output) are quantised again: "
                                         "rtn, mse or act (default: act with statistics, else mse)");
  cmd->add_option("--output-type", o->output_type,
                  "also re-quantise the output head (the tied embedding when there is no output.weight) to this "
                  "type, e.g. q4_0: FFN pruning cannot shrink it, and it can be a third of the bytes per token");
  cmd->add_option("--compensate", o->compensate,
                  "how the kept weights make up for what is removed: none (drop), bias (the removed channels' "
                  "mean output moves into a bias), lsq (re-fit the kept columns by ridge least squares on the "
                  "--calib activations), lsq-bias (both); auto (default): lsq-bias where the architecture reads "
                  "output biases (llama), else lsq; none with --stats");
  cmd->add_option("--ffn-plan", o->ffn_plan,
                  "uniform (default): --ffn's fraction in every layer; sensitivity: the same total, shared out by "
                  "each layer's measured KL cost (needs --calib; a llama model is then written as deci)")
      ->check(CLI::IsMember({"uniform", "sensitivity"}));
  cmd->add_option("--sens-tokens", o->sens_tokens, "--ffn-plan sensitivity: calibration tokens each layer's KL is "
                                                   "measured on (default 512)");
  cmd->add_option("--save-gram", o->save_gram, "with --calib and a compensation: also save the Gram matrices "
                                               "(large: (n_ff + 1)^2 doubles per layer)");
  cmd->add_option("--gram", o->gram, "Gram matrices of this model saved by --save-gram: no calibration run for "
                                     "the fit (give --stats for the statistics)");
  cmd->add_option("--sens-text", o->sens_text, "--ffn-plan sensitivity: measure the KL on this text (default: "
                                               "the --calib text)");
  cmd->add_option("--ridge", o->ridge, "lsq: ridge strength, a fraction of the mean input power (default "
                                       "1e-4)");
  cmd->add_option("--shrink", o->shrink, "lsq: per-channel shrinkage, s = SHRINK * channels / calibration tokens "
                                         "times each channel's variance; 0 turns it off (default 3; see "
                                         "docs/QUANTIZATION.md)");
  cmd->add_option("--vocab-keep", o->vocab_keep, kVocabKeepHelp)->type_name("FILE|N");
  cmd->add_option("-t,--threads", o->threads, "threads for calibration and re-quantisation (default: performance cores)");
  return [o]() {
    check_ratio(o->ffn, "--ffn");
    check_ratio(o->heads, "--heads");
    if (o->ffn == 0.0 && o->heads == 0.0 && o->output_type.empty() && o->vocab_keep.empty())
      fail("nothing to prune: give --ffn and/or --heads a fraction > 0 (or --output-type, --vocab-keep)");
    // Only FFN channels and KV groups are ranked by importance; the vocabulary is not.
    const bool vocab_only = !o->vocab_keep.empty() && o->ffn == 0.0 && o->heads == 0.0;
    if (o->calib_tokens < 0 || o->calib_ctx < 2) fail("--calib-tokens must be >= 1 and --calib-ctx >= 2");
    // Weight norms alone misrank channels badly (SmolLM2 at 10 %: perplexity 12 -> ~6000),
    // so that needs asking for; the importance normally comes from activations.
    if (o->calib.empty() && o->stats.empty() && !o->weights_only && !vocab_only)
      fail("prune needs channel importance from activations: give --calib TEXT or --stats FILE "
           "(or --weights-only to rank by weight norms alone, which is much worse)");
    std::optional<pllm::QuantMethod> requant;
    if (!o->requant.empty()) requant = unwrap(pllm::parse_quant_method(o->requant));
    if (requant == pllm::QuantMethod::act && o->calib.empty() && o->stats.empty())
      fail("--requant act needs activation statistics (--calib or --stats)");
    std::error_code ec;
    if (o->in == o->out || std::filesystem::equivalent(o->in, o->out, ec))
      fail("the output would overwrite the input (" + o->out + ")");

    if (o->ffn_plan == "sensitivity" && ((o->calib.empty() && o->sens_text.empty()) || o->ffn <= 0.0))
      fail("--ffn-plan sensitivity shares out --ffn's channels by measured KL: give --ffn > 0 and --calib "
           "(or --sens-text)");
    if (o->sens_tokens < 1) fail("--sens-tokens must be >= 1");
    if (!(o->ridge >= 0.0 && o->ridge <= 1e6)) fail("--ridge must be a number in [0, 1e6]");
    if (!(o->shrink >= 0.0 && o->shrink <= 1e6)) fail("--shrink must be a number in [0, 1e6]");
    auto model = unwrap(pllm::Model::load_for_tools(o->in));
    std::vector<int32_t> text;
    if (!o->calib.empty()) text = unwrap(pllm::tokenize_text_file(*model, o->calib));
    const std::vector<int32_t> sens_text =
        o->sens_text.empty() ? text : unwrap(pllm::tokenize_text_file(*model, o->sens_text));
    pllm::ActStats stats;
    pllm::VocabPrune vocab;  // --vocab-keep, planned before any slow calibration
    if (!o->vocab_keep.empty())
      vocab = unwrap(pllm::plan_vocab_keep(model->file(), model->tokenizer(), o->vocab_keep, o->calib));
    pllm::PruneOptions po;
    if (!o->vocab_keep.empty()) po.vocab = &vocab;
    po.ffn_ratio = o->ffn;
    po.head_ratio = o->heads;
    po.ridge = o->ridge;
    po.shrink = o->shrink;
    po.compensate = choose_compensation(*o, *model);
    const std::string& arch = model->config().arch;
    if (pllm::compensate_has_bias(po.compensate) && arch != "llama" && arch != "deci")
      fail(std::string("--compensate ") + pllm::compensate_name(po.compensate) + " writes output biases, which "
           "llama.cpp's " + arch + " does not read: use --compensate lsq");
    std::unique_ptr<pllm::GramStats> gram;
    bool collect = false;
    if (po.compensate != pllm::Compensate::none && (o->ffn > 0.0 || o->heads > 0.0)) {
      if (!o->gram.empty()) {
        gram = unwrap(pllm::GramStats::load(o->gram, model->file(), model->identity()));
      } else {
        if (o->calib_tokens == 0) o->calib_tokens = kCompensateTokens;
        if (o->calib.empty())
          fail(std::string("--compensate ") + pllm::compensate_name(po.compensate) +
               " fits the kept weights on calibration activations, which --stats does not hold: give --calib "
               "(or --gram)");
        gram = gram_stats_for(*o, *model);
        collect = true;
      }
      po.gram = gram.get();
    }
    if (o->calib_tokens == 0) o->calib_tokens = kCalibTokens;
    // Statistics serve the FFN / KV ranking and re-quantisation: not a vocabulary-only prune.
    const bool stats_unused = vocab_only && o->output_type.empty() && requant != pllm::QuantMethod::act;
    if ((!o->calib.empty() || !o->stats.empty()) && !stats_unused) {
      stats = activation_stats(*o, model, text, collect ? gram.get() : nullptr);
      po.stats = &stats;
    }
    if (!o->save_gram.empty()) {
      if (!collect) fail("--save-gram: nothing collected (it needs --calib and a compensation other than none)");
      unwrap(gram->save(o->save_gram, model->identity()));
      std::printf("saved the Gram matrices to %s (reuse them with --gram and --stats)\n", o->save_gram.c_str());
    }
    po.requant = requant ? *requant : po.stats ? pllm::QuantMethod::act : pllm::QuantMethod::mse;
    po.n_threads = o->threads;
    if (!o->output_type.empty()) po.output_type = unwrap(pllm::parse_quant_type(o->output_type));
    if (o->ffn_plan == "sensitivity") po.ffn_keep = sensitivity_plan(*o, model, po, sens_text);
    const pllm::PrunePlan plan = unwrap(pllm::plan_prune(*model, po));
    if (po.gram) warn_short_calibration(*po.gram, po.compensate);
    // FFN / KV ranking: nothing of it applies to a vocabulary-only prune
    if (!vocab_only) report(*o, *model, plan, po.gram ? po.compensate : pllm::Compensate::none);
    if (po.compensate != pllm::Compensate::none && po.gram)
      std::printf("compensation: %s (ridge %g, shrink %g), fitted on %llu calibration tokens\n",
                  pllm::compensate_name(po.compensate), po.ridge, po.shrink, (unsigned long long)stats.n_tokens);
    if (po.vocab) report_vocab_plan(vocab);

    pllm::GgufWriter w;
    unwrap(pllm::build_pruned(*model, po, plan, std::filesystem::path(o->in).filename().string(), w));
    unwrap(w.write(o->out));
    // Read the result back through the full loader: what we wrote must be a model we run.
    auto pruned = unwrap(pllm::Model::load(o->out, /*vocab_only=*/false));
    const uint64_t p0 = pllm::count_parameters(model->file()), p1 = pllm::count_parameters(pruned->file());
    const uint64_t s0 = model->file().file_size(), s1 = pruned->file().file_size();
    std::printf("parameters: %.2f M -> %.2f M (%.1f%%)\n", double(p0) / 1e6, double(p1) / 1e6,
                100.0 * double(p1) / double(p0));
    std::printf("file size:  %.2f MB -> %.2f MB (%.1f%%)\n", double(s0) / 1e6, double(s1) / 1e6,
                100.0 * double(s1) / double(s0));
    if (po.vocab) report_vocab_bytes(model->file(), pruned->file());
    std::printf("wrote %s\n", o->out.c_str());
    return 0;
  };
}

}  // namespace cli
