// pllm_draft_*: speculative decoding's drafters (runtime/speculative.h) as pllm_generate uses them.
#include <algorithm>

#include "api/api_internal.h"

using pllm_api::fail;
using pllm_api::guarded;

namespace pllm_api {

pllm_status draft_spec(const pllm_draft_params* d, const pllm::Model& m, const char* fn, pllm::DraftSpec& spec) {
  spec = pllm::DraftSpec{};
  if (!d || d->kind == PLLM_DRAFT_NONE) return PLLM_OK;
  spec.max_tokens = d->max_tokens == 0 ? spec.max_tokens : d->max_tokens;
  if (spec.max_tokens < 1 || spec.max_tokens > 32)
    return fail(PLLM_ERR_INVALID_ARGUMENT, std::string(fn) + ": draft length " + std::to_string(spec.max_tokens) +
                                               " is not in 1..32");
  switch (d->kind) {
    case PLLM_DRAFT_LOOKUP: spec.kind = pllm::DraftKind::lookup; break;
    case PLLM_DRAFT_MODEL:
      spec.kind = pllm::DraftKind::model;
      if (!d->model) return fail(PLLM_ERR_INVALID_ARGUMENT, std::string(fn) + ": PLLM_DRAFT_MODEL without a model");
      spec.model = d->model->model;
      break;
    case PLLM_DRAFT_SKIP:
      spec.kind = pllm::DraftKind::skip;
      if ((d->skip_layers != nullptr) == (d->skip_file != nullptr))
        return fail(PLLM_ERR_INVALID_ARGUMENT, std::string(fn) + ": PLLM_DRAFT_SKIP takes skip_layers or skip_file");
      if (d->skip_file) {
        auto layers = pllm::load_skip_layers(d->skip_file, m);
        if (!layers.ok()) return fail(layers.error());
        spec.skip_layers = std::move(*layers);
      } else {
        spec.skip_layers.assign(d->skip_layers, d->skip_layers + d->n_skip_layers);
      }
      break;
    default: return fail(PLLM_ERR_INVALID_ARGUMENT, std::string(fn) + ": unknown draft kind " + std::to_string(int(d->kind)));
  }
  return PLLM_OK;
}

pllm_status session_drafter(pllm_session& s, const pllm_sampling_params& sp, const char* fn, pllm::Drafter** out,
                            int* max_tokens) {
  *out = nullptr;
  pllm::DraftSpec spec;
  if (pllm_status st = draft_spec(sp.draft, s.session->model(), fn, spec); st != PLLM_OK) return st;
  if (spec.kind == pllm::DraftKind::none) return PLLM_OK;
  // The drafter's identity: the kind, the draft model and the layers (its length is per call).
  std::string key = std::to_string(int(spec.kind)) + ":" + std::to_string(reinterpret_cast<uintptr_t>(spec.model.get()));
  for (int l : spec.skip_layers) key += "," + std::to_string(l);
  if (!s.drafter || s.draft_key != key) {
    s.drafter.reset();
    auto made = pllm::make_drafter(spec, *s.session);
    if (!made.ok()) return fail(made.error().code == pllm::Status::invalid_argument ? PLLM_ERR_INVALID_ARGUMENT
                                                                                    : pllm_api::to_status(made.error().code),
                                std::string(fn) + ": " + made.error().message);
    s.drafter = std::move(*made);
    s.draft_key = std::move(key);
  }
  *out = s.drafter.get();
  *max_tokens = spec.max_tokens;
  return PLLM_OK;
}

}  // namespace pllm_api

extern "C" {

pllm_draft_params pllm_draft_default_params(void) {
  pllm_draft_params p{};
  p.kind = PLLM_DRAFT_NONE;
  p.max_tokens = pllm::DraftSpec{}.max_tokens;
  return p;
}

pllm_status pllm_draft_calibrate(pllm_session* s, const pllm_token* tokens, size_t n_tokens, int32_t max_tokens,
                                 const char* out_path, double* speedup_out) {
  return guarded([&] {
    if (!s || !tokens || !out_path) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_draft_calibrate: null argument");
    if (max_tokens < 1 || max_tokens > 32)
      return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_draft_calibrate: draft length must be in 1..32");
    const int n_vocab = s->session->model().config().n_vocab;
    for (size_t i = 0; i < n_tokens; ++i)
      if (tokens[i] < 0 || tokens[i] >= n_vocab) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_draft_calibrate: invalid token id");
    s->drafter.reset();  // a skip drafter's layers may change
    s->draft_key.clear();
    auto c = pllm::calibrate_skip_layers(*s->session, std::span<const pllm::TokenId>(tokens, n_tokens), max_tokens);
    if (!c.ok()) return fail(c.error());
    if (auto w = pllm::save_skip_layers(out_path, s->session->model(), *c); !w.ok()) return fail(w.error());
    if (speedup_out) *speedup_out = c->speedup;
    return PLLM_OK;
  });
}

}  // extern "C"
