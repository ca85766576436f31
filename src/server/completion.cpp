// POST /v1/chat/completions and /v1/completions: parse, render and tokenize the prompt, check
// it fits, submit to the runtime on a session of the request's own, then stream (SSE) or wait
// for the answer. While waiting the connection is probed (an SSE comment, or leading
// whitespace of the JSON body, every 100 ms), so a client that went away is noticed and its
// request cancelled (the session is removed: its row stops within one step).
#include <chrono>
#include <ctime>
#include <optional>

#include "model/chat_prompt.h"
#include "runtime/stop_matcher.h"
#include "runtime/tool_chat.h"
#include "server/server_impl.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace pllm::server {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kProbeMs = 100;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The request's text as it streams: decoded tokens through the stop strings (nothing from a
// completed stop string on is sent). With tools, the tokens' raw bytes (the tool vocabulary
// spells the call markers, which the decoder drops as control tokens) go to the call parser,
// which sends text and calls apart.
class TextStream {
 public:
  TextStream(const Tokenizer& tok, std::vector<std::string> stop, std::shared_ptr<const TokenVocab> raw,
             std::optional<ToolCallFormat> tools, std::string id_prefix)
      : dec_(tok), stops_(std::move(stop)), raw_(std::move(raw)) {
    if (tools) calls_.emplace(*tools, std::move(id_prefix));
  }
  // The text that can be sent after this token; sets stopped() when a stop string completed.
  std::string push(int32_t token, std::vector<ToolCallDelta>& calls) {
    if (!calls_) return std::string(stops_.push(dec_.push(token)));
    return parsed(calls_->push(stops_.push(raw_->piece(token))), calls);
  }
  std::string flush(std::vector<ToolCallDelta>& calls) {
    std::string rest = stops_.stopped() ? std::string() : std::string(stops_.finish(calls_ ? "" : dec_.flush()));
    if (!calls_) return rest;
    std::string text = parsed(calls_->push(rest), calls);
    return text + parsed(calls_->finish(), calls);
  }
  bool stopped() const { return stops_.stopped(); }
  const ToolCallStream* tool_calls() const { return calls_ ? &*calls_ : nullptr; }

 private:
  static std::string parsed(ToolStreamDelta d, std::vector<ToolCallDelta>& calls) {
    for (auto& c : d.calls) calls.push_back(std::move(c));
    return std::move(d.content);
  }
  StreamDecoder dec_;
  StopMatcher stops_;
  std::shared_ptr<const TokenVocab> raw_;
  std::optional<ToolCallStream> calls_;
};

json tool_call_delta_json(const ToolCallDelta& d) {
  json j = {{"index", d.index}};
  if (!d.id.empty()) {  // the call's first delta: id, type and name once
    j["id"] = d.id;
    j["type"] = "function";
    j["function"] = {{"name", d.name}, {"arguments", d.arguments}};
  } else {
    j["function"] = {{"arguments", d.arguments}};
  }
  return j;
}

json token_logprob(const Tokenizer& tok, int32_t id, float lp) {
  const std::string piece = tok.token_to_piece(id, true);
  json bytes = json::array();
  for (unsigned char c : piece) bytes.push_back(int(c));
  return {{"token", piece}, {"logprob", lp}, {"bytes", bytes}};
}

json chat_logprobs(const Tokenizer& tok, const RuntimeEvent& e) {
  json item = token_logprob(tok, e.token, e.logprob);
  json top = json::array();
  for (const auto& [id, lp] : e.top) top.push_back(token_logprob(tok, id, lp));
  item["top_logprobs"] = top;
  return item;
}

struct Reply {  // what one request produced so far
  std::string id, model;
  bool chat = true;
  int n_prompt = 0, n_generated = 0, n_cached = 0;
  DraftStats draft;  // speculative decoding's guesses
  std::string finish_reason;
  std::optional<ApiError> error;
  json logprobs = json::array();
  bool first = true;
  Clock::time_point start = Clock::now(), last_token;

  json usage() const {
    json u = {{"prompt_tokens", n_prompt},
              {"completion_tokens", n_generated},
              {"total_tokens", n_prompt + n_generated},
              {"prompt_tokens_details", {{"cached_tokens", n_cached}}}};
    // OpenAI's names for guessed tokens the model kept and the ones it did not.
    if (draft.drafted > 0)
      u["completion_tokens_details"] = {{"accepted_prediction_tokens", draft.accepted},
                                        {"rejected_prediction_tokens", draft.drafted - draft.accepted}};
    return u;
  }
  json chunk(const std::string& text, const json& choice_extra, const std::vector<ToolCallDelta>& calls = {}) const {
    json choice = {{"index", 0}, {"finish_reason", nullptr}};
    if (chat) {
      json delta = json::object();
      if (first) delta["role"] = "assistant";
      if (!text.empty() || calls.empty()) delta["content"] = text;
      if (!calls.empty()) {
        delta["tool_calls"] = json::array();
        for (const auto& c : calls) delta["tool_calls"].push_back(tool_call_delta_json(c));
      }
      choice["delta"] = delta;
    } else {
      choice["text"] = text;
    }
    for (const auto& [k, v] : choice_extra.items()) choice[k] = v;
    return {{"id", id},
            {"object", chat ? "chat.completion.chunk" : "text_completion"},
            {"created", int64_t(std::time(nullptr))},
            {"model", model},
            {"choices", json::array({choice})}};
  }
};

// A whole reply's message: with calls, OpenAI's tool_calls (content null when there is none).
json message_json(const std::string& text, const ToolCallStream* tools) {
  if (!tools || tools->calls().empty()) return {{"role", "assistant"}, {"content", text}};
  const ToolReply r = tools->reply();  // the same text, trimmed beside the calls
  return {{"role", "assistant"},
          {"content", r.content.empty() ? json(nullptr) : json(r.content)},
          {"tool_calls", tool_calls_json(r.calls)}};
}

// How a request's end reads to the client: a finish_reason, or an error when the answer was
// cut short by something other than the model, max_tokens or a stop string (never a quiet
// "stop" on a truncated answer).
std::optional<std::string> finish_reason_of(const RuntimeEvent& e, bool stopped) {
  if (stopped || e.reason == EndReason::eos || e.reason == EndReason::stop_string) return "stop";
  if (e.reason == EndReason::done) return "length";
  if (e.reason == EndReason::context_full || (e.reason == EndReason::failed && e.status == Status::out_of_range))
    return "length";  // context full
  return std::nullopt;
}

}  // namespace

void HttpServer::Impl::completion(const httplib::Request& req, httplib::Response& res, bool chat) {
  const char* endpoint = chat ? "chat_completions" : "completions";
  if (!authorized(req, res, endpoint)) return;
  if (!ready) return send_error(res, {503, "server_error", "", "model_loading", "the model is still loading"}, endpoint);
  ParseResult parsed = parse_completion_request(req.body, chat, model->sampling_defaults());
  if (!parsed.request) return send_error(res, parsed.error, endpoint);
  CompletionRequest r = std::move(*parsed.request);
  if (!r.model.empty() && r.model != opt.model_id)
    return send_error(res, {404, "invalid_request_error", "model", "model_not_found",
                            "the model '" + r.model + "' does not exist; this server has '" + opt.model_id + "'"},
                      endpoint);
  // The prompt, exactly as the model sees it.
  std::string text = r.prompt;
  std::optional<ToolCallFormat> tool_format;  // set when the reply is parsed for calls
  GrammarConstraint grammar;
  if (chat && r.uses_tools()) {
    // The tools' constraint first: a format or schema that cannot be enforced is the tools' 400.
    if (!r.tools.empty()) {
      auto c = tool_constraint(*model, opt.chat_template, {r.tools, r.tool_choice, r.parallel_tool_calls},
                               vocab.get(model->tokenizer()));
      if (!c.ok()) return send_error(res, {400, "invalid_request_error", "tools", "", c.error().message}, endpoint);
      grammar = std::move(c->grammar);
      tool_format = c->format;
    }
    auto prompt = tool_chat_prompt(*model, std::move(r.messages), r.tools, opt.chat_template, r.template_vars);
    if (!prompt.ok()) {
      const std::string& e = prompt.error().message;
      return send_error(res, {400, "invalid_request_error", e.rfind("tools", 0) == 0 ? "tools" : "messages", "", e},
                        endpoint);
    }
    text = std::move(*prompt);
  } else if (chat) {
    auto rendered = apply_chat_template(*model, r.messages, true, opt.chat_template, r.template_vars);
    if (!rendered.ok()) return send_error(res, {400, "invalid_request_error", "messages", "", rendered.error().message}, endpoint);
    text = std::move(*rendered);
  }
  if (!r.image_urls.empty() && !vision)
    return send_error(res, {400, "invalid_request_error", "messages", "",
                            "image parts need a vision encoder, and this server has none (serve --mmproj FILE)"},
                      endpoint);
  auto ids = !r.image_urls.empty() ? image_prompt_ids(*vision, *model, text, r.image_urls)
             : chat               ? encode_chat_prompt(model->tokenizer(), text)
                                  : model->tokenizer().encode(text, true, false);
  if (!ids.ok()) return send_error(res, {400, "invalid_request_error", chat ? "messages" : "prompt", "", ids.error().message}, endpoint);
  const int n_prompt = int(ids->size());
  const int room = opt.n_ctx - n_prompt;
  if (room < 1 || (r.max_tokens > 0 && r.max_tokens > room))
    return send_error(res, {400, "invalid_request_error", chat ? "messages" : "prompt", "context_length_exceeded",
                            "this model's context is " + std::to_string(opt.n_ctx) + " tokens; the prompt has " +
                                std::to_string(n_prompt) + " and max_tokens asks for " +
                                std::to_string(r.max_tokens > 0 ? r.max_tokens : 1) + " more"},
                      endpoint);
  if (r.grammar_kind) {
    auto g = compile_grammar(*r.grammar_kind, r.grammar_text);
    if (!g.ok()) return send_error(res, {400, "invalid_request_error", r.grammar_param, "", g.error().message}, endpoint);
    grammar = {std::move(g).value(), vocab.get(model->tokenizer())};
  }
  SessionConfig scfg = opt.session;
  scfg.n_ctx = opt.n_ctx;
  scfg.n_batch = std::max(scfg.n_batch, runtime->prefill_chunk());
  if (vision) {
    scfg.image_rows = server_image_rows(*vision);
    scfg.n_batch = std::max(scfg.n_batch, server_vision_tile_rows(*vision));  // a tile's rows may run together
  }
  auto key = runtime->add_session(scfg);
  if (!key.ok()) return send_error(res, {500, "server_error", "", "", key.error().message}, endpoint);
  auto channel = std::make_shared<Channel>();
  RuntimeRequest rr;
  rr.klass = RequestClass::interactive;
  rr.prompt = std::move(*ids);
  rr.max_tokens = r.max_tokens > 0 ? r.max_tokens : room;
  rr.sampling = r.sampling;
  rr.top_logprobs = r.top_logprobs;
  rr.grammar = std::move(grammar);
  if (draft.kind != DraftKind::none && r.draft_max != 0) {
    rr.draft = draft;
    if (r.draft_max > 0) rr.draft.max_tokens = r.draft_max;
  }
  rr.on_event = [channel](const RuntimeEvent& e) { channel->push(e); };
  if (auto sub = runtime->submit(*key, std::move(rr)); !sub.ok()) {
    (void)runtime->remove_session(*key);
    return send_error(res, {400, "invalid_request_error", "", "", sub.error().message}, endpoint);
  }
  metrics.prompt_tokens(uint64_t(n_prompt));

  auto reply = std::make_shared<Reply>();
  reply->id = std::string(chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id++);
  reply->model = opt.model_id;
  reply->chat = chat;
  reply->n_prompt = n_prompt;
  std::shared_ptr<const TokenVocab> raw = tool_format ? vocab.get(model->tokenizer()) : nullptr;
  auto stream = std::make_shared<TextStream>(model->tokenizer(), r.stop, raw, tool_format, "call_" + reply->id.substr(reply->id.find('-') + 1) + "_");
  const int64_t session = *key;
  auto finished = std::make_shared<std::atomic<bool>>(false);

  // Moves the channel's events into the reply; returns text to send and whether it ended.
  auto drain = [this, channel, reply, stream, session, r](std::string& out_text, json& out_logprobs,
                                                          std::vector<ToolCallDelta>& out_calls) {
    for (const RuntimeEvent& e : channel->take(kProbeMs)) {
      if (e.kind == RuntimeEvent::Kind::token) {
        if (stream->stopped()) continue;
        const auto now = Clock::now();
        if (reply->n_generated == 0) metrics.ttft(seconds_since(reply->start));
        else metrics.inter_token(std::chrono::duration<double>(now - reply->last_token).count());
        reply->last_token = now;
        ++reply->n_generated;
        out_text += stream->push(e.token, out_calls);
        if (r.top_logprobs >= 0) out_logprobs.push_back(chat_logprobs(model->tokenizer(), e));
        if (stream->stopped()) (void)runtime->control(session, ControlAction::interrupt);
        continue;
      }
      out_text += stream->flush(out_calls);
      reply->n_cached = e.n_cached;
      reply->draft = e.draft;
      metrics.cached_tokens(uint64_t(e.n_cached));
      if (auto finish = finish_reason_of(e, stream->stopped())) {
        reply->finish_reason = *finish;
        if (*finish == "stop" && stream->tool_calls() && !stream->tool_calls()->calls().empty())
          reply->finish_reason = "tool_calls";
      } else {
        std::string why = "generation ended early: ";
        why += e.reason == EndReason::kv_exhausted ? "KV memory exhausted" : end_reason_name(e.reason);
        if (e.reason == EndReason::failed) why += std::string(" (") + status_name(e.status) + ")";
        reply->error = ApiError{500, "server_error", "", "", why};
      }
      return true;
    }
    return false;
  };
  // Runs when the response is over or the client went away: the session goes. A request still
  // running is cancelled first (no step lock needed), so its row stops after the running step.
  auto release = [this, session, finished](bool) {
    if (!finished->load()) {
      metrics.cancelled();
      (void)runtime->control(session, ControlAction::cancel);
    }
    (void)runtime->remove_session(session);
  };

  // The response is all written: count it and end it.
  auto complete = [this, reply, finished, endpoint](httplib::DataSink& sink) {
    finished->store(true);
    metrics.generated_tokens(uint64_t(reply->n_generated));
    metrics.request(endpoint, 200);
    sink.done();
    return true;
  };
  if (r.stream) {
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [reply, drain, complete, r](size_t, httplib::DataSink& sink) {
          auto send = [&](const json& j) {
            const std::string line = "data: " + dump(j) + "\n\n";
            return sink.write(line.data(), line.size());
          };
          for (;;) {
            std::string piece;
            json lps = json::array();
            std::vector<ToolCallDelta> calls;
            const bool ended = drain(piece, lps, calls);
            if (!piece.empty() || !lps.empty() || !calls.empty() || reply->first) {
              json extra = json::object();
              if (r.top_logprobs >= 0) extra["logprobs"] = reply->chat ? json{{"content", lps}} : json(nullptr);
              if (!send(reply->chunk(piece, extra, calls))) return false;
              reply->first = false;
            } else if (!ended && !sink.write(": ping\n\n", 8)) {
              return false;  // the client went away
            }
            if (!ended) continue;
            if (reply->error) {
              if (!send(error_body(*reply->error))) return false;
            } else {
              json done = reply->chunk("", json{{"finish_reason", reply->finish_reason}});
              if (reply->chat) done["choices"][0]["delta"] = json::object();
              if (!send(done)) return false;
              if (r.include_usage) {
                json u = reply->chunk("", json::object());
                u["choices"] = json::array();
                u["usage"] = reply->usage();
                if (!send(u)) return false;
              }
            }
            if (!sink.write("data: [DONE]\n\n", 14)) return false;
            return complete(sink);
          }
        },
        release);
    return;
  }
  res.set_chunked_content_provider(
      "application/json",
      [reply, drain, complete, r, stream](size_t, httplib::DataSink& sink) {
        std::string text;
        json lps = json::array();
        std::vector<ToolCallDelta> deltas;
        for (;;) {
          if (drain(text, lps, deltas)) break;
          if (!sink.write(" ", 1)) return false;  // leading whitespace is valid JSON: a liveness probe
        }
        json body;
        if (reply->error) {
          body = error_body(*reply->error);
        } else {
          json choice = {{"index", 0}, {"finish_reason", reply->finish_reason}};
          if (reply->chat) choice["message"] = message_json(text, stream->tool_calls());
          else choice["text"] = text;
          choice["logprobs"] = r.top_logprobs >= 0 && reply->chat ? json{{"content", lps}} : json(nullptr);
          body = {{"id", reply->id},
                  {"object", reply->chat ? "chat.completion" : "text_completion"},
                  {"created", int64_t(std::time(nullptr))},
                  {"model", reply->model},
                  {"choices", json::array({choice})},
                  {"usage", reply->usage()}};
        }
        const std::string s = dump(body);
        if (!sink.write(s.data(), s.size())) return false;
        return complete(sink);
      },
      release);
}

}  // namespace pllm::server
