#!/usr/bin/env bash
# Static cycle estimates of the kernels' inner loops (issue P7): see run_mca.py and
# docs/PERFORMANCE.md "ARM estimates (llvm-mca)". Needs clang (any recent) and llvm-mca; LLVM >= 17
# for the znver4 and Neoverse N1 models (Debian 12: apt-get install llvm-19; the AArch64 target
# headers: g++-aarch64-linux-gnu). Runs niced: the TUs
# compile one at a time (~1 min).
set -euo pipefail
# What it compiles and measures with, installed where we can (root + apt), as scripts/common.sh does.
# shellcheck source=../../scripts/common.sh
source "$(dirname "$0")/../../scripts/common.sh"
DEB_PACKAGES=(clang llvm-19 g++-aarch64-linux-gnu)
DEB_OPTIONAL=()
install_deps
# --vs-llamacpp: run_mca_llamacpp.py (ours against llama.cpp's NEON kernels) instead.
script=run_mca.py
if [ "${1:-}" = --vs-llamacpp ]; then
  script=run_mca_llamacpp.py
  shift
fi
exec nice -n 10 python3 "$(dirname "$0")/$script" "$@"
