#!/usr/bin/env bash
# The whole test suite: release build + unit tests + Python reference/CLI tests, then the
# same under AddressSanitizer + UBSan, then the ARM kernel tests under qemu.
source "$(dirname "$0")/common.sh"
install_deps
setup_venv
fetch_model
fetch_gemma3
export POCKETLLM_MODELS="$MODELS_DIR"

log "release build"
build "$ROOT/build" -DCMAKE_BUILD_TYPE=Release -DPLLM_BUILD_TESTS=ON -DPLLM_SANITIZE=OFF
(cd "$ROOT/build" && ctest --output-on-failure -j "$JOBS")
POCKETLLM_BIN="$ROOT/build/pocketllm" "$VENV/bin/python" -m pytest -q "$ROOT/tests/py"

log "AddressSanitizer + UBSan build"
build "$ROOT/build-asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPLLM_SANITIZE=ON -DPLLM_BUILD_TESTS=ON
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd "$ROOT/build-asan" && ctest --output-on-failure -j "$JOBS")
POCKETLLM_BIN="$ROOT/build-asan/pocketllm" POCKETLLM_SANITIZED=1 "$VENV/bin/python" -m pytest -q "$ROOT/tests/py"

if [ -x "$ROOT/scripts/test_arm.sh" ]; then
  log "aarch64 kernel tests under qemu"
  "$ROOT/scripts/test_arm.sh"
fi
log "all tests passed"
