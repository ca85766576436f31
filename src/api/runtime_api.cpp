// The C API of the scheduled runtime (pocketllm.h, "Scheduled runtime").
#include <cmath>
#include <cstring>
#include <limits>

#include "api/api_internal.h"
#include "runtime/engine.h"
#include "runtime/scheduled_runtime.h"
#include "runtime/thermal_source.h"
#include "runtime/trace_log.h"
#include "tokenizer/tokenizer.h"

using namespace pllm_api;

namespace {

// What the app reports, and the sysfs zones when asked for: the hotter of the two decides.
// Sysfs is scanned at most once a second (the governor ticks every step).
class AppAndSysfsThermal : public pllm::ThermalSource {
 public:
  explicit AppAndSysfsThermal(bool use_sysfs) : use_sysfs_(use_sysfs) {}
  pllm::AppThermalSource app;

  pllm::ThermalReading read(int64_t now_ms) override {
    pllm::ThermalReading a = app.read(now_ms);
    if (!use_sysfs_) return a;
    if (!last_scan_ms_ || now_ms - *last_scan_ms_ >= 1000) {
      sys_ = sysfs_.read(now_ms);
      last_scan_ms_ = now_ms;
    }
    if (!sys_.valid) return a;
    if (!a.valid) return sys_;
    pllm::ThermalReading r = a;
    r.level = std::max(a.level, sys_.level);
    if (std::isnan(r.headroom) || sys_.headroom > r.headroom) r.headroom = sys_.headroom;
    r.temp_c = sys_.temp_c;
    return r;
  }

 private:
  bool use_sysfs_;
  pllm::SysfsThermalSource sysfs_;
  pllm::ThermalReading sys_;
  std::optional<int64_t> last_scan_ms_;
};

// The bits of an enum value a C caller passed, as an int (never loaded as the enum type).
template <class E>
int32_t enum_bits(const E& e) {
  static_assert(sizeof(E) == sizeof(int32_t));
  int32_t v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// The scheduled runtime ends with the first seven reasons; generate()'s own never reach an
// event (a full context is failed with out_of_range there).
pllm_end_reason to_c(pllm::EndReason r) {
  switch (r) {
    case pllm::EndReason::done: return PLLM_END_DONE;
    case pllm::EndReason::eos: return PLLM_END_EOS;
    case pllm::EndReason::cancelled:
    case pllm::EndReason::callback: return PLLM_END_CANCELLED;
    case pllm::EndReason::reset: return PLLM_END_RESET;
    case pllm::EndReason::interrupted: return PLLM_END_INTERRUPTED;
    case pllm::EndReason::failed:
    case pllm::EndReason::context_full: return PLLM_END_FAILED;
    case pllm::EndReason::kv_exhausted: return PLLM_END_KV_EXHAUSTED;
    case pllm::EndReason::stop_string: return PLLM_END_DONE;
  }
  return PLLM_END_FAILED;
}

}  // namespace

struct pllm_runtime {
  std::shared_ptr<const pllm::Model> model;
  pllm_sampling_params default_sampling;
  std::unique_ptr<AppAndSysfsThermal> thermal;
  std::unique_ptr<pllm::TraceLog> trace;
  std::shared_ptr<pllm_api::FrameFanout> fanout;  // the engine handle's (pllm_engine_frame)
  std::unique_ptr<pllm::ScheduledRuntime> rt;  // last: stopped and destroyed first
  ~pllm_runtime() {
    if (!fanout) return;
    std::lock_guard lk(fanout->mu);
    std::erase(fanout->runtimes, rt.get());
  }
};

extern "C" {

pllm_runtime_params pllm_runtime_default_params(void) {
  pllm_runtime_params p{};
  const pllm::SchedulerConfig sc;
  p.interactive_weight = sc.interactive_weight;
  p.background_weight = sc.background_weight;
  p.prefill_chunk = sc.prefill_chunk;
  p.max_batch_rows = 8;
  p.kv_budget_tokens = int64_t(1) << 20;
  p.max_tokens_per_frame = sc.max_tokens_per_frame;
  const pllm::RuntimeConfig rc;
  p.ui_headroom = float(rc.frame_policy.headroom);
  p.interactive_ttft_bound_ms = float(rc.interactive_ttft_bound_ms);
  p.governor = 0;
  p.thermal_sysfs = 0;
  p.trace_events = 0;
  p.trace_atrace = 0;
  return p;
}

pllm_status pllm_runtime_create(pllm_engine* e, pllm_model* m, const pllm_runtime_params* params,
                                pllm_runtime** out) {
  return guarded([&] {
    if (!e || !m || !out) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_runtime_create: null argument");
    *out = nullptr;
    const pllm_runtime_params p = params ? *params : pllm_runtime_default_params();
    pllm::RuntimeConfig cfg;
    cfg.scheduler.interactive_weight = p.interactive_weight;
    cfg.scheduler.background_weight = p.background_weight;
    cfg.scheduler.prefill_chunk = p.prefill_chunk;
    cfg.scheduler.max_tokens_per_frame = p.max_tokens_per_frame;
    cfg.frame_policy.headroom = p.ui_headroom;
    cfg.interactive_ttft_bound_ms = p.interactive_ttft_bound_ms;
    cfg.max_batch_rows = p.max_batch_rows;
    cfg.kv_budget_tokens = p.kv_budget_tokens;
    auto h = std::make_unique<pllm_runtime>();
    h->model = m->model;
    h->default_sampling = pllm_model_sampling_params(m);
    if (p.trace_events < 0) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_runtime_create: trace_events must be >= 0");
    if (p.trace_events > 0) {
      auto t = pllm::TraceLog::create(size_t(p.trace_events));
      if (!t.ok()) return fail(t.error());
      h->trace = std::move(*t);
      if (p.trace_atrace) {
        // Best effort: where trace_marker is not writable (no root, no tracefs) the JSON trace
        // still works.
        if (auto w = pllm::AtraceWriter::open_default(); w.ok()) (void)h->trace->attach_atrace(std::move(*w));
      }
      cfg.trace = h->trace.get();
    }
    if (p.governor) {
      h->thermal = std::make_unique<AppAndSysfsThermal>(p.thermal_sysfs != 0);
      cfg.thermal = h->thermal.get();
      cfg.governor = pllm::GovernorConfig{};
    }
    auto rt = pllm::ScheduledRuntime::create(m->model, e->engine, std::move(cfg));
    if (!rt.ok()) return fail(rt.error());
    h->rt = std::move(rt).value();
    h->fanout = e->frames;
    {
      std::lock_guard lk(h->fanout->mu);
      h->fanout->runtimes.push_back(h->rt.get());
    }
    *out = h.release();
    return PLLM_OK;
  });
}

void pllm_runtime_free(pllm_runtime* r) { delete r; }

pllm_status pllm_runtime_add_session(pllm_runtime* r, const pllm_session_params* params, int64_t* out_key) {
  return guarded([&] {
    if (!r || !out_key) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_runtime_add_session: null argument");
    pllm::SessionConfig cfg;
    if (pllm_status st = session_config(params, cfg); st != PLLM_OK) return st;
    if (!params || params->n_batch == 0) cfg.n_batch = std::max(cfg.n_batch, r->rt->prefill_chunk());
    auto key = r->rt->add_session(cfg);
    if (!key.ok()) return fail(key.error());
    *out_key = *key;
    return PLLM_OK;
  });
}

pllm_status pllm_runtime_remove_session(pllm_runtime* r, int64_t session) {
  return guarded([&] {
    if (!r) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_runtime_remove_session: null runtime");
    auto res = r->rt->remove_session(session);
    return res.ok() ? PLLM_OK : fail(res.error());
  });
}

pllm_status pllm_runtime_submit(pllm_runtime* r, int64_t session, const pllm_request* req, uint64_t* out_id) {
  return guarded([&] {
    if (!r || !req) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_runtime_submit: null argument");
    if (req->n_prompt && !req->prompt) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_runtime_submit: null prompt");
    // A C caller may put any int in an enum field; read it as one (loading an out-of-range
    // value as the C++ enum type is undefined).
    const int32_t klass = enum_bits(req->klass);
    if (klass != PLLM_CLASS_INTERACTIVE && klass != PLLM_CLASS_BACKGROUND)
      return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_runtime_submit: unknown request class");
    pllm::RuntimeRequest rr;
    rr.klass = klass == PLLM_CLASS_INTERACTIVE ? pllm::RequestClass::interactive : pllm::RequestClass::background;
    if (req->base_weight >= 0) rr.base_weight = req->base_weight;
    rr.prompt.assign(req->prompt, req->prompt + req->n_prompt);
    rr.max_tokens = req->max_tokens;
    const pllm_sampling_params& sp = req->sampling ? *req->sampling : r->default_sampling;
    if (pllm_status st = draft_spec(sp.draft, *r->model, "pllm_runtime_submit", rr.draft); st != PLLM_OK) return st;
    if (!sampling_config(sp, rr.sampling))
      return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_runtime_submit: sampling parameter out of range");
    if (pllm_status st = grammar_constraint(sp, *r->model, "pllm_runtime_submit", rr.grammar); st != PLLM_OK)
      return st;
    if (req->on_event) {
      // Token text through a per-request stream decoder (multi-byte characters split over
      // tokens come out whole).
      auto decoder = std::make_shared<pllm::StreamDecoder>(r->model->tokenizer());
      rr.on_event = [fn = req->on_event, ud = req->user_data, decoder](const pllm::RuntimeEvent& e) {
        pllm_event ev{};
        ev.request = e.request;
        ev.session = e.session;
        std::string text;
        if (e.kind == pllm::RuntimeEvent::Kind::token) {
          ev.kind = 0;
          ev.token = e.token;
          ev.index = e.index;
          text = decoder->push(e.token);
        } else {
          ev.kind = 1;
          ev.token = -1;
          ev.reason = to_c(e.reason);
          ev.status = to_status(e.status);
          ev.n_generated = e.n_generated;
          ev.n_drafted = e.draft.drafted;
          ev.n_draft_accepted = e.draft.accepted;
        }
        ev.text = text.c_str();
        ev.text_len = text.size();
        fn(&ev, ud);
      };
    }
    auto id = r->rt->submit(session, std::move(rr));
    if (!id.ok()) return fail(id.error());
    if (out_id) *out_id = *id;
    return PLLM_OK;
  });
}

pllm_status pllm_runtime_control(pllm_runtime* r, int64_t session, pllm_control action) {
  return guarded([&] {
    if (!r) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_runtime_control: null runtime");
    pllm::ControlAction a;
    switch (enum_bits(action)) {
      case PLLM_CONTROL_CANCEL: a = pllm::ControlAction::cancel; break;
      case PLLM_CONTROL_RESET: a = pllm::ControlAction::reset; break;
      case PLLM_CONTROL_INTERRUPT: a = pllm::ControlAction::interrupt; break;
      default: return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_runtime_control: unknown action");
    }
    auto res = r->rt->control(session, a);
    return res.ok() ? PLLM_OK : fail(res.error());
  });
}

pllm_status pllm_runtime_frame(pllm_runtime* r, double frame_start_ms, double period_ms) {
  return guarded([&] {
    if (!r) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_runtime_frame: null runtime");
    if (period_ms <= 0) {
      r->rt->stop_frames();
      return PLLM_OK;
    }
    auto res = r->rt->frame(frame_start_ms, period_ms);
    return res.ok() ? PLLM_OK : fail(res.error());
  });
}

pllm_status pllm_runtime_ui_frame(pllm_runtime* r, double frame_start_ms, double ui_ms) {
  return guarded([&] {
    if (!r) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_runtime_ui_frame: null runtime");
    auto res = r->rt->report_ui_frame(frame_start_ms, ui_ms);
    return res.ok() ? PLLM_OK : fail(res.error());
  });
}

int32_t pllm_runtime_ttft_over_bound(const pllm_runtime* r) { return r ? r->rt->ttft_over_bound() : 0; }

pllm_status pllm_runtime_frame_period(pllm_runtime* r, double period_ms) {
  return guarded([&] {
    if (!r) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_runtime_frame_period: null runtime");
    auto res = r->rt->frame_period(period_ms);
    return res.ok() ? PLLM_OK : fail(res.error());
  });
}

pllm_status pllm_engine_frame(pllm_engine* e, double frame_start_ms, double period_ms) {
  return guarded([&] {
    if (!e) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_engine_frame: null engine");
    std::lock_guard lk(e->frames->mu);
    for (pllm::ScheduledRuntime* rt : e->frames->runtimes) {
      if (period_ms <= 0) {
        rt->stop_frames();
        continue;
      }
      if (auto res = rt->frame(frame_start_ms, period_ms); !res.ok()) return fail(res.error());
    }
    return PLLM_OK;
  });
}

double pllm_runtime_now_ms(const pllm_runtime* r) { return r ? r->rt->now_ms() : 0.0; }

pllm_status pllm_runtime_set_thermal(pllm_runtime* r, int32_t level, float headroom) {
  return guarded([&] {
    if (!r) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_runtime_set_thermal: null runtime");
    if (!r->thermal) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_runtime_set_thermal: the governor is off");
    if (level >= 0)
      if (auto res = r->thermal->app.set_level(level); !res.ok()) return fail(res.error());
    if (auto res = r->thermal->app.set_headroom(headroom); !res.ok()) return fail(res.error());
    return PLLM_OK;
  });
}

pllm_status pllm_runtime_set_ios_thermal_state(pllm_runtime* r, int32_t state) {
  return guarded([&] {
    if (!r) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_runtime_set_ios_thermal_state: null runtime");
    if (!r->thermal) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_runtime_set_ios_thermal_state: the governor is off");
    auto level = pllm::thermal_level_from_ios_state(state);
    if (!level.ok()) return fail(level.error());
    auto res = r->thermal->app.set_level(*level);
    return res.ok() ? PLLM_OK : fail(res.error());
  });
}

pllm_status pllm_runtime_step(pllm_runtime* r, int32_t* out_state) {
  return guarded([&] {
    if (!r) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_runtime_step: null runtime");
    auto res = r->rt->step();
    if (!res.ok()) return fail(res.error());
    if (out_state) *out_state = int32_t(res->kind);
    return PLLM_OK;
  });
}

pllm_status pllm_runtime_start(pllm_runtime* r) {
  return guarded([&] {
    if (!r) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_runtime_start: null runtime");
    auto res = r->rt->start();
    return res.ok() ? PLLM_OK : fail(res.error());
  });
}

void pllm_runtime_stop(pllm_runtime* r) {
  if (r) r->rt->stop();
}

int32_t pllm_runtime_wait_idle(pllm_runtime* r, double timeout_ms) {
  return r && r->rt->wait_idle(timeout_ms) ? 1 : 0;
}

int32_t pllm_runtime_thermal_level(const pllm_runtime* r) { return r ? r->rt->caps().level : 0; }

pllm_status pllm_runtime_trace_json(const pllm_runtime* r, char** out_json) {
  return guarded([&] {
    if (!r || !out_json) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_runtime_trace_json: null argument");
    *out_json = nullptr;
    if (!r->trace) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_runtime_trace_json: the runtime has no trace (trace_events 0)");
    *out_json = dup_string(r->trace->chrome_json());
    return PLLM_OK;
  });
}

}  // extern "C"
