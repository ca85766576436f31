// The three drafters of runtime/speculative.h and the spec that chooses one.
#include <algorithm>
#include "runtime/session.h"
#include "runtime/speculative.h"

namespace pllm {
namespace {

int32_t argmax(const float* logits, int n) { return int32_t(std::max_element(logits, logits + n) - logits); }

Error cancelled() { return make_error(Status::cancelled, "cancelled"); }

// Prompt lookup: the tokens that followed the latest earlier occurrence of the sequence's last
// n tokens (n from ngram_max down to ngram_min). Linear in the sequence: a few thousand
// comparisons, nothing beside a forward pass of milliseconds.
class LookupDrafter final : public Drafter {
 public:
  LookupDrafter(int ngram_min, int ngram_max) : min_(ngram_min), max_(ngram_max) {}
  DraftKind kind() const override { return DraftKind::lookup; }
  bool free() const override { return true; }
  Result<void> draft(Session&, std::span<const int32_t> t, int max_n, std::vector<int32_t>& out) override {
    const size_t n = t.size();
    for (int g = max_; g >= min_; --g) {
      if (size_t(g) >= n) continue;
      const auto tail = t.subspan(n - size_t(g));
      for (size_t j = n - size_t(g); j-- > 0;) {
        if (!std::equal(tail.begin(), tail.end(), t.begin() + ptrdiff_t(j))) continue;
        const size_t from = j + size_t(g), take = std::min(size_t(max_n), n - from);
        out.insert(out.end(), t.begin() + ptrdiff_t(from), t.begin() + ptrdiff_t(from + take));
        return {};
      }
    }
    return {};
  }

 private:
  int min_, max_;
};

// Self-speculation: the target session itself with layers left out, one token per pass; the
// session then drops the draft's positions (their kept layers' keys and values came from the
// shortened model; the verify pass writes them again).
class SkipDrafter final : public Drafter {
 public:
  explicit SkipDrafter(std::vector<uint8_t> mask) : mask_(std::move(mask)) {}
  DraftKind kind() const override { return DraftKind::skip; }
  Result<void> draft(Session& s, std::span<const int32_t> t, int max_n, std::vector<int32_t>& out) override {
    const size_t n0 = s.history().size();
    if (t.size() != n0 + 1 || !std::equal(s.history().begin(), s.history().end(), t.begin()))
      return make_error(Status::internal, "a layer-skip draft must continue the target session's history");
    const int n_vocab = s.model().config().n_vocab;
    int32_t cur = t.back();
    Result<void> r;
    for (int i = 0; i < max_n; ++i) {
      r = s.eval_skipping({&cur, 1}, mask_);
      if (!r.ok()) break;
      cur = argmax(s.last_logits(), n_vocab);
      out.push_back(cur);
    }
    auto back = s.truncate_exactly(n0);
    return r.ok() ? back : r;
  }

 private:
  std::vector<uint8_t> mask_;
};

// A smaller model with the same vocabulary, on its own session: it catches up with the
// target's sequence (only what differs from what it holds), then decodes greedily.
class ModelDrafter final : public Drafter {
 public:
  explicit ModelDrafter(std::unique_ptr<Session> s) : s_(std::move(s)) {}
  DraftKind kind() const override { return DraftKind::model; }
  Result<void> prepare(Session& target, std::span<const int32_t> t) override {
    return t.empty() || t.size() >= size_t(s_->n_ctx()) ? Result<void>() : catch_up(target, t);
  }
  Result<void> draft(Session& target, std::span<const int32_t> t, int max_n, std::vector<int32_t>& out) override {
    if (t.size() >= size_t(s_->n_ctx())) return {};  // no room: no draft
    PLLM_TRY(catch_up(target, t));
    const int n_vocab = s_->model().config().n_vocab;
    max_n = std::min<int>(max_n, s_->n_ctx() - int(t.size()));
    for (int i = 0; i < max_n; ++i) {
      const int32_t d = argmax(s_->last_logits(), n_vocab);
      out.push_back(d);
      if (i + 1 == max_n) break;
      if (target.cancel_requested()) return cancelled();
      PLLM_TRY(s_->eval_last({&d, 1}));
    }
    return {};
  }

 private:
  // The draft session holds t, its last token's logits ready: only what differs runs.
  Result<void> catch_up(Session& target, std::span<const int32_t> t) {
    const auto& h = s_->history();
    size_t common = std::mismatch(h.begin(), h.end(), t.begin(), t.end()).first - h.begin();
    s_->truncate(std::min(common, t.size() - 1));  // at least the last token runs (its logits)
    // The catch-up may be a whole prompt: in chunks, so a cancel of the target stops it.
    size_t done = s_->history().size();
    while (done < t.size()) {
      if (target.cancel_requested()) return cancelled();
      const size_t n = std::min(t.size() - done, size_t(s_->n_batch()));
      PLLM_TRY(s_->eval_last(t.subspan(done, n)));
      done += n;
    }
    return {};
  }

  std::unique_ptr<Session> s_;
};

Result<void> check_same_vocab(const Model& target, const Model& draft) {
  const Tokenizer& a = target.tokenizer();
  const Tokenizer& b = draft.tokenizer();
  if (a.n_vocab() != b.n_vocab() || target.config().n_vocab != draft.config().n_vocab)
    return make_error(Status::invalid_argument, "the draft model's vocabulary has " + std::to_string(b.n_vocab()) +
                                                    " tokens, the target's " + std::to_string(a.n_vocab()));
  for (int32_t id = 0; id < a.n_vocab(); ++id)
    if (a.token_to_piece(id, true) != b.token_to_piece(id, true))
      return make_error(Status::invalid_argument, "the draft model's token " + std::to_string(id) + " (\"" +
                                                      b.token_to_piece(id, true) + "\") differs from the target's (\"" +
                                                      a.token_to_piece(id, true) + "\")");
  return {};
}

}  // namespace

const char* draft_kind_name(DraftKind k) {
  switch (k) {
    case DraftKind::none: return "none";
    case DraftKind::lookup: return "lookup";
    case DraftKind::model: return "model";
    case DraftKind::skip: return "skip";
  }
  return "?";
}

Result<std::unique_ptr<Drafter>> make_drafter(const DraftSpec& spec, Session& target) {
  const Model& m = target.model();
  // Identity with plain decoding rests on a verify pass's rows being one-row steps bit for
  // bit: the int16 kernels are (integer sums); exact mode's multi-row kernels sum floats in
  // another order, so a guess could change the output.
  if (target.compute_tag() != uint32_t(ActMode::int16))
    return make_error(Status::invalid_argument,
                      "speculative decoding needs the int16 activation mode (the default): in other modes a verify "
                      "pass's rows are not bit for bit the plain steps' logits");
  if (spec.max_tokens < 1 || spec.max_tokens > 32)
    return make_error(Status::invalid_argument, "draft length " + std::to_string(spec.max_tokens) + " is not in 1..32");
  switch (spec.kind) {
    case DraftKind::none: return make_error(Status::invalid_argument, "no drafter was asked for");
    case DraftKind::lookup:
      if (spec.ngram_min < 1 || spec.ngram_max < spec.ngram_min || spec.ngram_max > 16)
        return make_error(Status::invalid_argument, "lookup n-gram lengths must satisfy 1 <= min <= max <= 16");
      return std::unique_ptr<Drafter>(new LookupDrafter(spec.ngram_min, spec.ngram_max));
    case DraftKind::skip: {
      const int n_layer = m.config().n_layer;
      std::vector<uint8_t> mask(size_t(n_layer), 0);
      for (int l : spec.skip_layers) {
        if (l < 0 || l >= n_layer)
          return make_error(Status::invalid_argument, "skip layer " + std::to_string(l) + " does not exist (the model has " +
                                                          std::to_string(n_layer) + ")");
        mask[size_t(l)] = 1;
      }
      if (spec.skip_layers.empty()) return make_error(Status::invalid_argument, "no layer to skip");
      if (std::all_of(mask.begin(), mask.end(), [](uint8_t b) { return b != 0; }))
        return make_error(Status::invalid_argument, "a draft that skips every layer");
      return std::unique_ptr<Drafter>(new SkipDrafter(std::move(mask)));
    }
    case DraftKind::model: {
      if (!spec.model) return make_error(Status::invalid_argument, "no draft model");
      if (spec.model->vocab_only()) return make_error(Status::invalid_argument, "the draft model was loaded vocab-only");
      PLLM_TRY(check_same_vocab(m, *spec.model));
      SessionConfig cfg;
      cfg.n_ctx = target.n_ctx();
      PLLM_ASSIGN(auto s, Session::create(spec.model, cfg, target.shared_engine()));
      return std::unique_ptr<Drafter>(new ModelDrafter(std::move(s)));
    }
  }
  return make_error(Status::invalid_argument, "unknown drafter");
}

}  // namespace pllm
