#include "base/trace.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace pllm {

Tracer::Tracer(size_t capacity) { events_.reserve(capacity); }

std::string Tracer::chrome_trace_json() const {
  // Complete events ("ph":"X") with microsecond timestamps relative to the first event.
  std::string out = "{\"traceEvents\":[";
  const int64_t t0 = events_.empty() ? 0 : events_.front().begin_ns;
  char buf[256];
  for (size_t i = 0; i < events_.size(); ++i) {
    const Event& e = events_[i];
    const int n = std::snprintf(buf, sizeof(buf),
                                "%s{\"name\":\"%s\",\"cat\":\"op\",\"ph\":\"X\",\"pid\":1,\"tid\":1,"
                                "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"layer\":%d}}",
                                i ? "," : "", e.name, double(e.begin_ns - t0) / 1e3,
                                double(e.end_ns - e.begin_ns) / 1e3, e.layer);
    out.append(buf, size_t(n));
  }
  out += "],\"displayTimeUnit\":\"ms\"}\n";
  return out;
}

std::string Tracer::summary() const {
  struct Agg {
    int64_t ns = 0;
    long calls = 0;
  };
  std::map<std::string, Agg> by_name;
  int64_t total = 0;
  for (const Event& e : events_) {
    Agg& a = by_name[e.name];
    a.ns += e.end_ns - e.begin_ns;
    ++a.calls;
    total += e.end_ns - e.begin_ns;
  }
  std::vector<std::pair<std::string, Agg>> rows(by_name.begin(), by_name.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  std::string out = "op                 total ms    calls   share\n";
  char buf[160];
  for (const auto& [name, a] : rows) {
    std::snprintf(buf, sizeof(buf), "%-16s %10.2f %8ld %6.1f%%\n", name.c_str(), double(a.ns) / 1e6, a.calls,
                  total ? 100.0 * double(a.ns) / double(total) : 0.0);
    out += buf;
  }
  std::snprintf(buf, sizeof(buf), "%-16s %10.2f %8zu events%s\n", "total", double(total) / 1e6, events_.size(),
                dropped_ ? " (buffer full: later events dropped)" : "");
  out += buf;
  return out;
}

}  // namespace pllm
