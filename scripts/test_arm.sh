#!/usr/bin/env bash
# Cross-build the kernel tests (test_kernels, test_quant, test_attention_kv, test_gemm,
# test_matvec_rows, test_f16act, test_act, test_static_act_kernels, test_i16act) for aarch64 and run them
# under qemu-user:
#   -cpu max         all features (NEON, dotprod, i8mm, FP16 arithmetic): every ISA table is tested,
#                    the W4A16 kernels use fp16 FMLA (and their f32 fallback is tested directly)
#   PLLM_ISA=neon / dotprod   kernels() capped to those levels
#   -cpu cortex-a76  ARMv8.2 with dotprod and FP16 arithmetic but no i8mm: the i8mm table must be absent
#   -cpu cortex-a53  ARMv8.0 without dotprod, i8mm or FP16 arithmetic: only the NEON table, and the
#                    W4A16 kernels must be the f32-accumulating fallback
# Exits non-zero on any failure; exits 0 with a SKIP message only when the cross
# toolchain / qemu is missing and cannot be installed (not root or no apt-get).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${PLLM_ARM_BUILD_DIR:-$ROOT/build-arm}"
GTEST_SRC="${PLLM_GTEST_SOURCE_DIR:-/usr/src/googletest}"
TESTS="test_kernels test_quant test_attention_kv test_gemm test_matvec_rows test_f16act test_act test_static_act_kernels
test_i16act"

have_tools() {
  command -v aarch64-linux-gnu-g++ >/dev/null && command -v qemu-aarch64-static >/dev/null &&
    [ -f "$GTEST_SRC/CMakeLists.txt" ]
}

if ! have_tools; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "test_arm: installing cross toolchain, qemu-user-static, googletest sources"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq g++-aarch64-linux-gnu qemu-user-static googletest >/dev/null
  fi
fi
if ! have_tools; then
  echo "SKIP test_arm: aarch64 cross toolchain / qemu-aarch64-static / googletest sources unavailable" \
       "(need root + apt-get to install them)"
  exit 0
fi

LAUNCHER=()  # the compiler cache, as scripts/common.sh sets it up for the other builds
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=true
  LAUNCHER=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$ROOT" -B "$BUILD" -G Ninja "${LAUNCHER[@]}" \
  -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/aarch64-linux-gnu.cmake" \
  -DCMAKE_BUILD_TYPE=Release \
  -DPLLM_KERNELS_ONLY=ON -DPLLM_BUILD_TOOLS=OFF -DPLLM_BUILD_TESTS=ON \
  -DPLLM_GTEST_SOURCE_DIR="$GTEST_SRC" >/dev/null
# shellcheck disable=SC2086
if ! ninja -C "$BUILD" -j"${PLLM_ARM_JOBS:-$(nproc)}" $TESTS >"$BUILD/build.log" 2>&1; then
  grep -E "error|FAILED" -A5 "$BUILD/build.log" | head -60
  echo "test_arm: cross build FAILED (full log: $BUILD/build.log)"
  exit 1
fi

status=0
run() {  # run <label> <env...> -- <qemu cpu> <binary>
  local label=$1; shift
  echo "=== $label"
  if ! "$@"; then
    echo "FAILED: $label"
    status=1
  fi
}
Q=qemu-aarch64-static
B="$BUILD/src/kernels"
T="$B/test_kernels"
# gtest prints "SKIPPED" lines for ISAs that are not runnable; assert the expected ones.
expect_isas() {  # expect_isas <cpu> <want dotprod table: yes|no> <want i8mm table: yes|no>
  local out
  out=$($Q -cpu "$1" "$T" --gtest_filter='*TableIsComplete*:Dispatch.*' 2>&1) || { echo "$out"; return 1; }
  echo "$out" | grep -q "OK \] AllIsas/KernelIsa.TableIsComplete/neon" || { echo "neon table missing on $1"; return 1; }
  local isa want
  for isa in dotprod i8mm; do
    if [ "$isa" = dotprod ]; then want=$2; else want=$3; fi
    if [ "$want" = yes ]; then
      echo "$out" | grep -q "OK \] AllIsas/KernelIsa.TableIsComplete/$isa" || { echo "$isa table missing on $1"; return 1; }
    else
      echo "$out" | grep -q "SKIPPED \] AllIsas/KernelIsa.TableIsComplete/$isa" || { echo "$isa table present on $1"; return 1; }
    fi
  done
}
expect_selected() {  # expect_selected <cpu> <PLLM_ISA value or empty> <isa kernels() must pick>
  local out
  out=$(env ${2:+PLLM_ISA=$2} $Q -cpu "$1" "$T" --gtest_filter='Dispatch.*' 2>&1) || { echo "$out"; return 1; }
  echo "$out" | grep -q "^\[ selected \] $3\$" || { echo "$out" | grep "selected"; echo "expected $3"; return 1; }
}
expect_f16act() {  # expect_f16act <cpu> <"fp16 FMLA" or "f32 FMA">
  local out
  out=$($Q -cpu "$1" "$B/test_f16act" --gtest_filter='F16ActNeon.*' 2>&1) || { echo "$out"; return 1; }
  echo "$out" | grep "^\[ f16act \]"
  ! echo "$out" | grep "^\[ f16act \]" | grep -vq "$2" || { echo "expected $2 on $1"; return 1; }
}
# The scalar twins run once here (test_kernels on cpu max: the reference code on an ARM
# compiler); the other binaries skip their scalar cases, which re-run the same reference code
# (tested natively in the x86 build) at qemu's speed. Where every ARM level installs the same
# kernels (attention: dispatch.cpp) only the neon cases run. int16 activations: the dotprod and
# i8mm tables have their own tiles (arm/i16act_dotprod.cpp), tested against the twin and, bit
# for bit, against the neon table's (I16ActArm); the i8mm table installs the dotprod tiles
# (I16ActArm.DotprodTablesHaveTheirOwnTiles), so its generic cases would re-run them.
NOSCALAR='--gtest_filter=-*/scalar'
NEON_ONLY='--gtest_filter=-*/scalar:*/dotprod:*/i8mm'
run "test_quant (cpu max)" $Q -cpu max "$B/test_quant" --gtest_brief=1
run "test_kernels (cpu max: scalar, neon, dotprod, i8mm)" $Q -cpu max "$T" --gtest_brief=1
run "test_kernels (cpu max, PLLM_ISA=neon)" env PLLM_ISA=neon $Q -cpu max "$T" --gtest_brief=1
run "test_kernels (cpu cortex-a76: no i8mm)" $Q -cpu cortex-a76 "$T" --gtest_brief=1
run "test_kernels (cpu cortex-a53: no dotprod)" $Q -cpu cortex-a53 "$T" --gtest_brief=1
run "test_attention_kv (cpu max: neon)" $Q -cpu max "$B/test_attention_kv" --gtest_brief=1 "$NEON_ONLY"
run "test_attention_kv (cpu cortex-a53: neon)" $Q -cpu cortex-a53 "$B/test_attention_kv" --gtest_brief=1 "$NOSCALAR"
run "test_gemm (cpu max: neon, dotprod, i8mm)" $Q -cpu max "$B/test_gemm" --gtest_brief=1 "$NOSCALAR"
run "test_gemm (cpu cortex-a76: neon, dotprod)" $Q -cpu cortex-a76 "$B/test_gemm" --gtest_brief=1 "$NOSCALAR"
run "test_gemm (cpu cortex-a53: neon)" $Q -cpu cortex-a53 "$B/test_gemm" --gtest_brief=1 "$NOSCALAR"
run "test_matvec_rows (cpu max: neon, dotprod, i8mm)" $Q -cpu max "$B/test_matvec_rows" --gtest_brief=1 "$NOSCALAR"
run "test_matvec_rows (cpu cortex-a53: neon)" $Q -cpu cortex-a53 "$B/test_matvec_rows" --gtest_brief=1 "$NOSCALAR"
run "test_f16act (cpu max: fp16 FMLA kernels + f32 fallback)" $Q -cpu max "$B/test_f16act" --gtest_brief=1
run "test_f16act (cpu cortex-a76: fp16 FMLA, no i8mm)" $Q -cpu cortex-a76 "$B/test_f16act" --gtest_brief=1
run "test_f16act (cpu cortex-a53: no FP16 arithmetic)" $Q -cpu cortex-a53 "$B/test_f16act" --gtest_brief=1
run "test_act (cpu max: scalar, neon tables)" $Q -cpu max "$B/test_act" --gtest_brief=1
run "test_static_act_kernels (cpu max: scalar, neon, dotprod, i8mm)" $Q -cpu max "$B/test_static_act_kernels" --gtest_brief=1
run "test_i16act (cpu max: neon, dotprod; I16ActArm with i8mm)" $Q -cpu max "$B/test_i16act" --gtest_brief=1 \
  --gtest_filter='-*/scalar:*/i8mm'
run "test_i16act (cpu cortex-a76: dotprod tiles = neon)" $Q -cpu cortex-a76 "$B/test_i16act" --gtest_brief=1 \
  --gtest_filter='I16ActArm.*'
run "test_i16act (cpu cortex-a53: neon)" $Q -cpu cortex-a53 "$B/test_i16act" --gtest_brief=1 "$NOSCALAR"
run "ISA availability (max: neon+dotprod+i8mm)" expect_isas max yes yes
run "ISA availability (cortex-a76: neon+dotprod)" expect_isas cortex-a76 yes no
run "ISA availability (cortex-a53: neon only)" expect_isas cortex-a53 no no
run "selection: cpu max picks i8mm" expect_selected max "" i8mm
run "selection: PLLM_ISA=dotprod on cpu max" expect_selected max dotprod dotprod
run "selection: PLLM_ISA=neon on cpu max" expect_selected max neon neon
run "selection: cortex-a76 picks dotprod (PLLM_ISA=i8mm too)" expect_selected cortex-a76 i8mm dotprod
run "selection: PLLM_ISA=dotprod on cortex-a53 caps to neon" expect_selected cortex-a53 dotprod neon
run "W4A16 kernels: fp16 FMLA on cpu max" expect_f16act max "fp16 FMLA"
run "W4A16 kernels: f32 fallback on cortex-a53" expect_f16act cortex-a53 "f32 FMA"
if [ $status -ne 0 ]; then echo "test_arm: FAILED"; else echo "test_arm: all ARM kernel tests passed"; fi
exit $status
