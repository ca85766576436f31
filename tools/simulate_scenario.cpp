// Scenario parsing for `pocketllm simulate`: strict (unknown keys and wrong types are errors,
// so a typo never silently falls back to a default).
#include "simulate_scenario.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "cli_common.h"

namespace cli::sim {
namespace {

using json = nlohmann::json;

class Reader {
 public:
  Reader(const json& obj, std::string where, std::set<std::string> allowed) : obj_(obj), where_(std::move(where)) {
    if (!obj_.is_object()) fail(where_ + ": must be an object");
    for (const auto& [key, _] : obj_.items())
      if (!allowed.count(key)) fail(where_ + ": unknown key \"" + key + "\"");
  }
  bool has(const char* key) const { return obj_.contains(key); }
  double number(const char* key, double def, double lo, double hi) const {
    if (!has(key)) return def;
    const json& v = obj_.at(key);
    if (!v.is_number()) fail(at(key) + " must be a number");
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < lo || x > hi)
      fail(at(key) + " must be in [" + fmt(lo) + ", " + fmt(hi) + "], not " + fmt(x));
    return x;
  }
  int integer(const char* key, int def, int lo, int hi) const {
    if (!has(key)) return def;
    const json& v = obj_.at(key);
    if (!v.is_number_integer()) fail(at(key) + " must be an integer");
    const auto x = v.get<int64_t>();
    if (x < lo || x > hi) fail(at(key) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return int(x);
  }
  std::string string(const char* key, const std::string& def) const {
    if (!has(key)) return def;
    const json& v = obj_.at(key);
    if (!v.is_string()) fail(at(key) + " must be a string");
    return v.get<std::string>();
  }
  bool boolean(const char* key, bool def) const {
    if (!has(key)) return def;
    const json& v = obj_.at(key);
    if (!v.is_boolean()) fail(at(key) + " must be true or false");
    return v.get<bool>();
  }
  const json& child(const char* key) const { return obj_.at(key); }
  std::string at(const char* key) const { return where_ + "." + key; }

 private:
  static std::string fmt(double x) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%g", x);
    return buf;
  }
  const json& obj_;
  std::string where_;
};

FrameSpec parse_frame(const json& j, const std::string& where) {
  Reader r(j, where, {"period_ms", "ui_work_ms", "ui_headroom", "max_tokens_per_frame", "reports_ui"});
  FrameSpec f;
  f.period_ms = r.number("period_ms", f.period_ms, 4, 1000);
  f.ui_work_ms = r.number("ui_work_ms", f.ui_work_ms, 0, f.period_ms);
  f.ui_headroom = r.number("ui_headroom", f.ui_headroom, 0.05, 1);
  f.max_tokens_per_frame = r.integer("max_tokens_per_frame", f.max_tokens_per_frame, 1, 1000);
  f.reports_ui = r.boolean("reports_ui", f.reports_ui);
  return f;
}

ThermalSpec parse_thermal(const json& j, const std::string& where) {
  Reader r(j, where, {"ambient_c", "limit_c", "c_per_busy", "tau_s"});
  ThermalSpec t;
  t.ambient_c = r.number("ambient_c", t.ambient_c, -20, 60);
  t.limit_c = r.number("limit_c", t.limit_c, t.ambient_c + 1, 120);
  t.c_per_busy = r.number("c_per_busy", t.c_per_busy, 0, 100);
  t.tau_s = r.number("tau_s", t.tau_s, 0.1, 3600);
  return t;
}

RequestSpec parse_request(const json& j, const std::string& where) {
  Reader r(j, where, {"at_ms", "class", "base_weight", "prompt", "max_tokens", "temperature", "session", "reset", "repeat",
                      "every_ms"});
  RequestSpec q;
  q.at_ms = r.number("at_ms", 0, 0, 86'400'000);
  q.klass = r.string("class", q.klass);
  if (q.klass != "interactive" && q.klass != "background")
    fail(r.at("class") + " must be \"interactive\" or \"background\", not \"" + q.klass + "\"");
  if (r.has("base_weight")) q.base_weight = r.integer("base_weight", 0, 0, 1'000'000);
  if (!r.has("prompt")) fail(where + ": missing \"prompt\"");
  q.prompt = r.string("prompt", "");
  if (q.prompt.empty()) fail(r.at("prompt") + " must not be empty");
  q.max_tokens = r.integer("max_tokens", q.max_tokens, 1, 100'000);
  if (r.has("temperature")) q.temperature = r.number("temperature", 0, 0, 10);
  q.session = r.string("session", "");
  q.reset = r.boolean("reset", false);
  q.repeat = r.integer("repeat", 1, 1, 100'000);
  q.every_ms = r.number("every_ms", 0, 0, 86'400'000);
  if (q.repeat > 1 && q.every_ms <= 0) fail(where + ": \"repeat\" needs \"every_ms\" > 0");
  return q;
}

}  // namespace

Scenario parse_scenario(const std::string& json_text, const std::string& where) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail(where + ": not valid JSON");
  Reader r(j, where, {"model", "threads", "duration_s", "n_ctx", "max_batch_rows", "activations", "frame", "thermal",
                      "requests", "description"});
  Scenario s;
  s.model = r.string("model", "");
  s.threads = r.integer("threads", s.threads, 1, 256);
  s.duration_s = r.number("duration_s", s.duration_s, 0.1, 3600);
  s.n_ctx = r.integer("n_ctx", s.n_ctx, 16, 1 << 20);
  s.max_batch_rows = r.integer("max_batch_rows", s.max_batch_rows, 1, 64);
  const std::string act = r.string("activations", std::string(pllm::act_mode_name(s.activations)));
  const std::optional<pllm::ActMode> mode = pllm::parse_act_mode(act);
  if (!mode) fail(r.at("activations") + " must be one of " + pllm::act_mode_words(", ") + ", not \"" + act + "\"");
  s.activations = *mode;
  (void)r.string("description", "");
  if (r.has("frame")) s.frame = parse_frame(r.child("frame"), r.at("frame"));
  if (r.has("thermal")) s.thermal = parse_thermal(r.child("thermal"), r.at("thermal"));
  if (!r.has("requests") || !r.child("requests").is_array() || r.child("requests").empty())
    fail(r.at("requests") + " must be a non-empty array");
  const json& reqs = r.child("requests");
  for (size_t i = 0; i < reqs.size(); ++i) {
    const RequestSpec q = parse_request(reqs[i], r.at("requests") + "[" + std::to_string(i) + "]");
    for (int k = 0; k < q.repeat; ++k) {
      RequestSpec c = q;
      c.at_ms = q.at_ms + k * q.every_ms;
      c.repeat = 1;
      if (c.at_ms < s.duration_s * 1000) s.requests.push_back(c);
    }
  }
  if (s.requests.size() > 1'000'000) fail(where + ": more than a million requests");
  std::stable_sort(s.requests.begin(), s.requests.end(),
                   [](const RequestSpec& a, const RequestSpec& b) { return a.at_ms < b.at_ms; });
  return s;
}

}  // namespace cli::sim
