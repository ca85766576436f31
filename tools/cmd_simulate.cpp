// `pocketllm simulate SCENARIO.json`: runs the real engine on the real CPU against a scripted
// stretch of an app's life (a UI thread drawing frames, requests arriving, a device heating
// up) and reports what a user would feel: missed frames, UI latency, time to first token per
// class, tokens/s, temperature. --no-frame-budget / --no-governor switch the runtime's two
// protections off, so one scenario run twice shows what each is worth.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>

#include <nlohmann/json.hpp>

#include "cli_cpp_api.h"
#include "commands.h"
#include "model/chat_prompt.h"
#include "model/model.h"
#include "runtime/scheduled_runtime.h"
#include "runtime/trace_log.h"
#include "simulate_report.h"
#include "simulate_scenario.h"
#include "simulate_ui.h"

namespace cli {
namespace {

using sim::Scenario;

// The scenario's thermal model, shared by the stepping thread (heats it, the governor reads
// it) and the main thread (samples the timeline).
class SharedThermal : public pllm::ThermalSource {
 public:
  explicit SharedThermal(pllm::SimulatedThermalSource s) : sim_(std::move(s)) {}
  pllm::ThermalReading read(int64_t now_ms) override {
    std::lock_guard lk(mu_);
    return sim_.read(now_ms);
  }
  void add_busy(double now_ms, double busy_ms) {
    std::lock_guard lk(mu_);
    carry_ms_ += busy_ms;  // whole milliseconds go in; the fraction waits for the next step
    const double whole = std::floor(carry_ms_);
    carry_ms_ -= whole;
    (void)sim_.add_busy(int64_t(now_ms), int64_t(whole));
  }

 private:
  std::mutex mu_;
  pllm::SimulatedThermalSource sim_;
  double carry_ms_ = 0;
};

std::string model_path_for(const std::string& override_path, const std::string& in_scenario) {
  if (!override_path.empty() || in_scenario.empty()) return resolve_model_path(override_path);
  if (in_scenario.find('/') != std::string::npos) return resolve_model_path(in_scenario);
  const char* env = std::getenv("POCKETLLM_MODELS");
  return resolve_model_path(std::string(env && *env ? env : "models") + "/" + in_scenario);
}

std::vector<int32_t> chat_tokens(const pllm::Model& m, const std::string& user) {
  auto text = pllm::apply_chat_template(m, {{"user", user}}, true);
  if (!text.ok()) fail(text.error().message);
  auto ids = pllm::encode_chat_prompt(m.tokenizer(), *text);
  if (!ids.ok()) fail("tokenizer: " + ids.error().message);
  return *ids;
}

struct Options {
  std::string scenario, model, trace_out, backend = "cpu";
  bool no_frame_budget = false, no_governor = false, json = false;
};

int run_simulation(const Options& o) {
  const Scenario sc = sim::parse_scenario(read_file(o.scenario), o.scenario);
  const std::string path = model_path_for(o.model, sc.model);
  auto model = pllm::Model::load(path, false, {}, pllm::repack_for(sc.activations));
  if (!model.ok()) fail("loading " + path + ": " + model.error().message);
  auto engine = pllm::Engine::create(sc.threads, pllm::parse_engine_backend(o.backend).value());  // CLI11 checked it
  if (!engine.ok()) fail(engine.error().message);

  const bool frames_on = sc.frame && !o.no_frame_budget;
  const bool governor_on = sc.thermal && !o.no_governor;
  std::unique_ptr<SharedThermal> thermal;
  if (sc.thermal) {
    pllm::SimulatedThermalParams tp;
    tp.ambient_c = float(sc.thermal->ambient_c);
    tp.limit_c = float(sc.thermal->limit_c);
    tp.c_per_busy = float(sc.thermal->c_per_busy);
    tp.tau_s = float(sc.thermal->tau_s);
    auto s = pllm::SimulatedThermalSource::create(tp, 0);
    if (!s.ok()) fail(s.error().message);
    thermal = std::make_unique<SharedThermal>(std::move(*s));
  }

  sim::Recorder rec(sc);
  std::unique_ptr<pllm::TraceLog> trace;
  if (!o.trace_out.empty()) {
    auto t = pllm::TraceLog::create(size_t(1) << 20);
    if (!t.ok()) fail(t.error().message);
    trace = std::move(*t);
  }
  pllm::RuntimeConfig cfg;
  cfg.trace = trace.get();
  cfg.max_batch_rows = sc.max_batch_rows;
  if (sc.frame) {
    cfg.frame_policy.headroom = sc.frame->ui_headroom;
    cfg.scheduler.max_tokens_per_frame = sc.frame->max_tokens_per_frame;
  }
  if (governor_on) {
    cfg.thermal = thermal.get();
    cfg.governor = pllm::GovernorConfig{};
  }
  std::function<double()> clock;  // set once the runtime exists
  cfg.on_step = [&](const pllm::StepOutcome& out) {
    if (thermal) thermal->add_busy(clock(), out.forward_ms);
    rec.on_step(out);
  };
  auto rt_r = pllm::ScheduledRuntime::create(*model, *engine, std::move(cfg));
  if (!rt_r.ok()) fail(rt_r.error().message);
  pllm::ScheduledRuntime& rt = **rt_r;
  clock = [&rt] { return rt.now_ms(); };

  // Sessions and prompts before the clock starts: what is measured is serving, not setup.
  pllm::SessionConfig scfg;
  scfg.n_ctx = sc.n_ctx;
  scfg.act = sc.activations;
  std::map<std::string, int64_t> named;
  std::vector<int64_t> session_of(sc.requests.size());
  std::vector<std::vector<int32_t>> prompts(sc.requests.size());
  for (size_t i = 0; i < sc.requests.size(); ++i) {
    const auto& q = sc.requests[i];
    prompts[i] = chat_tokens(**model, q.prompt);
    if (!q.session.empty() && named.count(q.session)) {
      session_of[i] = named[q.session];
      continue;
    }
    auto key = rt.add_session(scfg);
    if (!key.ok()) fail(key.error().message);
    session_of[i] = *key;
    if (!q.session.empty()) named[q.session] = *key;
  }
  if (auto r = rt.start(); !r.ok()) fail(r.error().message);

  const double t0 = rt.now_ms();
  const double until = t0 + sc.duration_s * 1000.0;
  rec.start(t0, until);
  std::unique_ptr<sim::UiSimulator> ui;
  if (sc.frame) {
    std::function<void(double, double)> vsync, ui_done;
    if (frames_on) {
      vsync = [&rt](double start, double period) { (void)rt.frame(start, period); };
      if (sc.frame->reports_ui) ui_done = [&rt](double start, double ui_ms) { (void)rt.report_ui_frame(start, ui_ms); };
    }
    ui = std::make_unique<sim::UiSimulator>(*sc.frame, clock, vsync, ui_done);
    ui->start(t0, until);
  }
  // The main thread submits on schedule and samples the timeline every 100 ms.
  size_t next = 0;
  double next_sample = t0;
  for (;;) {
    const double now = rt.now_ms();
    if (now >= until) break;
    while (next < sc.requests.size() && t0 + sc.requests[next].at_ms <= now) {
      const auto& q = sc.requests[next];
      if (q.reset) (void)rt.control(session_of[next], pllm::ControlAction::reset);
      pllm::RuntimeRequest r;
      r.klass = q.klass == "interactive" ? pllm::RequestClass::interactive : pllm::RequestClass::background;
      r.base_weight = q.base_weight;
      r.prompt = prompts[next];
      r.max_tokens = q.max_tokens;
      r.sampling = (*model)->sampling_defaults();
      if (q.temperature) r.sampling.temperature = float(*q.temperature);
      r.on_event = rec.callback(next, now, clock);
      auto id = rt.submit(session_of[next], std::move(r));
      if (!id.ok()) fail("request " + std::to_string(next) + ": " + id.error().message);
      ++next;
    }
    if (now >= next_sample) {
      const pllm::ThermalReading reading = thermal ? thermal->read(int64_t(now)) : pllm::ThermalReading{};
      const int missed = ui ? ui->missed_so_far.load() : 0;
      rec.sample(now, reading, rt.caps().level, missed);
      if (trace) {
        trace->counter("frames_missed", missed);
        if (reading.valid) trace->counter("sim_temp_c", reading.temp_c);
      }
      next_sample += 100;
    }
    double wake = std::min(until, next_sample);
    if (next < sc.requests.size()) wake = std::min(wake, t0 + sc.requests[next].at_ms);
    if (wake > now) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(wake - now));
  }
  if (ui) ui->join();
  rt.stop();
  if (auto err = rt.driver_error()) fail("runtime: " + err->message);

  if (trace) {
    FILE* f = std::fopen(o.trace_out.c_str(), "wb");
    if (!f) fail("cannot write the trace to " + o.trace_out);
    const std::string j = trace->chrome_json();
    const bool ok = std::fwrite(j.data(), 1, j.size(), f) == j.size();
    if (std::fclose(f) != 0 || !ok) fail("writing the trace to " + o.trace_out + " failed");
  }
  sim::RunInfo info{o.scenario, path, sc, frames_on, governor_on, rt.governor_changes(), rt.ttft_over_bound(),
                    rt.frame_stats()};
  const nlohmann::json report = rec.report(info, ui.get());
  if (o.json)
    std::printf("%s\n", report.dump(2).c_str());
  else
    std::printf("%s", sim::human_report(report).c_str());
  return 0;
}

}  // namespace

std::function<int()> add_simulate(CLI::App& app) {
  auto* cmd = app.add_subcommand("simulate", "run the engine against a scripted app scenario and report UI smoothness, "
                                              "latency, throughput and temperature");
  auto o = std::make_shared<Options>();
  cmd->add_option("scenario", o->scenario, "scenario JSON file (see bench/scenarios/)")->required();
  cmd->add_option("-m,--model", o->model, "GGUF file (overrides the scenario's \"model\")");
  cmd->add_flag("--no-frame-budget", o->no_frame_budget, "run flat out instead of within the UI frame budget");
  cmd->add_flag("--no-governor", o->no_governor, "no thermal governor (the thermal model still runs)");
  cmd->add_option("--trace-out", o->trace_out, "write a Perfetto / Chrome trace of the run here");
  cmd->add_flag("--json", o->json, "one JSON object on stdout");
  cmd->add_option("--backend", o->backend, "what runs the model: cpu (default), vulkan, auto (see pocketllm run --help)")
      ->check(CLI::IsMember({"cpu", "auto", "vulkan"}));
  return [o]() { return run_simulation(*o); };
}

}  // namespace cli
