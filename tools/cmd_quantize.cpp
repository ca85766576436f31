// `pocketllm quantize IN OUT --type T`: our own quantiser (src/quantizer/). Every 2-D
// weight of IN (any type the engine reads, dequantised to f32) is quantised to T (or the
// type the rules in quantizer/type_plan.h choose), other tensors are written as F32, and
// the metadata is copied with provenance keys. Methods: rtn (the reference quantisers),
// mse (per-block scale/clipping search), act (the search weighted by each input column's
// mean x² from calibration statistics: --calib runs a text through IN, --stats loads a
// --save-stats file).
//
// Unlike the other subcommands this one uses the C++ layers directly (calibration needs
// an activation observer, which the C API does not offer).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "cli_common.h"
#include "commands.h"
#include "model/model.h"
#include "quantizer/act_stats.h"
#include "quantizer/calibration.h"
#include "quantizer/quantize_model.h"

namespace cli {
namespace {

using pllm::QuantMethod;
using pllm::TensorType;

template <class T>
T or_fail(pllm::Result<T> r) {
  if (!r.ok()) fail(r.error().message);
  return std::move(r).value();
}
void or_fail(pllm::Result<void> r) {
  if (!r.ok()) fail(r.error().message);
}

// One line on stderr, redrawn in place, only when stderr is a terminal.
class Progress {
 public:
  Progress() : tty_(isatty(STDERR_FILENO) != 0) {}
  void draw(const char* what, int64_t done, int64_t total, const std::string& detail) {
    if (!tty_ || total <= 0) return;
    const int width = 30, fill = int(double(done) / double(total) * width);
    std::fprintf(stderr, "\r%s [%s%s] %lld/%lld %-40.40s", what, std::string(size_t(fill), '=').c_str(),
                 std::string(size_t(width - fill), ' ').c_str(), static_cast<long long>(done),
                 static_cast<long long>(total), detail.c_str());
    std::fflush(stderr);
    open_ = true;
  }
  void done() {
    if (open_) std::fprintf(stderr, "\r%*s\r", 100, "");
    open_ = false;
  }

 private:
  bool tty_;
  bool open_ = false;
};

std::string base_name(const std::string& path) {
  const size_t s = path.find_last_of('/');
  return s == std::string::npos ? path : path.substr(s + 1);
}

double mib(uint64_t bytes) { return double(bytes) / (1024.0 * 1024.0); }

void print_summary(const pllm::QuantizeReport& rep, const std::string& in, uint64_t in_bytes, const std::string& out,
                   TensorType base, QuantMethod method, const pllm::ActStats* stats) {
  std::printf("quantize: %s -> %s (type %s, method %s", in.c_str(), out.c_str(), pllm::quant_type_name(base).c_str(),
              pllm::quant_method_name(method));
  if (method == QuantMethod::act && stats)
    std::printf(", calibration %s, %llu tokens", stats->source.c_str(), static_cast<unsigned long long>(stats->n_tokens));
  std::printf(")\n");
  struct Row {
    int count = 0;
    uint64_t elements = 0, bytes = 0;
  };
  std::map<std::string, Row> by_type;
  for (const auto& t : rep.tensors) {
    Row& r = by_type[t.choice.quantized ? pllm::quant_type_name(t.choice.type) : "f32 (1-D)"];
    ++r.count;
    r.elements += t.n_elements;
    r.bytes += t.bytes;
  }
  std::printf("  %-10s %8s %12s %10s %8s\n", "type", "tensors", "elements", "MiB", "bpw");
  for (const auto& [name, r] : by_type)
    std::printf("  %-10s %8d %12llu %10.2f %8.3f\n", name.c_str(), r.count, static_cast<unsigned long long>(r.elements),
                mib(r.bytes), r.elements ? 8.0 * double(r.bytes) / double(r.elements) : 0.0);
  std::printf("2-D weights: %.2f M elements, %.2f MiB, %.3f bits per weight\n", double(rep.weight_elements()) / 1e6,
              mib(rep.weight_bytes()), rep.weight_bpw());
  std::printf("file: %.2f MiB (input %.2f MiB)\n", mib(rep.file_bytes), mib(in_bytes));
  // Fallbacks grouped by (wanted type, written type, row length), each with its count and
  // the first few names.
  std::map<std::tuple<std::string, std::string, uint64_t>, std::vector<std::string>> fallbacks;
  int n_unweighted = 0;
  for (const auto& t : rep.tensors) {
    if (t.choice.quantized && t.choice.fallback())
      fallbacks[{pllm::quant_type_name(t.choice.wanted), pllm::quant_type_name(t.choice.type), t.dims[0]}].push_back(
          t.name);
    if (method == QuantMethod::act && t.choice.quantized && !t.weighted) ++n_unweighted;
  }
  if (fallbacks.empty()) std::printf("fallbacks: none\n");
  for (const auto& [key, names] : fallbacks) {
    const auto& [wanted, got, cols] = key;
    std::string list;
    for (size_t i = 0; i < names.size() && i < 4; ++i) list += (i ? ", " : "") + names[i];
    if (names.size() > 4) list += ", ... (" + std::to_string(names.size() - 4) + " more)";
    std::printf("fallback: %zu tensor(s) %s -> %s (row length %llu is not a multiple of the %s block): %s\n",
                names.size(), wanted.c_str(), got.c_str(), static_cast<unsigned long long>(cols), wanted.c_str(),
                list.c_str());
  }
  if (n_unweighted > 0)
    std::printf("act: %d tensor(s) without activation statistics (not fed by an activation) used mse\n", n_unweighted);
  std::printf("time: %.1f s\n", rep.seconds);
}

}  // namespace

std::function<int()> add_quantize(CLI::App& app) {
  auto* cmd = app.add_subcommand("quantize", "quantise a GGUF model (rtn, mse or activation-aware)");
  struct Opts {
    std::string in, out, type, method = "rtn", calib, save_stats, stats;
    std::vector<std::string> tensor_types;
    bool pure = false;
    int64_t calib_tokens = 8192;
    int calib_ctx = 512, threads = 0;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("input", o->in, "model to quantise (any type the engine loads)")->required();
  cmd->add_option("output", o->out, "GGUF file to write")->required();
  cmd->add_option("--type", o->type, "f16, bf16, f32, q8_0, q6_k, q5_0, q5_1, q4_0, q4_1, q4_k")->required();
  cmd->add_option("--method", o->method, "rtn (default), mse (scale/clipping search) or act (activation-aware)");
  cmd->add_flag("--pure", o->pure, "every 2-D tensor at --type (no q6_k output head)");
  cmd->add_option("--tensor-type", o->tensor_types, "REGEX=TYPE for the tensors whose name matches (repeatable)");
  cmd->add_option("--calib", o->calib, "text to run through the input model for activation statistics");
  cmd->add_option("--calib-tokens", o->calib_tokens, "calibration tokens (default 8192)");
  cmd->add_option("--calib-ctx", o->calib_ctx, "calibration chunk length, a fresh context each (default 512)");
  cmd->add_option("--save-stats", o->save_stats, "write the calibration statistics to this file");
  cmd->add_option("--stats", o->stats, "activation statistics from an earlier --save-stats");
  cmd->add_option("-t,--threads", o->threads, "threads (default: physical performance cores)");
  return [o]() {
    const TensorType base = or_fail(pllm::parse_quant_type(o->type));
    const QuantMethod method = or_fail(pllm::parse_quant_method(o->method));
    pllm::QuantizeOptions qo;
    qo.plan.base = base;
    qo.plan.pure = o->pure;
    for (const std::string& spec : o->tensor_types) qo.plan.rules.push_back(or_fail(pllm::parse_tensor_type_rule(spec)));
    qo.method = method;
    if (o->threads < 0 || o->threads > 256) fail("-t must be between 0 and 256");
    qo.n_threads = o->threads;
    if (!o->calib.empty() && !o->stats.empty()) fail("--calib and --stats exclude each other");
    if (!o->save_stats.empty() && o->calib.empty()) fail("--save-stats needs --calib");
    if (method == QuantMethod::act && o->calib.empty() && o->stats.empty())
      fail("--method act needs activation statistics: --calib FILE or --stats FILE");
    if (o->calib_tokens < 1) fail("--calib-tokens must be at least 1");
    if (o->calib_ctx < 2 || o->calib_ctx > (1 << 20)) fail("--calib-ctx must be between 2 and 1048576");
    if (access(o->in.c_str(), R_OK) != 0) fail("cannot read input model " + o->in);
    if (o->in == o->out) fail("the output must be a different file from the input");

    auto file = or_fail(pllm::GgufFile::open(o->in));
    Progress bar;
    std::unique_ptr<pllm::ActStats> stats;
    if (!o->stats.empty()) {
      stats = std::make_unique<pllm::ActStats>(or_fail(pllm::ActStats::load(o->stats)));
      or_fail(stats->check_matches(*file, pllm::compute_model_identity(*file)));
    } else if (!o->calib.empty()) {
      auto model = or_fail(pllm::Model::load(o->in, false));
      const auto tokens = or_fail(pllm::tokenize_text_file(*model, o->calib));
      pllm::CalibrationOptions co;
      co.n_ctx = o->calib_ctx;
      co.max_tokens = o->calib_tokens;
      co.n_threads = o->threads;
      auto cal = or_fail(pllm::Calibrator::create(model, co));
      stats = std::make_unique<pllm::ActStats>();
      const auto t0 = std::chrono::steady_clock::now();
      const int64_t n = or_fail(cal->run(tokens, stats.get(), nullptr, [&](int64_t done, int64_t total) {
        bar.draw("calibration", done, total, base_name(o->calib));
      }));
      bar.done();
      stats->model_identity = model->identity();
      stats->model_name = or_fail(file->get_string_or("general.name", base_name(o->in)));
      stats->n_tokens = uint64_t(n);
      stats->source = base_name(o->calib);
      std::fprintf(stderr, "calibration: %lld tokens of %s in %.1f s\n", static_cast<long long>(n),
                   o->calib.c_str(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      if (!o->save_stats.empty()) {
        or_fail(stats->save(o->save_stats));
        std::fprintf(stderr, "calibration: statistics written to %s\n", o->save_stats.c_str());
      }
    }
    qo.stats = stats.get();
    qo.progress = [&](size_t i, size_t n, std::string_view name) {
      bar.draw("quantize", int64_t(i), int64_t(n), std::string(name));
    };
    const pllm::QuantizeReport rep = or_fail(pllm::quantize_file(*file, o->out, qo));
    bar.done();
    print_summary(rep, o->in, file->file_size(), o->out, base, method, stats.get());
    return 0;
  };
}

}  // namespace cli
