#!/usr/bin/env bash
# Our ARM decode loops against llama.cpp's NEON kernels under llvm-mca, in cycles per weight byte
# (issue P14): see run_mca_llamacpp.py and docs/PERFORMANCE.md. Needs llama.cpp's sources
# (bench/setup_llamacpp.sh); run_mca.sh installs the tools and runs it niced.
set -euo pipefail
exec "$(dirname "$0")/run_mca.sh" --vs-llamacpp "$@"
