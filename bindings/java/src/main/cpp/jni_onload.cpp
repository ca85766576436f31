// The library's only exported symbols: JNI_OnLoad caches the classes and method ids the native
// code calls back through and registers org.pocketllm.Native's methods (RegisterNatives, so no
// Java_* symbol is exported and the engine's own symbols stay hidden).
#include "jni_support.h"

extern "C" JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM* vm, void*) {
  JNIEnv* env = nullptr;
  if (vm->GetEnv(reinterpret_cast<void**>(&env), JNI_VERSION_1_6) != JNI_OK) return JNI_ERR;
  if (!pllm_jni::init_cache(env)) return JNI_ERR;
  jclass native_class = env->FindClass("org/pocketllm/Native");
  if (!native_class) return JNI_ERR;
  const bool ok = pllm_jni::register_model_natives(env, native_class) &&
                  pllm_jni::register_session_natives(env, native_class) &&
                  pllm_jni::register_structured_natives(env, native_class);
  env->DeleteLocalRef(native_class);
  return ok ? JNI_VERSION_1_6 : JNI_ERR;
}

extern "C" JNIEXPORT void JNICALL JNI_OnUnload(JavaVM* vm, void*) {
  JNIEnv* env = nullptr;
  if (vm->GetEnv(reinterpret_cast<void**>(&env), JNI_VERSION_1_6) == JNI_OK) pllm_jni::drop_cache(env);
}
