// org.pocketllm.Native's model, tokenizer and chat-template methods: each one C call (or two
// when a buffer was too small), its error thrown as the matching PocketLLMException.
#include <cstring>

#include "jni_support.h"

namespace pllm_jni {
namespace {

// A C string argument: NUL inside would silently cut it short in C.
bool c_text(JNIEnv* env, jbyteArray array, std::string& out, const char* what, bool nullable = false) {
  if (!from_bytes(env, array, out, nullable)) return false;
  if (out.find('\0') != std::string::npos) {
    throw_invalid(env, std::string(what) + " contains a NUL character");
    return false;
  }
  return true;
}

jbyteArray static_text(JNIEnv* env, const char* s) { return to_bytes(env, s, s ? std::strlen(s) : 0); }

jbyteArray JNICALL version(JNIEnv* env, jclass) { return static_text(env, pllm_version()); }
jbyteArray JNICALL isa(JNIEnv* env, jclass) { return static_text(env, pllm_isa()); }
jint JNICALL default_threads(JNIEnv*, jclass) { return pllm_default_threads(); }

jlong JNICALL model_load(JNIEnv* env, jclass, jbyteArray path, jint vocab_only, jint repack, jint chat_template) {
  return guarded(env, jlong(0), [&]() -> jlong {
    std::string p;
    if (!c_text(env, path, p, "the model path")) return 0;
    pllm_model_params mp = pllm_model_default_params();
    mp.vocab_only = vocab_only;
    mp.repack_weights = repack;
    mp.chat_template = chat_template;
    pllm_model* m = nullptr;
    const pllm_status st = pllm_model_load(p.c_str(), &mp, &m);
    if (st != PLLM_OK) {
      throw_last_error(env, st);
      return 0;
    }
    return to_handle(m);
  });
}

void JNICALL model_free(JNIEnv*, jclass, jlong h) { pllm_model_free(from_handle<pllm_model>(h)); }

jintArray JNICALL model_info(JNIEnv* env, jclass, jlong h) {
  const auto* m = from_handle<const pllm_model>(h);
  const jint info[5] = {pllm_model_n_vocab(m), pllm_model_n_ctx_train(m), pllm_model_bos(m), pllm_model_eos(m),
                        pllm_model_add_bos(m)};
  jintArray out = env->NewIntArray(5);
  if (out) env->SetIntArrayRegion(out, 0, 5, info);
  return out;
}

jboolean JNICALL model_is_eog(JNIEnv*, jclass, jlong h, jint token) {
  return pllm_model_is_eog(from_handle<const pllm_model>(h), token) ? JNI_TRUE : JNI_FALSE;
}

jint JNICALL activations_parse(JNIEnv* env, jclass, jbyteArray word) {
  return guarded(env, jint(-1), [&]() -> jint {
    std::string w;
    if (!c_text(env, word, w, "the activations word")) return -1;
    int32_t out = 0;
    const pllm_status st = pllm_activations_parse(w.c_str(), &out);
    if (st != PLLM_OK) {
      throw_last_error(env, st);
      return -1;
    }
    return out;
  });
}

jint JNICALL activations_repack(JNIEnv*, jclass, jint activations) { return pllm_activations_repack(activations); }

// Calls fill(out, capacity, &n) with a buffer that grows once to the size the first call asked for.
template <typename T, typename Fill>
bool grow_call(JNIEnv* env, size_t first_capacity, std::vector<T>& out, Fill&& fill) {
  out.resize(first_capacity);
  for (int attempt = 0; attempt < 2; ++attempt) {
    size_t n = 0;
    const pllm_status st = fill(out.data(), out.size(), &n);
    if (st == PLLM_ERR_OUT_OF_RANGE && n > out.size()) {
      out.resize(n);
      continue;
    }
    if (st != PLLM_OK) {
      throw_last_error(env, st);
      return false;
    }
    out.resize(n);
    return true;
  }
  throw_status(env, PLLM_ERR_INTERNAL, "the buffer the engine asked for was still too small");
  return false;
}

jintArray ints_to_java(JNIEnv* env, const std::vector<int32_t>& ids) {
  jintArray out = env->NewIntArray(jsize(ids.size()));
  if (out && !ids.empty()) env->SetIntArrayRegion(out, 0, jsize(ids.size()), reinterpret_cast<const jint*>(ids.data()));
  return out;
}

jintArray JNICALL tokenize(JNIEnv* env, jclass, jlong h, jbyteArray text, jboolean add_special,
                           jboolean parse_special) {
  return guarded(env, jintArray(nullptr), [&]() -> jintArray {
    std::string t;
    if (!from_bytes(env, text, t)) return nullptr;
    std::vector<int32_t> ids;
    // A token covers at least one byte, plus a few specials: one call nearly always suffices.
    if (!grow_call(env, t.size() + 8, ids, [&](int32_t* out, size_t cap, size_t* n) {
          return pllm_tokenize(from_handle<const pllm_model>(h), t.data(), t.size(), add_special, parse_special,
                               out, cap, n);
        }))
      return nullptr;
    return ints_to_java(env, ids);
  });
}

jintArray JNICALL tokenize_prompt(JNIEnv* env, jclass, jlong h, jbyteArray text) {
  return guarded(env, jintArray(nullptr), [&]() -> jintArray {
    std::string t;
    if (!from_bytes(env, text, t)) return nullptr;
    std::vector<int32_t> ids;
    if (!grow_call(env, t.size() + 8, ids, [&](int32_t* out, size_t cap, size_t* n) {
          return pllm_tokenize_prompt(from_handle<const pllm_model>(h), t.data(), t.size(), out, cap, n);
        }))
      return nullptr;
    return ints_to_java(env, ids);
  });
}

jbyteArray JNICALL detokenize(JNIEnv* env, jclass, jlong h, jintArray tokens, jboolean render_special) {
  return guarded(env, jbyteArray(nullptr), [&]() -> jbyteArray {
    std::vector<int32_t> ids;
    if (!from_ints(env, tokens, ids)) return nullptr;
    std::vector<char> text;
    if (!grow_call(env, 16 * ids.size() + 64, text, [&](char* out, size_t cap, size_t* n) {
          return pllm_detokenize(from_handle<const pllm_model>(h), ids.data(), ids.size(), render_special, out, cap,
                                 n);
        }))
      return nullptr;
    return to_bytes(env, text.data(), text.size());
  });
}

jbyteArray JNICALL apply_template(JNIEnv* env, jclass, jlong h, jobjectArray roles, jobjectArray contents,
                                  jboolean add_generation_prompt, jbyteArray variables_json) {
  return guarded(env, jbyteArray(nullptr), [&]() -> jbyteArray {
    if (!roles || !contents || env->GetArrayLength(roles) != env->GetArrayLength(contents)) {
      throw_invalid(env, "roles and contents must be arrays of one length");
      return nullptr;
    }
    const jsize n = env->GetArrayLength(roles);
    std::vector<std::string> texts(size_t(n) * 2);
    for (jsize i = 0; i < n; ++i) {
      auto role = static_cast<jbyteArray>(env->GetObjectArrayElement(roles, i));
      auto content = static_cast<jbyteArray>(env->GetObjectArrayElement(contents, i));
      const bool ok = c_text(env, role, texts[size_t(2 * i)], "a message's role") &&
                      c_text(env, content, texts[size_t(2 * i + 1)], "a message's content");
      env->DeleteLocalRef(role);
      env->DeleteLocalRef(content);
      if (!ok) return nullptr;
    }
    std::vector<pllm_chat_message> msgs(static_cast<size_t>(n));
    for (size_t i = 0; i < msgs.size(); ++i) msgs[i] = {texts[2 * i].c_str(), texts[2 * i + 1].c_str()};
    std::string vars;
    if (!c_text(env, variables_json, vars, "the template variables", /*nullable=*/true)) return nullptr;
    char* out = nullptr;
    const pllm_status st =
        pllm_chat_apply_template_vars(from_handle<const pllm_model>(h), msgs.data(), msgs.size(),
                                      add_generation_prompt, variables_json ? vars.c_str() : nullptr, &out);
    if (st != PLLM_OK) {
      throw_last_error(env, st);
      return nullptr;
    }
    jbyteArray result = to_bytes(env, out, std::strlen(out));
    pllm_string_free(out);
    return result;
  });
}

const JNINativeMethod k_methods[] = {  // signatures: org.pocketllm.Native
    native_method("version", "()[B", reinterpret_cast<void*>(version)),
    native_method("isa", "()[B", reinterpret_cast<void*>(isa)),
    native_method("defaultThreads", "()I", reinterpret_cast<void*>(default_threads)),
    native_method("modelLoad", "([BIII)J", reinterpret_cast<void*>(model_load)),
    native_method("modelFree", "(J)V", reinterpret_cast<void*>(model_free)),
    native_method("modelInfo", "(J)[I", reinterpret_cast<void*>(model_info)),
    native_method("modelIsEog", "(JI)Z", reinterpret_cast<void*>(model_is_eog)),
    native_method("activationsParse", "([B)I", reinterpret_cast<void*>(activations_parse)),
    native_method("activationsRepack", "(I)I", reinterpret_cast<void*>(activations_repack)),
    native_method("tokenize", "(J[BZZ)[I", reinterpret_cast<void*>(tokenize)),
    native_method("tokenizePrompt", "(J[B)[I", reinterpret_cast<void*>(tokenize_prompt)),
    native_method("detokenize", "(J[IZ)[B", reinterpret_cast<void*>(detokenize)),
    native_method("applyTemplate", "(J[[B[[BZ[B)[B", reinterpret_cast<void*>(apply_template)),
};

}  // namespace

bool register_model_natives(JNIEnv* env, jclass native_class) {
  return env->RegisterNatives(native_class, k_methods, sizeof(k_methods) / sizeof(k_methods[0])) == JNI_OK;
}

}  // namespace pllm_jni
