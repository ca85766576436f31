// The server's counters and latency histograms, rendered in Prometheus' text format for
// GET /metrics. Thread-safe (one mutex: a few updates per token at most).
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace pllm::server {

class Histogram {
 public:
  // Upper bounds in seconds, as Prometheus expects.
  static constexpr std::array<double, 12> kBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
  void observe(double seconds);
  void render(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::array<uint64_t, kBounds.size()> counts_{};  // per bucket (not cumulative)
  uint64_t count_ = 0;
  double sum_ = 0;
};

struct Gauges {  // read when /metrics is scraped
  size_t queue_depth = 0;   // requests submitted and not ended
  int thermal_level = 0;
  int ttft_over_bound = 0;  // requests with no token within their class's first-token bound
  uint64_t cache_hits = 0, cache_misses = 0;
  int64_t image_tiles_encoded = 0;  // serve --mmproj: tiles the vision encoder ran (shared image rows)
};

class Metrics {
 public:
  void request(const std::string& endpoint, int status);
  void prompt_tokens(uint64_t n);
  void generated_tokens(uint64_t n);
  void cancelled();
  void cached_tokens(uint64_t n);
  void ttft(double seconds);
  void inter_token(double seconds);
  std::string render(const Gauges& g) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  uint64_t prompt_tokens_ = 0, generated_tokens_ = 0, cancelled_ = 0, cached_tokens_ = 0;
  Histogram ttft_, itl_;
};

}  // namespace pllm::server
