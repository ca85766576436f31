#!/usr/bin/env bash
# Quick start: install what is missing, build, fetch the default model, answer a prompt.
#   scripts/run.sh "What is the capital of France?"   [extra pocketllm run flags]
source "$(dirname "$0")/common.sh"
PROMPT="${1:-What is the capital of France?}"
shift || true
install_deps
[ -x "$ROOT/build/pocketllm" ] || build "$ROOT/build" -DCMAKE_BUILD_TYPE=Release -DPLLM_BUILD_TESTS=OFF
fetch_model
"$ROOT/build/pocketllm" run -m "$DEFAULT_MODEL" -p "$PROMPT" "$@"
log "interactive chat: build/pocketllm chat   (other commands: build/pocketllm --help)"
