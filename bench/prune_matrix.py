#!/usr/bin/env python3
"""Structured pruning of SmolLM2-135M at several FFN ratios: parameters, file size, perplexity and
decode speed before and after.

    scripts/make_corpus.sh                                   # once
    bench/prune_matrix.py [--ratios 0.10,0.25,0.35] [--head-types q4_0] [--rounds 5] [--no-speed]

The importance statistics come from the first --calib-bytes of models/corpus/python-docs.txt, the
perplexity from the text after --eval-offset (disjoint), 16 chunks of 512 tokens. Decode speed is
`pocketllm bench -p 64 -n 128 -t 2` (exact and --int8-act), alternating the original and the pruned
files round by round, median of the rounds; run it on an idle machine. --head-types adds, per type
T, the original with only its output head re-quantised to T (`prune --output-type T` alone) and the
largest ratio with the head at T too, so the head's share of the speed-up is measured apart from the
pruning's. Results: a markdown table on stdout and bench/.cache/prune/results.json.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.environ.get("POCKETLLM_MODELS", os.path.join(ROOT, "models"))
CACHE = os.path.join(ROOT, "bench", ".cache", "prune")


def run(cmd):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(map(str, cmd))}\n{p.stderr[-3000:]}")
    return p


def n_params(path):
    from gguf import GGUFReader
    return sum(int(t.n_elements) for t in GGUFReader(path).tensors)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pocketllm", default=os.path.join(ROOT, "build", "pocketllm"))
    ap.add_argument("--source", default=os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--corpus", default=os.path.join(MODELS, "corpus", "python-docs.txt"))
    ap.add_argument("--calib-bytes", type=int, default=200_000)
    ap.add_argument("--eval-offset", type=int, default=250_000)
    ap.add_argument("--ratios", default="0.10,0.25,0.35")
    ap.add_argument("--head-types", default="q4_0", help="comma-separated; empty: none")
    ap.add_argument("--chunks", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-speed", action="store_true")
    ap.add_argument("-t", "--threads", type=int, default=2)
    args = ap.parse_args()
    os.makedirs(CACHE, exist_ok=True)
    text = open(args.corpus, "rb").read()
    calib, evalf = os.path.join(CACHE, "calib.txt"), os.path.join(CACHE, "eval.txt")
    open(calib, "wb").write(text[:args.calib_bytes])
    open(evalf, "wb").write(text[args.eval_offset:])
    stats = os.path.join(CACHE, "stats.gguf")

    files = [("original", args.source)]
    def prune(out, ratio, extra):
        imp = ["--stats", stats] if os.path.exists(stats) else ["--calib", calib, "--save-stats", stats]
        ffn = ["--ffn", ratio] if float(ratio) > 0 else []
        run([args.pocketllm, "prune", args.source, out, "-t", str(args.threads)] + ffn + imp + extra)

    ratios = args.ratios.split(",")
    for r in ratios:
        out = os.path.join(CACHE, f"pruned-{r}.gguf")
        prune(out, r, [])
        files.append((f"FFN -{float(r) * 100:.0f}%", out))
    for t in filter(None, args.head_types.split(",")):
        for r in ("0", ratios[-1]):
            out = os.path.join(CACHE, f"pruned-{r}-head-{t}.gguf")
            prune(out, r, ["--output-type", t])
            label = f"head {t}" if float(r) == 0 else f"FFN -{float(r) * 100:.0f}% + head {t}"
            files.append((label, out))

    rows = []
    for label, path in files:
        s = json.loads(run([args.pocketllm, "perplexity", "-m", path, "-f", evalf, "-c", "512", "--chunks",
                            str(args.chunks), "-t", str(args.threads), "--json"]).stdout)
        rows.append({"label": label, "path": path, "params_m": n_params(path) / 1e6,
                     "mb": os.path.getsize(path) / 1e6, "ppl": s["ppl"], "tg": {}, "tg_int8": {}})
        print(f"{label}: ppl {s['ppl']:.3f}", file=sys.stderr)
    if not args.no_speed:
        for rnd in range(args.rounds):
            order = rows if rnd % 2 == 0 else rows[::-1]
            for row in order:
                for key, extra in (("tg", []), ("tg_int8", ["--int8-act"])):
                    j = json.loads(run([args.pocketllm, "bench", "-m", row["path"], "-p", "64", "-n", "128", "-r",
                                        "1", "-t", str(args.threads), "--bw-mib", "0", "--json"] + extra).stdout)
                    row[key].setdefault("runs", []).append(j["tg_tps"])
        for row in rows:
            for key in ("tg", "tg_int8"):
                # the median: one slow round (a noisy neighbour on a shared VM) moves a mean a lot
                row[key]["median"] = statistics.median(row[key]["runs"])
    with open(os.path.join(CACHE, "results.json"), "w") as f:
        json.dump(rows, f, indent=1)
    base = rows[0]
    print("| model | params (M) | file MB | PPL | tg128 tok/s (exact) | vs original | tg128 tok/s (int8) | vs original |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        sp = lambda k: (f"{r[k]['median']:.1f} | {r[k]['median'] / base[k]['median']:.2f}x" if "median" in r[k]
                        else "- | -")
        print(f"| {r['label']} | {r['params_m']:.2f} | {r['mb']:.1f} | {r['ppl']:.3f} | {sp('tg')} | {sp('tg_int8')} |")


if __name__ == "__main__":
    main()
