#!/usr/bin/env bash
# The Java binding (bindings/java): builds the JNI library (PLLM_BUILD_JNI) and the classes, checks
# the library's shape (what it links, what it exports, 16 KiB segment alignment) and runs the
# JUnit 5 suite (bindings/java/src/test) on the real model and a tiny random-weight one, printing
# "N passed, N failed".
#   --asan   the same suite with the library built with AddressSanitizer + UBSan, loaded into the
#            JVM through LD_PRELOAD of libasan (the JVM itself is not instrumented), without the
#            cases tagged "numerics" (mostly the real model's arithmetic: minutes under ASan,
#            nothing the other cases do not check of the binding's memory); with --long, all of them
source "$(dirname "$0")/common.sh"
MODE=release
LONG=0
for a in "$@"; do
  case "$a" in
    --asan) MODE=asan ;;
    --long) LONG=1 ;;
    *) log "unknown option $a (only --asan, --long)"; exit 2 ;;
  esac
done
install_deps
setup_venv
fetch_model
export POCKETLLM_MODELS="$MODELS_DIR"
JAVA_HOME="$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")"
export JAVA_HOME
JUNIT_JAR=/usr/share/java/junit-platform-console-standalone.jar
JAVA_SRC="$ROOT/bindings/java/src"

if [ "$MODE" = asan ]; then
  BUILD="$ROOT/build-java-asan"
  BUILD_ARGS=("${SANITIZER_BUILD[@]}" -DPLLM_SANITIZE=ON)
else
  BUILD="$ROOT/build-java"
  BUILD_ARGS=(-DCMAKE_BUILD_TYPE=Release -DPLLM_SANITIZE=OFF)
fi
log "Java binding ($MODE): JNI library in $BUILD"
# shellcheck disable=SC2046
cmake -S "$ROOT" -B "$BUILD" -G Ninja $(cmake_launcher) "${BUILD_ARGS[@]}" -DPLLM_TSAN=OFF -DPLLM_BUILD_JNI=ON \
  -DPLLM_BUILD_TESTS=OFF -DPLLM_BUILD_TOOLS=OFF >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target pocketllm_jni pocketllm_jni_check
LIB="$BUILD/libpocketllm_jni.so"

# The tiny model of the fast cases (leak cycles, errors, the raw byte stream).
"$VENV/bin/python" "$ROOT/tests/py/tiny_models.py" "$BUILD/tiny" llama-Q8_0 >/dev/null
TINY="$BUILD/tiny/llama-Q8_0.gguf"
# The library's shape (what makes System.loadLibrary work anywhere: bindings/java/CMakeLists.txt),
# then its natives driven without a JVM (under ASan this checks the JNI code for leaks too).
"$BUILD/pocketllm_jni_check" --shape "$LIB" $([ "$MODE" = asan ] && echo --sanitized) | grep -v '^ok'
"$BUILD/pocketllm_jni_check" --load "$LIB" "$TINY" | grep -v '^ok'

CLASSES="$BUILD/java"
rm -rf "$CLASSES" && mkdir -p "$CLASSES/main" "$CLASSES/test"
javac -Xlint:all -Werror -d "$CLASSES/main" $(find "$JAVA_SRC/main/java" -name '*.java')
javac -Xlint:all -Xlint:-processing -Werror -cp "$CLASSES/main:$JUNIT_JAR" -d "$CLASSES/test" \
  $(find "$JAVA_SRC/test/java" -name '*.java')
# The chat-screen sample of the docs compiles against the binding as it is.
javac -Xlint:all -Werror -cp "$CLASSES/main" -d "$CLASSES/sample" "$ROOT/docs/android/ChatViewModel.java"
JVM_ENV=()
SELECT=()
if [ "$MODE" = asan ]; then
  [ "$LONG" = 1 ] || SELECT=(--exclude-tag numerics)
  # The JVM catches SIGSEGV itself (implicit null checks, safepoint polls): ASan must leave that
  # signal to it. Leak checking at exit would report the JVM's own allocations.
  JVM_ENV=(LD_PRELOAD="$("${CXX:-g++}" -print-file-name=libasan.so)"
           ASAN_OPTIONS=detect_leaks=0:handle_segv=0:allow_user_segv_handler=1:use_sigaltstack=0:abort_on_error=0
           UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1)
fi
OUT="$BUILD/junit.log"
set +e
env "${JVM_ENV[@]}" java -Xmx256m -Dpocketllm.library="$LIB" -Dpocketllm.tinyModel="$TINY" \
  -jar "$JUNIT_JAR" --class-path "$CLASSES/main:$CLASSES/test" --scan-class-path --disable-banner \
  "${SELECT[@]}" --details=tree --details-theme=ascii --disable-ansi-colors \
  --config=junit.jupiter.execution.timeout.default=180s 2>&1 | tee "$OUT"
rc=${PIPESTATUS[0]}
set -e
passed=$(sed -n 's/^\[ *\([0-9]*\) tests successful.*/\1/p' "$OUT")
failed=$(sed -n 's/^\[ *\([0-9]*\) tests failed.*/\1/p' "$OUT")
echo "Java binding ($MODE): ${passed:-0} passed, ${failed:-?} failed"
exit "$rc"
