#!/usr/bin/env python3
"""Speculative decoding against plain decoding (P19), pocketllm's side.

For each model and workload (rewrite a given text, edit given code, open chat), runs
`pocketllm run --json` plain and with each drafter, alternated, `--rounds` times, and reports the
median decode tokens/s, the ratio to plain decoding, the acceptance rate (guesses kept / guesses
verified) and the tokens each verify pass yielded. Greedy, so every run writes the same tokens
(checked: a run whose tokens differ from plain decoding's is an error).

  bench/speculative.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf \\
      --skip-layers 14,16,18,20,22,24 [--draft-model draft.gguf] [--rounds 3] [-n 128] [-t 2]

Prints a Markdown table (docs/PERFORMANCE.md, "Speculative decoding").
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORKLOADS = {
    "rewrite": ("Rewrite the following paragraph, keeping every sentence but fixing the spelling: "
                "The comittee met on tuesday to discus the budget for next year. They agreed that the "
                "new library wil open at nine in the morning and close at eight in the evening. The "
                "repairs to the old bridge over the river wil start in march and take six weeks."),
    "code edit": ("Rename the variable `total` to `running_sum` in this Python function and return the "
                  "whole function:\n\ndef add_all(values):\n    total = 0\n    for v in values:\n"
                  "        total = total + v\n    return total\n"),
    "open chat": "Tell me about the history of tea and how it spread around the world.",
}


def run(binary: str, model: str, prompt: str, n: int, threads: int, extra: list[str]) -> dict:
    cmd = [binary, "run", "-m", model, "-t", str(threads), "-n", str(n), "--json", "-p", prompt, *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        sys.exit(f"error: {' '.join(cmd[:8])} ...: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, action="append", help="GGUF file (repeatable)")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "pocketllm"))
    ap.add_argument("--skip-layers", action="append", default=[],
                    help="layers a skip draft leaves out, one list per --model (e.g. 14,16,18)")
    ap.add_argument("--draft-model", action="append", default=[], help="a draft model per --model ('' for none)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-n", type=int, default=128, help="tokens to generate")
    ap.add_argument("-t", type=int, default=2, help="threads")
    ap.add_argument("--draft-max", type=int, default=8)
    a = ap.parse_args()

    print(f"| model | workload | drafter | decode tok/s | vs plain | acceptance | tokens / verify pass |")
    print(f"|---|---|---|---|---|---|---|")
    for i, model in enumerate(a.model):
        drafters = {"plain": [], "lookup": ["--draft", "lookup"]}
        if i < len(a.skip_layers) and a.skip_layers[i]:
            drafters["skip"] = ["--draft", "skip", "--draft-skip-layers", a.skip_layers[i]]
        if i < len(a.draft_model) and a.draft_model[i]:
            drafters["model"] = ["--draft", "model", "--draft-model", a.draft_model[i]]
        for wname, prompt in WORKLOADS.items():
            tps: dict[str, list[float]] = {d: [] for d in drafters}
            last: dict[str, dict] = {}
            for _ in range(a.rounds):
                for d, extra in drafters.items():  # alternated within each round
                    r = run(a.bin, model, prompt, a.n, a.t, [*extra, "--draft-max", str(a.draft_max)] if extra else [])
                    tps[d].append(r["decode_tps"])
                    last[d] = r
            plain = statistics.median(tps["plain"])
            for d in drafters:
                r = last[d]
                if r["tokens"] != last["plain"]["tokens"]:
                    sys.exit(f"error: {d} on {wname} wrote other tokens than plain decoding")
                med = statistics.median(tps[d])
                acc = f"{r['draft_accepted'] / r['drafted']:.2f}" if r["drafted"] else "–"
                per_pass = f"{(r['draft_accepted'] + r['draft_passes']) / r['draft_passes']:.2f}" if r["draft_passes"] else "–"
                print(f"| {os.path.basename(model)} | {wname} | {d} | {med:.1f} | {med / plain:.2f}× | {acc} | {per_pass} |",
                      flush=True)


if __name__ == "__main__":
    main()
