// `pocketllm quantize IN OUT --type T`: our own quantiser (src/quantizer/). Every 2-D
// weight of IN (any type the engine reads, dequantised to f32) is quantised to T (or the
// type the rules in quantizer/type_plan.h choose: like llama.cpp, the output head, or the
// tied embedding, is q6_k for the types below 6 bits unless --pure; T may be one of
// llama.cpp's mixes, q2_k, q3_k_m, q4_k_s, q4_k_m, q5_k_m, iq4_nl, iq4_xs, which give
// attn_v, ffn_down and attn_output more bits by layer as llama-quantize does; rows that do
// not fit the type's block fall back, q4_k -> q5_0, q5_k -> q5_1, q2_k/q3_k -> q4_0,
// iq4_xs -> iq4_nl, q6_k -> q8_0, else f16), other tensors F32, and the metadata is copied with
// provenance keys. Methods: rtn (the reference quantisers),
// mse (per-block scale/clipping search), act (the search weighted by each input column's
// mean x² from calibration statistics: --calib runs a text through IN, --stats loads a
// --save-stats file).
//
// --sensitivity measures, per 2-D tensor, the KL divergence of the output when only that
// tensor is quantised (over the first --sens-tokens of the --calib text) and predicts it
// for every other type the tensor's rows fit (quantizer/sensitivity.h); --target-bpw B
// uses those figures to choose each tensor's type within B bits per weight
// (quantizer/bpw_plan.h: from every tensor at its cheapest candidate, upgrades by KL saved
// per bit; no output-head rule) and fixes every tensor's type. --sensitivity-out saves the
// figures and --sensitivity-in reuses them (checked against the model, type and method),
// so one measurement serves several budgets.
//
// Unlike the other subcommands this one uses the C++ layers directly (calibration needs
// an activation observer and sensitivity in-memory weight overrides, which the C API does
// not offer).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/checked.h"
#include "cli_cpp_api.h"
#include "commands.h"
#include "model/model.h"
#include "quantizer/act_stats.h"
#include "quantizer/calibration.h"
#include "quantizer/quantize_model.h"
#include "quantizer/sensitivity.h"
#include "quantize_report.h"
#include "sensitivity_file.h"

namespace cli {
namespace {

using pllm::QuantMethod;
using pllm::TensorType;

}  // namespace

std::function<int()> add_quantize(CLI::App& app) {
  auto* cmd = app.add_subcommand("quantize", "quantise a GGUF model (rtn, mse or activation-aware; mixed precision)");
  struct Opts {
    std::string in, out, type, method = "rtn", calib, save_stats, stats, sens_out, sens_in;
    std::vector<std::string> tensor_types;
    bool pure = false, sensitivity = false;
    int64_t calib_tokens = 8192, sens_tokens = 256;
    int calib_ctx = 512, threads = 0;
    double target_bpw = 0;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("input", o->in, "model to quantise (any type the engine loads)")->required();
  cmd->add_option("output", o->out, "GGUF file to write (optional with --sensitivity alone)");
  cmd->add_option("--type", o->type,
                  "f16, bf16, f32, q8_0, q6_k, q5_k, q5_0, q5_1, q4_0, q4_1, q4_k, q3_k, iq4_nl, iq4_xs, q2_k, or a "
                  "llama.cpp mix: q5_k_m, q4_k_m, q4_k_s, q3_k_m, q2_k, iq4_xs, iq4_nl (with --pure: the type alone)")
      ->required();
  cmd->add_option("--method", o->method, "rtn (default), mse (scale/clipping search) or act (activation-aware)");
  cmd->add_flag("--pure", o->pure, "every 2-D tensor at --type (no q6_k output head)");
  cmd->add_option("--tensor-type", o->tensor_types, "REGEX=TYPE for the tensors whose name matches (repeatable)");
  cmd->add_option("--calib", o->calib, "text to run through the input model (statistics; sensitivity)");
  cmd->add_option("--calib-tokens", o->calib_tokens, "calibration tokens for the statistics (default 8192)");
  cmd->add_option("--calib-ctx", o->calib_ctx, "calibration chunk length, a fresh context each (default 512)");
  cmd->add_option("--save-stats", o->save_stats, "write the calibration statistics to this file");
  cmd->add_option("--stats", o->stats, "activation statistics from an earlier --save-stats");
  cmd->add_flag("--sensitivity", o->sensitivity, "KL divergence per tensor quantised alone, as a table");
  cmd->add_option("--sens-tokens", o->sens_tokens, "tokens of the --calib text the KL is measured over (default 256)");
  cmd->add_option("--sensitivity-out", o->sens_out, "also write the sensitivity figures as JSON");
  cmd->add_option("--sensitivity-in", o->sens_in, "reuse the figures of an earlier --sensitivity-out (same model, type, method)");
  cmd->add_option("--target-bpw", o->target_bpw, "per-tensor types (q4_0 ... f16, as the rows allow) with the least predicted KL within B bits per weight");
  cmd->add_option("-t,--threads", o->threads, "threads (default: physical performance cores)");
  return [o, cmd]() {
    const pllm::QuantPreset preset = unwrap(pllm::parse_quant_preset(o->type));
    const pllm::TensorType base = preset.base;
    const QuantMethod method = unwrap(pllm::parse_quant_method(o->method));
    pllm::QuantizeOptions qo;
    qo.plan.base = base;
    qo.plan.mix = preset.mix;
    qo.plan.pure = o->pure;
    for (const std::string& spec : o->tensor_types) qo.plan.rules.push_back(unwrap(pllm::parse_tensor_type_rule(spec)));
    qo.method = method;
    if (o->threads < 0 || o->threads > 256) fail("-t must be between 0 and 256");
    qo.n_threads = o->threads;
    const bool planned = o->target_bpw != 0;
    const bool reuse = !o->sens_in.empty();
    const bool measure = (o->sensitivity || planned) && !reuse;
    if (planned && !(o->target_bpw > 0 && o->target_bpw <= 32)) fail("--target-bpw must be between 0 and 32");
    if (reuse && !o->sensitivity && !planned) fail("--sensitivity-in needs --sensitivity or --target-bpw");
    if (reuse && !o->sens_out.empty()) fail("--sensitivity-in and --sensitivity-out exclude each other");
    if (reuse && cmd->count("--sens-tokens") > 0) fail("--sens-tokens does not apply to --sensitivity-in (already measured)");
    if (measure && o->calib.empty()) fail("--sensitivity and --target-bpw need the text to measure on: --calib FILE");
    if (!o->sens_out.empty() && !measure) fail("--sensitivity-out needs --sensitivity or --target-bpw");
    if (planned && !o->tensor_types.empty()) fail("--target-bpw chooses the types itself: drop --tensor-type");
    // Sensitivity is measured for one type; a mix would not be what --pure measures.
    if ((o->sensitivity || planned || reuse) && preset.mix != pllm::QuantMix::none && !o->pure)
      fail("--sensitivity and --target-bpw measure one type, not the mix " + o->type + ": add --pure or give a type");
    if (!o->calib.empty() && !o->stats.empty() && !measure)
      fail("--calib and --stats exclude each other (with --stats, --calib is only the sensitivity text)");
    if (!o->save_stats.empty() && (o->calib.empty() || !o->stats.empty()))
      fail("--save-stats needs --calib (and no --stats)");
    if (method == QuantMethod::act && o->calib.empty() && o->stats.empty())
      fail("--method act needs activation statistics: --calib FILE or --stats FILE");
    if (o->calib_tokens < 1) fail("--calib-tokens must be at least 1");
    if (o->sens_tokens < 1) fail("--sens-tokens must be at least 1");
    if (o->calib_ctx < 2 || o->calib_ctx > (1 << 20)) fail("--calib-ctx must be between 2 and 1048576");
    if (o->out.empty() && !(o->sensitivity && !planned)) fail("missing the output file (OUT)");
    // Nothing given is silently ignored.
    const bool collect = !o->calib.empty() && o->stats.empty() && (method == QuantMethod::act || !o->save_stats.empty());
    if (!o->calib.empty() && !collect && !measure)
      fail("--calib is used by --method act, --save-stats, --sensitivity and --target-bpw only");
    if (!o->stats.empty() && method != QuantMethod::act) fail("--stats is used by --method act only");
    if (access(o->in.c_str(), R_OK) != 0) fail("cannot read input model " + o->in);
    if (o->in == o->out) fail("the output must be a different file from the input");

    auto file = unwrap(pllm::GgufFile::open(o->in));
    Progress bar;
    // The model itself is needed to run text through it (statistics, sensitivity).
    std::shared_ptr<pllm::Model> model;
    std::vector<int32_t> tokens;
    if (collect || measure) {
      model = unwrap(pllm::Model::load_for_tools(o->in));
      tokens = unwrap(pllm::tokenize_text_file(*model, o->calib));
    }
    std::unique_ptr<pllm::ActStats> stats;
    if (!o->stats.empty()) {
      stats = std::make_unique<pllm::ActStats>(unwrap(pllm::ActStats::load(o->stats)));
      unwrap(stats->check_matches(*file, pllm::compute_model_identity(*file)));
    } else if (collect) {
      pllm::CalibrationOptions co;
      co.n_ctx = o->calib_ctx;
      co.max_tokens = o->calib_tokens;
      co.n_threads = o->threads;
      auto cal = unwrap(pllm::Calibrator::create(model, co));
      stats = std::make_unique<pllm::ActStats>();
      const auto t0 = std::chrono::steady_clock::now();
      const int64_t n = unwrap(cal->run(tokens, stats.get(), nullptr, [&](int64_t done, int64_t total) {
        bar.draw("calibration", done, total, base_name(o->calib));
      }));
      bar.done();
      stats->model_identity = model->identity();
      stats->model_name = unwrap(file->get_string_or("general.name", base_name(o->in)));
      stats->n_tokens = uint64_t(n);
      stats->source = base_name(o->calib);
      std::fprintf(stderr, "calibration: %lld tokens of %s in %.1f s\n", static_cast<long long>(n),
                   o->calib.c_str(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      if (!o->save_stats.empty()) {
        unwrap(stats->save(o->save_stats));
        std::fprintf(stderr, "calibration: statistics written to %s\n", o->save_stats.c_str());
      }
    }
    qo.stats = stats.get();

    if (planned && measure) {  // before the (long) measurement: can the budget hold the cheapest plan?
      std::vector<pllm::PlanItem> sizes;  // the candidates' sizes, KLs unknown (0)
      for (const pllm::TensorInfo& t : file->tensors()) {
        if (t.dims.size() != 2) continue;
        pllm::PlanItem it{t.name, t.n_elements, {}};
        for (TensorType c : pllm::plan_candidate_types(base, t.dims[0])) {
          const auto bytes = pllm::checked_mul(*pllm::row_bytes(uint32_t(c), t.dims[0]), t.dims[1]);
          if (!bytes) fail("tensor '" + t.name + "' is too large");
          it.candidates.push_back(pllm::PlanCandidate{c, *bytes, 0.0});
        }
        sizes.push_back(std::move(it));
      }
      unwrap(pllm::plan_target_bpw(sizes, o->target_bpw));
    }
    const uint64_t identity = pllm::compute_model_identity(*file);
    std::optional<pllm::SensitivityReport> sens;
    if (reuse) {
      if (access(o->sens_in.c_str(), R_OK) != 0) fail("cannot read " + o->sens_in);
      sens = unwrap(parse_sensitivity_json(read_file(o->sens_in), o->sens_in, *file, identity, base, method));
      std::fprintf(stderr, "sensitivity: %zu tensors over %lld tokens from %s\n", sens->entries.size(),
                   static_cast<long long>(sens->tokens), o->sens_in.c_str());
    } else if (measure) {
      pllm::SensitivityOptions so;
      so.type = base;
      so.method = method;
      so.stats = stats.get();
      so.calib.n_ctx = int(std::min<int64_t>(o->calib_ctx, o->sens_tokens));
      so.calib.max_tokens = o->sens_tokens;
      so.calib.n_threads = o->threads;
      so.progress = [&](size_t i, size_t n, std::string_view name) {
        bar.draw("sensitivity", int64_t(i), int64_t(n), std::string(name));
      };
      const auto t0 = std::chrono::steady_clock::now();
      sens = unwrap(pllm::measure_sensitivity(model, tokens, so));
      bar.done();
      std::fprintf(stderr, "sensitivity: %zu tensors over %lld tokens in %.1f s\n", sens->entries.size(),
                   static_cast<long long>(sens->tokens),
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      if (!o->sens_out.empty()) {
        std::ofstream js(o->sens_out);
        js << sensitivity_json(*sens, identity, base, method) << "\n";
        if (!js) fail("cannot write " + o->sens_out);
      }
    }
    model.reset();
    if (sens) {
      if (o->sensitivity) print_sensitivity(*sens, method);
      if (planned) {
        const pllm::BpwPlan plan = unwrap(pllm::plan_target_bpw(pllm::plan_items(*sens), o->target_bpw));
        print_plan(*sens, plan, o->target_bpw);
        for (size_t i = 0; i < sens->entries.size(); ++i)
          qo.plan.explicit_types[sens->entries[i].name] = sens->entries[i].candidates[plan.choice[i]].type;
      }
    }
    if (o->out.empty()) return 0;
    qo.progress = [&](size_t i, size_t n, std::string_view name) {
      bar.draw("quantize", int64_t(i), int64_t(n), std::string(name));
    };
    const pllm::QuantizeReport rep = unwrap(pllm::quantize_file(*file, o->out, qo));
    bar.done();
    print_summary(rep, o->in, file->file_size(), o->out, preset, method, stats.get());
    return 0;
  };
}

}  // namespace cli
