// `pocketllm calibrate-act IN OUT --calib FILE`: static activation scales for --static-act.
// Runs the text through IN with a histogram of |x| per product input attached
// (quantizer/act_scale_calib.h), picks each input's clip threshold (--act-calib kl:
// TensorRT's entropy calibration; minmax: the largest |x|; percentile), and writes a copy
// of IN with the steps as pocketllm.act_scale.<tensor> metadata (weights unchanged).
//
// Like quantize, this uses the C++ layers directly (the C API has no activation observer).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_cpp_api.h"
#include "commands.h"
#include "model/model.h"
#include "quantizer/act_scale_calib.h"
#include "quantizer/calibration.h"

namespace cli {
namespace {


std::string file_name(const std::string& path) {
  const size_t s = path.find_last_of('/');
  return s == std::string::npos ? path : path.substr(s + 1);
}

void write_report(const std::string& path, const pllm::ActHistograms& h,
                  const std::vector<pllm::ActScaleEntry>& scales, const pllm::ActCalibProvenance& prov) {
  nlohmann::ordered_json j = {{"method", prov.method}, {"tokens", prov.tokens}, {"source", prov.source}};
  j["tensors"] = nlohmann::ordered_json::array();
  for (const pllm::ActScaleEntry& e : scales) {
    const pllm::AbsHistogram& hist = h.histograms().find(e.tensor)->second;
    j["tensors"].push_back({{"tensor", e.tensor},
                            {"max_abs", e.max_abs},
                            {"threshold", e.threshold},
                            {"scale", e.scale},
                            {"range", hist.range()},
                            {"non_finite", hist.non_finite()},
                            {"counts", hist.counts()}});
  }
  std::ofstream f(path, std::ios::binary);
  f << j.dump(1) << "\n";
  if (!f.good()) fail("cannot write the report to " + path);
}

}  // namespace

std::function<int()> add_calibrate_act(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "calibrate-act", "static activation scales for --static-act: copy a model with calibrated scales added");
  struct Opts {
    std::string in, out, calib, method = "kl", report, skip;
    double percentile = 99.99;
    int64_t calib_tokens = 8192;
    int calib_ctx = 512, bins = 2048, threads = 0;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("input", o->in, "model to calibrate")->required();
  cmd->add_option("output", o->out, "GGUF file to write (the input plus pocketllm.act_scale.* keys)")->required();
  cmd->add_option("--calib", o->calib, "text to run through the model")->required();
  cmd->add_option("--act-calib", o->method, "threshold per input: kl (default; entropy), minmax, percentile")
      ->check(CLI::IsMember({"kl", "minmax", "percentile"}));
  cmd->add_option("--percentile", o->percentile, "percent of |x| kept below the threshold (default 99.99)")
      ->check(CLI::Range(1e-6, 100.0));
  cmd->add_option("--calib-tokens", o->calib_tokens, "calibration tokens (default 8192; 0: the whole text)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40));
  cmd->add_option("--calib-ctx", o->calib_ctx, "calibration chunk length, a fresh context each (default 512)")
      ->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--bins", o->bins, "histogram bins per input (default 2048)")->check(CLI::Range(128, 1 << 20));
  cmd->add_option("--skip", o->skip,
                  "REGEX: products whose weight name matches get no scale and stay dynamic (a product "
                  "sharing its input with a scaled one -- Q/K/V, gate/up -- still uses that scale)");
  cmd->add_option("--report", o->report, "write every input's histogram, threshold and scale as JSON");
  cmd->add_option("-t,--threads", o->threads, "threads (default: physical performance cores)")
      ->check(CLI::Range(0, 256));
  return [o]() {
    if (access(o->in.c_str(), R_OK) != 0) fail("cannot read input model " + o->in);
    if (o->in == o->out) fail("the output must be a different file from the input");
    pllm::ActScaleOptions so;
    so.method = unwrap(pllm::parse_act_calib_method(o->method));
    so.percentile = o->percentile / 100.0;
    std::regex skip;
    try {
      if (!o->skip.empty()) skip = std::regex(o->skip);
    } catch (const std::regex_error& e) {
      fail("--skip: bad regular expression '" + o->skip + "': " + e.what());
    }

    auto model = unwrap(pllm::Model::load(o->in, false));
    const auto tokens = unwrap(pllm::tokenize_text_file(*model, o->calib));
    pllm::CalibrationOptions co;
    co.n_ctx = o->calib_ctx;
    co.max_tokens = o->calib_tokens;
    co.n_threads = o->threads;
    auto cal = unwrap(pllm::Calibrator::create(model, co));
    pllm::ActHistograms hist(o->bins);
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t n = unwrap(cal->run(tokens, &hist, nullptr));
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto scales = unwrap(pllm::compute_act_scales(hist, so));
    const size_t n_observed = scales.size();
    if (!o->skip.empty())
      std::erase_if(scales, [&](const pllm::ActScaleEntry& e) { return std::regex_search(e.tensor, skip); });

    pllm::ActCalibProvenance prov;
    prov.method = o->method;
    if (o->method == "percentile") {
      char pct[32];
      std::snprintf(pct, sizeof pct, ":%g", o->percentile);
      prov.method += pct;
    }
    prov.tokens = uint64_t(n);
    prov.source = file_name(o->calib);
    auto res = pllm::write_with_act_scales(model->file(), o->out, scales, prov);
    if (!res.ok()) fail(res.error().message);
    if (!o->report.empty()) write_report(o->report, hist, scales, prov);

    std::vector<double> ratio;
    for (const auto& e : scales) ratio.push_back(e.max_abs > 0 ? e.threshold / e.max_abs : 1.0);
    std::sort(ratio.begin(), ratio.end());
    std::printf("calibrate-act: %s -> %s (%s, %lld tokens of %s in %.1f s)\n", o->in.c_str(), o->out.c_str(),
                prov.method.c_str(), static_cast<long long>(n), prov.source.c_str(), secs);
    if (!ratio.empty())
      std::printf("%zu product inputs; threshold / max |x|: min %.3f, median %.3f, max %.3f\n", ratio.size(),
                  ratio.front(), ratio[ratio.size() / 2], ratio.back());
    if (scales.size() != n_observed)
      std::printf("--skip: %zu of %zu products left without a scale\n", n_observed - scales.size(), n_observed);
    return 0;
  };
}

}  // namespace cli
