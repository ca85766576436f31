#!/usr/bin/env bash
# Make Q4_0 and Q8_0 variants of SmolLM2-135M-Instruct from the Q4_1 file with llama.cpp's own
# llama-quantize (built by bench/setup_llamacpp.sh), into models/ (or $POCKETLLM_MODELS).
#
# The source is already quantised (Q4_1 matrices, Q8_0 tied embedding/output table), so this
# needs --allow-requantize: the new files carry the rounding of both formats and are a speed
# test bed, not a quality reference. The embedding table stays Q8_0 in both, as in the source,
# so that only the layer matrices change type between the three files.
set -euo pipefail
BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$BENCH/.." && pwd)"
MODELS_DIR="${POCKETLLM_MODELS:-$ROOT/models}"
SRC="$MODELS_DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
QUANTIZE="$BENCH/.cache/bin/llama-quantize"

[ -f "$SRC" ] || { echo "error: $SRC not found (scripts/run.sh fetches it)" >&2; exit 1; }
[ -x "$QUANTIZE" ] || { echo "error: $QUANTIZE not built (run bench/setup_llamacpp.sh)" >&2; exit 1; }

for type in Q4_0 Q8_0; do
  out="$MODELS_DIR/SmolLM2-135M-Instruct.$type.gguf"
  if [ -f "$out" ]; then echo "exists: $out"; continue; fi
  "$QUANTIZE" --allow-requantize --token-embedding-type q8_0 "$SRC" "$out.part" "$type" 2 >"$out.log" 2>&1 ||
    { echo "error: llama-quantize failed, see $out.log" >&2; exit 1; }
  mv "$out.part" "$out"
  rm -f "$out.log"
  echo "made:   $out"
done
