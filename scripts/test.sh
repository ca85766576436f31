#!/usr/bin/env bash
# The whole test suite (what CI runs through .ci/run):
#   1. release build: every C++ unit test and the whole Python suite (the Vulkan backend's
#      tests among them, on lavapipe: Debian mesa-vulkan-drivers); then the Python package
#      (python/: `pip install ./python` into the venv) and its tests, and the Java binding
#      (scripts/test_java.sh: the JNI library and its JUnit suite);
#   2. AddressSanitizer + UBSan build: the C++ suites that parse input or manage memory
#      (minus the cases that only re-run the real model's numerics) and the Python suites that
#      feed outside bytes to the engine (GGUF files, CLI flags, tokenizer input, cache files,
#      chat input, simulate scenarios, HTTP requests to the server), the server soak (on a
#      tiny model) and the Java binding's JNI library in a JVM;
#   3. ThreadSanitizer build of the test cases whose code shares threads (thread pool, several
#      callers on one engine, cancellation and pre-warm through the C API, prefix cache, the
#      runtime's driver thread, the trace ring, the server soak on the tiny model) and the
#      scheduler's and governor's suites;
#   4. the libFuzzer targets (scripts/fuzz.sh: GGUF files, tokenizer input, chat templates (the
#      native families and the Jinja interpreter), KV
#      snapshots, completion request bodies, GBNF grammars, JSON schemas, tool calls, images, mmproj
#      files), 20 s each on their seed corpora;
#   5. the ARM kernel tests under qemu.
# scripts/test.sh --long additionally runs every case of the ASan suites, a shorter server soak
# on the real model under ASan (16 clients x 4) and TSan (8 x 2), the whole Python suite
# under ASan, the batched engine tests on every ISA level and each fuzz target for 300 s: run
# it by hand before resolving an issue.
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
export PLLM_TEST_LONG="$LONG"  # the Python suites' long-only cases (test_golden_logits.py: every ISA level)

log "release build"
build "$ROOT/build" -DCMAKE_BUILD_TYPE=Release -DPLLM_BUILD_TESTS=ON -DPLLM_SANITIZE=OFF -DPLLM_TSAN=OFF
(cd "$ROOT/build" && ctest --output-on-failure -j "$JOBS")
# the server soak at full length on the real model (ctest's run: 16 clients x 8 requests)
[ "$LONG" = 1 ] && PLLM_SOAK_REQUESTS=20 "$ROOT/build/tests/cpp/test_server_soak" --gtest_brief=1
# --durations: the slowest cases in the log, for keeping the suite within CI's time
POCKETLLM_BIN="$ROOT/build/pocketllm" "$VENV/bin/python" -m pytest -q --durations=15 "$ROOT/tests/py"

log "Python package: pip install ./python, then python/tests"
# scikit-build-core builds the engine again, as a shared library, in build-python (incremental
# where this ran before) with the release build's compilers and the compiler cache: the layers'
# objects then come from the cache (same flags, same paths relative to the checkout) and only
# the C API's files, compiled with hidden visibility, are new.
compiler_of() { sed -n "s/^CMAKE_$1_COMPILER:FILEPATH=//p" "$ROOT/build/CMakeCache.txt"; }
CMAKE_ARGS="$(cmake_launcher) -DCMAKE_C_COMPILER=$(compiler_of C) -DCMAKE_CXX_COMPILER=$(compiler_of CXX)" \
  SKBUILD_BUILD_DIR="$ROOT/build-python" "$VENV/bin/pip" install -q --disable-pip-version-check "$ROOT/python"
"$VENV/bin/python" -m pytest -q "$ROOT/python/tests"
"$ROOT/scripts/test_swift.sh"  # the Swift package (Package.swift): libpocketllm.so, then swift test
"$ROOT/scripts/test_java.sh"  # the Java binding: JNI library, its shape, the JUnit suite

log "AddressSanitizer + UBSan build (the suites that parse input or touch memory directly)"
# Parsers (GGUF, tokenizer, chat template, KV snapshots, the prefix cache's files, the C API's
# arguments, sysfs thermal files, stop strings over streamed text, mmproj files and image bytes), the KV cache and engine memory, and the kernels' bounds on small inputs. Test
# cases that only re-run the real model's numerics are left to the release build: under ASan
# each costs minutes and checks no input handling the cases kept here do not.
ASAN_TESTS=(test_gguf test_gguf_writer test_tokenizer test_chat_template test_jinja test_sampler test_kv_cache test_kv_memory
            test_kv_snapshot test_prefix_cache test_api test_engine test_model_override test_kernels
            test_matvec_rows test_gemm test_attention_kv test_quant test_thermal_sysfs test_trace_log
            test_scheduled_runtime test_runtime_api test_server_soak test_prune_compensate test_frame_policy
            test_scheduler_interactive test_stop_matcher test_chat_prompt test_grammar test_json_schema
            test_sampler_grammar test_tool_calls test_speculative test_vision test_image_rows test_delta_net)
ASAN_NUMERICS='EngineReal.BatchedEqualsSolo*:EngineReal.CancelMidStep*:PrefixCacheTest.SameGreedyOutput*'
ASAN_NUMERICS+=':PrefixCacheTest.Prewarm*:PrefixCacheTest.SharedBySessions*:PrefixCacheTest.WindowedSessions*'
ASAN_NUMERICS+=':PrefixCacheTest.BudgetsEvict*:PrefixCacheTest.ActivationModes*:KvSnapshot.RoundTrip*'
ASAN_NUMERICS+=':KvSnapshot.Q4Only*:Api.SameSeedSameTokens'
ASAN_NUMERICS+=':Speculative.*:Cases/SpeculativeIdentity.*'  # (its skip-file parsing stays)
# the runtime's token-equality cases (its argument, control and frame cases stay)
ASAN_NUMERICS+=':RuntimeReal.ManySessions*:RuntimeReal.AFollowUp*:RuntimeReal.Paused*:RuntimeReal.Interactive*'
ASAN_NUMERICS+=':RuntimeReal.GovernorCaps*:RuntimeReal.DriverThread*:RuntimeApi.QuickStart*:RuntimeApi.ManySessions*'
ASAN_NUMERICS+=':RuntimeReal.InteractiveFirstToken*:RuntimeReal.InteractiveSubmitStops*:RuntimeReal.FrameCalls*'
cmake -S "$ROOT" -B "$ROOT/build-asan" -G Ninja $(cmake_launcher) "${SANITIZER_BUILD[@]}" -DPLLM_SANITIZE=ON -DPLLM_TSAN=OFF \
  -DPLLM_BUILD_TESTS=ON >/dev/null
cmake --build "$ROOT/build-asan" -j "$JOBS" --target pocketllm_cli vision_probe "${ASAN_TESTS[@]}"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ASAN_FILTER="-$ASAN_NUMERICS"
[ "$LONG" = 1 ] && ASAN_FILTER='*'
# The server soak (16 clients x 20 requests) under the sanitizers runs a tiny model: the real
# one's numerics cost minutes under ASan and check nothing new there (the release build runs the
# soak on it); --long adds a shorter soak on the real model.
"$VENV/bin/python" "$ROOT/tests/py/tiny_models.py" "$ROOT/build-asan/soak" soak-llama-Q4_0 >/dev/null
SOAK_TINY=(PLLM_SOAK_MODEL="$ROOT/build-asan/soak/soak-llama-Q4_0.gguf")
for t in "${ASAN_TESTS[@]}"; do
  env "${SOAK_TINY[@]}" "$ROOT/build-asan/tests/cpp/$t" --gtest_brief=1 --gtest_filter="$ASAN_FILTER"
done
if [ "$LONG" = 1 ]; then
  PLLM_SOAK_REQUESTS=4 "$ROOT/build-asan/tests/cpp/test_server_soak" --gtest_brief=1
fi
PARSING_SUITES=(test_malformed_gguf.py test_cli_errors.py test_tokenize.py test_chat_repl.py test_chat_templates.py
                "test_simulate.py::test_bad_scenario_is_one_clear_error" "test_simulate.py::test_bad_command_lines"
                "test_server.py::test_bad_requests_get_openai_errors" "test_server.py::test_oversized_body_and_unknown_route"
                "test_server.py::test_tokenize_round_trip" "test_server.py::test_disconnect_cancels_and_metrics_parse"
                "test_prune_compensate.py::test_saved_gram_matrices_replace_the_calibration"
                "test_structured_output.py::test_what_cannot_be_enforced_is_a_400" "test_structured_output.py::test_cli_grammar_flags_errors"
                "test_tool_calls.py::test_bad_tools_and_history_are_400"
                "test_speculative_cli.py::test_bad_draft_flags_are_one_error"
                "test_speculative_cli.py::test_server_bad_speculative_field_is_400"
                "test_vision.py::test_malformed_mmproj_is_one_clear_error"
                "test_vision.py::test_hostile_images_are_one_clear_error"
                test_vision_text.py)
if [ "$LONG" = 1 ]; then
  PY_ASAN=("$ROOT/tests/py")
else
  PY_ASAN=("${PARSING_SUITES[@]/#/$ROOT/tests/py/}")
  # the prefix cache's files: the damaged-file and concurrent-writer cases (the others are numerics)
  PY_ASAN+=("$ROOT/tests/py/test_prefix_cache.py::test_corrupt_file_warns_and_output_is_unchanged"
            "$ROOT/tests/py/test_prefix_cache.py::test_concurrent_writers_leave_the_directory_consistent")
fi
POCKETLLM_BIN="$ROOT/build-asan/pocketllm" POCKETLLM_SANITIZED=1 "$VENV/bin/python" -m pytest -q "${PY_ASAN[@]}"
"$ROOT/scripts/test_java.sh" --asan $([ "$LONG" = 1 ] && echo --long)  # the JNI library under ASan in a JVM

log "ThreadSanitizer build (concurrency tests)"
# The test cases whose code shares threads: the pool, several callers on one engine, cancel
# from another thread or mid-step, pre-warm on the background lane, the prefix cache shared
# by sessions on several threads, the app-set thermal source. The numerics cases of the same suites run in the release
# build (under TSan they take minutes and share no threads).
TSAN_TESTS=(test_thread_pool test_engine test_api test_prefix_cache test_thermal test_scheduler test_governor test_frame_policy
            test_trace_log test_scheduled_runtime test_runtime_api test_server_soak test_speculative_runtime
            test_image_rows)
declare -A TSAN_FILTER=(
  [test_thread_pool]='*'
  [test_thermal]='*'
  [test_scheduler]='*'
  [test_governor]='*'
  [test_frame_policy]='*'
  [test_trace_log]='*'
  [test_image_rows]='*'
  [test_server_soak]='*'
  [test_scheduled_runtime]='RuntimeReal.DriverThreadServesOtherThreads:RuntimeReal.ControlsEndWhatTheyShould:RuntimeReal.InteractiveSubmitStopsABackgroundPromptStep:RuntimeReal.FrameCallsFromOtherThreadsWhileTheDriverSteps'
  [test_runtime_api]='RuntimeApi.ManySessionsOnTheDriverThreadAndCancel'
  [test_speculative_runtime]='SpecRuntime.InteractiveSubmitStopsABackgroundVerifyStep'
  [test_engine]='EngineReal.ConcurrentCallers*:EngineReal.CancelMidStep*'
  [test_api]='Api.CancelFromAnotherThread:Api.CallbackStopsAndCancelFromInsideStops:Api.PrewarmThenGenerate:ApiLoad.*'
  [test_prefix_cache]='PrefixCacheTest.SharedBySessions*:PrefixCacheTest.Prewarm*'
)
cmake -S "$ROOT" -B "$ROOT/build-tsan" -G Ninja $(cmake_launcher) "${SANITIZER_BUILD[@]}" -DPLLM_TSAN=ON -DPLLM_SANITIZE=OFF \
  -DPLLM_BUILD_TESTS=ON >/dev/null
cmake --build "$ROOT/build-tsan" -j "$JOBS" --target "${TSAN_TESTS[@]}" vision_probe
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
for t in "${TSAN_TESTS[@]}"; do
  env "${SOAK_TINY[@]}" "$ROOT/build-tsan/tests/cpp/$t" --gtest_brief=1 --gtest_filter="${TSAN_FILTER[$t]}"
done
# The soak again on the hybrid and per-layer-embedding architectures (tiny Qwen3.5: DeltaNet state per
# sequence, restore points as state snapshots; tiny Gemma 4: KV shared across layers): 7 + 24 s.
"$VENV/bin/python" "$ROOT/tests/py/tiny_models.py" "$ROOT/build-tsan/soak" qwen35-Q8_0 gemma4-Q8_0 >/dev/null
for m in qwen35-Q8_0 gemma4-Q8_0; do
  PLLM_SOAK_MODEL="$ROOT/build-tsan/soak/$m.gguf" "$ROOT/build-tsan/tests/cpp/test_server_soak" --gtest_brief=1
done
# The vision encoder on 2 pool threads (attention tasks per head and query block, products, norms):
# a tiny idefics3 mmproj, in every activation mode (int16 and int8 on the panels they load).
"$VENV/bin/python" "$ROOT/tests/py/vision_models.py" idefics3 q8_0 "$ROOT/build-tsan/soak/mmproj.gguf" >/dev/null
"$VENV/bin/python" -c "import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; from vision_images import write_png; write_png(Path(sys.argv[2]), 77, 45, 3)" \
  "$ROOT/tests/py" "$ROOT/build-tsan/soak/image.png"
for act in exact int16 int8; do
  "$ROOT/build-tsan/tests/cpp/vision_probe" encode "$ROOT/build-tsan/soak/mmproj.gguf" "$ROOT/build-tsan/soak/image.png" \
    "$ROOT/build-tsan/soak/embeddings.bin" 2 "$act" >/dev/null
done
if [ "$LONG" = 1 ]; then
  PLLM_SOAK_CLIENTS=8 PLLM_SOAK_REQUESTS=2 "$ROOT/build-tsan/tests/cpp/test_server_soak" --gtest_brief=1
fi

if [ "$LONG" = 1 ]; then
  # (the scalar twins run the real model too slowly; tests/py/test_batched_logits.py covers
  # them on the tiny models)
  log "batched engine vs solo on every SIMD level"
  for isa in avx2 avxvnni avx512 neon dotprod i8mm; do
    PLLM_ISA=$isa "$ROOT/build/tests/cpp/test_engine" --gtest_brief=1 --gtest_filter="EngineReal.Batched*"
  done
fi

log "libFuzzer targets (every parser of outside bytes, clang + ASan + UBSan)"
FUZZ_SECONDS=20
[ "$LONG" = 1 ] && FUZZ_SECONDS=300
"$ROOT/scripts/fuzz.sh" "$FUZZ_SECONDS"

if [ -x "$ROOT/scripts/test_arm.sh" ]; then
  log "aarch64 kernel tests under qemu"
  "$ROOT/scripts/test_arm.sh"
fi
[ "$LONG" = 1 ] && "$ROOT/scripts/test_java_arm.sh"  # the JNI library for aarch64: C-level checks under qemu
log "all tests passed"
