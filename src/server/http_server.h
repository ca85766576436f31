// `pocketllm serve`: an OpenAI-compatible HTTP server (cpp-httplib) over ScheduledRuntime.
// Every completion request gets a session of its own on the runtime, which batches all running
// requests into one forward pass per step (requests beyond --parallel wait in its queue) and
// shares the prefix cache between them. A client that disconnects (while queued, during the
// prompt or while tokens stream) has its request cancelled within one step.
#pragma once
#include <memory>
#include <string>

#include "base/result.h"
#include "model/chat_prompt.h"
#include "model/model.h"
#include "runtime/session.h"
#include "runtime/speculative.h"

namespace pllm {
class PrefixCache;
}

namespace pllm::server {

struct ServerOptions {
  std::string host = "127.0.0.1";  // loopback unless told otherwise
  int port = 8080;                 // 0: any free port (see HttpServer::port)
  int parallel = 4;                // requests stepped together; more wait in the queue
  std::string api_key;             // non-empty: /v1/* need "Authorization: Bearer <key>"
  std::string model_id;            // the id /v1/models reports and requests may name
  int n_ctx = 4096;                // per request
  int threads = 0;                 // engine threads (0: performance cores)
  EngineBackend backend = EngineBackend::cpu;  // what runs the steps (runtime/engine.h)
  size_t max_body_bytes = 1 << 20;
  SessionConfig session;           // KV type, activation mode (n_ctx is set from above)
  ChatTemplateMode chat_template = ChatTemplateMode::file;  // how /v1/chat/completions renders messages
  std::string mmproj;              // vision encoder: chat requests may send images (image_url parts)
  bool vision_int8 = false;        // its products with int8 activations
};

class HttpServer {
 public:
  // Listens at once; /health says 503 "loading" until set_model().
  static Result<std::unique_ptr<HttpServer>> create(ServerOptions opt);
  ~HttpServer();
  // cache: the prefix cache the requests share (made for this model), or null.
  // draft: speculative decoding for every completion (runtime/speculative.h; a request's
  // speculative.n_max changes its length or turns it off).
  Result<void> set_model(std::shared_ptr<const Model> model, std::shared_ptr<PrefixCache> cache = nullptr,
                         DraftSpec draft = {});
  int port() const;
  // Serves until stop() (from another thread or a signal handler's helper thread).
  void run();
  void stop();

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pllm::server
