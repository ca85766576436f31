#include "jni_support.h"

#include <cstring>

namespace pllm_jni {
namespace {
Cache g_cache;

jclass global_class(JNIEnv* env, const char* name) {
  jclass local = env->FindClass(name);
  if (!local) return nullptr;
  auto global = static_cast<jclass>(env->NewGlobalRef(local));
  env->DeleteLocalRef(local);
  return global;
}
}  // namespace

const Cache& cache() { return g_cache; }

bool init_cache(JNIEnv* env) {
  Cache c;
  c.exception_class = global_class(env, "org/pocketllm/PocketLLMException");
  if (!c.exception_class) return false;
  c.exception_of = env->GetStaticMethodID(c.exception_class, "of", "(I[B)Lorg/pocketllm/PocketLLMException;");
  if (!c.exception_of) return false;
  c.token_sink_class = global_class(env, "org/pocketllm/TokenSink");
  if (!c.token_sink_class) return false;
  c.token_sink_piece = env->GetMethodID(c.token_sink_class, "onPiece", "(I[B)V");
  if (!c.token_sink_piece) return false;
  g_cache = c;
  return true;
}

void drop_cache(JNIEnv* env) {
  if (g_cache.exception_class) env->DeleteGlobalRef(g_cache.exception_class);
  if (g_cache.token_sink_class) env->DeleteGlobalRef(g_cache.token_sink_class);
  g_cache = Cache{};
}

void throw_status(JNIEnv* env, int status, const std::string& message) {
  if (env->ExceptionCheck()) return;
  jbyteArray msg = to_bytes(env, message.data(), message.size());
  if (!msg) return;  // OutOfMemoryError pending
  auto ex = static_cast<jthrowable>(
      env->CallStaticObjectMethod(g_cache.exception_class, g_cache.exception_of, jint(status), msg));
  env->DeleteLocalRef(msg);
  if (ex && !env->ExceptionCheck()) env->Throw(ex);
  if (ex) env->DeleteLocalRef(ex);
}

void throw_last_error(JNIEnv* env, pllm_status status) {
  const char* msg = pllm_last_error();
  std::string text = msg && *msg ? msg : pllm_status_string(status);
  throw_status(env, status, text);
}

bool from_bytes(JNIEnv* env, jbyteArray array, std::string& out, bool nullable) {
  out.clear();
  if (!array) {
    if (!nullable) throw_invalid(env, "null argument");
    return nullable;
  }
  const jsize n = env->GetArrayLength(array);
  out.resize(size_t(n));
  if (n) env->GetByteArrayRegion(array, 0, n, reinterpret_cast<jbyte*>(out.data()));
  return !env->ExceptionCheck();
}

jbyteArray to_bytes(JNIEnv* env, const char* data, size_t n) {
  if (n > size_t(INT32_MAX)) {
    throw_status(env, PLLM_ERR_OUT_OF_RANGE, "text too long for a Java array");
    return nullptr;
  }
  jbyteArray a = env->NewByteArray(jsize(n));
  if (!a) return nullptr;
  if (n) env->SetByteArrayRegion(a, 0, jsize(n), reinterpret_cast<const jbyte*>(data));
  return a;
}

bool from_ints(JNIEnv* env, jintArray array, std::vector<int32_t>& out) {
  out.clear();
  if (!array) {
    throw_invalid(env, "null token array");
    return false;
  }
  const jsize n = env->GetArrayLength(array);
  out.resize(size_t(n));
  static_assert(sizeof(jint) == sizeof(int32_t));
  if (n) env->GetIntArrayRegion(array, 0, n, reinterpret_cast<jint*>(out.data()));
  return !env->ExceptionCheck();
}

}  // namespace pllm_jni
