// What the C API's files share: the handle structs behind the opaque types and the
// status/error helpers (thread-local last error, exception guard).
#pragma once
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>
#include <new>
#include <string>

#include "model/chat_prompt.h"
#include "pocketllm/pocketllm.h"
#include "runtime/engine.h"
#include "runtime/prefix_cache.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "runtime/speculative.h"

struct pllm_model {
  std::shared_ptr<const pllm::Model> model;
  pllm::ChatTemplateMode chat_template = pllm::ChatTemplateMode::file;  // pllm_model_params::chat_template
  mutable pllm::LazyTokenVocab vocab;  // for grammars (pllm_grammar_create)
};

struct pllm_grammar {
  pllm::GrammarConstraint constraint;
  const pllm::Model* model = nullptr;  // whose vocabulary it was made for
};

struct pllm_session {
  std::unique_ptr<pllm::Session> session;
  // The sampler pllm_engine_step draws with, made on the first sampled step and again when
  // the sampling parameters change.
  std::unique_ptr<pllm::Sampler> sampler;
  pllm::SamplingConfig sampler_cfg;
  const pllm_grammar* sampler_grammar = nullptr;
  // The drafter of speculative pllm_generate calls (a draft model's session and cache), kept
  // while the requests' pllm_draft_params stay the same (draft_key).
  std::unique_ptr<pllm::Drafter> drafter;
  std::string draft_key;
};

namespace pllm {
class ScheduledRuntime;
}
namespace pllm_api {
// The runtimes made on one engine handle, so that pllm_engine_frame reaches them all. Shared
// by the handle and its runtimes: either may be freed first.
struct FrameFanout {
  std::mutex mu;
  std::vector<pllm::ScheduledRuntime*> runtimes;
};
}  // namespace pllm_api

struct pllm_engine {
  std::shared_ptr<pllm::Engine> engine;
  std::shared_ptr<pllm_api::FrameFanout> frames = std::make_shared<pllm_api::FrameFanout>();
};

struct pllm_prefix_cache {
  std::shared_ptr<pllm::PrefixCache> cache;
  uint64_t model_id;
};

namespace pllm_api {

inline thread_local std::string g_last_error;

inline pllm_status to_status(pllm::Status s) { return static_cast<pllm_status>(static_cast<int>(s)); }

inline pllm_status fail(pllm_status s, std::string msg) {
  g_last_error = std::move(msg);
  return s;
}
inline pllm_status fail(const pllm::Error& e) { return fail(to_status(e.code), e.message); }

// A pllm_backend as the engine's choice; false for an unknown value.
inline bool engine_backend_of(int32_t b, pllm::EngineBackend* out) {
  switch (b) {
    case PLLM_BACKEND_CPU: *out = pllm::EngineBackend::cpu; return true;
    case PLLM_BACKEND_AUTO: *out = pllm::EngineBackend::auto_; return true;
    case PLLM_BACKEND_VULKAN: *out = pllm::EngineBackend::vulkan; return true;
  }
  return false;
}

template <class F>
pllm_status guarded(F&& f) {
  try {
    g_last_error.clear();
    return f();
  } catch (const std::bad_alloc&) {
    return fail(PLLM_ERR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return fail(PLLM_ERR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(PLLM_ERR_INTERNAL, "internal error");
  }
}

inline char* dup_string(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (!p) throw std::bad_alloc();
  std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

inline pllm_status copy_out(const void* src, size_t n, size_t elem, void* out, size_t capacity, size_t* n_out) {
  if (n_out) *n_out = n;
  if (n > capacity)
    return fail(PLLM_ERR_OUT_OF_RANGE, "output buffer too small: " + std::to_string(n) + " needed, " +
                                           std::to_string(capacity) + " given");
  if (n) std::memcpy(out, src, n * elem);
  return PLLM_OK;
}

}  // namespace pllm_api

namespace pllm_api {
// The drafter d asks for, as the runtime's DraftSpec (kind none for null or PLLM_DRAFT_NONE;
// a skip file is read for model m).
pllm_status draft_spec(const pllm_draft_params* d, const pllm::Model& m, const char* fn, pllm::DraftSpec& out);
// The session's drafter for sp.draft (null without one), made or kept (draft_api.cpp).
pllm_status session_drafter(pllm_session& s, const pllm_sampling_params& sp, const char* fn, pllm::Drafter** out,
                            int* max_tokens);
// pllm_session_create's work, on engine e (null: a private one). *out null on error.
pllm_status create_session(pllm_model* m, pllm_engine* e, const pllm_session_params* params, pllm_session** out);
// pllm_session_params as a SessionConfig; an error for an unknown KV type.
pllm_status session_config(const pllm_session_params* params, pllm::SessionConfig& cfg);
// Checks the ranges and converts; false when a parameter is out of range.
bool sampling_config(const pllm_sampling_params& sp, pllm::SamplingConfig& out);
// sp.grammar as a constraint for a session of model m (none when null); an error for a grammar
// made for another model. fn names the calling function in the message.
pllm_status grammar_constraint(const pllm_sampling_params& sp, const pllm::Model& m, const char* fn,
                               pllm::GrammarConstraint& out);
}  // namespace pllm_api
