#include "runtime/generator.h"

#include <algorithm>
#include <chrono>

#include "runtime/prefix_cache.h"

namespace pllm {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Length of the longest suffix of `text` that is a proper prefix of some stop string:
// that much text must be held back, since the next token may complete the stop string.
size_t held_back(std::string_view text, const std::vector<std::string>& stops) {
  size_t hold = 0;
  for (const std::string& s : stops) {
    for (size_t k = std::min(s.size() - 1, text.size()); k > hold; --k)
      if (text.substr(text.size() - k) == std::string_view(s).substr(0, k)) {
        hold = k;
        break;
      }
  }
  return hold;
}

// Restores the longest cached block-aligned prefix of tokens with common < n <= max (the
// session holds tokens[0, common)); returns n, or 0 when nothing was restored.
size_t restore_from_cache(Session& s, PrefixCache& pc, std::span<const int32_t> tokens, size_t common, size_t max) {
  auto hit = pc.lookup(s.kv_cache().type(), tokens, common, max, s.compute_tag());
  if (!hit.snapshot) return 0;
  auto r = s.restore_prefix(*hit.snapshot, /*verified=*/true);
  if (!r.ok()) {  // the session is unchanged; forget the entry
    pc.drop(hit.key, r.error().message);
    return 0;
  }
  return hit.n_tokens;  // the session now holds exactly these tokens
}

// Offers the snapshot of tokens' longest block-aligned prefix (a group boundary for q4, so
// always exportable) unless RAM has it already. The session holds tokens[0, ...) first.
void offer_to_cache(Session& s, PrefixCache& pc, std::span<const int32_t> tokens) {
  const size_t nb = tokens.size() / PrefixCache::kBlock * PrefixCache::kBlock;
  const KvType type = s.kv_cache().type();
  if (nb == 0 || s.history().size() < nb || pc.contains(type, tokens.first(nb), s.compute_tag())) return;
  auto snap = s.save_prefix(nb);
  if (snap.ok()) pc.insert(type, tokens.first(nb), std::move(*snap), s.compute_tag());
}

}  // namespace

Result<void> prefill_prefix(Session& s, std::span<const int32_t> tokens) {
  const auto& hist = s.history();
  size_t common = 0;
  while (common < hist.size() && common < tokens.size() && hist[common] == tokens[common]) ++common;
  s.truncate(common);
  common = s.history().size();
  if (common == tokens.size()) return {};
  PrefixCache* pc = s.snapshots_supported() ? s.prefix_cache() : nullptr;
  size_t restored = 0;
  if (pc) {
    restored = restore_from_cache(s, *pc, tokens, common, tokens.size());
    if (restored > 0) common = restored;
  }
  if (common < tokens.size()) PLLM_TRY(s.eval(tokens.subspan(common), nullptr));
  if (pc) {
    offer_to_cache(s, *pc, tokens);
    pc->count_tokens(restored, tokens.size() - common);
  }
  return {};
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
  s.stop_prewarm();  // a prewarm's work so far is reused below like any history
  s.clear_cancel();

  // Reuse the cached prefix; at least the last prompt token is re-run to get its logits.
  const auto& hist = s.history();
  size_t common = 0;
  while (common < hist.size() && common + 1 < prompt.size() && hist[common] == prompt[common]) ++common;
  s.truncate(common);
  common = s.history().size();  // the cache may resume earlier (q4 group, window)

  // Prefix cache: restore the longest cached block-aligned prefix the session does not
  // hold yet (leaving at least the last prompt token to run for its logits).
  PrefixCache* pc = s.snapshots_supported() ? s.prefix_cache() : nullptr;
  const auto t0 = Clock::now();
  if (pc) {
    st.n_restored = int(restore_from_cache(s, *pc, prompt, common, prompt.size() - 1));
    if (st.n_restored > 0) common = size_t(st.n_restored);
  }
  st.n_reused = int(common);

  auto r = s.eval_last(prompt.subspan(common));
  if (!r.ok()) {
    if (r.error().code == Status::cancelled) {
      st.stop = StopReason::cancelled;
      return st;
    }
    return r.error();
  }
  const double prefill_ms = ms_since(t0);
  st.prefill_tps = prefill_ms > 0 ? double(prompt.size() - common) * 1000.0 / prefill_ms : 0.0;

  Sampler sampler(params.sampling, model.config().n_vocab);
  StreamDecoder decoder(tok);
  std::string pending;  // text decoded but held back because it may start a stop string
  st.stop = StopReason::max_tokens;
  Clock::time_point t_first{};
  bool stopped = false;
  for (int i = 0; i < params.max_tokens && !stopped; ++i) {
    const int32_t id = sampler.sample(s.last_logits(), s.history());
    if (i == 0) {
      t_first = Clock::now();
      st.ttft_ms = std::chrono::duration<double, std::milli>(t_first - t0).count();
    }
    if (!params.ignore_eos && tok.is_end_of_generation(id)) {
      st.stop = StopReason::eog;
      break;
    }
    ++st.n_generated;
    pending += decoder.push(id);
    std::string_view emit = pending;
    for (const std::string& stop : params.stop_strings) {
      const size_t at = pending.find(stop);
      if (at != std::string::npos && at < emit.size()) {
        emit = std::string_view(pending).substr(0, at);
        st.stop = StopReason::stop_string;
        stopped = true;
      }
    }
    if (!stopped) emit = emit.substr(0, emit.size() - held_back(emit, params.stop_strings));
    const bool keep_going = on_token ? on_token(id, emit) : true;
    pending.erase(0, emit.size());
    if (stopped) break;
    if (!keep_going) {
      st.stop = StopReason::callback;
      break;
    }
    if (s.cancel_requested()) {
      st.stop = StopReason::cancelled;
      break;
    }
    if (i + 1 == params.max_tokens) break;
    if (!s.unbounded() && s.history().size() + 1 > size_t(s.n_ctx())) {
      st.stop = StopReason::context_full;
      break;
    }
    const int32_t next[1] = {id};
    auto e = s.eval_last(next);
    if (!e.ok()) {
      if (e.error().code == Status::cancelled) {
        st.stop = StopReason::cancelled;
        break;
      }
      return e.error();
    }
  }
  if (pc) {
    // After decoding, so the snapshot copy adds nothing to the time to first token. Without
    // the last token: the same prompt again restores up to there and runs that token.
    offer_to_cache(s, *pc, prompt.first(prompt.size() - 1));
    pc->count_tokens(size_t(st.n_restored), prompt.size() - common);
  }
  // Flush what remains (held-back stop-string prefixes, a partial UTF-8 tail) as token -1.
  std::string tail = pending + decoder.flush();
  if (!tail.empty() && st.stop != StopReason::stop_string && on_token) on_token(-1, tail);
  if (st.n_generated > 1) {
    const double decode_ms = ms_since(t_first);
    st.decode_tps = decode_ms > 0 ? double(st.n_generated - 1) * 1000.0 / decode_ms : 0.0;
  }
  return st;
}

}  // namespace pllm
