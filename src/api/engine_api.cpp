// The C API of engines and batched steps (pocketllm.h, "Engines").
#include <algorithm>
#include <cstring>
#include <vector>

#include "api/api_internal.h"
#include "backends/vulkan/vk_backend.h"
#include "runtime/engine.h"
#include "runtime/generator.h"

using namespace pllm_api;

extern "C" {

pllm_engine_params pllm_engine_default_params(void) { return pllm_engine_params{0, PLLM_BACKEND_CPU}; }

namespace {

void copy_str(char* dst, size_t cap, const std::string& s) {
  const size_t n = std::min(cap - 1, s.size());
  std::memcpy(dst, s.data(), n);
  dst[n] = 0;
}

pllm_status backend_stats(const pllm::Engine& e, pllm_backend_stats* out) {
  const pllm::BackendStats s = e.backend_stats();
  *out = pllm_backend_stats{};
  copy_str(out->device, sizeof out->device, s.device);
  copy_str(out->device_error, sizeof out->device_error, s.device_error);
  copy_str(out->last_fallback, sizeof out->last_fallback, s.last_fallback);
  out->device_steps = s.device_steps;
  out->cpu_steps = s.cpu_steps;
  out->fallbacks = s.fallbacks;
  out->validation_messages = s.validation_messages;
  return PLLM_OK;
}

}  // namespace

pllm_status pllm_engine_backend_stats(const pllm_engine* e, pllm_backend_stats* out) {
  return guarded([&] {
    if (!e || !out) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_engine_backend_stats: null argument");
    return backend_stats(*e->engine, out);
  });
}

pllm_status pllm_session_backend_stats(const pllm_session* s, pllm_backend_stats* out) {
  return guarded([&] {
    if (!s || !out) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_session_backend_stats: null argument");
    return backend_stats(s->session->engine(), out);
  });
}

size_t pllm_backend_probe(int32_t as_json, char* buf, size_t cap) {
  try {
    const std::string s = pllm::vulkan_probe(as_json != 0);
    if (buf && cap > 0) copy_str(buf, cap, s);
    return s.size();
  } catch (...) {
    return 0;
  }
}

pllm_status pllm_engine_create(const pllm_engine_params* params, pllm_engine** out) {
  return guarded([&] {
    if (!out) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_engine_create: null argument");
    *out = nullptr;
    const pllm_engine_params p = params ? *params : pllm_engine_default_params();
    pllm::EngineBackend backend;
    if (!engine_backend_of(p.backend, &backend))
      return fail(PLLM_ERR_INVALID_ARGUMENT, "unknown backend " + std::to_string(p.backend));
    auto e = pllm::Engine::create(p.n_threads, backend);
    if (!e.ok()) return fail(e.error());
    *out = new pllm_engine{std::move(e).value()};
    return PLLM_OK;
  });
}

void pllm_engine_free(pllm_engine* e) { delete e; }

int32_t pllm_engine_n_threads(const pllm_engine* e) { return e ? e->engine->n_threads() : 0; }

pllm_status pllm_session_create_on(pllm_engine* e, pllm_model* m, const pllm_session_params* params,
                                   pllm_session** out) {
  return guarded([&] {
    if (!e || !m || !out) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_session_create_on: null argument");
    return create_session(m, e, params, out);
  });
}

pllm_status pllm_engine_step(pllm_engine* e, pllm_step_item* items, size_t n_items) {
  return guarded([&] {
    if (!e || (!items && n_items)) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_engine_step: null argument");
    if (n_items == 0) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_engine_step: no items");
    // Grown, never shrunk: a steady-state step allocates nothing here.
    thread_local std::vector<pllm::SessionStep> steps;
    steps.clear();
    for (size_t i = 0; i < n_items; ++i) {
      pllm_step_item& it = items[i];
      it.token = -1;
      it.status = PLLM_ERR_INVALID_ARGUMENT;
      if (!it.session || (!it.tokens && it.n_tokens))
        return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_engine_step: item " + std::to_string(i) + " has a null pointer");
      if (&it.session->session->engine() != e->engine.get())
        return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_engine_step: item " + std::to_string(i) +
                                                   "'s session was not created on this engine");
      pllm::SamplingConfig sc;
      if (it.sampling && !sampling_config(*it.sampling, sc))
        return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_engine_step: item " + std::to_string(i) +
                                                   ": sampling parameter out of range");
      if (it.sampling && it.sampling->draft && it.sampling->draft->kind != PLLM_DRAFT_NONE)
        return fail(PLLM_ERR_UNSUPPORTED, "pllm_engine_step: speculative decoding (sampling.draft) is pllm_generate's; "
                                          "a step is one pass the caller chose");
      pllm::GrammarConstraint gc;
      if (it.sampling)
        if (pllm_status st = grammar_constraint(*it.sampling, it.session->session->model(), "pllm_engine_step", gc);
            st != PLLM_OK)
          return st;
      const int32_t n_vocab = it.session->session->model().config().n_vocab;
      for (size_t j = 0; j < it.n_tokens; ++j)
        if (it.tokens[j] < 0 || it.tokens[j] >= n_vocab)
          return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_engine_step: token id " + std::to_string(it.tokens[j]) +
                                                     " is out of range");
      if (it.logits_out && it.sampling)
        return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_engine_step: item " + std::to_string(i) +
                                                   " asks for every row's logits and for sampling");
      steps.push_back({it.session->session.get(), {it.tokens, it.n_tokens}, true, it.logits_out, {}});
    }
    auto r = pllm::Session::step(steps);
    for (size_t i = 0; i < n_items; ++i) {
      pllm_step_item& it = items[i];
      const pllm::Result<void>& res = steps[i].result;
      it.status = res.ok() ? PLLM_OK : to_status(res.error().code);
      if (!res.ok() || !it.sampling) continue;
      pllm_session& s = *it.session;
      pllm::SamplingConfig sc;
      sampling_config(*it.sampling, sc);
      // A grammar's state runs on while the same grammar is named; another one starts afresh.
      if (!s.sampler || !(sc == s.sampler_cfg) || it.sampling->grammar != s.sampler_grammar) {
        pllm::GrammarConstraint gc;
        if (it.sampling->grammar) gc = it.sampling->grammar->constraint;
        s.sampler = std::make_unique<pllm::Sampler>(sc, s.session->model().config().n_vocab, gc);
        s.sampler_cfg = sc;
        s.sampler_grammar = it.sampling->grammar;
      }
      it.token = s.sampler->sample(s.session->last_logits(), s.session->history());
      if (it.token == pllm::Sampler::kNoToken) {
        it.status = PLLM_ERR_INVALID_ARGUMENT;
        pllm_api::fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_engine_step: the grammar allows no token here" +
                                                      pllm::grammar_bound_note(s.sampler->grammar()));
      }
    }
    if (!r.ok()) return fail(r.error());
    return PLLM_OK;
  });
}

const float* pllm_session_logits(const pllm_session* s) { return s ? s->session->last_logits() : nullptr; }

int32_t pllm_session_n_batch(const pllm_session* s) { return s ? s->session->n_batch() : 0; }

}  // extern "C"
