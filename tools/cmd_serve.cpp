// `pocketllm serve`: the OpenAI-compatible server (src/server/). Listens at once (GET /health
// answers 503 until the model is loaded), loads the model, serves until SIGINT / SIGTERM.
#include <csignal>
#include <cstdio>
#include <thread>

#include "cli_cpp_api.h"
#include "commands.h"
#include "draft_options.h"
#include "model/model.h"
#include "runtime/prefix_cache.h"
#include "server/http_server.h"

namespace cli {
namespace {

struct Options {
  std::string model, host = "127.0.0.1", api_key, cache_dir, kv_type = "f16";
  int port = 8080, parallel = 4, ctx = 4096, threads = 0;
  std::string backend = "cpu";
  std::string chat_template = "file";  // --chat-template file|native
  double cache_ram_mb = 256;
  ActChoice act;
  DraftOptions draft;
  std::string mmproj;  // --mmproj: images in chat requests
  bool image_int8 = false;
};

// The server's drafter (serve --draft ...), checked against the loaded model.
pllm::DraftSpec draft_spec(const DraftOptions& d, const pllm::Model& m, pllm::ActMode act) {
  pllm::DraftSpec spec;
  spec.max_tokens = d.max_tokens;
  if (d.kind == "lookup") spec.kind = pllm::DraftKind::lookup;
  if (d.kind == "model") {
    spec.kind = pllm::DraftKind::model;
    const std::string path = resolve_model_path(d.model);
    auto dm = pllm::Model::load(path, /*vocab_only=*/false, {}, pllm::repack_for(act));
    if (!dm.ok()) fail("loading the draft model " + path + ": " + dm.error().message);
    spec.model = std::move(*dm);
  }
  if (d.kind == "skip") {
    spec.kind = pllm::DraftKind::skip;
    if (!d.skip_file.empty()) {
      auto layers = pllm::load_skip_layers(d.skip_file, m);
      if (!layers.ok()) fail(layers.error().message);
      spec.skip_layers = std::move(*layers);
    } else {
      spec.skip_layers = d.skip_layers;
    }
    for (int l : spec.skip_layers)
      if (l < 0 || l >= m.config().n_layer)
        fail("--draft-skip-layers: layer " + std::to_string(l) + " does not exist (the model has " +
             std::to_string(m.config().n_layer) + ")");
  }
  return spec;
}

pllm::server::HttpServer* g_server = nullptr;  // for the signal thread only

int serve(const Options& o) {
  const std::string path = resolve_model_path(o.model);
  o.draft.check();
  pllm::server::ServerOptions so;
  so.host = o.host;
  so.port = o.port;
  so.parallel = o.parallel;
  so.api_key = o.api_key;
  so.n_ctx = o.ctx;
  so.threads = o.threads;
  so.backend = pllm::parse_engine_backend(o.backend).value();  // CLI11 checked the name
  so.session.act = *pllm::parse_act_mode(o.act.name());  // the C API's word for a value it made
  if (o.kv_type == "f32") so.session.kv.type = pllm::KvType::f32;
  else if (o.kv_type == "q8") so.session.kv.type = pllm::KvType::q8;
  else if (o.kv_type == "q4") so.session.kv.type = pllm::KvType::q4;
  so.model_id = path.substr(path.find_last_of('/') + 1);
  so.chat_template = *pllm::parse_chat_template_mode(o.chat_template);  // CLI11 checked the word
  so.mmproj = o.mmproj;
  so.vision_int8 = o.image_int8;
  // Photos sent inline (base64 in the JSON body) need room: 32 MiB bodies with a vision encoder.
  if (!o.mmproj.empty()) so.max_body_bytes = size_t(32) << 20;
  auto server = pllm::server::HttpServer::create(so);
  if (!server.ok()) fail(server.error().message);
  std::fprintf(stderr, "pocketllm serve: listening on http://%s:%d (loading %s)\n", o.host.c_str(), (*server)->port(),
               path.c_str());
  // Signals end the server from a thread of its own (stop() is not async-signal-safe).
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client that went away is a failed write, not a signal
  g_server = server->get();
  std::thread signals([set] {
    int sig = 0;
    sigwait(&set, &sig);
    if (g_server) g_server->stop();
  });
  signals.detach();
  std::thread loader([&] {
    // Panels for the kernels the sessions will run.
    auto model = pllm::Model::load(path, /*vocab_only=*/false, {}, pllm::repack_for(so.session.act));
    if (!model.ok()) {
      std::fprintf(stderr, "error: loading %s: %s\n", path.c_str(), model.error().message.c_str());
      std::exit(1);
    }
    if (so.session.act == pllm::ActMode::int8_static && (*model)->act_scale_counts().n_static == 0) {
      std::fprintf(stderr, "error: --act static needs calibrated scales, and %s has none (pocketllm calibrate-act)\n",
                   path.c_str());
      std::exit(1);
    }
    std::shared_ptr<pllm::PrefixCache> cache;
    pllm::PrefixCacheParams cp;
    cp.ram_bytes = uint64_t(o.cache_ram_mb * 1024 * 1024);
    cp.dir = o.cache_dir;
    if (auto c = pllm::PrefixCache::create((*model)->identity(), cp); c.ok()) cache = *c;
    if (auto r = (*server)->set_model(*model, cache, draft_spec(o.draft, **model, so.session.act)); !r.ok()) {
      std::fprintf(stderr, "error: %s\n", r.error().message.c_str());
      std::exit(1);
    }
    std::fprintf(stderr, "pocketllm serve: ready\n");
  });
  (*server)->run();
  loader.join();
  g_server = nullptr;
  return 0;
}

}  // namespace

std::function<int()> add_serve(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server with a web chat at /");
  auto o = std::make_shared<Options>();
  cmd->add_option("-m,--model", o->model, "GGUF file");
  cmd->add_option("--host", o->host, "address to bind (default 127.0.0.1: this machine only)");
  cmd->add_option("--port", o->port, "port (default 8080; 0: any free port)")->check(CLI::Range(0, 65535));
  cmd->add_option("--parallel", o->parallel, "requests stepped together (default 4); more wait in the queue")
      ->check(CLI::Range(1, 64));
  cmd->add_option("-c,--ctx", o->ctx, "context per request in tokens (default 4096)")->check(CLI::Range(16, 1 << 20));
  cmd->add_option("-t,--threads", o->threads, "engine threads (default: performance cores)")->check(CLI::Range(0, 256));
  cmd->add_option("--backend", o->backend, "what runs the model: cpu (default), vulkan, auto (see pocketllm run --help)")
      ->check(CLI::IsMember({"cpu", "auto", "vulkan"}));
  cmd->add_option("--api-key", o->api_key, "require Authorization: Bearer KEY on /v1/*");
  cmd->add_option("--chat-template", o->chat_template,
                  "file (default: the model's own tokenizer.chat_template, rendered) or native (the built-in layout "
                  "of its family)")
      ->check(CLI::IsMember({"file", "native"}));
  cmd->add_option("--cache-dir", o->cache_dir, "prefix cache directory (default: RAM only)");
  cmd->add_option("--cache-ram", o->cache_ram_mb, "prefix cache RAM budget in MiB (default 256)")->check(CLI::Range(0.0, 1e7));
  cmd->add_option("--kv-type", o->kv_type, "KV cache storage")->check(CLI::IsMember({"f16", "q8", "q4", "f32"}));
  o->act.add_to(cmd);
  o->draft.add_to(cmd);
  cmd->add_option("--mmproj", o->mmproj,
                  "vision encoder (llama.cpp's mmproj GGUF): chat requests may send images as image_url parts "
                  "with data: URIs");
  cmd->add_flag("--image-int8", o->image_int8, "the vision encoder's products with int8 activations");
  return [o]() { return serve(*o); };
}

}  // namespace cli
