#!/usr/bin/env bash
# The Java binding's JNI library cross-built for aarch64 Linux (Debian's g++-aarch64-linux-gnu,
# the engine and PCRE2 linked in as for Android) and its C-level checks run under qemu-user:
# the library's shape (needs only libc, exports only JNI_OnLoad / JNI_OnUnload, 16 KiB aligned
# segments) and its natives driven through a stand-in JavaVM on the tiny model
# (bindings/java/native_test). There is no aarch64 JVM here: the JUnit suite runs natively
# (scripts/test_java.sh). Exits 0 with a SKIP message only when the tools cannot be installed.
source "$(dirname "$0")/common.sh"
BUILD="${PLLM_JAVA_ARM_BUILD_DIR:-$ROOT/build-java-arm}"
SYSROOT=/usr/aarch64-linux-gnu   # Debian's libc6-dev-arm64-cross

have_tools() {
  command -v aarch64-linux-gnu-g++ >/dev/null && command -v qemu-aarch64-static >/dev/null &&
    [ -f /usr/lib/aarch64-linux-gnu/libpcre2-8.a ] && command -v javac >/dev/null
}
if ! have_tools && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  log "test_java_arm: installing the cross toolchain, qemu-user-static and PCRE2 for arm64"
  export DEBIAN_FRONTEND=noninteractive
  dpkg --add-architecture arm64  # PCRE2's static library for aarch64 (Debian multiarch)
  apt-get update -qq
  apt-get install -y -qq g++-aarch64-linux-gnu qemu-user-static libpcre2-dev:arm64 openjdk-17-jdk-headless >/dev/null
fi
if ! have_tools; then
  echo "SKIP test_java_arm: aarch64 cross toolchain / qemu-aarch64-static / libpcre2-dev:arm64 unavailable" \
       "(need root + apt-get to install them)"
  exit 0
fi
install_deps
setup_venv
JAVA_HOME="$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")"

# A staging root holding just the host's architecture-independent headers the build needs
# (PCRE2's, nlohmann/json): the cross compiler must not see the host's /usr/include as a whole
# (its C library headers are the x86 ones). PCRE2's arm64 archive is named directly.
STAGE="$BUILD/stage"
mkdir -p "$STAGE/usr/include" "$STAGE/usr/share/cmake"
ln -sfn /usr/include/pcre2.h "$STAGE/usr/include/pcre2.h"
ln -sfn /usr/include/nlohmann "$STAGE/usr/include/nlohmann"
ln -sfn /usr/share/cmake/nlohmann_json "$STAGE/usr/share/cmake/nlohmann_json"
export PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig PKG_CONFIG_SYSROOT_DIR="$STAGE"

log "Java binding: JNI library cross-built for aarch64 in $BUILD"
# shellcheck disable=SC2046
cmake -S "$ROOT" -B "$BUILD" -G Ninja $(cmake_launcher) \
  -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/aarch64-linux-gnu.cmake" -Dnlohmann_json_DIR="$STAGE/usr/share/cmake/nlohmann_json" \
  -DCMAKE_EXE_LINKER_FLAGS=" " -DPLLM_PCRE2_ARCHIVE=/usr/lib/aarch64-linux-gnu/libpcre2-8.a \
  -DCMAKE_BUILD_TYPE=Release -DPLLM_BUILD_JNI=ON -DPLLM_BUILD_TESTS=OFF -DPLLM_BUILD_TOOLS=OFF -DPLLM_VULKAN=OFF \
  -DJAVA_INCLUDE_PATH="$JAVA_HOME/include" -DJAVA_INCLUDE_PATH2="$JAVA_HOME/include/linux" >/dev/null
if ! cmake --build "$BUILD" -j "$JOBS" --target pocketllm_jni pocketllm_jni_check >"$BUILD/build.log" 2>&1; then
  grep -E "error|FAILED" -A5 "$BUILD/build.log" | head -60
  echo "test_java_arm: cross build FAILED (full log: $BUILD/build.log)"
  exit 1
fi
"$VENV/bin/python" "$ROOT/tests/py/tiny_models.py" "$BUILD/tiny" llama-Q8_0 >/dev/null
# The check is a dynamic aarch64 executable (it dlopens the library): qemu finds the aarch64
# loader and C library under -L.
Q=(qemu-aarch64-static -L "$SYSROOT")
"${Q[@]}" "$BUILD/pocketllm_jni_check" --shape "$BUILD/libpocketllm_jni.so" | grep -v '^ok'
# The cross-thread cancel check is left out: under qemu-user the check stalls at its first
# std::thread (seen with qemu 7.2; cause not found yet). It runs natively in scripts/test_java.sh.
PLLM_JNI_CHECK_NO_THREADS=1 "${Q[@]}" "$BUILD/pocketllm_jni_check" --load "$BUILD/libpocketllm_jni.so" "$BUILD/tiny/llama-Q8_0.gguf" | grep -v '^ok'
echo "test_java_arm: the aarch64 JNI library passed its C-level checks"
