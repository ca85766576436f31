// org.pocketllm.Native's structured-output methods: grammars (pllm_grammar_*), tools
// (pllm_tools_*), conversations as OpenAI's messages JSON, and a reply's calls read back.
// JSON crosses as UTF-8 byte[]; the parsed reply comes back as byte[][] (content, then id,
// name, arguments per call) so the Java side needs no JSON library.
#include <nlohmann/json.hpp>

#include "jni_support.h"

namespace pllm_jni {
namespace {

jlong JNICALL grammar_create(JNIEnv* env, jclass, jlong model, jint kind, jbyteArray text) {
  return guarded(env, jlong(0), [&]() -> jlong {
    std::string t;
    if (!from_bytes(env, text, t, /*nullable=*/true)) return 0;
    pllm_grammar* g = nullptr;
    const pllm_status st = pllm_grammar_create(from_handle<const pllm_model>(model), pllm_grammar_kind(kind),
                                               text ? t.c_str() : nullptr, &g);
    if (st != PLLM_OK) {
      throw_last_error(env, st);
      return 0;
    }
    return to_handle(g);
  });
}

void JNICALL grammar_free(JNIEnv*, jclass, jlong g) { pllm_grammar_free(from_handle<pllm_grammar>(g)); }

jlong JNICALL tools_create(JNIEnv* env, jclass, jlong model, jbyteArray tools, jbyteArray choice, jboolean parallel) {
  return guarded(env, jlong(0), [&]() -> jlong {
    std::string t, c;
    if (!from_bytes(env, tools, t) || !from_bytes(env, choice, c, /*nullable=*/true)) return 0;
    pllm_tools* out = nullptr;
    const pllm_status st = pllm_tools_create(from_handle<const pllm_model>(model), t.c_str(),
                                             choice ? c.c_str() : nullptr, parallel ? 1 : 0, &out);
    if (st != PLLM_OK) {
      throw_last_error(env, st);
      return 0;
    }
    return to_handle(out);
  });
}

void JNICALL tools_free(JNIEnv*, jclass, jlong t) { pllm_tools_free(from_handle<pllm_tools>(t)); }

jlong JNICALL tools_grammar(JNIEnv*, jclass, jlong t) {
  return to_handle(const_cast<pllm_grammar*>(pllm_tools_grammar(from_handle<const pllm_tools>(t))));
}

jbyteArray JNICALL apply_template_json(JNIEnv* env, jclass, jlong model, jbyteArray messages, jlong tools,
                                       jboolean add_generation_prompt, jbyteArray variables) {
  return guarded(env, jbyteArray(nullptr), [&]() -> jbyteArray {
    std::string m, v;
    if (!from_bytes(env, messages, m) || !from_bytes(env, variables, v, /*nullable=*/true)) return nullptr;
    char* text = nullptr;
    const pllm_status st = pllm_chat_apply_template_json(from_handle<const pllm_model>(model), m.c_str(),
                                                         from_handle<const pllm_tools>(tools),
                                                         add_generation_prompt ? 1 : 0, variables ? v.c_str() : nullptr,
                                                         &text);
    if (st != PLLM_OK) {
      throw_last_error(env, st);
      return nullptr;
    }
    const std::string out(text);
    pllm_string_free(text);
    return to_bytes(env, out.data(), out.size());
  });
}

// {content (null when none), id0, name0, arguments0, id1, ...} and the whole JSON last.
jobjectArray JNICALL tools_parse(JNIEnv* env, jclass, jlong tools, jintArray tokens) {
  return guarded(env, jobjectArray(nullptr), [&]() -> jobjectArray {
    std::vector<int32_t> ids;
    if (!from_ints(env, tokens, ids)) return nullptr;
    char* json = nullptr;
    const pllm_status st = pllm_tools_parse(from_handle<const pllm_tools>(tools), ids.data(), ids.size(), &json);
    if (st != PLLM_OK) {
      throw_last_error(env, st);
      return nullptr;
    }
    const std::string text(json);
    pllm_string_free(json);
    const nlohmann::json reply = nlohmann::json::parse(text);
    std::vector<const std::string*> parts;
    std::vector<std::string> owned;
    owned.reserve(1 + 3 * reply["tool_calls"].size() + 1);
    owned.push_back(reply["content"].is_string() ? reply["content"].get<std::string>() : std::string());
    for (const auto& c : reply["tool_calls"]) {
      owned.push_back(c["id"].get<std::string>());
      owned.push_back(c["function"]["name"].get<std::string>());
      owned.push_back(c["function"]["arguments"].get<std::string>());
    }
    owned.push_back(text);
    jclass bytes_class = env->FindClass("[B");
    if (!bytes_class) return nullptr;
    jobjectArray out = env->NewObjectArray(jsize(owned.size()), bytes_class, nullptr);
    env->DeleteLocalRef(bytes_class);
    if (!out) return nullptr;
    for (size_t i = 0; i < owned.size(); ++i) {
      if (i == 0 && !reply["content"].is_string()) continue;  // null content stays null
      jbyteArray b = to_bytes(env, owned[i].data(), owned[i].size());
      if (!b) return nullptr;
      env->SetObjectArrayElement(out, jsize(i), b);
      env->DeleteLocalRef(b);
    }
    return out;
  });
}

}  // namespace

bool register_structured_natives(JNIEnv* env, jclass native_class) {
  const JNINativeMethod methods[] = {
      native_method("grammarCreate", "(JI[B)J", reinterpret_cast<void*>(grammar_create)),
      native_method("grammarFree", "(J)V", reinterpret_cast<void*>(grammar_free)),
      native_method("toolsCreate", "(J[B[BZ)J", reinterpret_cast<void*>(tools_create)),
      native_method("toolsFree", "(J)V", reinterpret_cast<void*>(tools_free)),
      native_method("toolsGrammar", "(J)J", reinterpret_cast<void*>(tools_grammar)),
      native_method("applyTemplateJson", "(J[BJZ[B)[B", reinterpret_cast<void*>(apply_template_json)),
      native_method("toolsParse", "(J[I)[[B", reinterpret_cast<void*>(tools_parse)),
  };
  return env->RegisterNatives(native_class, methods, jint(sizeof methods / sizeof methods[0])) == JNI_OK;
}

}  // namespace pllm_jni
