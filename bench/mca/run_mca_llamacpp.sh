#!/usr/bin/env bash
# Our ARM decode loops against llama.cpp's NEON kernels under llvm-mca, in cycles per weight byte
# (issue P14): see run_mca_llamacpp.py and docs/PERFORMANCE.md. Needs what run_mca.sh needs and
# llama.cpp's sources (bench/setup_llamacpp.sh). Runs niced.
set -euo pipefail
# What it compiles and measures with, installed where we can (root + apt), as scripts/common.sh does.
# shellcheck source=../../scripts/common.sh
source "$(dirname "$0")/../../scripts/common.sh"
DEB_PACKAGES=(clang llvm-19 g++-aarch64-linux-gnu)
DEB_OPTIONAL=()
install_deps
exec nice -n 10 python3 "$(dirname "$0")/run_mca_llamacpp.py" "$@"
