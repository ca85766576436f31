// What every native method of the Java binding shares: the classes and method ids cached in
// JNI_OnLoad, C errors turned into Java exceptions, and UTF-8 moved as byte[] (never through
// NewStringUTF / GetStringUTFChars, which speak modified UTF-8 and mangle emoji).
#pragma once

#include <jni.h>

#include <cstdint>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "pocketllm/pocketllm.h"

namespace pllm_jni {

// Global references made once in JNI_OnLoad (jni_onload.cpp).
struct Cache {
  jclass exception_class = nullptr;    // org.pocketllm.PocketLLMException
  jmethodID exception_of = nullptr;    // static PocketLLMException of(int status, byte[] utf8Message)
  jclass token_sink_class = nullptr;   // org.pocketllm.TokenSink
  jmethodID token_sink_piece = nullptr;  // void onPiece(int token, byte[] utf8)
};
const Cache& cache();
bool init_cache(JNIEnv* env);  // false with a Java exception pending
void drop_cache(JNIEnv* env);

// Throws the PocketLLMException subclass of `status` carrying `message` (UTF-8). Does nothing
// if an exception is already pending (the first one wins).
void throw_status(JNIEnv* env, int status, const std::string& message);
// The failed C call's status with pllm_last_error(), read on this thread right after it.
void throw_last_error(JNIEnv* env, pllm_status status);
inline void throw_invalid(JNIEnv* env, const std::string& message) {
  throw_status(env, PLLM_ERR_INVALID_ARGUMENT, message);
}

// byte[] <-> bytes. from_bytes: false (an exception pending) when the array is null and
// `nullable` is false.
bool from_bytes(JNIEnv* env, jbyteArray array, std::string& out, bool nullable = false);
jbyteArray to_bytes(JNIEnv* env, const char* data, size_t n);  // nullptr with OOM pending
bool from_ints(JNIEnv* env, jintArray array, std::vector<int32_t>& out);

// Runs a native method's body so that no C++ exception crosses into the JVM: bad_alloc becomes
// PocketLLMException.OutOfMemory, anything else PocketLLMException.Internal.
template <typename R, typename F>
R guarded(JNIEnv* env, R on_error, F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    throw_status(env, PLLM_ERR_OUT_OF_MEMORY, "out of memory in the JNI binding");
  } catch (const std::exception& e) {
    throw_status(env, PLLM_ERR_INTERNAL, std::string("internal error in the JNI binding: ") + e.what());
  } catch (...) {
    throw_status(env, PLLM_ERR_INTERNAL, "internal error in the JNI binding");
  }
  return on_error;
}

// Handles travel to Java as jlong.
template <typename T>
T* from_handle(jlong h) {
  return reinterpret_cast<T*>(static_cast<intptr_t>(h));
}
template <typename T>
jlong to_handle(T* p) {
  return static_cast<jlong>(reinterpret_cast<intptr_t>(p));
}

inline JNINativeMethod native_method(const char* name, const char* signature, void* fn) {
  return JNINativeMethod{const_cast<char*>(name), const_cast<char*>(signature), fn};
}

// Each file's native methods, registered on org.pocketllm.Native by JNI_OnLoad.
bool register_model_natives(JNIEnv* env, jclass native_class);
bool register_session_natives(JNIEnv* env, jclass native_class);
bool register_structured_natives(JNIEnv* env, jclass native_class);

}  // namespace pllm_jni
