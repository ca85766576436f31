#!/usr/bin/env bash
# Build llama.cpp's llama-bench, llama-batched-bench, llama-quantize and llama-server for the
# side-by-side comparisons (llama-server: bench/server_compare.py), llama-debug, whose
# --save-logits gives the reference logits of bench/arch_vs_llamacpp.py, and llama-lookup /
# llama-speculative (bench/speculative.py).
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
                 llama-debug llama-lookup llama-speculative) ;;
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
if [ "${#missing[@]}" -eq 0 ]; then
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
LLAMA_SRC="$SRC_ROOT/vendor/llama.cpp"
[ -f "$LLAMA_SRC/CMakeLists.txt" ] || { log "no vendor/llama.cpp/CMakeLists.txt in the sdist"; exit 1; }

# 3. configure + build only the tools the benchmarks use
log "configuring llama.cpp in $BUILD"
cmake -S "$LLAMA_SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DGGML_NATIVE=$NATIVE -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TOOLS=ON \
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_APP=OFF >/dev/null
log "building ${missing[*]} with -j$JOBS (takes a while on few cores)"
cmake --build "$BUILD" -j "$JOBS" --target "${missing[@]}"
for t in "${missing[@]}"; do
  cp "$(find "$BUILD" -type f -name "$t" -perm -u+x | head -n1)" "$BIN/$t"
done
log "done: ${TOOLS[*]} in $BIN"
"$BIN/llama-bench" --help >/dev/null 2>&1 || log "warning: llama-bench --help failed"
[ ! -x "$BIN/llama-server" ] || "$BIN/llama-server" --version >/dev/null 2>&1 || log "warning: llama-server --version failed"
