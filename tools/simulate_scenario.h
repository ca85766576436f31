// `pocketllm simulate`: the scenario file (a scripted stretch of an app's life: a UI thread's
// frames, requests arriving over time, a thermal model) and its parser.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "model/act_mode.h"

namespace cli::sim {

struct FrameSpec {
  double period_ms = 16.667;        // 60 Hz
  double ui_work_ms = 4.0;          // CPU the UI thread needs per frame
  double ui_headroom = 0.75;        // the frame policy's headroom (RuntimeConfig::frame_policy)
  int max_tokens_per_frame = 3;
  bool reports_ui = true;           // the UI reports each frame's time (else the engine reads misses)
};

struct ThermalSpec {
  double ambient_c = 30.0;
  double limit_c = 45.0;            // the severe threshold; time above it is reported
  double c_per_busy = 25.0;         // steady rise above ambient at 100 % engine busy time
  double tau_s = 20.0;              // time constant
};

struct RequestSpec {
  double at_ms = 0;
  std::string klass = "interactive";  // interactive | background
  std::optional<int> base_weight;
  std::string prompt;               // user message, rendered with the model's chat template
  int max_tokens = 64;
  std::optional<double> temperature;  // default: the model's sampling defaults; 0: greedy
  std::string session;              // requests naming the same session continue it; "" = own session
  bool reset = false;               // clear the session's context first (a new keystroke's suggestion)
  int repeat = 1;                   // this many copies ...
  double every_ms = 0;              // ... every_ms apart
};

struct Scenario {
  std::string model;                // file name or path ("" = the default model)
  int threads = 2;
  double duration_s = 10;
  int n_ctx = 1024;
  int max_batch_rows = 8;
  pllm::ActMode activations = pllm::kDefaultActMode;  // "activations": one of act_mode_words()
  std::optional<FrameSpec> frame;   // no "frame": no UI thread
  std::optional<ThermalSpec> thermal;  // no "thermal": no thermal model
  std::vector<RequestSpec> requests;   // expanded repeats, sorted by at_ms
};

// Parses and checks a scenario; throws cli::Failure with one clear message (which key, why)
// on malformed JSON, unknown keys, wrong types or values out of range.
Scenario parse_scenario(const std::string& json_text, const std::string& where);

}  // namespace cli::sim
