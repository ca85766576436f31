#!/usr/bin/env bash
# The whole test suite (what CI runs through .ci/run):
#   1. release build: every C++ unit test and the whole Python suite;
#   2. AddressSanitizer + UBSan build: every C++ unit test, and the Python suites that feed
#      outside bytes to the engine (GGUF files, CLI flags, tokenizer input, KV snapshots and
#      cache files, chat input);
#   3. ThreadSanitizer build of the tests whose code shares threads (thread pool, engine and
#      batched steps, cancellation and pre-warm through the C API, prefix cache);
#   4. the ARM kernel tests under qemu.
# scripts/test.sh --long additionally runs the whole Python suite under ASan and the batched
# engine tests on every ISA level: run it by hand before resolving an issue.
source "$(dirname "$0")/common.sh"
LONG=0
for a in "$@"; do
  case "$a" in
    --long) LONG=1 ;;
    *) log "unknown option $a (only --long)"; exit 2 ;;
  esac
done
install_deps
setup_venv
fetch_model
fetch_gemma3
export POCKETLLM_MODELS="$MODELS_DIR"

log "release build"
build "$ROOT/build" -DCMAKE_BUILD_TYPE=Release -DPLLM_BUILD_TESTS=ON -DPLLM_SANITIZE=OFF -DPLLM_TSAN=OFF
(cd "$ROOT/build" && ctest --output-on-failure -j "$JOBS")
POCKETLLM_BIN="$ROOT/build/pocketllm" "$VENV/bin/python" -m pytest -q "$ROOT/tests/py"

log "AddressSanitizer + UBSan build"
build "$ROOT/build-asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPLLM_SANITIZE=ON -DPLLM_TSAN=OFF -DPLLM_BUILD_TESTS=ON
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The batched-equality test is numerics (3 minutes under ASan); the engine's other tests run the
# same batched paths here.
(cd "$ROOT/build-asan" && ctest --output-on-failure -j "$JOBS" -E 'EngineReal.BatchedEqualsSolo')
PARSING_SUITES=(test_malformed_gguf.py test_cli_errors.py test_tokenize.py test_prefix_cache.py test_chat_repl.py)
if [ "$LONG" = 1 ]; then PY_ASAN=("$ROOT/tests/py"); else PY_ASAN=("${PARSING_SUITES[@]/#/$ROOT/tests/py/}"); fi
POCKETLLM_BIN="$ROOT/build-asan/pocketllm" POCKETLLM_SANITIZED=1 "$VENV/bin/python" -m pytest -q "${PY_ASAN[@]}"

log "ThreadSanitizer build (concurrency tests)"
TSAN_TESTS=(test_thread_pool test_engine test_api test_prefix_cache)
cmake -S "$ROOT" -B "$ROOT/build-tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPLLM_TSAN=ON -DPLLM_SANITIZE=OFF \
  -DPLLM_BUILD_TESTS=ON >/dev/null
cmake --build "$ROOT/build-tsan" -j "$JOBS" --target "${TSAN_TESTS[@]}"
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
# The batched-equality test is numerics, not threads, and slow under TSan: the release
# build runs it (and --long on every ISA level).
for t in "${TSAN_TESTS[@]}"; do
  "$ROOT/build-tsan/tests/cpp/$t" --gtest_brief=1 --gtest_filter='-EngineReal.BatchedEqualsSolo*'
done

if [ "$LONG" = 1 ]; then
  # (the scalar twins run the real model too slowly; tests/py/test_batched_logits.py covers
  # them on the tiny models)
  log "batched engine vs solo on every SIMD level"
  for isa in avx2 avx512 neon dotprod i8mm; do
    PLLM_ISA=$isa "$ROOT/build/tests/cpp/test_engine" --gtest_brief=1 --gtest_filter="EngineReal.Batched*"
  done
fi

if [ -x "$ROOT/scripts/test_arm.sh" ]; then
  log "aarch64 kernel tests under qemu"
  "$ROOT/scripts/test_arm.sh"
fi
log "all tests passed"
