// org.pocketllm.Native's session methods: creation, pllm_generate with its token callback
// calling back into Java, and cancellation from any thread.
//
// Cancelling: Java numbers a session's generations 1, 2, ... A generation is cancelled on its
// own (Generation.cancel) or with every one started before (Session.cancel: all ids up to n),
// whether it runs or still waits its turn. pllm_generate clears the session's cancel flag when
// it starts, so a cancel landing between "the generation was started" and that point would be
// lost for the prefill; cancel therefore repeats pllm_session_cancel until the generation has
// ended (a step at most), and the token callback stops a generation that was cancelled. The
// lock makes sure a repeated cancel never reaches the session's next generation.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>

#include "jni_support.h"

namespace pllm_jni {
namespace {

struct JniSession {
  pllm_session* session = nullptr;
  const pllm_model* model = nullptr;  // Java keeps it open while the session lives
  std::mutex mu;
  std::condition_variable ended;
  bool running = false;       // a pllm_generate is in progress (under mu)
  int64_t current = 0;        // its generation id, or the last one's (under mu)
  std::vector<int64_t> cancelled_ids;   // generations cancelled alone before they started (under mu)
  std::atomic<int64_t> cancel_upto{0};  // generations with an id <= this are cancelled
  std::atomic<bool> current_cancelled{false};  // the running one was cancelled alone

  // Under mu: is generation `id`, about to start, cancelled? (Forgets it in cancelled_ids.)
  bool take_cancelled(int64_t id) {
    auto it = std::find(cancelled_ids.begin(), cancelled_ids.end(), id);
    const bool alone = it != cancelled_ids.end();
    if (alone) cancelled_ids.erase(it);
    return alone || cancel_upto.load() >= id;
  }
  bool stop_requested(int64_t id) const { return current_cancelled.load() || cancel_upto.load() >= id; }
};

// Indices of the int[] that sessionCreate takes (org.pocketllm.SessionParams.toNative).
enum SessionField { N_CTX, THREADS, KV_TYPE, KV_WINDOW, KV_SINKS, BATCH, ACTIVATIONS, BACKEND, N_SESSION_FIELDS };
// Indices of the double[] of sampling overrides (org.pocketllm.GenerateOptions.toNative); NaN
// keeps the model's value.
enum SamplingField { MAX_TOKENS, TEMPERATURE, TOP_K, TOP_P, MIN_P, REPEAT_PENALTY, N_SAMPLING_FIELDS };
// Indices of the double[] that generate returns (org.pocketllm.GenerationStats).
enum StatsField { N_PROMPT, N_REUSED, N_CACHED, N_GENERATED, TTFT_MS, PREFILL_TPS, DECODE_TPS, STOP_REASON, N_STATS };

jlong JNICALL session_create(JNIEnv* env, jclass, jlong model, jintArray fields) {
  return guarded(env, jlong(0), [&]() -> jlong {
    std::vector<int32_t> f;
    if (!from_ints(env, fields, f)) return 0;
    if (f.size() != N_SESSION_FIELDS) {
      throw_invalid(env, "session parameters: wrong field count");
      return 0;
    }
    pllm_session_params p = pllm_session_default_params();
    p.n_ctx = f[N_CTX];
    p.n_threads = f[THREADS];
    p.kv_type = f[KV_TYPE];
    p.kv_window = f[KV_WINDOW];
    p.kv_sinks = f[KV_SINKS];
    p.n_batch = f[BATCH];
    p.activations = f[ACTIVATIONS];
    p.backend = f[BACKEND];
    auto js = std::make_unique<JniSession>();
    js->model = from_handle<const pllm_model>(model);
    const pllm_status st = pllm_session_create(from_handle<pllm_model>(model), &p, &js->session);
    if (st != PLLM_OK) {
      throw_last_error(env, st);
      return 0;
    }
    return to_handle(js.release());
  });
}

void JNICALL session_free(JNIEnv*, jclass, jlong h) {
  auto* js = from_handle<JniSession>(h);
  if (!js) return;
  pllm_session_free(js->session);
  delete js;
}

void JNICALL session_reset(JNIEnv*, jclass, jlong h) { pllm_session_reset(from_handle<JniSession>(h)->session); }

jint JNICALL session_n_ctx(JNIEnv*, jclass, jlong h) { return pllm_session_n_ctx(from_handle<JniSession>(h)->session); }

// Cancels generation `id` alone (only_this) or every one up to it; with wait, returns once
// none of them runs.
void JNICALL session_cancel(JNIEnv* env, jclass, jlong h, jlong id, jboolean only_this, jboolean wait) {
  guarded(env, 0, [&] {
    auto* js = from_handle<JniSession>(h);
    std::unique_lock<std::mutex> lock(js->mu);
    if (!only_this) {
      js->cancel_upto.store(std::max(js->cancel_upto.load(), int64_t(id)));
    } else if (js->running && js->current == id) {
      js->current_cancelled.store(true);
    } else if (id > js->current) {  // not started yet (an id <= current has ended)
      js->cancelled_ids.push_back(id);
    }
    const auto targeted = [&] { return only_this ? js->current == id : js->current <= id; };
    while (js->running && targeted()) {
      pllm_session_cancel(js->session);
      if (!wait) break;
      js->ended.wait_for(lock, std::chrono::milliseconds(1));
    }
    return 0;
  });
}

struct CallbackState {
  JNIEnv* env;
  jobject sink;
  JniSession* js;
  int64_t id;
  bool java_threw = false;
};

int on_token(pllm_token token, const char* text, size_t text_len, void* user) noexcept {
  auto* cb = static_cast<CallbackState*>(user);
  JNIEnv* env = cb->env;
  // Every token, with its text or none (the C API hands over complete UTF-8 only: a token that
  // ends mid-character, or a control token, has none; the tool-call parser needs its id).
  jbyteArray piece = to_bytes(env, text ? text : "", text_len);
  if (piece) {
    env->CallVoidMethod(cb->sink, cache().token_sink_piece, jint(token), piece);
    env->DeleteLocalRef(piece);  // a long generation would fill the local reference table
  }
  if (env->ExceptionCheck()) {
    cb->java_threw = true;
    return 1;
  }
  return cb->js->stop_requested(cb->id) ? 1 : 0;
}

bool sampling_from(JNIEnv* env, const pllm_model* model, jdoubleArray fields, pllm_sampling_params& sp) {
  std::vector<double> f(N_SAMPLING_FIELDS);
  if (!fields || env->GetArrayLength(fields) != N_SAMPLING_FIELDS) {
    throw_invalid(env, "sampling options: wrong field count");
    return false;
  }
  env->GetDoubleArrayRegion(fields, 0, N_SAMPLING_FIELDS, f.data());
  sp = pllm_model_sampling_params(model);
  sp.max_tokens = int32_t(f[MAX_TOKENS]);
  if (!std::isnan(f[TEMPERATURE])) sp.temperature = float(f[TEMPERATURE]);
  if (!std::isnan(f[TOP_K])) sp.top_k = int32_t(f[TOP_K]);
  if (!std::isnan(f[TOP_P])) sp.top_p = float(f[TOP_P]);
  if (!std::isnan(f[MIN_P])) sp.min_p = float(f[MIN_P]);
  if (!std::isnan(f[REPEAT_PENALTY])) sp.repeat_penalty = float(f[REPEAT_PENALTY]);
  return true;
}

jdoubleArray stats_to_java(JNIEnv* env, const pllm_generation_stats& st) {
  const jdouble out[N_STATS] = {double(st.n_prompt_tokens), double(st.n_reused_tokens), double(st.n_cached_tokens),
                                double(st.n_generated),     st.ttft_ms,                 st.prefill_tps,
                                st.decode_tps,              double(st.stop_reason)};
  jdoubleArray a = env->NewDoubleArray(N_STATS);
  if (a) env->SetDoubleArrayRegion(a, 0, N_STATS, out);
  return a;
}

jdoubleArray JNICALL generate(JNIEnv* env, jclass, jlong h, jlong id, jintArray prompt, jdoubleArray sampling,
                              jlong seed, jboolean has_seed, jobjectArray stops, jlong grammar, jobject sink) {
  return guarded(env, jdoubleArray(nullptr), [&]() -> jdoubleArray {
    auto* js = from_handle<JniSession>(h);
    std::vector<int32_t> ids;
    if (!from_ints(env, prompt, ids)) return nullptr;
    pllm_sampling_params sp;
    if (!sampling_from(env, js->model, sampling, sp)) return nullptr;
    if (has_seed) sp.seed = uint64_t(seed);
    sp.grammar = from_handle<const pllm_grammar>(grammar);  // 0: free text
    std::vector<std::string> stop_texts(stops ? size_t(env->GetArrayLength(stops)) : 0);
    for (size_t i = 0; i < stop_texts.size(); ++i) {
      auto s = static_cast<jbyteArray>(env->GetObjectArrayElement(stops, jsize(i)));
      const bool ok = from_bytes(env, s, stop_texts[i]);
      env->DeleteLocalRef(s);
      if (!ok) return nullptr;
      if (stop_texts[i].find('\0') != std::string::npos) {
        throw_invalid(env, "a stop string contains a NUL character");
        return nullptr;
      }
    }
    std::vector<const char*> stop_ptrs;
    for (const auto& s : stop_texts) stop_ptrs.push_back(s.c_str());
    sp.stop_strings = stop_ptrs.empty() ? nullptr : stop_ptrs.data();
    sp.n_stop_strings = stop_ptrs.size();

    pllm_generation_stats st{};
    {
      std::lock_guard<std::mutex> lock(js->mu);
      if (js->take_cancelled(id)) {  // cancelled before it started
        st.n_prompt_tokens = int32_t(ids.size());
        st.stop_reason = PLLM_STOP_CANCELLED;
        return stats_to_java(env, st);
      }
      js->current_cancelled.store(false);
      js->running = true;
      js->current = id;
    }
    CallbackState cb{env, sink, js, id};
    const pllm_status status = pllm_generate(js->session, ids.data(), ids.size(), &sp, on_token, &cb, &st);
    {
      std::lock_guard<std::mutex> lock(js->mu);
      js->running = false;
    }
    js->ended.notify_all();
    if (cb.java_threw) return nullptr;  // the sink's exception is the one Java sees
    if (status != PLLM_OK) {
      throw_last_error(env, status);
      return nullptr;
    }
    // The binding stops a generation through the callback only to cancel it.
    if (st.stop_reason == PLLM_STOP_CALLBACK) st.stop_reason = PLLM_STOP_CANCELLED;
    return stats_to_java(env, st);
  });
}

const JNINativeMethod k_methods[] = {  // signatures: org.pocketllm.Native
    native_method("sessionCreate", "(J[I)J", reinterpret_cast<void*>(session_create)),
    native_method("sessionFree", "(J)V", reinterpret_cast<void*>(session_free)),
    native_method("sessionReset", "(J)V", reinterpret_cast<void*>(session_reset)),
    native_method("sessionNCtx", "(J)I", reinterpret_cast<void*>(session_n_ctx)),
    native_method("sessionCancel", "(JJZZ)V", reinterpret_cast<void*>(session_cancel)),
    native_method("generate", "(JJ[I[DJZ[[BJLorg/pocketllm/TokenSink;)[D", reinterpret_cast<void*>(generate)),
};

}  // namespace

bool register_session_natives(JNIEnv* env, jclass native_class) {
  return env->RegisterNatives(native_class, k_methods, sizeof(k_methods) / sizeof(k_methods[0])) == JNI_OK;
}

}  // namespace pllm_jni
