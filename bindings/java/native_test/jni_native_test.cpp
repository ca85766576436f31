// C-level checks of libpocketllm_jni.so, without a JVM (so they also run cross-built under
// qemu-user, where there is no aarch64 JVM):
//   --shape LIB [--sanitized]  the ELF file: it needs only the C library (no libstdc++,
//                              libgcc_s, OpenMP or PCRE2: they are linked in), exports only
//                              JNI_OnLoad / JNI_OnUnload, and its segments are 16 KiB aligned
//   --load LIB MODEL           dlopen it, call JNI_OnLoad with a stand-in JavaVM (fake_jni.h) and
//                              drive the registered natives: errors become exceptions carrying
//                              the engine's message, UTF-8 round trips, a generation streams
//                              pieces that are each valid UTF-8, cancel stops it
// Prints one line per check and exits non-zero on the first failure.
#include <dlfcn.h>
#include <elf.h>

#include <atomic>
#include <thread>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "fake_jni.h"

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::printf("FAILED: %s\n", what.c_str());
  std::exit(1);
}
void check(bool ok, const std::string& what) {
  if (!ok) fail(what);
  std::printf("ok: %s\n", what.c_str());
}

// ---- --shape ----------------------------------------------------------------------------

std::vector<char> read_file(const char* path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(std::string("cannot read ") + path);
  return std::vector<char>(std::istreambuf_iterator<char>(f), {});
}

template <typename T>
const T* at(const std::vector<char>& f, size_t off, size_t n = 1) {
  if (off > f.size() || n > (f.size() - off) / sizeof(T)) fail("ELF: offset out of the file");
  return reinterpret_cast<const T*>(f.data() + off);
}

int check_shape(const char* path, bool sanitized) {
  const auto f = read_file(path);
  const auto* eh = at<Elf64_Ehdr>(f, 0);
  check(std::memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64, "64-bit ELF file");
  const auto* ph = at<Elf64_Phdr>(f, eh->e_phoff, eh->e_phnum);
  bool aligned = true;
  int loads = 0;
  for (int i = 0; i < eh->e_phnum; ++i)
    if (ph[i].p_type == PT_LOAD) {
      ++loads;
      aligned = aligned && ph[i].p_align >= 16384 && ph[i].p_vaddr % 16384 == ph[i].p_offset % 16384;
    }
  check(loads > 0 && aligned, "every LOAD segment aligned to 16 KiB (Android's 16 KiB pages)");

  const auto* sh = at<Elf64_Shdr>(f, eh->e_shoff, eh->e_shnum);
  std::vector<std::string> needed;
  std::set<std::string> exported;
  for (int i = 0; i < eh->e_shnum; ++i) {
    const Elf64_Shdr& s = sh[i];
    if (s.sh_type == SHT_DYNAMIC) {
      const char* strtab = at<char>(f, sh[s.sh_link].sh_offset, sh[s.sh_link].sh_size);
      const auto* d = at<Elf64_Dyn>(f, s.sh_offset, s.sh_size / sizeof(Elf64_Dyn));
      for (size_t k = 0; k < s.sh_size / sizeof(Elf64_Dyn) && d[k].d_tag != DT_NULL; ++k)
        if (d[k].d_tag == DT_NEEDED) needed.emplace_back(strtab + d[k].d_un.d_val);
    } else if (s.sh_type == SHT_DYNSYM) {
      const char* strtab = at<char>(f, sh[s.sh_link].sh_offset, sh[s.sh_link].sh_size);
      const auto* sym = at<Elf64_Sym>(f, s.sh_offset, s.sh_size / sizeof(Elf64_Sym));
      for (size_t k = 0; k < s.sh_size / sizeof(Elf64_Sym); ++k)
        if (sym[k].st_shndx != SHN_UNDEF && ELF64_ST_BIND(sym[k].st_info) != STB_LOCAL && sym[k].st_name)
          exported.insert(strtab + sym[k].st_name);
    }
  }
  const char* allowed[] = {"libc.so", "libm.so", "libdl.so", "ld-linux", "libpthread.so", "librt.so",
                           "ld-android", "liblog.so"};
  for (const auto& n : needed) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || n.rfind(a, 0) == 0;
    if (sanitized) ok = ok || n.rfind("libasan.so", 0) == 0 || n.rfind("libubsan.so", 0) == 0;
    check(ok, "needs " + n + " (the C library only: the C++ runtime, PCRE2 and the engine are linked in)");
  }
  std::string names;
  for (const auto& e : exported) names += e + " ";
  check(exported == std::set<std::string>{"JNI_OnLoad", "JNI_OnUnload"}, "exports only JNI_OnLoad and JNI_OnUnload: " + names);
  std::printf("jni_native_test --shape: all checks passed (%zu libraries needed)\n", needed.size());
  return 0;
}

// ---- --load -----------------------------------------------------------------------------

bool valid_utf8(const std::vector<uint8_t>& b) {
  size_t i = 0;
  while (i < b.size()) {
    const uint8_t c = b[i];
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > b.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((b[i + k] & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

int check_load(const char* lib, const char* model_path) {
  void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) fail(std::string("dlopen: ") + dlerror());
  check(true, "dlopen with RTLD_NOW: every symbol resolved");
  auto on_load = reinterpret_cast<jint (*)(JavaVM*, void*)>(dlsym(h, "JNI_OnLoad"));
  check(on_load != nullptr, "JNI_OnLoad found");
  check(dlsym(h, "pllm_model_load") == nullptr, "the engine's symbols are hidden");
  fake_jni::Jvm jvm;
  check(on_load(jvm.vm(), nullptr) == JNI_VERSION_1_6, "JNI_OnLoad returns JNI_VERSION_1_6");
  const char* natives[] = {"version", "modelLoad", "modelFree", "tokenize", "detokenize", "applyTemplate",
                           "sessionCreate", "sessionFree", "sessionCancel", "generate"};
  for (const char* n : natives) check(jvm.native(n) != nullptr, std::string("registered ") + n);
  JNIEnv* env = jvm.env();

  // Errors: a Java exception with the C status and pllm_last_error()'s message.
  auto model_load = jvm.native_as<jlong (*)(JNIEnv*, jclass, jbyteArray, jint, jint, jint)>("modelLoad");
  const jlong none = model_load(env, nullptr, jvm.bytes("/nonexistent/model.gguf"), 0, 0, 0);
  auto ex = jvm.take_exception();
  check(none == 0 && ex.status == 2 && ex.message.find("/nonexistent/model.gguf") != std::string::npos,
        "a bad path throws status 2 (Io) with the engine's message: " + ex.message);
  model_load(env, nullptr, nullptr, 0, 0, 0);
  check(jvm.take_exception().status == 1, "a null path throws status 1 (InvalidArgument)");

  const jlong m = model_load(env, nullptr, jvm.bytes(model_path), 0, 0, 0);
  check(m != 0 && !jvm.pending(), "model loads");

  // UTF-8 both ways as bytes: emoji and CJK survive a tokenize / detokenize round trip.
  const std::string text = "h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\x98\x80";  // "héllo 世界 😀"
  auto tokenize = jvm.native_as<jintArray (*)(JNIEnv*, jclass, jlong, jbyteArray, jboolean, jboolean)>("tokenize");
  auto detokenize = jvm.native_as<jbyteArray (*)(JNIEnv*, jclass, jlong, jintArray, jboolean)>("detokenize");
  jintArray ids = tokenize(env, nullptr, m, jvm.bytes(text), JNI_FALSE, JNI_FALSE);
  const auto back = jvm.bytes_of(detokenize(env, nullptr, m, ids, JNI_FALSE));
  check(std::string(back.begin(), back.end()) == text, "tokenize / detokenize round trip of emoji and CJK");

  // A generation: random sampling over the byte-level vocabulary; every piece valid UTF-8.
  auto session_create = jvm.native_as<jlong (*)(JNIEnv*, jclass, jlong, jintArray)>("sessionCreate");
  const jlong s = session_create(env, nullptr, m, jvm.ints({0, 1, 0, 0, 4, 0, 0, 0}));
  check(s != 0 && !jvm.pending(), "session created");
  auto generate = jvm.native_as<jdoubleArray (*)(JNIEnv*, jclass, jlong, jlong, jintArray, jdoubleArray, jlong,
                                                 jboolean, jobjectArray, jlong, jobject)>("generate");
  std::vector<std::vector<uint8_t>> pieces;
  jvm.on_piece = [&](int32_t, std::vector<uint8_t> piece) { pieces.push_back(std::move(piece)); };
  jintArray prompt = tokenize(env, nullptr, m, jvm.bytes("hello"), JNI_TRUE, JNI_FALSE);
  const double nan = __builtin_nan("");
  jdoubleArray stats = generate(env, nullptr, s, 1, prompt, jvm.doubles({40, 1.0, 0, 1.0, 0, nan}), 5, JNI_TRUE,
                                jvm.array({}), 0, jvm.sink());
  const auto st = jvm.doubles_of(stats);
  check(!jvm.pending() && st.size() == 8 && st[3] > 0 && st[3] <= 40, "a generation of up to 40 tokens");
  bool all_valid = !pieces.empty();
  for (const auto& p : pieces) all_valid = all_valid && valid_utf8(p);
  check(all_valid, "every streamed piece (" + std::to_string(pieces.size()) + ") is valid UTF-8");

  // Cancel: a generation cancelled before it starts does not run; the session's cancel-all
  // stops one from inside its callback.
  auto cancel = jvm.native_as<void (*)(JNIEnv*, jclass, jlong, jlong, jboolean, jboolean)>("sessionCancel");
  cancel(env, nullptr, s, 2, JNI_TRUE, JNI_TRUE);
  const auto skipped = jvm.doubles_of(generate(env, nullptr, s, 2, prompt, jvm.doubles({40, 1.0, 0, 1.0, 0, nan}),
                                               5, JNI_TRUE, jvm.array({}), 0, jvm.sink()));
  check(skipped[3] == 0 && skipped[7] == 4, "a generation cancelled before it started ends cancelled, no token");
  int seen = 0;
  jvm.on_piece = [&](int32_t, std::vector<uint8_t>) {
    if (++seen == 3) cancel(env, nullptr, s, 3, JNI_FALSE, JNI_FALSE);
  };
  const auto stopped = jvm.doubles_of(generate(env, nullptr, s, 3, prompt, jvm.doubles({200, 1.0, 0, 1.0, 0, nan}),
                                               5, JNI_TRUE, jvm.array({}), 0, jvm.sink()));
  check(stopped[7] == 4 && stopped[3] < 10, "cancel from the token callback stops within a step");

  // Cancel from another thread (what Session.cancel does): it returns once the generation has
  // ended, and no piece arrives after that.
  // Skipped with PLLM_JNI_CHECK_NO_THREADS=1: under qemu-user 7.2 the process stalls at its first
  // std::thread (the aarch64 run; not understood yet, see scripts/test_java_arm.sh).
  if (std::getenv("PLLM_JNI_CHECK_NO_THREADS")) {
    std::printf("skipped: cancel from another thread (PLLM_JNI_CHECK_NO_THREADS)\n");
  } else {
    std::atomic<int> pieces_seen{0};
    std::atomic<bool> cancel_returned{false};
    std::atomic<int> after_return{0};
    std::atomic<bool> cancelling{false}, generation_over{false};
    jvm.on_piece = [&](int32_t, std::vector<uint8_t>) {
      if (cancel_returned.load()) after_return.fetch_add(1);
      if (pieces_seen.fetch_add(1) == 2)  // hold the third piece until the other thread is cancelling
        while (!cancelling.load()) std::this_thread::yield();
    };
    std::thread canceller([&] {
      while (pieces_seen.load() < 3 && !generation_over.load()) std::this_thread::yield();
      cancelling.store(true);
      cancel(jvm.env(), nullptr, s, 4, JNI_TRUE, JNI_TRUE);
      cancel_returned.store(true);
    });
    const auto crossed = jvm.doubles_of(generate(env, nullptr, s, 4, prompt, jvm.doubles({100, 1.0, 0, 1.0, 0, nan}),
                                                 9, JNI_TRUE, jvm.array({}), 0, jvm.sink()));
    generation_over.store(true);
    canceller.join();
    check(crossed[7] == 4 && after_return.load() == 0, "cancel from another thread: the generation ended first");
  }

  jvm.native_as<void (*)(JNIEnv*, jclass, jlong)>("sessionFree")(env, nullptr, s);
  jvm.native_as<void (*)(JNIEnv*, jclass, jlong)>("modelFree")(env, nullptr, m);
  std::printf("jni_native_test --load: all checks passed\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);  // the lines before a crash are the clue
  if (argc >= 3 && std::strcmp(argv[1], "--shape") == 0)
    return check_shape(argv[2], argc >= 4 && std::strcmp(argv[3], "--sanitized") == 0);
  if (argc == 4 && std::strcmp(argv[1], "--load") == 0) return check_load(argv[2], argv[3]);
  std::fprintf(stderr, "usage: %s --shape LIB [--sanitized] | --load LIB MODEL\n", argv[0]);
  return 2;
}
