// `pocketllm simulate`: what the run measured (per request, per step, over time) and the
// report made of it (JSON with the keys the docs' plots read, or text).
#pragma once
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/scheduled_runtime.h"
#include "simulate_scenario.h"
#include "simulate_ui.h"

namespace cli::sim {

struct RunInfo {
  std::string scenario_path, model_path;
  const Scenario& scenario;
  bool frame_budget = false, governor = false;
  int governor_changes = 0;
  int ttft_over_bound = 0;     // requests past their class's first-token bound
  pllm::FrameStats frame;      // the frame policy at the end
};

class Recorder {
 public:
  explicit Recorder(const Scenario& sc);
  void start(double t0_ms, double until_ms);
  // The event callback of request i, submitted at submit_ms (tokens after the end of the run
  // are not counted).
  pllm::RuntimeCallback callback(size_t i, double submit_ms, std::function<double()> clock);
  void on_step(const pllm::StepOutcome& out);  // the stepping thread
  void sample(double now_ms, const pllm::ThermalReading& t, int level, int frames_missed);
  nlohmann::json report(const RunInfo& info, const UiSimulator* ui) const;

 private:
  struct Req {
    bool submitted = false;
    double submit_ms = 0, first_token_ms = -1;
    int tokens = 0;
    std::string end;  // "" while running
  };
  struct Sample {
    double t_s, temp_c;
    int level, tokens, frames_missed;
  };
  const Scenario& sc_;
  double t0_ = 0, until_ = 0;
  mutable std::mutex mu_;
  std::vector<Req> reqs_;
  std::vector<Sample> timeline_;
  int tokens_ = 0;
  double busy_ms_ = 0;
  long steps_ = 0, rows_ = 0;
};

std::string human_report(const nlohmann::json& r);

}  // namespace cli::sim
