#include "server/metrics.h"

#include <cstdio>

namespace pllm::server {
namespace {

void line(std::string& out, const char* fmt, auto... args) {
  char buf[256];
  const int n = std::snprintf(buf, sizeof(buf), fmt, args...);
  if (n > 0) out.append(buf, size_t(std::min(n, int(sizeof(buf)) - 1)));
}

void header(std::string& out, const std::string& name, const char* type, const std::string& help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

void Histogram::observe(double seconds) {
  size_t i = 0;
  while (i < kBounds.size() && seconds > kBounds[i]) ++i;
  if (i < kBounds.size()) ++counts_[i];
  ++count_;
  sum_ += seconds;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  header(out, name, "histogram", help);
  uint64_t cum = 0;
  for (size_t i = 0; i < kBounds.size(); ++i) {
    cum += counts_[i];
    line(out, "%s_bucket{le=\"%g\"} %llu\n", name.c_str(), kBounds[i], (unsigned long long)cum);
  }
  line(out, "%s_bucket{le=\"+Inf\"} %llu\n", name.c_str(), (unsigned long long)count_);
  line(out, "%s_sum %.6f\n", name.c_str(), sum_);
  line(out, "%s_count %llu\n", name.c_str(), (unsigned long long)count_);
}

void Metrics::request(const std::string& endpoint, int status) {
  std::lock_guard lk(mu_);
  ++requests_[{endpoint, status}];
}
void Metrics::prompt_tokens(uint64_t n) {
  std::lock_guard lk(mu_);
  prompt_tokens_ += n;
}
void Metrics::generated_tokens(uint64_t n) {
  std::lock_guard lk(mu_);
  generated_tokens_ += n;
}
void Metrics::cancelled() {
  std::lock_guard lk(mu_);
  ++cancelled_;
}
void Metrics::cached_tokens(uint64_t n) {
  std::lock_guard lk(mu_);
  cached_tokens_ += n;
}
void Metrics::ttft(double s) {
  std::lock_guard lk(mu_);
  ttft_.observe(s);
}
void Metrics::inter_token(double s) {
  std::lock_guard lk(mu_);
  itl_.observe(s);
}

std::string Metrics::render(const Gauges& g) const {
  std::lock_guard lk(mu_);
  std::string out;
  header(out, "pocketllm_requests_total", "counter", "HTTP requests by endpoint and status");
  for (const auto& [key, n] : requests_)
    line(out, "pocketllm_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n", key.first.c_str(), key.second,
         (unsigned long long)n);
  header(out, "pocketllm_prompt_tokens_total", "counter", "prompt tokens of accepted requests");
  line(out, "pocketllm_prompt_tokens_total %llu\n", (unsigned long long)prompt_tokens_);
  header(out, "pocketllm_generated_tokens_total", "counter", "tokens generated");
  line(out, "pocketllm_generated_tokens_total %llu\n", (unsigned long long)generated_tokens_);
  header(out, "pocketllm_cancelled_requests_total", "counter", "requests stopped by a client disconnect");
  line(out, "pocketllm_cancelled_requests_total %llu\n", (unsigned long long)cancelled_);
  ttft_.render(out, "pocketllm_time_to_first_token_seconds", "time from request to first token");
  itl_.render(out, "pocketllm_inter_token_latency_seconds", "time between consecutive tokens of a request");
  header(out, "pocketllm_queue_depth", "gauge", "requests accepted and not finished");
  line(out, "pocketllm_queue_depth %zu\n", g.queue_depth);
  header(out, "pocketllm_thermal_level", "gauge", "the thermal governor's level (0 = none)");
  line(out, "pocketllm_thermal_level %d\n", g.thermal_level);
  header(out, "pocketllm_ttft_over_bound_total", "counter",
         "requests that had no token within their class's first-token bound");
  line(out, "pocketllm_ttft_over_bound_total %d\n", g.ttft_over_bound);
  header(out, "pocketllm_prefix_cache_hits_total", "counter", "prompt prefixes restored from the cache");
  line(out, "pocketllm_prefix_cache_hits_total %llu\n", (unsigned long long)g.cache_hits);
  header(out, "pocketllm_prefix_cache_misses_total", "counter", "prompt prefix lookups that found nothing");
  line(out, "pocketllm_prefix_cache_misses_total %llu\n", (unsigned long long)g.cache_misses);
  header(out, "pocketllm_prefix_cache_restored_tokens_total", "counter", "prompt tokens restored instead of computed");
  line(out, "pocketllm_prefix_cache_restored_tokens_total %llu\n", (unsigned long long)cached_tokens_);
  header(out, "pocketllm_image_tiles_encoded_total", "counter",
         "image tiles the vision encoder ran (an image sent again is not encoded again)");
  line(out, "pocketllm_image_tiles_encoded_total %lld\n", (long long)g.image_tiles_encoded);
  return out;
}

}  // namespace pllm::server
