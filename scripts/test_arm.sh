#!/usr/bin/env bash
# Cross-build the kernel tests (test_kernels, test_quant, test_attention, test_attention_kv, test_gemm, test_matvec_rows) for aarch64 and run them under qemu-user:
#   -cpu max         all features (NEON + dotprod): every ISA table is tested
#   PLLM_ISA=neon    kernels() capped to baseline NEON
#   -cpu cortex-a53  ARMv8.0 without dotprod: the dotprod table must be absent
# Exits non-zero on any failure; exits 0 with a SKIP message only when the cross
# toolchain / qemu is missing and cannot be installed (not root or no apt-get).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${PLLM_ARM_BUILD_DIR:-$ROOT/build-arm}"
GTEST_SRC="${PLLM_GTEST_SOURCE_DIR:-/usr/src/googletest}"

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

cmake -S "$ROOT" -B "$BUILD" -G Ninja \
  -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/aarch64-linux-gnu.cmake" \
  -DCMAKE_BUILD_TYPE=Release \
  -DPLLM_KERNELS_ONLY=ON -DPLLM_BUILD_TOOLS=OFF -DPLLM_BUILD_TESTS=ON \
  -DPLLM_GTEST_SOURCE_DIR="$GTEST_SRC" >/dev/null
if ! ninja -C "$BUILD" -j"$(nproc)" test_kernels test_quant test_attention test_attention_kv test_gemm test_matvec_rows >"$BUILD/build.log" 2>&1; then
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
T="$BUILD/src/kernels/test_kernels"
QT="$BUILD/src/kernels/test_quant"
# gtest prints "SKIPPED" lines for ISAs that are not runnable; assert the expected ones.
expect_isas() {  # expect_isas <cpu> <env value or empty> <want neon table> <want dotprod table>
  local out
  out=$(env ${2:+PLLM_ISA=$2} $Q -cpu "$1" "$T" --gtest_filter='*TableIsComplete*:Dispatch.*' 2>&1) || { echo "$out"; return 1; }
  echo "$out" | grep -q "OK \] AllIsas/KernelIsa.TableIsComplete/neon" || { echo "neon table missing on $1"; return 1; }
  if [ "$4" = yes ]; then
    echo "$out" | grep -q "OK \] AllIsas/KernelIsa.TableIsComplete/dotprod" || { echo "dotprod table missing on $1"; return 1; }
  else
    echo "$out" | grep -q "SKIPPED \] AllIsas/KernelIsa.TableIsComplete/dotprod" || { echo "dotprod table present on $1"; return 1; }
  fi
}
run "test_quant (cpu max)" $Q -cpu max "$QT" --gtest_brief=1
run "test_kernels (cpu max: scalar, neon, dotprod)" $Q -cpu max "$T" --gtest_brief=1
run "test_kernels (cpu max, PLLM_ISA=neon)" env PLLM_ISA=neon $Q -cpu max "$T" --gtest_brief=1
run "test_kernels (cpu cortex-a53: no dotprod)" $Q -cpu cortex-a53 "$T" --gtest_brief=1
run "test_attention (cpu max: scalar, neon, dotprod)" $Q -cpu max "$BUILD/src/kernels/test_attention" --gtest_brief=1
run "test_attention (cpu cortex-a53: scalar, neon)" $Q -cpu cortex-a53 "$BUILD/src/kernels/test_attention" --gtest_brief=1
run "test_attention_kv (cpu max: scalar, neon, dotprod)" $Q -cpu max "$BUILD/src/kernels/test_attention_kv" --gtest_brief=1
run "test_attention_kv (cpu cortex-a53: scalar, neon)" $Q -cpu cortex-a53 "$BUILD/src/kernels/test_attention_kv" --gtest_brief=1
run "test_gemm (cpu max: scalar, neon, dotprod)" $Q -cpu max "$BUILD/src/kernels/test_gemm" --gtest_brief=1
run "test_gemm (cpu cortex-a53: scalar, neon)" $Q -cpu cortex-a53 "$BUILD/src/kernels/test_gemm" --gtest_brief=1
run "test_matvec_rows (cpu max: scalar, neon, dotprod)" $Q -cpu max "$BUILD/src/kernels/test_matvec_rows" --gtest_brief=1
run "test_matvec_rows (cpu cortex-a53: scalar, neon)" $Q -cpu cortex-a53 "$BUILD/src/kernels/test_matvec_rows" --gtest_brief=1
run "ISA availability (max: neon+dotprod)" expect_isas max "" yes yes
run "ISA availability (cortex-a53: neon only)" expect_isas cortex-a53 "" yes no
run "PLLM_ISA=dotprod on cortex-a53 caps to neon" env PLLM_ISA=dotprod $Q -cpu cortex-a53 "$T" --gtest_filter='Dispatch.*' --gtest_brief=1
if [ $status -ne 0 ]; then echo "test_arm: FAILED"; else echo "test_arm: all ARM kernel tests passed"; fi
exit $status
