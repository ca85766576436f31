#!/usr/bin/env bash
# Build llama.cpp's llama-bench, llama-batched-bench, llama-quantize and llama-server for the
# side-by-side comparisons (llama-server: bench/server_compare.py), llama-debug, whose
# --save-logits gives the reference logits of bench/arch_vs_llamacpp.py, and llama-lookup /
# llama-speculative (bench/speculative.py), and llama-mtmd-cli with pllm-clip-oracle (ours,
# tests/oracle/clip_oracle.cpp, linked against llama.cpp's static mtmd/clip libraries): the
# image embeddings the vision tests (tests/py/test_vision.py) compare against.
#
# The source comes from the PyPI sdist of llama-cpp-python (it vendors llama.cpp under
# vendor/llama.cpp). Everything is cached:
#   bench/.venv/                    Python venv with the `gguf` package
#   bench/.cache/sdist/             the downloaded sdist and its unpacked tree
#   bench/.cache/llama.cpp-build/   the CMake build
#   bench/.cache/bin/               llama-bench, llama-quantize, llama-server, ... (static builds)
# The server is built without its web UI: LLAMA_BUILD_UI=OFF (no npm) and LLAMA_USE_PREBUILT_UI=OFF
# (no download of prebuilt assets from Hugging Face at build time), so the build stays offline.
# Rerunning skips every step whose result already exists. Not part of the test suite.
#
# LLAMA_ISA=avx2 bench/setup_llamacpp.sh builds llama-bench and llama-batched-bench a second time
# without -march=native (GGML_NATIVE=OFF: AVX2 + FMA + F16C + BMI2, no AVX-512) into
# bench/.cache/bin-avx2/: on an AVX-512 machine, the llama.cpp an AVX2 machine would run, beside
# ours under PLLM_ISA=avx2 (compare.py --isa avx2, parallel_compare.py --isa avx2).
set -euo pipefail
BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="$BENCH/.cache"
VENV="$BENCH/.venv"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
log() { printf '[bench-setup] %s\n' "$*" >&2; }

LLAMA_ISA="${LLAMA_ISA:-native}"
case "$LLAMA_ISA" in
  native) BIN="$CACHE/bin"; BUILD="$CACHE/llama.cpp-build"; NATIVE=ON
          TOOLS=(llama-bench llama-quantize llama-batched-bench llama-completion llama-perplexity llama-server
                 llama-debug llama-lookup llama-speculative llama-mtmd-cli) ;;
  avx2) BIN="$CACHE/bin-avx2"; BUILD="$CACHE/llama.cpp-build-avx2"; NATIVE=OFF
        TOOLS=(llama-bench llama-batched-bench) ;;
  *) log "LLAMA_ISA must be native or avx2, not $LLAMA_ISA"; exit 2 ;;
esac
mkdir -p "$CACHE/sdist" "$BIN"

# 1. venv with gguf (and pip for the sdist download)
if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV"
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import gguf" 2>/dev/null; then
  log "installing gguf into $VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check gguf
fi

missing=()
for t in "${TOOLS[@]}"; do [ -x "$BIN/$t" ] || missing+=("$t"); done
ORACLE_SRC="$BENCH/../tests/oracle/clip_oracle.cpp"
need_oracle=0
if [ "$LLAMA_ISA" = native ] && { [ ! -x "$BIN/pllm-clip-oracle" ] || [ "$ORACLE_SRC" -nt "$BIN/pllm-clip-oracle" ]; }; then
  need_oracle=1
fi
if [ "${#missing[@]}" -eq 0 ] && [ "$need_oracle" -eq 0 ]; then
  log "${TOOLS[*]} already built in $BIN"
  exit 0
fi

# 2. the sdist
SDIST="$(ls "$CACHE"/sdist/llama_cpp_python-*.tar.gz 2>/dev/null | head -n1 || true)"
if [ -z "$SDIST" ]; then
  log "downloading the llama-cpp-python sdist"
  "$VENV/bin/pip" download -q --disable-pip-version-check --no-binary :all: --no-deps llama-cpp-python -d "$CACHE/sdist"
  SDIST="$(ls "$CACHE"/sdist/llama_cpp_python-*.tar.gz | head -n1)"
fi
SRC_ROOT="$CACHE/sdist/src"
if [ ! -f "$SRC_ROOT/.unpacked" ]; then
  log "unpacking $(basename "$SDIST")"
  rm -rf "$SRC_ROOT"; mkdir -p "$SRC_ROOT"
  tar -xzf "$SDIST" -C "$SRC_ROOT" --strip-components=1
  touch "$SRC_ROOT/.unpacked"
fi
# The physical path: a git worktree may reach bench/.cache through a symlink, and configuring
# the shared build with the other spelling of the same source makes ninja rebuild everything.
LLAMA_SRC="$(cd "$SRC_ROOT/vendor/llama.cpp" && pwd -P)"
[ -f "$LLAMA_SRC/CMakeLists.txt" ] || { log "no vendor/llama.cpp/CMakeLists.txt in the sdist"; exit 1; }

# 3. configure + build only the tools the benchmarks use
log "configuring llama.cpp in $BUILD"
cmake -S "$LLAMA_SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DGGML_NATIVE=$NATIVE -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TOOLS=ON \
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_APP=OFF >/dev/null
if [ "${#missing[@]}" -gt 0 ]; then
  log "building ${missing[*]} with -j$JOBS (takes a while on few cores)"
  cmake --build "$BUILD" -j "$JOBS" --target "${missing[@]}"
  for t in "${missing[@]}"; do
    # "$BUILD/": find descends into the build dir even where it is a symlink (a worktree's bench/.cache)
    cp "$(find "$BUILD/" -type f -name "$t" -perm -u+x | head -n1)" "$BIN/$t"
  done
fi

# 4. the clip oracle: our program over llama.cpp's internal clip/mtmd API (the public mtmd API
# needs a text model to tokenize and does not show the preprocessed image), linked statically.
if [ "$need_oracle" -eq 1 ]; then
  log "building pllm-clip-oracle"
  TARGETS=(mtmd llama ggml)
  # newer llama.cpp links mtmd with a small hashing library of its own
  grep -q '^build vendor-hash:' "$BUILD/build.ninja" && TARGETS+=(vendor-hash)
  cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}"
  OPENMP=()
  grep -q '^GGML_OPENMP_ENABLED:INTERNAL=ON' "$BUILD/CMakeCache.txt" && OPENMP=(-fopenmp)
  HASH_LIB=()
  [ -f "$BUILD/vendor/hash/libvendor-hash.a" ] && HASH_LIB=("$BUILD/vendor/hash/libvendor-hash.a")
  ${CXX:-g++} -std=c++17 -O2 -I"$LLAMA_SRC/tools/mtmd" -I"$LLAMA_SRC/include" -I"$LLAMA_SRC/ggml/include" \
    "$ORACLE_SRC" -o "$BIN/pllm-clip-oracle" \
    "$BUILD/tools/mtmd/libmtmd.a" "$BUILD/src/libllama.a" "${HASH_LIB[@]}" \
    "$BUILD/ggml/src/libggml.a" "$BUILD/ggml/src/libggml-cpu.a" "$BUILD/ggml/src/libggml-base.a" \
    "${OPENMP[@]}" -lpthread -ldl -lm
fi
log "done: ${TOOLS[*]} in $BIN"
"$BIN/llama-bench" --help >/dev/null 2>&1 || log "warning: llama-bench --help failed"
[ ! -x "$BIN/llama-server" ] || "$BIN/llama-server" --version >/dev/null 2>&1 || log "warning: llama-server --version failed"
