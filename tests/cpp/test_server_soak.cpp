// Soak test of the HTTP server (in-process, on 127.0.0.1): many clients streaming at once,
// some hanging up on purpose mid-request. Every stream that is not cut must be complete and
// valid SSE (role first, one finish_reason last, usage only when asked, [DONE] at the end) and
// carry the same text a lone request gets (greedy: batching, queueing and the shared prefix
// cache must not change a token); every cut request must be cancelled on the server, and no
// work may be left behind.
// Scale: PLLM_SOAK_CLIENTS (default 16) clients x PLLM_SOAK_REQUESTS (default 8) requests each
// of up to PLLM_SOAK_MAX_TOKENS (24) tokens; scripts/test.sh --long runs 20 requests each on the
// real model and the sanitizer builds run the tiny model (scripts/test.sh).
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "real_model.h"
#include "runtime/prefix_cache.h"
#include "server/http_server.h"

namespace {

using json = nlohmann::json;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// A request that runs to the end asks for at most this many tokens (PLLM_SOAK_MAX_TOKENS).
const int kMaxTokens = std::max(4, env_int("PLLM_SOAK_MAX_TOKENS", 24));
constexpr int kLongMaxTokens = 200;   // a request the client cuts asks for this (still running when cut)
const char* const kQuestions[] = {"What is the capital of France?", "Name three colours.",
                                  "What is 2 + 2? Answer in one sentence.", "Say hello to a cat."};
// Completions continue text (a "Question: ... Answer:" prompt makes SmolLM2 end at once).
const char* const kStarts[] = {"The capital of France is", "Three colours are", "Two plus two equals",
                               "A cat says"};
const char* const kLongAsk = "Write a very long story about a dragon who learns to bake bread.";
const char* const kLongStart = "Once upon a time, in a land far away, there lived a dragon who";

json body_for(bool chat, int question, int max_tokens, bool stream, bool usage) {
  const std::string text = question < 0 ? (chat ? kLongAsk : kLongStart) : chat ? kQuestions[question] : kStarts[question];
  json b = {{"max_tokens", max_tokens}, {"temperature", 0}, {"stream", stream}};
  if (chat) b["messages"] = json::array({{{"role", "user"}, {"content", text}}});
  else b["prompt"] = text;
  if (usage) b["stream_options"] = {{"include_usage", true}};
  return b;
}

const char* path_for(bool chat) { return chat ? "/v1/chat/completions" : "/v1/completions"; }

std::string text_of(const json& choice, bool chat) {
  if (!chat) return choice.value("text", "");
  const json& d = choice.at("delta");
  return d.contains("content") && d["content"].is_string() ? d["content"].get<std::string>() : "";
}

// One streamed request as the client saw it.
struct Stream {
  int status = 0;
  bool done = false;  // [DONE] arrived
  bool cut = false;   // the client hung up on purpose
  std::string error;  // a malformed stream
  std::vector<json> chunks;
};

// cut_after >= 0: hang up once that many data events arrived (0: on the first bytes).
Stream stream_request(int port, bool chat, const json& body, int cut_after) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(300, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = path_for(chat);
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  Stream s;
  std::string buf;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (cut_after == 0) return !(s.cut = true);
    buf.append(data, n);
    for (size_t end; (end = buf.find("\n\n")) != std::string::npos;) {
      const std::string event = buf.substr(0, end);
      buf.erase(0, end + 2);
      if (event.rfind(':', 0) == 0) continue;  // an SSE comment (the server's keep-alive probe)
      if (event.rfind("data: ", 0) != 0 || s.done) {
        s.error = "unexpected event: " + event;
        return false;
      }
      if (event == "data: [DONE]") {
        s.done = true;
        continue;
      }
      json j = json::parse(event.substr(6), nullptr, false);
      if (j.is_discarded() || !j.is_object()) {
        s.error = "not a JSON object: " + event;
        return false;
      }
      s.chunks.push_back(std::move(j));
      if (cut_after > 0 && int(s.chunks.size()) >= cut_after) return !(s.cut = true);
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool ok = cli.send(req, res, err);
  s.status = res.status;
  if (!ok && !s.cut && s.error.empty()) s.error = "transport error " + httplib::to_string(err);
  if (ok && !buf.empty() && s.error.empty()) s.error = "trailing bytes after the last event: " + buf;
  return s;
}

// What a lone, plain (not streamed) request answers.
struct Reference {
  std::string text, finish;
  int completion_tokens = 0;
};

std::map<std::string, double> scrape(int port) {
  httplib::Client cli("127.0.0.1", port);
  auto r = cli.Get("/metrics");
  std::map<std::string, double> m;
  if (!r || r->status != 200) return m;
  std::istringstream in(r->body);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#' || line.find('{') != std::string::npos) continue;
    const size_t sp = line.find(' ');
    if (sp != std::string::npos) m[line.substr(0, sp)] = std::atof(line.c_str() + sp + 1);
  }
  return m;
}

class ServerSoak : public ::testing::Test {
 protected:
  void SetUp() override {
    // PLLM_SOAK_MODEL: another GGUF (the sanitizer runs use a tiny one: the checks hold for
    // any model, and the real one under ASan costs minutes of numerics and no extra coverage).
    if (const char* path = std::getenv("PLLM_SOAK_MODEL"); path && *path) {
      auto m = pllm::Model::load(path, false);
      ASSERT_TRUE(m.ok()) << path << ": " << m.error().message;
      model_ = *m;
    } else {
      model_ = shared_real_model();
      if (!model_) GTEST_SKIP() << "real model not found at " << real_model_path();
    }
    pllm::server::ServerOptions opt;
    opt.port = 0;
    opt.parallel = 4;
    opt.n_ctx = 512;
    auto server = pllm::server::HttpServer::create(opt);
    ASSERT_TRUE(server.ok()) << server.error().message;
    server_ = std::move(*server);
    pllm::PrefixCacheParams cp;
    cp.ram_bytes = 64 << 20;
    auto cache = pllm::PrefixCache::create(model_->identity(), cp);
    ASSERT_TRUE(cache.ok()) << cache.error().message;
    ASSERT_TRUE(server_->set_model(model_, *cache).ok());
    thread_ = std::thread([this] { server_->run(); });
  }
  void TearDown() override {
    if (!server_) return;
    server_->stop();
    thread_.join();
  }
  int port() const { return server_->port(); }

  // question: an index into kQuestions (chat) or kStarts (completions); -1: kLongAsk / kLongStart.
  Reference reference(bool chat, int question, int max_tokens) {
    httplib::Client cli("127.0.0.1", port());
    cli.set_read_timeout(300, 0);
    auto r = cli.Post(path_for(chat), body_for(chat, question, max_tokens, false, false).dump(), "application/json");
    Reference ref;
    if (!r || r->status != 200) {
      ADD_FAILURE() << question << ": " << (r ? std::to_string(r->status) + " " + r->body : httplib::to_string(r.error()));
      return ref;
    }
    const json j = json::parse(r->body);
    const json& c = j["choices"][0];
    ref.text = chat ? c["message"]["content"].get<std::string>() : c["text"].get<std::string>();
    ref.finish = c["finish_reason"].get<std::string>();
    ref.completion_tokens = j["usage"]["completion_tokens"].get<int>();
    return ref;
  }

  std::shared_ptr<const pllm::Model> model_;
  std::unique_ptr<pllm::server::HttpServer> server_;
  std::thread thread_;
};

struct Job {
  bool chat = true;
  int question = 0;
  int max_tokens = kMaxTokens;
  bool usage = false;
  int cut_after = -1;  // -1: read to the end
};

// A finished (not cut) stream against its lone reference; "" when it is right.
std::string check_stream(const Job& job, const Stream& s, const Reference& ref) {
  if (s.status != 200) return "status " + std::to_string(s.status) + (s.error.empty() ? "" : " (" + s.error + ")");
  if (!s.error.empty()) return s.error;
  if (!s.done) return "no [DONE]";
  std::vector<json> chunks = s.chunks;
  json usage;
  if (job.usage) {
    if (chunks.empty() || !chunks.back().contains("usage")) return "no usage chunk last";
    usage = chunks.back()["usage"];
    if (!chunks.back()["choices"].empty()) return "the usage chunk has choices";
    chunks.pop_back();
  }
  if (chunks.empty()) return "no chunks";
  std::string text, finish;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const json& c = chunks[i];
    if (c.contains("usage")) return "a usage chunk nobody asked for, or two";
    if (c.value("id", "") != chunks[0].value("id", "") || c.value("id", "").empty()) return "ids differ";
    if (c.value("object", "") != (job.chat ? "chat.completion.chunk" : "text_completion")) return "wrong object";
    if (!c["choices"].is_array() || c["choices"].size() != 1) return "not one choice";
    const json& choice = c["choices"][0];
    if (i == 0 && job.chat && choice["delta"].value("role", "") != "assistant") return "first delta has no role";
    const bool last = i + 1 == chunks.size();
    if (choice["finish_reason"].is_null() == last) return "finish_reason not on the last chunk only";
    if (last) finish = choice["finish_reason"].get<std::string>();
    text += text_of(choice, job.chat);
  }
  if (finish != "stop" && finish != "length") return "finish_reason " + finish;
  if (!ref.text.starts_with(text)) return "text is not the lone request's: '" + text + "' vs '" + ref.text + "'";
  if (finish == "stop" && (text != ref.text || ref.finish != "stop")) return "stopped at another place than alone";
  if (job.usage && finish == "length" && usage.value("completion_tokens", -1) != job.max_tokens)
    return "length finish with " + usage.dump();
  return "";
}

TEST_F(ServerSoak, ConcurrentStreamsWithDisconnects) {
  const int n_clients = env_int("PLLM_SOAK_CLIENTS", 16);
  const int n_requests = env_int("PLLM_SOAK_REQUESTS", 8);
  const unsigned seed = unsigned(env_int("PLLM_SOAK_SEED", 1234));
  SCOPED_TRACE("clients " + std::to_string(n_clients) + " x requests " + std::to_string(n_requests) + ", seed " +
               std::to_string(seed));

  // The lone answers, one request at a time (prefix cache cold for the first, warm after).
  std::map<std::pair<bool, int>, Reference> refs;
  for (const bool chat : {true, false})
    for (int q = 0; q < int(std::size(kQuestions)); ++q) {
      const Reference& ref = refs[{chat, q}] = reference(chat, q, kMaxTokens);
      ASSERT_GT(ref.completion_tokens, 0) << (chat ? kQuestions[q] : kStarts[q]);
    }
  for (const bool chat : {true, false}) {
    // A cut request must still be running when the client hangs up.
    // (a cut comes after at most 4 tokens, and the server sees it at its next write)
    const Reference long_ref = reference(chat, -1, 32);
    ASSERT_EQ(long_ref.completion_tokens, 32) << "the long question ends too soon to be cut mid-stream";
  }
  const auto before = scrape(port());
  ASSERT_EQ(before.count("pocketllm_cancelled_requests_total"), 1u);

  std::mutex mu;
  std::vector<std::string> failures;
  int cuts = 0, finished = 0;
  std::vector<std::thread> clients;
  for (int c = 0; c < n_clients; ++c)
    clients.emplace_back([&, c] {
      std::mt19937 rng(seed + unsigned(c));
      for (int i = 0; i < n_requests; ++i) {
        Job job;
        job.chat = rng() % 2 == 0;
        job.question = int(rng() % std::size(kQuestions));
        job.usage = rng() % 2 == 0;
        if (rng() % 5 == 0) job.cut_after = int(rng() % 5);  // 20 %: hang up while queued, in the prompt or mid-stream
        else job.max_tokens = 4 + int(rng() % (kMaxTokens - 3));
        const bool cut = job.cut_after >= 0;
        const Stream s = stream_request(
            port(), job.chat,
            body_for(job.chat, cut ? -1 : job.question, cut ? kLongMaxTokens : job.max_tokens, true, job.usage),
            job.cut_after);
        std::string why;
        if (cut && !s.cut) why = s.error.empty() ? "the stream ended before the cut" : s.error;
        if (!cut) why = check_stream(job, s, refs.at({job.chat, job.question}));
        std::lock_guard lk(mu);
        (cut ? cuts : finished)++;
        if (!why.empty())
          failures.push_back("client " + std::to_string(c) + " request " + std::to_string(i) + " (" +
                             (job.chat ? "chat" : "completion") + ", q" + std::to_string(job.question) +
                             ", max " + std::to_string(job.max_tokens) + ", cut " + std::to_string(job.cut_after) +
                             "): " + why);
      }
    });
  for (auto& t : clients) t.join();
  for (const auto& f : failures) ADD_FAILURE() << f;
  EXPECT_EQ(cuts + finished, n_clients * n_requests);

  // Every cut request is cancelled and nothing is left running.
  std::map<std::string, double> after;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  do {
    after = scrape(port());
    if (after["pocketllm_queue_depth"] == 0 &&
        after["pocketllm_cancelled_requests_total"] - before.at("pocketllm_cancelled_requests_total") >= cuts)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(after["pocketllm_queue_depth"], 0);
  EXPECT_EQ(after["pocketllm_cancelled_requests_total"] - before.at("pocketllm_cancelled_requests_total"), cuts);
  EXPECT_GT(cuts, 0);
  // The server still answers after all that.
  const Reference again = reference(true, 0, kMaxTokens);
  EXPECT_EQ(again.text, refs.at({true, 0}).text);
}

}  // namespace

namespace {

// Constrained requests (a JSON schema, tools under "required" and "auto") and plain ones at
// once: each reply, streamed or whole, is the one a lone request gets. Run first on a fresh
// server, so the vocabulary trie the grammars share is built under concurrent first use.
const char* const kConstrainedBodies[] = {
    R"({"messages": [{"role": "user", "content": "Describe a person as JSON."}], "max_tokens": 24,
        "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": {"type": "object",
        "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0}},
        "required": ["name", "age"], "additionalProperties": false}}}})",
    R"({"messages": [{"role": "user", "content": "Weather in Paris?"}], "max_tokens": 32, "tool_choice": "required",
        "parallel_tool_calls": false, "tools": [{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}},
        "required": ["city"], "additionalProperties": false}}}]})",
    R"({"messages": [{"role": "user", "content": "Weather in Rome? Call the tool."}], "max_tokens": 16,
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string", "maxLength": 12}}, "required": ["city"],
        "additionalProperties": false}}}]})",
    R"({"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8})",
};

// A reply reduced to what must not depend on the company it ran in: content, finish_reason,
// each call's name and arguments (ids are per request).
json outcome(int status, const json& whole, const Stream* streamed) {
  json out = {{"status", status}};
  if (status != 200) return out;
  std::string content, finish;
  std::map<int, std::pair<std::string, std::string>> calls;
  if (streamed) {
    for (const json& c : streamed->chunks) {
      if (!c.contains("choices") || c["choices"].empty()) continue;
      const json& ch = c["choices"][0];
      content += text_of(ch, true);
      for (const json& d : ch["delta"].value("tool_calls", json::array())) {
        auto& [name, args] = calls[d["index"].get<int>()];
        if (d["function"].contains("name")) name = d["function"]["name"].get<std::string>();
        args += d["function"].value("arguments", "");
      }
      if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"].get<std::string>();
    }
  } else {
    const json& ch = whole["choices"][0];
    content = ch["message"]["content"].is_string() ? ch["message"]["content"].get<std::string>() : "";
    int i = 0;
    for (const json& t : ch["message"].value("tool_calls", json::array()))
      calls[i++] = {t["function"]["name"].get<std::string>(), t["function"]["arguments"].get<std::string>()};
    finish = ch["finish_reason"].get<std::string>();
  }
  json cs = json::array();
  for (const auto& [i, c] : calls) {
    const json args = json::parse(c.second, nullptr, false);
    cs.push_back({{"name", c.first}, {"arguments", args.is_discarded() ? json(c.second) : args}});
  }
  out["calls"] = cs;
  // With calls the whole reply trims the text around them; a stream sends it as written.
  if (!cs.empty()) content.erase(0, content.find_first_not_of(" \t\n\r") == std::string::npos ? content.size()
                                                                                               : content.find_first_not_of(" \t\n\r"));
  while (!cs.empty() && !content.empty() && std::isspace(static_cast<unsigned char>(content.back()))) content.pop_back();
  out["content"] = content;
  out["finish"] = finish;
  return out;
}

json run_constrained(int port, int which, bool stream) {
  json body = json::parse(kConstrainedBodies[which]);
  body["temperature"] = 0;
  body["stream"] = stream;
  if (stream) {
    const Stream s = stream_request(port, true, body, -1);
    if (!s.error.empty() || !s.done) return {{"error", s.error.empty() ? "no [DONE]" : s.error}};
    return outcome(s.status, json(), &s);
  }
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(300, 0);
  auto r = cli.Post("/v1/chat/completions", body.dump(), "application/json");
  if (!r) return {{"error", httplib::to_string(r.error())}};
  return outcome(r->status, r->status == 200 ? json::parse(r->body) : json(), nullptr);
}

}  // namespace

TEST_F(ServerSoak, ConcurrentConstrainedRequestsMatchLoneOnes) {
  const int n_clients = std::min(8, env_int("PLLM_SOAK_CLIENTS", 16));
  const int n_requests = std::min(4, env_int("PLLM_SOAK_REQUESTS", 8));
  {
    // One request first: the system's cpp-httplib (not built with TSan) initialises its own
    // statics on first use, which TSan would report; the engine's state stays cold.
    httplib::Client cli("127.0.0.1", port());
    auto r = cli.Get("/v1/models");
    ASSERT_TRUE(r && r->status == 200);
  }
  std::mutex mu;
  std::vector<std::tuple<int, bool, json>> seen;
  std::vector<std::thread> clients;
  for (int c = 0; c < n_clients; ++c)
    clients.emplace_back([&, c] {
      std::mt19937 rng(unsigned(77 + c));
      for (int i = 0; i < n_requests; ++i) {
        const int which = int(rng() % std::size(kConstrainedBodies));
        const bool stream = rng() % 2 == 0;
        json got = run_constrained(port(), which, stream);
        std::lock_guard lk(mu);
        seen.emplace_back(which, stream, std::move(got));
      }
    });
  for (auto& t : clients) t.join();
  for (int which = 0; which < int(std::size(kConstrainedBodies)); ++which) {
    const json lone = run_constrained(port(), which, false);
    ASSERT_FALSE(lone.contains("error")) << lone.dump();
    if (which == 1) {  // tool_choice required: a call, or one cut off by max_tokens (a tiny model's)
      const std::string content = lone["content"].get<std::string>();
      const size_t start = std::min(content.size(), content.find_first_not_of(" \t\n\r"));
      EXPECT_TRUE(lone["finish"] == "tool_calls" ||
                  (lone["finish"] == "length" && content.compare(start, 11, "<tool_call>") == 0))
          << lone.dump();
    }
    for (const auto& [w, stream, got] : seen)
      if (w == which) EXPECT_EQ(got, lone) << "request " << which << (stream ? " streamed" : " whole");
  }
}
