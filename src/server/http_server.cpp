// The server: routes, authorization, errors, and the small endpoints (health, models, metrics,
// tokenize, detokenize). The completion endpoints are in completion.cpp.
#include <chrono>

#include "runtime/prefix_cache.h"
#include "server/server_impl.h"
#include "server/web_chat.h"

namespace pllm::server {

json error_body(const ApiError& e) {
  return json{{"error", {{"message", e.message},
                         {"type", e.type},
                         {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                         {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void HttpServer::Impl::send_error(httplib::Response& res, const ApiError& e, const char* endpoint) {
  res.status = e.http_status;
  res.set_content(dump(error_body(e)), "application/json");
  metrics.request(endpoint, e.http_status);
}

bool HttpServer::Impl::authorized(const httplib::Request& req, httplib::Response& res, const char* endpoint) {
  if (opt.api_key.empty()) return true;
  if (req.get_header_value("Authorization") == "Bearer " + opt.api_key) return true;
  send_error(res, {401, "invalid_request_error", "", "invalid_api_key", "missing or wrong API key (Authorization: Bearer ...)"},
             endpoint);
  return false;
}

namespace {

ApiError loading() { return {503, "server_error", "", "model_loading", "the model is still loading"}; }

// Parses a small JSON body for /tokenize and /detokenize; an ApiError when it is not an object.
std::optional<json> object_body(const std::string& body, ApiError& err) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    err = {400, "invalid_request_error", "", "", "the request body must be a JSON object"};
    return std::nullopt;
  }
  return j;
}

}  // namespace

void HttpServer::Impl::routes() {
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    res.status = ready ? 200 : 503;
    res.set_content(ready ? R"({"status":"ok"})" : R"({"status":"loading"})", "application/json");
  });
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kWebChatHtml, "text/html; charset=utf-8");
  });
  http.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res, "models")) return;
    json data = json::array();
    if (ready) data.push_back({{"id", opt.model_id}, {"object", "model"}, {"created", 0}, {"owned_by", "pocketllm"}});
    res.set_content(dump({{"object", "list"}, {"data", data}}), "application/json");
    metrics.request("models", 200);
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    Gauges g;
    if (ready) {
      g.queue_depth = runtime->pending();
      g.thermal_level = runtime->caps().level;
      g.ttft_over_bound = runtime->ttft_over_bound();
    }
    if (ready && cache) {
      const PrefixCacheStats st = cache->stats();
      g.cache_hits = st.ram_hits + st.disk_hits;
      g.cache_misses = st.ram_misses - std::min(st.ram_misses, st.disk_hits);
    }
    if (ready && vision) g.image_tiles_encoded = server_image_rows(*vision)->encodes();
    res.set_content(metrics.render(g), "text/plain; version=0.0.4");
  });
  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) { completion(req, res, true); });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) { completion(req, res, false); });
  http.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res, "tokenize")) return;
    if (!ready) return send_error(res, loading(), "tokenize");
    ApiError err;
    auto j = object_body(req.body, err);
    if (!j || !(*j).contains("content") || !(*j)["content"].is_string())
      return send_error(res, j ? ApiError{400, "invalid_request_error", "content", "", "'content' must be a string"} : err,
                        "tokenize");
    const bool special = j->value("add_special", false);
    auto ids = model->tokenizer().encode((*j)["content"].get<std::string>(), special, special);
    if (!ids.ok()) return send_error(res, {400, "invalid_request_error", "content", "", ids.error().message}, "tokenize");
    res.set_content(dump({{"tokens", *ids}}), "application/json");
    metrics.request("tokenize", 200);
  });
  http.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res, "detokenize")) return;
    if (!ready) return send_error(res, loading(), "detokenize");
    ApiError err;
    auto j = object_body(req.body, err);
    if (!j || !(*j).contains("tokens") || !(*j)["tokens"].is_array())
      return send_error(res, j ? ApiError{400, "invalid_request_error", "tokens", "", "'tokens' must be an array"} : err,
                        "detokenize");
    std::string text;
    const int32_t n_vocab = model->config().n_vocab;
    for (const json& t : (*j)["tokens"]) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab)
        return send_error(res, {400, "invalid_request_error", "tokens", "", "token ids must be integers in [0, n_vocab)"},
                          "detokenize");
      text += model->tokenizer().token_to_piece(int32_t(t.get<int64_t>()));
    }
    res.set_content(dump({{"content", text}}), "application/json");
    metrics.request("detokenize", 200);
  });
  http.set_error_handler([this](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;  // a handler already wrote its error
    ApiError e{res.status, "invalid_request_error", "", "", "HTTP " + std::to_string(res.status)};
    if (res.status == 404) e.message = "no such endpoint";
    if (res.status == 413) e.message = "the request body is larger than the server accepts";
    res.set_content(dump(error_body(e)), "application/json");
  });
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() {
  stop();
  if (impl_->runtime) impl_->runtime->stop();
}

Result<std::unique_ptr<HttpServer>> HttpServer::create(ServerOptions opt) {
  if (opt.parallel < 1) return make_error(Status::invalid_argument, "serve: --parallel must be >= 1");
  if (opt.n_ctx < 16) return make_error(Status::invalid_argument, "serve: the context must be >= 16 tokens");
  auto impl = std::make_unique<Impl>();
  impl->opt = std::move(opt);
  impl->http.set_payload_max_length(impl->opt.max_body_bytes);
  // Every connection holds an HTTP thread while its request waits or streams: more threads
  // than --parallel, so requests beyond it queue in the scheduler instead of in the kernel.
  const size_t n_http = size_t(impl->opt.parallel) + 32;
  impl->http.new_task_queue = [n_http] { return new httplib::ThreadPool(n_http); };
  impl->routes();
  const int port = impl->opt.port == 0 ? impl->http.bind_to_any_port(impl->opt.host)
                                       : (impl->http.bind_to_port(impl->opt.host, impl->opt.port) ? impl->opt.port : -1);
  if (port < 0)
    return make_error(Status::io_error, "serve: cannot listen on " + impl->opt.host + ":" + std::to_string(impl->opt.port));
  impl->bound_port = port;
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

Result<void> HttpServer::set_model(std::shared_ptr<const Model> model, std::shared_ptr<PrefixCache> cache,
                                   DraftSpec draft) {
  Impl& s = *impl_;
  std::shared_ptr<ServerVision> vision;
  if (!s.opt.mmproj.empty()) {
    PLLM_ASSIGN(vision, load_server_vision(*model, s.opt.mmproj, s.opt.vision_int8));
  }
  PLLM_ASSIGN(std::shared_ptr<Engine> engine, Engine::create(s.opt.threads, s.opt.backend));
  RuntimeConfig cfg;
  cfg.max_batch_rows = s.opt.parallel;
  cfg.kv_budget_tokens = int64_t(s.opt.parallel) * s.opt.n_ctx;
  cfg.prefix_cache = cache;
  PLLM_ASSIGN(std::unique_ptr<ScheduledRuntime> rt, ScheduledRuntime::create(model, engine, std::move(cfg)));
  PLLM_TRY(rt->start());
  std::lock_guard lk(s.model_mu);
  s.model = std::move(model);
  s.engine = std::move(engine);
  s.runtime = std::move(rt);
  s.cache = std::move(cache);
  s.draft = std::move(draft);
  s.vision = std::move(vision);
  s.ready = true;
  return {};
}

int HttpServer::port() const { return impl_->bound_port; }
void HttpServer::run() { impl_->http.listen_after_bind(); }
void HttpServer::stop() { impl_->http.stop(); }

}  // namespace pllm::server
