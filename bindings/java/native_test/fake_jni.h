// A stand-in JavaVM / JNIEnv with just the functions libpocketllm_jni calls: objects are plain
// C++ structs, RegisterNatives records the methods so a test can call them, the exception
// factory and the token sink (the two Java methods the library calls back) are recorded. Every
// other JNI function aborts with its slot number, so a call the library starts making shows up.
#pragma once

#include <jni.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace fake_jni {

struct Obj {
  std::string class_name;  // for classes
  std::vector<uint8_t> bytes;
  std::vector<int32_t> ints;
  std::vector<double> doubles;
  std::vector<Obj*> elements;
  int status = 0;  // an exception's
  std::string message;
};

struct Exception {
  int status = 0;  // 0: none was pending
  std::string message;
};

class Jvm {
 public:
  Jvm() {
    self_ = this;
    static_assert(sizeof(JNINativeInterface_) % sizeof(void*) == 0);
    void** slots = reinterpret_cast<void**>(&fns_);
    for (size_t i = 0; i < sizeof(fns_) / sizeof(void*); ++i) slots[i] = reinterpret_cast<void*>(&unimplemented);
    fns_.FindClass = [](JNIEnv*, const char* name) -> jclass { return reinterpret_cast<jclass>(self_->make([&](Obj& o) { o.class_name = name; })); };
    fns_.NewGlobalRef = [](JNIEnv*, jobject o) { return o; };
    fns_.DeleteGlobalRef = [](JNIEnv*, jobject) {};
    fns_.DeleteLocalRef = [](JNIEnv*, jobject) {};
    fns_.GetStaticMethodID = [](JNIEnv*, jclass, const char* name, const char*) { return method(name); };
    fns_.GetMethodID = [](JNIEnv*, jclass, const char* name, const char*) { return method(name); };
    fns_.RegisterNatives = [](JNIEnv*, jclass, const JNINativeMethod* m, jint n) -> jint {
      for (jint i = 0; i < n; ++i) self_->natives_[m[i].name] = m[i].fnPtr;
      return JNI_OK;
    };
    fns_.ExceptionCheck = [](JNIEnv*) -> jboolean { return self_->pending_ ? JNI_TRUE : JNI_FALSE; };
    fns_.Throw = [](JNIEnv*, jthrowable t) -> jint {
      self_->pending_ = reinterpret_cast<Obj*>(t);
      return 0;
    };
    // jni.h's C++ wrappers forward the variadic calls to the va_list forms.
    fns_.CallStaticObjectMethodV = &call_static_object;
    fns_.CallVoidMethodV = &call_void;
    fns_.GetArrayLength = [](JNIEnv*, jarray a) -> jsize {
      const Obj* o = reinterpret_cast<Obj*>(a);
      return jsize(o->bytes.size() + o->ints.size() + o->doubles.size() + o->elements.size());
    };
    fns_.NewByteArray = [](JNIEnv*, jsize n) { return reinterpret_cast<jbyteArray>(self_->make([&](Obj& o) { o.bytes.resize(size_t(n)); })); };
    fns_.GetByteArrayRegion = [](JNIEnv*, jbyteArray a, jsize start, jsize n, jbyte* out) {
      std::memcpy(out, reinterpret_cast<Obj*>(a)->bytes.data() + start, size_t(n));
    };
    fns_.SetByteArrayRegion = [](JNIEnv*, jbyteArray a, jsize start, jsize n, const jbyte* in) {
      std::memcpy(reinterpret_cast<Obj*>(a)->bytes.data() + start, in, size_t(n));
    };
    fns_.NewIntArray = [](JNIEnv*, jsize n) { return reinterpret_cast<jintArray>(self_->make([&](Obj& o) { o.ints.resize(size_t(n)); })); };
    fns_.GetIntArrayRegion = [](JNIEnv*, jintArray a, jsize start, jsize n, jint* out) {
      std::memcpy(out, reinterpret_cast<Obj*>(a)->ints.data() + start, size_t(n) * sizeof(jint));
    };
    fns_.SetIntArrayRegion = [](JNIEnv*, jintArray a, jsize start, jsize n, const jint* in) {
      std::memcpy(reinterpret_cast<Obj*>(a)->ints.data() + start, in, size_t(n) * sizeof(jint));
    };
    fns_.NewDoubleArray = [](JNIEnv*, jsize n) {
      return reinterpret_cast<jdoubleArray>(self_->make([&](Obj& o) { o.doubles.resize(size_t(n)); }));
    };
    fns_.GetDoubleArrayRegion = [](JNIEnv*, jdoubleArray a, jsize start, jsize n, jdouble* out) {
      std::memcpy(out, reinterpret_cast<Obj*>(a)->doubles.data() + start, size_t(n) * sizeof(jdouble));
    };
    fns_.SetDoubleArrayRegion = [](JNIEnv*, jdoubleArray a, jsize start, jsize n, const jdouble* in) {
      std::memcpy(reinterpret_cast<Obj*>(a)->doubles.data() + start, in, size_t(n) * sizeof(jdouble));
    };
    fns_.GetObjectArrayElement = [](JNIEnv*, jobjectArray a, jsize i) {
      return reinterpret_cast<jobject>(reinterpret_cast<Obj*>(a)->elements.at(size_t(i)));
    };
    env_.functions = &fns_;
    invoke_.GetEnv = [](JavaVM*, void** env, jint) -> jint {
      *env = &self_->env_;
      return JNI_OK;
    };
    vm_.functions = &invoke_;
  }

  JavaVM* vm() { return &vm_; }
  JNIEnv* env() { return &env_; }
  void* native(const std::string& name) const {
    auto it = natives_.find(name);
    return it == natives_.end() ? nullptr : it->second;
  }
  template <typename F>
  F native_as(const std::string& name) const {
    void* p = native(name);
    if (!p) {
      std::printf("FAILED: no native %s registered\n", name.c_str());
      std::exit(1);
    }
    return reinterpret_cast<F>(p);
  }

  bool pending() const { return pending_ != nullptr; }
  Exception take_exception() {
    Exception e;
    if (pending_) e = {pending_->status, pending_->message};
    pending_ = nullptr;
    return e;
  }

  jbyteArray bytes(const std::string& s) {
    return reinterpret_cast<jbyteArray>(make([&](Obj& o) { o.bytes.assign(s.begin(), s.end()); }));
  }
  jintArray ints(std::vector<int32_t> v) { return reinterpret_cast<jintArray>(make([&](Obj& o) { o.ints = std::move(v); })); }
  jdoubleArray doubles(std::vector<double> v) { return reinterpret_cast<jdoubleArray>(make([&](Obj& o) { o.doubles = std::move(v); })); }
  jobjectArray array(std::vector<Obj*> v) { return reinterpret_cast<jobjectArray>(make([&](Obj& o) { o.elements = std::move(v); })); }
  jobject sink() { return reinterpret_cast<jobject>(make([](Obj&) {})); }
  static std::vector<uint8_t> bytes_of(jbyteArray a) { return a ? reinterpret_cast<Obj*>(a)->bytes : std::vector<uint8_t>{}; }
  static std::vector<double> doubles_of(jdoubleArray a) { return a ? reinterpret_cast<Obj*>(a)->doubles : std::vector<double>{}; }

  std::function<void(int32_t, std::vector<uint8_t>)> on_piece;

 private:
  template <typename Init>
  Obj* make(Init&& init) {  // from any thread (the checks call natives from two)
    auto o = std::make_unique<Obj>();
    init(*o);
    std::lock_guard<std::mutex> lock(mu_);
    objects_.push_back(std::move(o));
    return objects_.back().get();
  }
  static jmethodID method(const char* name) {
    static std::mutex mu;
    static std::map<std::string, std::unique_ptr<char>> ids;
    std::lock_guard<std::mutex> lock(mu);
    auto& p = ids[name];
    if (!p) p = std::make_unique<char>();
    return reinterpret_cast<jmethodID>(p.get());
  }
  // The exception factory PocketLLMException.of(int status, byte[] message).
  static jobject JNICALL call_static_object(JNIEnv*, jclass, jmethodID id, va_list ap) {
    if (id != method("of")) unimplemented();
    const jint status = va_arg(ap, jint);
    Obj* msg = reinterpret_cast<Obj*>(va_arg(ap, jbyteArray));
    return reinterpret_cast<jobject>(self_->make([&](Obj& o) {
      o.status = status;
      o.message.assign(msg->bytes.begin(), msg->bytes.end());
    }));
  }
  // TokenSink.onPiece(int token, byte[] utf8).
  static void JNICALL call_void(JNIEnv*, jobject, jmethodID id, va_list ap) {
    if (id != method("onPiece")) unimplemented();
    const jint token = va_arg(ap, jint);
    Obj* piece = reinterpret_cast<Obj*>(va_arg(ap, jbyteArray));
    if (self_->on_piece) self_->on_piece(token, piece->bytes);
  }
  [[noreturn]] static void unimplemented() {
    std::printf("FAILED: the library called a JNI function the stand-in does not have\n");
    std::abort();
  }

  static inline Jvm* self_ = nullptr;
  JNINativeInterface_ fns_{};
  JNIInvokeInterface_ invoke_{};
  JNIEnv env_{};
  JavaVM vm_{};
  std::map<std::string, void*> natives_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Obj>> objects_;
  Obj* pending_ = nullptr;
};

}  // namespace fake_jni
