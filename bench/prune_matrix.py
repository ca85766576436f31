#!/usr/bin/env python3
"""Structured pruning of SmolLM2-135M at several FFN ratios and with each compensation: parameters,
file size, perplexity, KL divergence to the unpruned model and decode speed.

    scripts/make_corpus.sh                                   # once
    bench/prune_matrix.py [--ratios 0.10,0.25,0.35] [--compensations none,bias,lsq,lsq-bias]
                          [--plans uniform,sensitivity] [--head-types q4_0] [--rounds 5] [--no-speed]

Calibration (importance, the compensation's activations, the sensitivity KL) uses the first
--calib-bytes of models/corpus/python-docs.txt; perplexity and KL the text after --eval-offset
(disjoint), 16 chunks of 512 tokens. For each ratio every compensation runs with the uniform plan;
the sensitivity plan runs with the last compensation listed. --head-types adds, per type T, the
original with only its output head re-quantised to T and the largest ratio's best setting (last
compensation, last plan) with the head at T too. Decode speed is `pocketllm bench -p 64 -n 128
-t 2` (exact and --int8-act), alternating the files round by round, median of the rounds; run it
on an idle machine. Results: a markdown table on stdout and bench/.cache/prune/results.json.
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
    ap.add_argument("--calib-tokens", type=int, default=32768)
    ap.add_argument("--compensations", default="none,bias,lsq,lsq-bias")
    ap.add_argument("--plans", default="uniform,sensitivity")
    ap.add_argument("--head-types", default="q4_0", help="comma-separated; empty: none")
    ap.add_argument("--extra", default="", help="more prune flags for every pruned file (space-separated)")
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

    files = [("original", args.source)]
    extra = args.extra.split()
    # One calibration run for everything: statistics and Gram matrices saved, then reused.
    stats, gram = os.path.join(CACHE, "stats.gguf"), os.path.join(CACHE, "gram.gguf")
    fresh = lambda p: os.path.exists(p) and os.path.getmtime(p) > os.path.getmtime(args.pocketllm)
    if not (fresh(stats) and fresh(gram)):
        run([args.pocketllm, "prune", args.source, os.path.join(CACHE, "calibration-run.gguf"), "-t",
             str(args.threads), "--ffn", "0.1", "--compensate", "lsq-bias", "--calib", calib, "--calib-tokens",
             str(args.calib_tokens), "--save-stats", stats, "--save-gram", gram])

    def prune(out, ratio, flags):
        if fresh(out):
            return  # made by this build already (the runs take minutes each)
        ffn = ["--ffn", ratio] if float(ratio) > 0 else []
        run([args.pocketllm, "prune", args.source, out, "-t", str(args.threads), "--stats", stats, "--gram", gram,
             "--sens-text", calib] + ffn + flags + extra)

    comps = args.compensations.split(",")
    plans = args.plans.split(",")
    ratios = args.ratios.split(",")
    best = ["--compensate", comps[-1], "--ffn-plan", plans[-1]]
    for r in ratios:
        pct = f"FFN -{float(r) * 100:.0f}%"
        for c in comps:
            out = os.path.join(CACHE, f"pruned-{r}-{c}.gguf")
            prune(out, r, ["--compensate", c])
            files.append((f"{pct} {c}", out))
        for p in plans[1:]:
            out = os.path.join(CACHE, f"pruned-{r}-{comps[-1]}-{p}.gguf")
            prune(out, r, ["--compensate", comps[-1], "--ffn-plan", p])
            files.append((f"{pct} {comps[-1]} {p}", out))
    for t in filter(None, args.head_types.split(",")):
        out = os.path.join(CACHE, f"head-{t}.gguf")
        prune(out, "0", ["--output-type", t])
        files.append((f"head {t} alone", out))
        out = os.path.join(CACHE, f"pruned-{ratios[-1]}-best-head-{t}.gguf")
        prune(out, ratios[-1], best + ["--output-type", t])
        files.append((f"FFN -{float(ratios[-1]) * 100:.0f}% {comps[-1]} {plans[-1]} + head {t}", out))

    base_logits = os.path.join(CACHE, "base-logits.bin")
    rows = []
    for label, path in files:
        kl = ["--save-logits", base_logits] if path == args.source else ["--kl-base", base_logits]
        s = json.loads(run([args.pocketllm, "perplexity", "-m", path, "-f", evalf, "-c", "512", "--chunks",
                            str(args.chunks), "-t", str(args.threads), "--json"] + kl).stdout)
        rows.append({"label": label, "path": path, "params_m": n_params(path) / 1e6,
                     "mb": os.path.getsize(path) / 1e6, "ppl": s["ppl"], "kl": s.get("kl_mean", 0.0),
                     "tg": {}, "tg_int8": {}})
        print(f"{label}: ppl {s['ppl']:.3f} kl {rows[-1]['kl']:.4f}", file=sys.stderr)
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
    print("| model | params (M) | file MB | PPL | vs original | KL | tg128 tok/s (exact) | vs original "
          "| tg128 tok/s (int8) | vs original |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        sp = lambda k: (f"{r[k]['median']:.1f} | {r[k]['median'] / base[k]['median']:.2f}x" if "median" in r[k]
                        else "- | -")
        print(f"| {r['label']} | {r['params_m']:.2f} | {r['mb']:.1f} | {r['ppl']:.3f} | "
              f"{100 * (r['ppl'] / base['ppl'] - 1):+.1f}% | {r['kl']:.4f} | {sp('tg')} | {sp('tg_int8')} |")


if __name__ == "__main__":
    main()
