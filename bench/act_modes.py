#!/usr/bin/env python3
"""Quality of our activation modes against exact mode, for choosing the default.

For each model file: perplexity on a text and KL divergence against exact mode's log-probs
(`pocketllm perplexity --save-logits` / `--kl-base`), then greedy answers (`run --temp 0`, the
model's chat template) to a handful of prompts in every mode, each compared token by token
with exact mode's: the first position where a mode's answer leaves exact mode's, or "same".

    bench/act_modes.py [MODEL ...] [--modes int16,int8,f16] [--text models/corpus/python-docs.txt]

Timings are not measured here (bench/compare.py does that).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS_DIR = os.environ.get("POCKETLLM_MODELS", os.path.join(ROOT, "models"))
MODE_FLAGS = {"exact": ["--exact"], "int16": ["--int16-act"], "int8": ["--int8-act"], "f16": ["--f16-act"]}
PROMPTS = [
    "What is the capital of France?",
    "Name three primary colors.",
    "How many legs does a spider have?",
    "Write a haiku about the sea.",
    "What is 12 times 7?",
    "Explain in one sentence what a CPU does.",
    "Translate 'good morning' into Spanish.",
    "Who wrote Romeo and Juliet?",
]


def pocketllm(args, cmd):
    proc = subprocess.run([args.pocketllm] + cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)}\n{proc.stderr}")
    return proc.stdout


def perplexity(args, model, mode, base, save):
    cmd = ["perplexity", "-m", model, "-f", args.text, "-c", "512", "--chunks", str(args.chunks), "--json",
           "-t", str(args.t)] + MODE_FLAGS[mode]
    cmd += ["--save-logits", base] if save else ["--kl-base", base]
    return json.loads(pocketllm(args, cmd))


def answer(args, model, mode, prompt):
    out = pocketllm(args, ["run", "-m", model, "-p", prompt, "--temp", "0", "-n", str(args.n), "--json",
                           "-t", str(args.t)] + MODE_FLAGS[mode])
    return json.loads(out)


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*")
    ap.add_argument("--pocketllm", default=os.path.join(ROOT, "build", "pocketllm"))
    ap.add_argument("--modes", default="int16,int8,f16", help="modes compared with exact (default int16,int8,f16)")
    ap.add_argument("--text", default=os.path.join(MODELS_DIR, "corpus", "python-docs.txt"))
    ap.add_argument("--chunks", type=int, default=20, help="512-token chunks scored (default 20)")
    ap.add_argument("-n", type=int, default=32, help="greedy tokens per answer (default 32)")
    ap.add_argument("-t", type=int, default=2, help="threads (default 2)")
    args = ap.parse_args()
    modes = args.modes.split(",")
    for m in modes:
        if m not in MODE_FLAGS or m == "exact":
            sys.exit(f"error: unknown mode {m!r}")
    models = args.models or [os.path.join(MODELS_DIR, "SmolLM2-135M-Instruct.Q4_1.gguf")]

    for model in models:
        name = os.path.basename(model)
        with tempfile.TemporaryDirectory() as tmp:
            base = os.path.join(tmp, "exact.bin")
            ex = perplexity(args, model, "exact", base, save=True)
            print(f"\n{name}: perplexity on {os.path.basename(args.text)}, {ex['tokens']} scored tokens\n")
            print("| mode | ppl | vs exact | KL mean | KL p99 | top-1 agrees |")
            print("|---|---|---|---|---|---|")
            print(f"| exact | {ex['ppl']:.4f} | – | – | – | – |")
            for m in modes:
                r = perplexity(args, model, m, base, save=False)
                print(f"| {m} | {r['ppl']:.4f} | {100 * (r['ppl'] / ex['ppl'] - 1):+.3f} % | {r['kl_mean']:.2e} "
                      f"| {r['kl_p99']:.2e} | {100 * r['top1_agree']:.2f} % |")
        print(f"\n{name}: greedy answers ({args.n} tokens) against exact mode's\n")
        print("| prompt | exact | " + " | ".join(modes) + " |")
        print("|---|---|" + "---|" * len(modes))
        same = {m: 0 for m in modes}
        for prompt in PROMPTS:
            ref = answer(args, model, "exact", prompt)
            cells = []
            for m in modes:
                got = answer(args, model, m, prompt)
                d = first_difference(got["tokens"], ref["tokens"])
                same[m] += d is None
                cells.append("same" if d is None else f"differs at token {d}: {got['text'][:40]!r}")
            print(f"| {prompt} | {ref['text'][:48]!r} | " + " | ".join(cells) + " |")
        print("\nanswers equal to exact mode's: " + ", ".join(f"{m} {same[m]}/{len(PROMPTS)}" for m in modes))


if __name__ == "__main__":
    main()
