#include "simulate_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace cli::sim {
namespace {

// Nearest-rank percentile (q in [0, 100]); 0 for no samples.
double percentile(std::vector<double> xs, double q) {
  if (xs.empty()) return 0;
  std::sort(xs.begin(), xs.end());
  const size_t rank = size_t(std::ceil(q / 100.0 * double(xs.size())));
  return xs[std::min(xs.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace

Recorder::Recorder(const Scenario& sc) : sc_(sc), reqs_(sc.requests.size()) {}

void Recorder::start(double t0_ms, double until_ms) {
  t0_ = t0_ms;
  until_ = until_ms;
}

pllm::RuntimeCallback Recorder::callback(size_t i, double submit_ms, std::function<double()> clock) {
  {
    std::lock_guard lk(mu_);
    reqs_[i].submitted = true;
    reqs_[i].submit_ms = submit_ms;
  }
  return [this, i, clock](const pllm::RuntimeEvent& e) {
    const double now = clock();
    std::lock_guard lk(mu_);
    Req& r = reqs_[i];
    if (e.kind == pllm::RuntimeEvent::Kind::end) {
      r.end = pllm::end_reason_name(e.reason);
      return;
    }
    if (now > until_) return;
    if (r.first_token_ms < 0) r.first_token_ms = now;
    ++r.tokens;
    ++tokens_;
  };
}

void Recorder::on_step(const pllm::StepOutcome& out) {
  std::lock_guard lk(mu_);
  busy_ms_ += out.forward_ms;
  ++steps_;
  rows_ += out.decode_rows + (out.prefill_tokens > 0 ? 1 : 0);
}

void Recorder::sample(double now_ms, const pllm::ThermalReading& t, int level, int frames_missed) {
  std::lock_guard lk(mu_);
  timeline_.push_back(Sample{(now_ms - t0_) / 1000.0, t.valid ? double(t.temp_c) : NAN, level, tokens_, frames_missed});
}

nlohmann::json Recorder::report(const RunInfo& info, const UiSimulator* ui) const {
  std::lock_guard lk(mu_);
  using json = nlohmann::json;
  const double secs = (until_ - t0_) / 1000.0;
  json r;
  r["scenario"] = info.scenario_path;
  r["model"] = info.model_path;
  r["threads"] = info.scenario.threads;
  r["duration_s"] = secs;
  r["frame_budget"] = info.frame_budget;
  r["governor"] = info.governor;
  r["ttft_over_bound"] = info.ttft_over_bound;
  r["ui_estimate_ms"] = info.frame.ui_estimate_ms;
  r["frame_holds"] = info.frame.holds;
  r["frame_probes"] = info.frame.probes;
  r["frame_policy_misses"] = info.frame.misses;  // misses the policy saw (reported, late or skipped)
  if (ui) {
    std::vector<double> lat;
    for (const FrameRecord& f : ui->frames()) lat.push_back(f.latency_ms);
    r["frames"] = ui->vsyncs();
    r["frames_missed"] = ui->missed();
    r["ui_p50_ms"] = percentile(lat, 50);
    r["ui_p99_ms"] = percentile(lat, 99);
  } else {
    r["frames"] = 0;
    r["frames_missed"] = 0;
    r["ui_p50_ms"] = 0;
    r["ui_p99_ms"] = 0;
  }
  r["tokens"] = tokens_;
  r["tokens_per_s"] = secs > 0 ? tokens_ / secs : 0;
  r["engine_busy_fraction"] = secs > 0 ? busy_ms_ / (secs * 1000.0) : 0;
  r["steps"] = steps_;
  r["mean_rows_per_step"] = steps_ ? double(rows_) / double(steps_) : 0;
  json ttft = json::object();
  json ends = json::object();
  int submitted = 0, unfinished = 0;
  for (const char* klass : {"interactive", "background"}) {
    std::vector<double> xs;
    int n = 0, no_token = 0;
    for (size_t i = 0; i < reqs_.size(); ++i) {
      if (sc_.requests[i].klass != klass || !reqs_[i].submitted) continue;
      ++n;
      if (reqs_[i].first_token_ms >= 0) xs.push_back(reqs_[i].first_token_ms - reqs_[i].submit_ms);
      else ++no_token;
    }
    ttft[klass] = {{"requests", n}, {"no_token", no_token}, {"p50", percentile(xs, 50)}, {"p95", percentile(xs, 95)},
                   {"max", xs.empty() ? 0.0 : *std::max_element(xs.begin(), xs.end())}, {"all", xs}};
  }
  for (const Req& q : reqs_) {
    if (!q.submitted) continue;
    ++submitted;
    if (q.end.empty()) ++unfinished;
    else ends[q.end] = ends.value(q.end, 0) + 1;
  }
  r["ttft_ms"] = ttft;
  r["requests"] = {{"submitted", submitted}, {"unfinished", unfinished}, {"ended", ends}};
  double peak = NAN, over = 0;
  json tl = json::array();
  for (size_t i = 0; i < timeline_.size(); ++i) {
    const Sample& s = timeline_[i];
    if (!std::isnan(s.temp_c)) peak = std::isnan(peak) ? s.temp_c : std::max(peak, s.temp_c);
    const double dt = i + 1 < timeline_.size() ? timeline_[i + 1].t_s - s.t_s : 0;
    if (info.scenario.thermal && s.temp_c >= info.scenario.thermal->limit_c) over += dt;
    tl.push_back({{"t_s", s.t_s}, {"temp_c", std::isnan(s.temp_c) ? json(nullptr) : json(s.temp_c)},
                  {"level", s.level}, {"tokens", s.tokens}, {"frames_missed", s.frames_missed}});
  }
  r["peak_temp_c"] = std::isnan(peak) ? json(nullptr) : json(peak);
  r["limit_c"] = info.scenario.thermal ? json(info.scenario.thermal->limit_c) : json(nullptr);
  r["time_over_limit_s"] = over;
  r["governor_changes"] = info.governor_changes;
  r["timeline"] = tl;
  return r;
}

std::string human_report(const nlohmann::json& r) {
  char buf[512];
  std::string out;
  std::snprintf(buf, sizeof(buf), "scenario %s: %.1f s, %d threads, frame budget %s, governor %s\n",
                r["scenario"].get<std::string>().c_str(), r["duration_s"].get<double>(), r["threads"].get<int>(),
                r["frame_budget"].get<bool>() ? "on" : "off", r["governor"].get<bool>() ? "on" : "off");
  out += buf;
  std::snprintf(buf, sizeof(buf), "frames      %d, missed %d; UI latency p50 %.1f ms, p99 %.1f ms\n",
                r["frames"].get<int>(), r["frames_missed"].get<int>(), r["ui_p50_ms"].get<double>(),
                r["ui_p99_ms"].get<double>());
  out += buf;
  std::snprintf(buf, sizeof(buf), "tokens      %d (%.1f tok/s), engine busy %.0f %%, %.2f rows/step\n",
                r["tokens"].get<int>(), r["tokens_per_s"].get<double>(),
                100 * r["engine_busy_fraction"].get<double>(), r["mean_rows_per_step"].get<double>());
  out += buf;
  for (const auto& [klass, t] : r["ttft_ms"].items()) {
    if (t["requests"].get<int>() == 0) continue;
    std::snprintf(buf, sizeof(buf), "ttft %-11s %d requests: p50 %.0f ms, p95 %.0f ms, max %.0f ms\n", klass.c_str(),
                  t["requests"].get<int>(), t["p50"].get<double>(), t["p95"].get<double>(), t["max"].get<double>());
    out += buf;
  }
  if (!r["peak_temp_c"].is_null()) {
    std::snprintf(buf, sizeof(buf), "thermal     peak %.1f C (limit %.1f C), %.1f s over the limit, %d governor changes\n",
                  r["peak_temp_c"].get<double>(), r["limit_c"].get<double>(), r["time_over_limit_s"].get<double>(),
                  r["governor_changes"].get<int>());
    out += buf;
  }
  return out;
}

}  // namespace cli::sim
