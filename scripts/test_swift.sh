#!/usr/bin/env bash
# The Swift package (Package.swift at the root, sources in bindings/swift/): builds
# libpocketllm.so (PLLM_BUILD_SHARED) in build-swift/, whose pkg-config file the package's
# CPocketLLM target reads, writes the tiny model of the load/close-cycle test, then runs
# `swift test` with the library's directory as the test binary's rpath. Ends with one line
# "Swift: N passed, N failed". Skipped (with a message) where no Swift toolchain is installed:
# swift on PATH, $SWIFT, or /opt/swift as on this project's machines.
#   --tsan: ThreadSanitizer on both sides, by hand (not in scripts/test.sh: the instrumented
#   library takes about 10 minutes to build on two cores): the library built with clang and
#   PLLM_TSAN in build-swift-tsan/, `swift test --sanitize=thread` over it.
source "$(dirname "$0")/common.sh"
TSAN=0
for a in "$@"; do
  case "$a" in
    --tsan) TSAN=1 ;;
    *) log "unknown option $a (only --tsan)"; exit 2 ;;
  esac
done
SWIFT="${SWIFT:-$(command -v swift || echo /opt/swift/usr/bin/swift)}"
if [ ! -x "$SWIFT" ]; then
  log "Swift package: no Swift toolchain (swift on PATH, \$SWIFT or /opt/swift): its tests are skipped"
  exit 0
fi
BUILD="$ROOT/build-swift"
CMAKE_EXTRA=(-DCMAKE_BUILD_TYPE=Release)
SWIFT_EXTRA=()
if [ "$TSAN" = 1 ]; then
  # clang, as the Swift toolchain's: its TSan runtime (linked into the test binary) serves both.
  BUILD="$ROOT/build-swift-tsan"
  CMAKE_EXTRA=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ "${SANITIZER_BUILD[@]}" -DPLLM_TSAN=ON)
  SWIFT_EXTRA=(--sanitize=thread)
fi
log "Swift package: libpocketllm.so in $BUILD, then swift test ${SWIFT_EXTRA[*]}"
# No-ops after scripts/test.sh's own calls; here so that the script also runs on its own.
install_deps
setup_venv
fetch_model
# shellcheck disable=SC2046
cmake -S "$ROOT" -B "$BUILD" -G Ninja $(cmake_launcher) "${CMAKE_EXTRA[@]}" -DPLLM_BUILD_SHARED=ON \
  -DPLLM_BUILD_TESTS=OFF -DPLLM_BUILD_TOOLS=OFF >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target pocketllm_shared
"$VENV/bin/python" "$ROOT/tests/py/tiny_models.py" "$BUILD/tiny" llama-Q4_0 >/dev/null

export PKG_CONFIG_PATH="$BUILD/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export POCKETLLM_MODELS="$MODELS_DIR" POCKETLLM_SWIFT_TINY_MODEL="$BUILD/tiny/llama-Q4_0.gguf"
# pkg-config gives SwiftPM the header and -L; SwiftPM refuses an rpath from a .pc file, so the
# loader finds the library through this one (an installed library needs neither).
SWIFT_ARGS=(--package-path "$ROOT" --scratch-path "$BUILD/swiftpm" "${SWIFT_EXTRA[@]}"
            -Xlinker -rpath -Xlinker "$(pkg-config --variable=libdir pocketllm)")
t0=$(date +%s)
"$SWIFT" build --build-tests "${SWIFT_ARGS[@]}"
log "Swift package built in $(( $(date +%s) - t0 )) s"
# --no-parallel: the suites load models and run sessions of their own; side by side on a
# two-core machine they would only slow each other down.
rm -f "$BUILD"/swift-tests*.xml
set +e
"$SWIFT" test --skip-build --no-parallel "${SWIFT_ARGS[@]}" --xunit-output "$BUILD/swift-tests.xml"
rc=$?
set -e
# Swift Testing's JUnit report (XCTest's, swift-tests.xml, holds no tests of this package). Its
# totals count issues, not tests: a test is failed when its <testcase> holds a <failure>.
report="$BUILD/swift-tests-swift-testing.xml"
read -r passed failed skipped < <(awk '
  function close_case() { if (state != "") count[state]++; state = "" }
  /<testcase / { close_case(); state = "passed" }
  /<failure/ { state = "failed" }
  /<skipped/ { if (state != "failed") state = "skipped" }
  END { close_case(); printf "%d %d %d\n", count["passed"], count["failed"], count["skipped"] }
' "$report" 2>/dev/null || echo "0 0 0")
echo "Swift: $passed passed, $failed failed, $skipped skipped"
[ "$rc" -eq 0 ] && [ "$passed" -gt 0 ]
