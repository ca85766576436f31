#!/usr/bin/env bash
# The libFuzzer targets (fuzz/fuzz_*.cpp): builds build-fuzz/ with clang (-DPLLM_FUZZ=ON: the
# engine under ASan + UBSan with coverage hooks), then runs every target for a bounded time on a
# fresh copy of its seed corpus fuzz/corpus/<target>/. Fails on any crash, leak, timeout, OOM or
# UBSan report; the input that caused it is kept in build-fuzz/artifacts/.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]    (default 20 s each, every target)
#
# scripts/test.sh runs it with 20 s per target (300 s with --long). For a longer hunt by hand:
#   scripts/fuzz.sh 3600 fuzz_gguf
# A finding: fix the parser, add the input to fuzz/corpus/<target>/ and a GoogleTest case with
# its exact bytes (docs/ARCHITECTURE.md, Tests).
source "$(dirname "$0")/common.sh"
SECS="${1:-20}"
shift || true
[[ "$SECS" =~ ^[0-9]+$ ]] || { log "usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]"; exit 2; }
BUILD="$ROOT/build-fuzz"
# Per input: ASan makes a slow input slower; 10 s is far beyond any valid one (a hang).
TIMEOUT_S="${PLLM_FUZZ_TIMEOUT:-10}"
RSS_MB="${PLLM_FUZZ_RSS_MB:-2048}"
install_deps  # clang and libFuzzer's runtime (a no-op when test.sh ran it already)

log "fuzz build (clang, ASan + UBSan + libFuzzer)"
# shellcheck disable=SC2046
CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -G Ninja $(cmake_launcher) "${SANITIZER_BUILD[@]}" \
  -DPLLM_FUZZ=ON -DPLLM_SANITIZE=OFF -DPLLM_TSAN=OFF -DPLLM_BUILD_TESTS=OFF -DPLLM_BUILD_TOOLS=OFF >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target pllm_fuzzers

TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
  for src in "$ROOT"/fuzz/fuzz_*.cpp; do TARGETS+=("$(basename "$src" .cpp)"); done
fi
mkdir -p "$BUILD/artifacts"
# Leaks are findings; a UBSan report stops the run (the build also sets -fno-sanitize-recover).
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
failed=()
for t in "${TARGETS[@]}"; do
  bin="$BUILD/fuzz/$t"
  [ -x "$bin" ] || { log "no fuzz target $t (fuzz/$t.cpp)"; exit 2; }
  # A copy: libFuzzer adds every input that finds new coverage to its first corpus directory.
  work="$BUILD/corpus-run/$t"
  rm -rf "$work" && mkdir -p "$work"
  [ -d "$ROOT/fuzz/corpus/$t" ] && cp -r "$ROOT/fuzz/corpus/$t/." "$work/"
  log "$t: ${SECS} s on $(ls "$work" | wc -l) seeds"
  logf="$BUILD/artifacts/$t.log"
  rm -f "$BUILD/artifacts/$t-"*  # an input named in a report is from this run
  set +e
  "$bin" -max_total_time="$SECS" -timeout="$TIMEOUT_S" -rss_limit_mb="$RSS_MB" -print_final_stats=1 \
    -artifact_prefix="$BUILD/artifacts/$t-" "$work" >"$logf" 2>&1
  rc=$?
  set -e
  # libFuzzer's last status line: runs, coverage (cov: edges, ft: features), corpus, exec/s.
  grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$logf" | tail -1 | sed "s/^/  $t: /" >&2 || true
  if [ $rc -ne 0 ]; then
    tail -40 "$logf" >&2
    log "$t FAILED (exit $rc): log $logf, input $(ls -t "$BUILD/artifacts/$t-"* 2>/dev/null | head -1)"
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  log "fuzzing found problems in: ${failed[*]}"
  exit 1
fi
log "fuzzing: no findings (${#TARGETS[@]} targets, ${SECS} s each)"
