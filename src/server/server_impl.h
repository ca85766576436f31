// What http_server.cpp (routes, small endpoints) and completion.cpp (the completion flow)
// share.
#pragma once
#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>

#include "runtime/scheduled_runtime.h"
#include "server/http_server.h"
#include "server/image_input.h"
#include "server/metrics.h"
#include "server/openai_request.h"

namespace pllm::server {

using json = nlohmann::json;

struct HttpServer::Impl {
  ServerOptions opt;
  httplib::Server http;
  int bound_port = 0;
  Metrics metrics;
  std::mutex model_mu;  // guards model / engine / runtime being set
  std::shared_ptr<const Model> model;
  std::shared_ptr<PrefixCache> cache;
  DraftSpec draft;  // every completion's drafter (kind none: plain decoding)
  std::shared_ptr<Engine> engine;
  std::unique_ptr<ScheduledRuntime> runtime;
  std::shared_ptr<ServerVision> vision;  // serve --mmproj, else null
  LazyTokenVocab vocab;  // the model's, for grammars (built on the first constrained request)
  std::atomic<bool> ready{false};
  std::atomic<uint64_t> next_id{1};

  void routes();
  // The completion endpoints (completion.cpp).
  void completion(const httplib::Request& req, httplib::Response& res, bool chat);
  bool authorized(const httplib::Request& req, httplib::Response& res, const char* endpoint);
  void send_error(httplib::Response& res, const ApiError& e, const char* endpoint);
};

// Events of one request, from the runtime's stepping thread to the HTTP thread serving it.
struct Channel {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<RuntimeEvent> events;
  void push(const RuntimeEvent& e) {
    {
      std::lock_guard lk(mu);
      events.push_back(e);
    }
    cv.notify_one();
  }
  // Waits up to timeout_ms for events; moves them out.
  std::deque<RuntimeEvent> take(int timeout_ms) {
    std::unique_lock lk(mu);
    cv.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] { return !events.empty(); });
    return std::exchange(events, {});
  }
};

json error_body(const ApiError& e);
// JSON text that never throws on bytes that are not UTF-8 (a token may end mid-character).
std::string dump(const json& j);

}  // namespace pllm::server
