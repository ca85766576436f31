// Session::step: several sessions advanced in one forward pass.
#include <algorithm>
#include <vector>

#include "runtime/session.h"

namespace pllm {

Result<void> Session::step(std::span<SessionStep> steps) {
  auto fail_all = [&](Error e) -> Result<void> {
    for (SessionStep& s : steps) s.result = e;
    return e;
  };
  if (steps.empty()) return make_error(Status::invalid_argument, "a step needs at least one session");
  const Session* first = steps[0].session;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Session* s = steps[i].session;
    if (!s) return fail_all(make_error(Status::invalid_argument, "a step item has no session"));
    if (s->engine_ != first->engine_ || s->model_ != first->model_)
      return fail_all(make_error(Status::invalid_argument, "sessions of one step must share the engine and model"));
    if (s->act_mode_ != first->act_mode_ || s->fuse_ != first->fuse_)
      return fail_all(make_error(Status::invalid_argument, "sessions of one step must share the activation mode"));
    for (size_t j = 0; j < i; ++j)
      if (steps[j].session == s) return fail_all(make_error(Status::invalid_argument, "a session appears twice in one step"));
  }
  // Grown, never shrunk: a steady-state step allocates nothing.
  thread_local std::vector<SeqStep> seqs;
  thread_local std::vector<size_t> index;  // seqs[k] is steps[index[k]]
  seqs.clear();
  index.clear();
  for (size_t i = 0; i < steps.size(); ++i) {
    SessionStep& st = steps[i];
    Session& s = *st.session;
    s.stop_background();
    st.result = Result<void>();
    const size_t n = st.tokens.size();
    if (n == 0 || n > size_t(s.n_batch_)) {
      st.result = make_error(Status::invalid_argument, "a step takes 1 to " + std::to_string(s.n_batch_) +
                                                           " tokens per session, not " + std::to_string(n));
    } else if (!s.unbounded() && s.history_.size() + n > size_t(s.n_ctx_)) {
      st.result = make_error(Status::out_of_range, std::to_string(s.history_.size() + n) +
                                                       " tokens do not fit the context of " + std::to_string(s.n_ctx_));
    } else if (s.cancel_requested()) {
      st.result = make_error(Status::cancelled, "cancelled");
    }
    if (!st.result.ok()) continue;
    float* out = st.logits_all ? st.logits_all : st.logits ? s.logits_.data() : nullptr;
    if (std::any_of(st.tokens.begin(), st.tokens.end(), [](int32_t t) { return t < 0; })) {
      // Image rows take steps of their own (their tile's embeddings; gemma3's rows together).
      st.result = s.run(st.tokens, out, st.logits_all != nullptr, {}, st.as_decode_steps);
      continue;
    }
    seqs.push_back(SeqStep{s.kv_.get(), st.tokens, out, st.logits_all != nullptr, &s.cancel_, st.as_decode_steps});
    index.push_back(i);
  }
  if (seqs.empty()) return {};  // every session had its own error
  StepOptions opt = first->step_options();
  if (seqs.size() > 1) opt.observer = nullptr;  // calibration observes one session at a time
  auto r = first->engine_->forward(*first->model_, seqs, opt);
  for (size_t k = 0; k < seqs.size(); ++k) {
    SessionStep& st = steps[index[k]];
    Session& s = *st.session;
    if (!r.ok() || seqs[k].cancelled()) {  // what it wrote of the cache is forgotten
      s.history_.resize(size_t(s.kv_->truncate(int(s.history_.size()))));
      st.result = r.ok() ? make_error(Status::cancelled, "cancelled") : Result<void>(r.error());
      continue;
    }
    s.history_.insert(s.history_.end(), st.tokens.begin(), st.tokens.end());
  }
  return r;
}

}  // namespace pllm
