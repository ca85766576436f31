#include "runtime/generator.h"

#include <chrono>

#include "runtime/decode_steps.h"
#include "runtime/prefix_cache.h"
#include "runtime/prefix_reuse.h"
#include "runtime/stop_matcher.h"

namespace pllm {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

std::string grammar_bound_note(const GrammarMatcher* matcher) {
  if (!matcher || !matcher->hit_bound()) return {};
  return " (the matcher reached its bounds: the grammar nests too deep or is too ambiguous here; nested"
         " repetitions such as ((x+ y?)+ z?)+ multiply the parses to follow)";
}

Error grammar_dead_end(const Tokenizer& tok, std::span<const int32_t> history, size_t n_prompt,
                       const GrammarMatcher* matcher) {
  const std::string text = tok.decode(history.subspan(std::min(n_prompt, history.size())));
  return make_error(Status::invalid_argument,
                    "the grammar allows no token of this vocabulary after the generated text \"" +
                        text.substr(text.size() > 200 ? text.size() - 200 : 0) + "\"" + grammar_bound_note(matcher));
}

Result<GenerateStats> generate(Session& s, std::span<const int32_t> prompt, const GenerateParams& params,
                               const TokenCallback& on_token) {
  GenerateStats st;
  st.n_prompt = int(prompt.size());
  if (prompt.empty()) return make_error(Status::invalid_argument, "empty prompt");
  if (params.max_tokens < 0) return make_error(Status::invalid_argument, "max_tokens must be >= 0");
  for (const auto& stop : params.stop_strings)
    if (stop.empty()) return make_error(Status::invalid_argument, "empty stop string");
  if (!s.unbounded() && prompt.size() >= size_t(s.n_ctx()))
    return make_error(Status::out_of_range, "prompt of " + std::to_string(prompt.size()) +
                                                " tokens does not fit the context of " + std::to_string(s.n_ctx()) +
                                                " (leave room for at least one generated token)");
  const Model& model = s.model();
  const Tokenizer& tok = model.tokenizer();
  s.stop_background();  // a prewarm's work so far is reused below like any history
  s.clear_cancel();

  // Reuse the session's history, then the prefix cache; at least the last prompt token is
  // re-run to get its logits. The session's cache may resume earlier (q4 group, window).
  size_t common = keep_common_prefix(s, prompt, prompt.size() - 1);
  PrefixCache* pc = s.snapshots_supported() ? s.prefix_cache() : nullptr;
  const auto t0 = Clock::now();
  if (pc) {
    st.n_restored = int(restore_cached_prefix(s, *pc, prompt, common, prompt.size() - 1));
    if (st.n_restored > 0) common = size_t(st.n_restored);
  }
  st.n_reused = int(common);

  auto r = s.eval_last(prompt.subspan(common));
  if (r.ok() && params.drafter) r = params.drafter->prepare(s, s.history());  // a draft model reads the prompt too
  if (!r.ok()) {
    if (r.error().code == Status::cancelled) {
      st.reason = EndReason::cancelled;
      return st;
    }
    return r.error();
  }
  const double prefill_ms = ms_since(t0);
  st.prefill_tps = prefill_ms > 0 ? double(prompt.size() - common) * 1000.0 / prefill_ms : 0.0;

  Sampler sampler(params.sampling, model.config().n_vocab, params.grammar);
  DecodeSteps steps(s, params.drafter, params.draft_min, params.draft_max);
  float* logits = steps.first();
  StreamDecoder decoder(tok);
  StopMatcher stops(params.stop_strings);
  st.reason = EndReason::done;
  Clock::time_point t_first{};
  for (int i = 0; i < params.max_tokens; ++i) {
    const int32_t id = sampler.sample(logits, steps.sequence());
    if (id == Sampler::kNoToken) return grammar_dead_end(tok, s.history(), prompt.size(), sampler.grammar());
    if (i == 0) {
      t_first = Clock::now();
      st.ttft_ms = std::chrono::duration<double, std::milli>(t_first - t0).count();
    }
    if (!params.ignore_eos && tok.is_end_of_generation(id)) {
      st.reason = EndReason::eos;
      break;
    }
    ++st.n_generated;
    const std::string_view emit = stops.push(decoder.push(id));
    const bool keep_going = on_token ? on_token(id, emit) : true;
    if (stops.stopped()) {
      st.reason = EndReason::stop_string;
      break;
    }
    if (!keep_going) {
      st.reason = EndReason::callback;
      break;
    }
    if (s.cancel_requested()) {
      st.reason = EndReason::cancelled;
      break;
    }
    if (sampler.grammar() && sampler.grammar()->is_finished()) {
      st.reason = EndReason::eos;  // nothing may follow but the end: no step to compute it
      break;
    }
    if (i + 1 == params.max_tokens) break;
    if (!s.unbounded() && steps.sequence().size() + 1 > size_t(s.n_ctx())) {
      st.reason = EndReason::context_full;
      break;
    }
    auto e = steps.advance(id, params.max_tokens - i - 1, sampler.grammar());
    if (!e.ok()) {
      if (e.error().code == Status::cancelled) {
        st.reason = EndReason::cancelled;
        break;
      }
      return e.error();
    }
    logits = *e;
  }
  steps.finish();
  st.n_draft_passes = steps.stats().passes;
  st.n_drafted = steps.stats().drafted;
  st.n_draft_accepted = steps.stats().accepted;
  if (pc) {
    // After decoding, so the snapshot copy adds nothing to the time to first token. Without
    // the last token: the same prompt again restores up to there and runs that token.
    offer_cached_prefix(s, *pc, prompt.size() - 1);
    pc->count_tokens(size_t(st.n_restored), prompt.size() - common);
  }
  // Flush what remains (held-back stop-string prefixes, a partial UTF-8 tail) as token -1.
  if (!stops.stopped()) {
    const std::string_view tail = stops.finish(decoder.flush());
    if (stops.stopped()) st.reason = EndReason::stop_string;  // the tail completed one
    if (!tail.empty() && on_token) on_token(-1, tail);
  }
  if (st.n_generated > 1) {
    const double decode_ms = ms_since(t_first);
    st.decode_tps = decode_ms > 0 ? double(st.n_generated - 1) * 1000.0 / decode_ms : 0.0;
  }
  return st;
}

}  // namespace pllm
