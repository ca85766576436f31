#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>

namespace pllm {

Sampler::Sampler(const SamplingConfig& cfg, int n_vocab, const GrammarConstraint& grammar)
    : cfg_(cfg), rng_state_(cfg.seed) {
  cands_.reserve(size_t(n_vocab));
  if (!grammar.triggers.empty()) lazy_ = grammar;
  else if (grammar) matcher_.emplace(grammar.grammar, grammar.vocab);
  for (const GrammarTrigger& t : lazy_.triggers) longest_trigger_ = std::max(longest_trigger_, t.text.size());
}

int32_t Sampler::watch_triggers(float* logits, int32_t id) {
  const int n_vocab = int(cands_.capacity());
  for (;;) {
    window_.assign(tail_).append(lazy_.vocab->piece(id));
    const std::string& text = window_;
    const size_t first = text.find_first_not_of(" \t\n\r");
    size_t at = std::string::npos;
    bool may_start = false;  // the text so far may still grow into an at_start trigger
    for (const GrammarTrigger& t : lazy_.triggers) {
      if (t.at_start) {
        if (started_ || first == std::string::npos) continue;
        const std::string_view rest = std::string_view(text).substr(first);
        if (rest.starts_with(t.text)) at = std::min(at, first);
        else if (std::string_view(t.text).starts_with(rest)) may_start = true;
      } else {
        // Only where the trigger ends in this token (one ending earlier fired then).
        const size_t from = tail_.size() >= t.text.size() ? tail_.size() - t.text.size() + 1 : 0;
        const size_t pos = text.find(t.text, from);
        if (pos != std::string::npos) at = std::min(at, pos);
      }
    }
    if (at == std::string::npos) {
      if (first != std::string::npos && !may_start) started_ = true;
      if (started_ && text.size() > longest_trigger_) tail_.assign(text, text.size() - longest_trigger_);
      else tail_.assign(text);
      return id;
    }
    if (!lazy_.refuse_triggers) {
      GrammarMatcher m(lazy_.grammar, lazy_.vocab);
      if (m.accept_text(std::string_view(text).substr(at))) {
        matcher_.emplace(std::move(m));
        lazy_ = {};
        tail_.clear();
        return id;
      }
    }
    logits[id] = -INFINITY;  // this token may not start (this) call: draw another
    if (std::none_of(logits, logits + n_vocab, [](float l) { return l > -INFINITY; })) return kNoToken;
    id = draw(logits);
  }
}

// splitmix64: tiny, well-distributed, identical on every platform.
double Sampler::next_uniform() {
  uint64_t z = (rng_state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return double(z >> 11) * (1.0 / 9007199254740992.0);
}

int32_t Sampler::sample(float* logits, std::span<const int32_t> recent) {
  const int n_vocab = int(cands_.capacity());
  if (cfg_.repeat_penalty != 1.0f && cfg_.repeat_last_n != 0) {
    const size_t n = cfg_.repeat_last_n < 0 ? recent.size() : std::min(recent.size(), size_t(cfg_.repeat_last_n));
    // Penalise each distinct recent token once (as llama.cpp does).
    for (size_t i = recent.size() - n; i < recent.size(); ++i) {
      const int32_t id = recent[i];
      if (id < 0 || id >= n_vocab) continue;
      bool seen = false;
      for (size_t j = recent.size() - n; j < i && !seen; ++j) seen = recent[j] == id;
      if (seen) continue;
      float& l = logits[id];
      l = l > 0 ? l / cfg_.repeat_penalty : l * cfg_.repeat_penalty;
    }
  }

  int32_t id = draw(logits);
  if (!lazy_.triggers.empty()) return watch_triggers(logits, id);
  if (matcher_ && !matcher_->accepts(id)) {
    matcher_->mask_logits(std::span<float>(logits, size_t(n_vocab)));
    if (std::none_of(logits, logits + n_vocab, [](float l) { return l > -INFINITY; })) return kNoToken;
    id = draw(logits);
  }
  if (matcher_ && !matcher_->accept(id).ok()) return kNoToken;  // the mask allowed it: cannot happen
  return id;
}

int32_t Sampler::draw(float* logits) {
  const int n_vocab = int(cands_.capacity());
  if (cfg_.temperature <= 0.0f) {
    return int32_t(std::max_element(logits, logits + n_vocab) - logits);
  }

  cands_.clear();
  for (int i = 0; i < n_vocab; ++i) cands_.push_back({i, logits[i], 0.0f});
  auto by_logit = [](const Cand& a, const Cand& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); };
  size_t n = cands_.size();
  if (cfg_.top_k > 0 && size_t(cfg_.top_k) < n) {
    std::partial_sort(cands_.begin(), cands_.begin() + cfg_.top_k, cands_.end(), by_logit);
    n = size_t(cfg_.top_k);
  } else {
    std::sort(cands_.begin(), cands_.end(), by_logit);
  }
  // Probabilities at temperature 1 for the nucleus / min-p cuts.
  auto normalise = [&](size_t count, float temp) {
    const float mx = cands_[0].logit;
    double sum = 0.0;
    for (size_t i = 0; i < count; ++i) {
      cands_[i].p = std::exp((cands_[i].logit - mx) / temp);
      sum += cands_[i].p;
    }
    for (size_t i = 0; i < count; ++i) cands_[i].p = float(cands_[i].p / sum);
  };
  normalise(n, 1.0f);
  if (cfg_.top_p < 1.0f) {
    double cum = 0.0;
    size_t keep = n;
    for (size_t i = 0; i < n; ++i) {
      cum += cands_[i].p;
      if (cum >= cfg_.top_p) {
        keep = i + 1;
        break;
      }
    }
    n = std::max<size_t>(1, keep);
  }
  if (cfg_.min_p > 0.0f) {
    const float cut = cfg_.min_p * cands_[0].p;
    size_t keep = 1;
    while (keep < n && cands_[keep].p >= cut) ++keep;
    n = keep;
  }
  normalise(n, cfg_.temperature);
  const double r = next_uniform();
  double cum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    cum += cands_[i].p;
    if (r < cum) return cands_[i].id;
  }
  while (n > 1 && cands_[n - 1].p <= 0.0f) --n;  // rounding left r past the sum: not a masked token
  return cands_[n - 1].id;
}

}  // namespace pllm
