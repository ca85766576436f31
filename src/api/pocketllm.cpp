// The C API: thin wrappers that translate Result<> into status codes plus a thread-local
// message, and catch everything so no exception crosses into C.
#include "pocketllm/pocketllm.h"

#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>

#include "api/api_internal.h"
#include "api/inspect.h"
#include "model/chat_prompt.h"
#include "kernels/kernels.h"
#include "runtime/generator.h"
#include "runtime/prefix_cache.h"
#include "runtime/prefix_reuse.h"
#include "runtime/session.h"

using namespace pllm_api;

namespace pllm_api {

namespace {

// pllm_activations and the library's modes, one line each (DEFAULT is the library's default).
struct CActMode {
  pllm_activations c;
  pllm::ActMode mode;
};
constexpr CActMode kCActModes[] = {{PLLM_ACT_INT16, pllm::ActMode::int16},
                                   {PLLM_ACT_EXACT, pllm::ActMode::exact},
                                   {PLLM_ACT_INT8, pllm::ActMode::int8},
                                   {PLLM_ACT_F16, pllm::ActMode::f16},
                                   {PLLM_ACT_STATIC, pllm::ActMode::int8_static}};

std::optional<pllm::ActMode> mode_of(int32_t a) {
  if (a == PLLM_ACT_DEFAULT) return pllm::kDefaultActMode;
  for (const CActMode& m : kCActModes)
    if (m.c == a) return m.mode;
  return std::nullopt;
}

// The mode of pllm_session_params: its activations field, or one of the older int8 / f16 /
// static flags (kept for apps built against them); both may be set only when they agree.
pllm::Result<pllm::ActMode> activation_mode(const pllm_session_params& p) {
  using pllm::ActMode;
  std::optional<ActMode> flag;
  if (p.static_activations) {
    flag = ActMode::int8_static;  // implies int8: the int8 flag may be set too
  } else if (p.int8_activations) {
    flag = ActMode::int8;
  }
  if (p.f16_activations) {
    if (flag)
      return pllm::make_error(pllm::Status::invalid_argument, "choose one of the int8, f16 and static activation flags");
    flag = ActMode::f16;
  }
  const std::optional<ActMode> field = mode_of(p.activations);
  if (!field) return pllm::make_error(pllm::Status::invalid_argument, "unknown activations " + std::to_string(p.activations));
  if (p.activations == PLLM_ACT_DEFAULT || !flag || *flag == *field) return flag.value_or(*field);
  return pllm::make_error(pllm::Status::invalid_argument,
                          "activations = " + std::string(pllm::act_mode_name(*field)) + " together with the " +
                              std::string(pllm::act_mode_name(*flag)) + " flag");
}

}  // namespace

pllm_status session_config(const pllm_session_params* params, pllm::SessionConfig& cfg) {
  const pllm_session_params p = params ? *params : pllm_session_default_params();
  cfg.n_ctx = p.n_ctx;
  cfg.n_threads = p.n_threads;
  if (!pllm_api::engine_backend_of(p.backend, &cfg.backend))
    return fail(PLLM_ERR_INVALID_ARGUMENT, "unknown backend " + std::to_string(p.backend));
  auto act = activation_mode(p);
  if (!act.ok()) return fail(PLLM_ERR_INVALID_ARGUMENT, act.error().message);
  cfg.act = *act;
  cfg.fuse = p.no_fuse == 0;
  cfg.profile = p.profile != 0;
  switch (p.kv_type) {
    case PLLM_KV_F16: cfg.kv.type = pllm::KvType::f16; break;
    case PLLM_KV_F32: cfg.kv.type = pllm::KvType::f32; break;
    case PLLM_KV_Q8: cfg.kv.type = pllm::KvType::q8; break;
    case PLLM_KV_Q4: cfg.kv.type = pllm::KvType::q4; break;
    default: return fail(PLLM_ERR_INVALID_ARGUMENT, "unknown KV type " + std::to_string(p.kv_type));
  }
  if (p.n_batch != 0) cfg.n_batch = p.n_batch;
  cfg.kv.window = p.kv_window;
  cfg.kv.sinks = p.kv_sinks;
  return PLLM_OK;
}

pllm_status create_session(pllm_model* m, pllm_engine* e, const pllm_session_params* params, pllm_session** out) {
  *out = nullptr;
  pllm::SessionConfig cfg;
  if (pllm_status st = session_config(params, cfg); st != PLLM_OK) return st;
  auto s = pllm::Session::create(m->model, cfg, e ? e->engine : nullptr);
  if (!s.ok()) return fail(s.error());
  *out = new pllm_session{std::move(s).value(), nullptr, {}, nullptr, nullptr, {}};
  return PLLM_OK;
}

bool sampling_config(const pllm_sampling_params& sp, pllm::SamplingConfig& out) {
  if (!(sp.temperature >= 0.0f) || sp.top_k < 0 || !(sp.top_p > 0.0f && sp.top_p <= 1.0f) ||
      !(sp.min_p >= 0.0f && sp.min_p <= 1.0f) || !(sp.repeat_penalty > 0.0f))
    return false;
  out = {sp.temperature, sp.top_k, sp.top_p, sp.min_p, sp.repeat_penalty, sp.repeat_last_n, sp.seed};
  return true;
}

}  // namespace pllm_api

extern "C" {

const char* pllm_last_error(void) { return g_last_error.c_str(); }

const char* pllm_status_string(pllm_status s) { return pllm::status_name(static_cast<pllm::Status>(s)); }

const char* pllm_version(void) { return "0.1.0"; }

const char* pllm_isa(void) { return pllm::isa_name(pllm::kernels().isa); }

int32_t pllm_default_threads(void) { return pllm::default_thread_count(); }

pllm_model_params pllm_model_default_params(void) {
  pllm_model_params p{};
  return p;
}

pllm_status pllm_model_load(const char* path, const pllm_model_params* params, pllm_model** out) {
  return guarded([&] {
    if (!path || !out) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_model_load: null argument");
    *out = nullptr;
    const pllm_model_params p = params ? *params : pllm_model_default_params();
    pllm::Model::Progress progress;
    if (p.progress) progress = [&](float f) { return p.progress(f, p.progress_user_data) == 0; };
    const pllm::RepackMode repack = p.repack_weights > 0    ? pllm::RepackMode::all
                                    : p.repack_weights == 0 ? pllm::RepackMode::int16
                                                            : pllm::RepackMode::none;
    auto m = pllm::Model::load(path, p.vocab_only != 0, progress, repack);
    if (!m.ok()) return fail(m.error());
    *out = new pllm_model{std::move(m).value(), p.chat_template == PLLM_CHAT_TEMPLATE_NATIVE
                                                   ? pllm::ChatTemplateMode::native
                                                   : pllm::ChatTemplateMode::file,
                          {}};
    return PLLM_OK;
  });
}

void pllm_model_free(pllm_model* model) { delete model; }

int32_t pllm_model_n_vocab(const pllm_model* m) { return m ? m->model->config().n_vocab : 0; }
int32_t pllm_model_n_ctx_train(const pllm_model* m) { return m ? m->model->config().n_ctx_train : 0; }
int32_t pllm_model_n_repacked(const pllm_model* m) { return m ? m->model->repacked_tensors() : 0; }
int32_t pllm_model_n_copied(const pllm_model* m) { return m ? m->model->copied_tensors() : 0; }
pllm_token pllm_model_bos(const pllm_model* m) { return m ? m->model->tokenizer().bos() : -1; }
pllm_token pllm_model_eos(const pllm_model* m) { return m ? m->model->tokenizer().eos() : -1; }
int pllm_model_is_eog(const pllm_model* m, pllm_token t) {
  return m && m->model->tokenizer().is_end_of_generation(t) ? 1 : 0;
}
int pllm_model_add_bos(const pllm_model* m) { return m && m->model->tokenizer().add_bos() ? 1 : 0; }
void pllm_model_act_scale_counts(const pllm_model* m, int32_t* n_static, int32_t* n_dynamic) {
  const pllm::ActScaleCounts c = m ? m->model->act_scale_counts() : pllm::ActScaleCounts{};
  if (n_static) *n_static = c.n_static;
  if (n_dynamic) *n_dynamic = c.n_dynamic;
}

pllm_status pllm_inspect_file(const char* path, char** json_out) {
  return guarded([&] {
    if (!path || !json_out) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_inspect_file: null argument");
    *json_out = nullptr;
    auto r = pllm::inspect_file_json(path);
    if (!r.ok()) return fail(r.error());
    *json_out = dup_string(r.value());
    return PLLM_OK;
  });
}

void pllm_string_free(char* s) { std::free(s); }

pllm_status pllm_tokenize(const pllm_model* m, const char* text, size_t text_len, int add_special,
                          int parse_special, pllm_token* out, size_t capacity, size_t* n_out) {
  return guarded([&] {
    if (!m || (!text && text_len) || (!out && capacity))
      return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_tokenize: null argument");
    auto r = m->model->tokenizer().encode(std::string_view(text ? text : "", text_len), add_special != 0,
                                          parse_special != 0);
    if (!r.ok()) return fail(r.error());
    return copy_out(r->data(), r->size(), sizeof(pllm_token), out, capacity, n_out);
  });
}

pllm_status pllm_tokenize_prompt(const pllm_model* m, const char* text, size_t text_len, pllm_token* out,
                                 size_t capacity, size_t* n_out) {
  return guarded([&] {
    if (!m || (!text && text_len) || (!out && capacity))
      return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_tokenize_prompt: null argument");
    auto r = pllm::encode_chat_prompt(m->model->tokenizer(), std::string_view(text ? text : "", text_len));
    if (!r.ok()) return fail(r.error());
    return copy_out(r->data(), r->size(), sizeof(pllm_token), out, capacity, n_out);
  });
}

pllm_status pllm_detokenize(const pllm_model* m, const pllm_token* tokens, size_t n_tokens, int render_special,
                            char* out, size_t capacity, size_t* n_out) {
  return guarded([&] {
    if (!m || (!tokens && n_tokens) || (!out && capacity))
      return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_detokenize: null argument");
    const auto& tok = m->model->tokenizer();
    for (size_t i = 0; i < n_tokens; ++i)
      if (tokens[i] < 0 || tokens[i] >= tok.n_vocab())
        return fail(PLLM_ERR_INVALID_ARGUMENT, "token id " + std::to_string(tokens[i]) + " is out of range");
    const std::string s = tok.decode(std::span<const pllm::TokenId>(tokens, n_tokens), render_special != 0);
    return copy_out(s.data(), s.size(), 1, out, capacity, n_out);
  });
}

pllm_status pllm_chat_apply_template(const pllm_model* m, const pllm_chat_message* messages, size_t n_messages,
                                     int add_generation_prompt, char** text_out) {
  return pllm_chat_apply_template_vars(m, messages, n_messages, add_generation_prompt, nullptr, text_out);
}

pllm_status pllm_chat_apply_template_vars(const pllm_model* m, const pllm_chat_message* messages, size_t n_messages,
                                          int add_generation_prompt, const char* variables_json, char** text_out) {
  return guarded([&] {
    if (!m || !text_out || (!messages && n_messages))
      return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_chat_apply_template: null argument");
    *text_out = nullptr;
    std::vector<pllm::ChatMessage> msgs;
    for (size_t i = 0; i < n_messages; ++i) {
      if (!messages[i].role || !messages[i].content)
        return fail(PLLM_ERR_INVALID_ARGUMENT, "chat message with null role or content");
      msgs.emplace_back(messages[i].role, messages[i].content);
    }
    pllm::ChatTemplateVars vars;
    if (variables_json) {
      auto v = pllm::parse_chat_template_vars(variables_json);
      if (!v.ok()) return fail(v.error());
      vars = std::move(*v);
    }
    auto r = pllm::apply_chat_template(*m->model, msgs, add_generation_prompt != 0, m->chat_template, vars);
    if (!r.ok()) return fail(r.error());
    *text_out = dup_string(r.value());
    return PLLM_OK;
  });
}

const char* pllm_activations_name(int32_t activations) {
  const std::optional<pllm::ActMode> m = mode_of(activations);
  return m ? pllm::act_mode_name(*m).data() : nullptr;
}

pllm_status pllm_activations_parse(const char* word, int32_t* out) {
  if (!word || !out) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_activations_parse: null argument");
  const std::optional<pllm::ActMode> m = pllm::parse_act_mode(word);
  for (const CActMode& c : kCActModes)
    if (m && c.mode == *m) {
      *out = c.c;
      return PLLM_OK;
    }
  return fail(PLLM_ERR_INVALID_ARGUMENT, "unknown activation mode '" + std::string(word) + "' (one of " +
                                             pllm::act_mode_words() + ")");
}

int32_t pllm_activations_repack(int32_t activations) {
  const std::optional<pllm::ActMode> m = mode_of(activations);
  if (!m) return PLLM_REPACK_OFF;
  switch (pllm::repack_for(*m)) {
    case pllm::RepackMode::all: return PLLM_REPACK_ON;
    case pllm::RepackMode::int16: return PLLM_REPACK_AUTO;
    case pllm::RepackMode::none: break;
  }
  return PLLM_REPACK_OFF;
}

pllm_session_params pllm_session_default_params(void) {
  pllm_session_params p{};
  p.kv_type = PLLM_KV_F16;
  p.kv_sinks = 4;
  return p;
}

pllm_status pllm_session_create(pllm_model* m, const pllm_session_params* params, pllm_session** out) {
  return guarded([&] {
    if (!m || !out) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_session_create: null argument");
    return create_session(m, nullptr, params, out);
  });
}

void pllm_session_free(pllm_session* s) { delete s; }

pllm_status pllm_session_profile(pllm_session* s, char** chrome_trace_json, char** summary) {
  return guarded([&] {
    if (!s) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_session_profile: null session");
    const pllm::Tracer* t = s->session->tracer();
    if (!t) return fail(PLLM_ERR_INVALID_ARGUMENT, "profiling was not enabled for this session");
    if (chrome_trace_json) *chrome_trace_json = dup_string(t->chrome_trace_json());
    if (summary) *summary = dup_string(t->summary());
    return PLLM_OK;
  });
}
int32_t pllm_session_n_ctx(const pllm_session* s) { return s ? s->session->n_ctx() : 0; }
uint64_t pllm_session_kv_bytes(const pllm_session* s) { return s ? s->session->kv_cache().bytes() : 0; }
uint64_t pllm_session_kv_committed_bytes(const pllm_session* s) {
  return s ? s->session->kv_cache().committed_bytes() : 0;
}
void pllm_session_reset(pllm_session* s) {
  if (s) s->session->reset();
}
pllm_status pllm_session_prewarm(pllm_session* s, const pllm_token* tokens, size_t n_tokens) {
  return guarded([&] {
    if (!s || (!tokens && n_tokens)) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_session_prewarm: null argument");
    const int32_t n_vocab = s->session->model().config().n_vocab;
    for (size_t i = 0; i < n_tokens; ++i)
      if (tokens[i] < 0 || tokens[i] >= n_vocab)
        return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_session_prewarm: token id out of range");
    pllm::prewarm(*s->session, std::vector<int32_t>(tokens, tokens + n_tokens));
    return PLLM_OK;
  });
}

pllm_status pllm_session_prewarm_wait(pllm_session* s) {
  return guarded([&] {
    if (!s) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_session_prewarm_wait: null session");
    auto r = s->session->wait_background();
    if (!r.ok()) return fail(r.error());
    return PLLM_OK;
  });
}

void pllm_session_cancel(pllm_session* s) {
  if (s) s->session->request_cancel();
}

pllm_status pllm_session_eval(pllm_session* s, const pllm_token* tokens, size_t n_tokens, float* logits_out) {
  return guarded([&] {
    if (!s || (!tokens && n_tokens)) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_session_eval: null argument");
    s->session->clear_cancel();
    auto r = s->session->eval(std::span<const pllm::TokenId>(tokens, n_tokens), logits_out);
    if (!r.ok()) return fail(r.error());
    return PLLM_OK;
  });
}

namespace {
pllm_sampling_params params_from(const pllm::SamplingConfig& d) {
  pllm_sampling_params p{};
  p.temperature = d.temperature;
  p.top_k = d.top_k;
  p.top_p = d.top_p;
  p.min_p = d.min_p;
  p.repeat_penalty = d.repeat_penalty;
  p.repeat_last_n = d.repeat_last_n;
  p.seed = d.seed;
  p.max_tokens = 256;
  return p;
}

// generate() ends with done, eos, stop_string, callback, cancelled or context_full; the
// scheduled runtime's reasons never reach pllm_generate.
pllm_stop_reason stop_reason_of(pllm::EndReason r) {
  switch (r) {
    case pllm::EndReason::eos: return PLLM_STOP_EOG;
    case pllm::EndReason::done: return PLLM_STOP_MAX_TOKENS;
    case pllm::EndReason::stop_string: return PLLM_STOP_STRING;
    case pllm::EndReason::callback: return PLLM_STOP_CALLBACK;
    case pllm::EndReason::context_full: return PLLM_STOP_CONTEXT_FULL;
    case pllm::EndReason::cancelled:
    case pllm::EndReason::reset:
    case pllm::EndReason::interrupted:
    case pllm::EndReason::failed:
    case pllm::EndReason::kv_exhausted: return PLLM_STOP_CANCELLED;
  }
  return PLLM_STOP_CANCELLED;
}
}  // namespace

pllm_sampling_params pllm_sampling_default_params(void) { return params_from(pllm::SamplingConfig{}); }

pllm_sampling_params pllm_model_sampling_params(const pllm_model* m) {
  return m ? params_from(m->model->sampling_defaults()) : pllm_sampling_default_params();
}

pllm_status pllm_generate(pllm_session* s, const pllm_token* prompt, size_t n_prompt,
                          const pllm_sampling_params* sampling, pllm_token_fn on_token, void* user_data,
                          pllm_generation_stats* stats) {
  return guarded([&] {
    if (!s || (!prompt && n_prompt)) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_generate: null argument");
    const pllm_sampling_params sp = sampling ? *sampling : pllm_sampling_default_params();
    pllm::GenerateParams gp;
    if (!sampling_config(sp, gp.sampling) || sp.max_tokens < 0 || (sp.n_stop_strings && !sp.stop_strings))
      return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_generate: sampling parameter out of range");
    if (pllm_status st = grammar_constraint(sp, s->session->model(), "pllm_generate", gp.grammar); st != PLLM_OK)
      return st;
    if (pllm_status st = pllm_api::session_drafter(*s, sp, "pllm_generate", &gp.drafter, &gp.draft_max); st != PLLM_OK)
      return st;
    gp.max_tokens = sp.max_tokens;
    gp.ignore_eos = sp.ignore_eos != 0;
    for (size_t i = 0; i < sp.n_stop_strings; ++i) {
      if (!sp.stop_strings[i]) return fail(PLLM_ERR_INVALID_ARGUMENT, "null stop string");
      gp.stop_strings.emplace_back(sp.stop_strings[i]);
    }
    pllm::TokenCallback cb;
    if (on_token)
      cb = [&](int32_t id, std::string_view text) { return on_token(id, text.data(), text.size(), user_data) == 0; };
    auto r = pllm::generate(*s->session, std::span<const pllm::TokenId>(prompt, n_prompt), gp, cb);
    if (!r.ok()) return fail(r.error());
    if (stats) {
      stats->n_prompt_tokens = r->n_prompt;
      stats->n_reused_tokens = r->n_reused;
      stats->n_generated = r->n_generated;
      stats->ttft_ms = r->ttft_ms;
      stats->prefill_tps = r->prefill_tps;
      stats->decode_tps = r->decode_tps;
      stats->stop_reason = stop_reason_of(r->reason);
      stats->n_cached_tokens = r->n_restored;
      stats->n_draft_passes = r->n_draft_passes;
      stats->n_drafted = r->n_drafted;
      stats->n_draft_accepted = r->n_draft_accepted;
    }
    return PLLM_OK;
  });
}

pllm_prefix_cache_params pllm_prefix_cache_default_params(void) {
  const pllm::PrefixCacheParams d;
  pllm_prefix_cache_params p{};
  p.ram_bytes = d.ram_bytes;
  p.dir = nullptr;
  p.disk_bytes = d.disk_bytes;
  p.ttl_seconds = d.ttl_seconds;
  return p;
}

pllm_status pllm_prefix_cache_create(const pllm_model* m, const pllm_prefix_cache_params* params,
                                     pllm_prefix_cache** out) {
  return guarded([&] {
    if (!m || !out) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_prefix_cache_create: null argument");
    *out = nullptr;
    const pllm_prefix_cache_params cp = params ? *params : pllm_prefix_cache_default_params();
    if (cp.ttl_seconds < 0) return fail(PLLM_ERR_INVALID_ARGUMENT, "prefix cache TTL must be >= 0");
    pllm::PrefixCacheParams p;
    p.ram_bytes = size_t(cp.ram_bytes);
    p.dir = cp.dir ? cp.dir : "";
    p.disk_bytes = cp.disk_bytes;
    p.ttl_seconds = cp.ttl_seconds;
    const uint64_t id = m->model->identity();
    auto c = pllm::PrefixCache::create(id, p);
    if (!c.ok()) return fail(c.error());
    *out = new pllm_prefix_cache{std::move(*c), id};
    return PLLM_OK;
  });
}

void pllm_prefix_cache_free(pllm_prefix_cache* c) { delete c; }

pllm_status pllm_session_set_prefix_cache(pllm_session* s, pllm_prefix_cache* c) {
  return guarded([&] {
    if (!s) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_session_set_prefix_cache: null session");
    if (c && c->model_id != s->session->model().identity())
      return fail(PLLM_ERR_INVALID_ARGUMENT, "the prefix cache belongs to another model");
    s->session->set_prefix_cache(c ? c->cache : nullptr);
    return PLLM_OK;
  });
}

pllm_status pllm_prefix_cache_stats(const pllm_prefix_cache* c, pllm_prefix_cache_counters* out) {
  return guarded([&] {
    if (!c || !out) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_prefix_cache_stats: null argument");
    const pllm::PrefixCacheStats st = c->cache->stats();
    out->ram_hits = st.ram_hits;
    out->ram_misses = st.ram_misses;
    out->disk_hits = st.disk_hits;
    out->disk_misses = st.disk_misses;
    out->inserts = st.inserts;
    out->ram_entries = st.ram_entries;
    out->ram_bytes = st.ram_bytes;
    out->disk_writes = st.disk_writes;
    out->disk_write_bytes = st.disk_write_bytes;
    out->disk_evictions = st.disk_evictions;
    out->disk_bad_files = st.disk_bad_files;
    out->disk_write_errors = st.disk_write_errors;
    out->restored_tokens = st.restored_tokens;
    out->computed_tokens = st.computed_tokens;
    return PLLM_OK;
  });
}

void pllm_prefix_cache_flush(pllm_prefix_cache* c) {
  if (!c) return;
  try {
    c->cache->flush();
  } catch (...) {  // nothing may cross the C API
  }
}

uint64_t pllm_model_weight_bytes(const pllm_model* m) {
  if (!m || m->model->vocab_only()) return 0;
  uint64_t total = 0;
  for (const auto& t : m->model->file().tensors()) total += t.n_bytes;
  return total;
}

uint64_t pllm_model_weight_bytes_per_token(const pllm_model* m) {
  if (!m || m->model->vocab_only()) return 0;
  const auto& f = m->model->file();
  const bool tied = f.tensor("output.weight") == nullptr;
  uint64_t total = 0;
  // Lookup tables (a step reads its tokens' rows): the embedding table unless it is also the
  // output head, and Gemma 4's per-layer embeddings (most of an E2B file).
  for (const auto& t : f.tensors())
    if ((tied || t.name != "token_embd.weight") && t.name != "per_layer_token_embd.weight") total += t.n_bytes;
  return total;
}

}  // extern "C"
