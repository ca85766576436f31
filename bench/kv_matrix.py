#!/usr/bin/env python3
"""KV-cache types and the sliding window at long context (issue P3), measured in one run:

for every KV type (f16, q8, q4), without and with a window (default 512 + 4 sinks):
  * `pocketllm bench -p DEPTH -n N`: decode tok/s after a DEPTH-token prompt, KV bytes, peak RSS;
  * `pocketllm perplexity -c DEPTH` over the corpus (when --corpus is given): ppl, and KL / top-1
    agreement against the f16 no-window run of the same chunks;
and, if llama.cpp's llama-bench is built (bench/setup_llamacpp.sh), its decode speed at the same
depth with f16 and q8_0 KV (flash attention on, which quantised V needs) for comparison.

Rounds alternate the configurations (the order flips each round) so drifts of the machine hit all
alike. Prints a markdown table; --json writes the raw numbers.

    bench/kv_matrix.py --pocketllm build/pocketllm -m models/SmolLM2-135M-Instruct.Q4_1.gguf \\
        --depth 4096 -n 64 --rounds 2 --corpus models/corpus/python-docs.txt
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA_BENCH = os.path.join(ROOT, "bench", ".cache", "bin", "llama-bench")


def run(cmd):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{p.stderr[-2000:]}")
    return p.stdout


def ours_bench(a, kv_type, window):
    cmd = [a.pocketllm, "bench", "-m", a.model, "-p", a.depth, "-n", a.n_gen, "-r", 1, "-t", a.threads,
           "--bw-mib", 0, "--json", "--kv-type", kv_type]
    if window:
        cmd += ["--kv-window", window, "--kv-sinks", a.sinks]
    return json.loads(run(cmd))


def llama_bench(a, kv_type):
    out = run([LLAMA_BENCH, "-m", a.model, "-p", 0, "-n", a.n_gen, "-d", a.depth, "-t", a.threads, "-r", 1,
               "-fa", 1, "-ctk", kv_type, "-ctv", kv_type, "-o", "json"])
    rows = json.loads(out)
    return rows[0]["avg_ts"]


def ours_ppl(a, kv_type, window, base=None, save=None):
    cmd = [a.pocketllm, "perplexity", "-m", a.model, "-f", a.corpus, "-c", a.depth, "--chunks", a.chunks,
           "-t", a.threads, "--json", "--kv-type", kv_type]
    if window:
        cmd += ["--kv-window", window, "--kv-sinks", a.sinks]
    if save:
        cmd += ["--save-logits", save]
    if base:
        cmd += ["--kl-base", base]
    return json.loads(run(cmd))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pocketllm", default=os.path.join(ROOT, "build", "pocketllm"))
    ap.add_argument("-m", "--model", default=os.path.join(os.environ.get("POCKETLLM_MODELS", os.path.join(ROOT, "models")),
                                                          "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--depth", type=int, default=4096)
    ap.add_argument("-n", "--n-gen", type=int, default=64)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--window", type=int, default=512)
    ap.add_argument("--sinks", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--corpus", help="text for the perplexity columns (scripts/make_corpus.sh)")
    ap.add_argument("--chunks", type=int, default=3, help="perplexity chunks of DEPTH tokens")
    ap.add_argument("--json", help="write raw results here")
    a = ap.parse_args()

    configs = [(t, w) for t in ("f16", "q8", "q4") for w in (0, a.window)]
    res = {c: [] for c in configs}
    lcpp = {"f16": [], "q8_0": []} if os.path.exists(LLAMA_BENCH) else {}
    for r in range(a.rounds):
        order = configs if r % 2 == 0 else configs[::-1]
        for c in order:
            res[c].append(ours_bench(a, *c))
            print(f"round {r} {c}: tg {res[c][-1]['tg_tps']:.1f} tok/s", file=sys.stderr)
        for t in (lcpp if r % 2 == 0 else list(lcpp)[::-1]):
            lcpp[t].append(llama_bench(a, t))
            print(f"round {r} llama.cpp {t}: tg {lcpp[t][-1]:.1f} tok/s", file=sys.stderr)

    ppl = {}
    if a.corpus:
        with tempfile.TemporaryDirectory() as tmp:
            base = os.path.join(tmp, "base.logits")
            ppl[("f16", 0)] = ours_ppl(a, "f16", 0, save=base)
            for c in configs[1:]:
                ppl[c] = ours_ppl(a, *c, base=base)
                print(f"ppl {c}: {ppl[c]['ppl']:.4f}", file=sys.stderr)

    mean = lambda xs: statistics.fmean(xs) if xs else float("nan")
    base_tg = mean([x["tg_tps"] for x in res[("f16", 0)]])
    base_kv = res[("f16", 0)][0]["kv_mb"]
    print(f"\nSmolLM2 {os.path.basename(a.model)}, {a.threads} threads, decode of {a.n_gen} tokens after a "
          f"{a.depth}-token prompt, {a.rounds} rounds alternated\n")
    hdr = "| KV | window | KV MB | vs f16 | peak RSS MiB | tg tok/s | vs f16 no window |"
    if ppl:
        hdr += f" ppl (c={a.depth}) | Δppl | KL vs f16 | top-1 |"
    print(hdr)
    print("|" + "---|" * (hdr.count("|") - 1))
    for c in configs:
        tg = [x["tg_tps"] for x in res[c]]
        sd = statistics.stdev(tg) if len(tg) > 1 else 0.0
        kv = res[c][0]["kv_mb"]
        rss = max(x["peak_rss_mb"] for x in res[c])
        win = f"{a.window}+{a.sinks}" if c[1] else "—"
        line = (f"| {c[0]} | {win} | {kv:.1f} | {kv / base_kv:.2f}× | {rss:.0f} | {mean(tg):.1f} ± {sd:.1f} | "
                f"{mean(tg) / base_tg:.2f}× |")
        if ppl:
            p = ppl[c]
            d = 100 * (p["ppl"] / ppl[("f16", 0)]["ppl"] - 1)
            kl = f"{p['kl_mean']:.5f}" if "kl_mean" in p else "—"
            t1 = f"{100 * p['top1_agree']:.2f}%" if "top1_agree" in p else "—"
            line += f" {p['ppl']:.4f} | {d:+.2f}% | {kl} | {t1} |"
        print(line)
    if lcpp:
        f16, q8 = mean(lcpp["f16"]), mean(lcpp["q8_0"])
        print(f"\nllama.cpp (llama-bench -fa 1 -d {a.depth} -n {a.n_gen}): f16 KV {f16:.1f} tok/s, "
              f"q8_0 KV {q8:.1f} tok/s ({q8 / f16:.2f}× of f16); ours f16 / llama.cpp f16 = {base_tg / f16:.2f}×, "
              f"ours q8 / llama.cpp q8_0 = {mean([x['tg_tps'] for x in res[('q8', 0)]]) / q8:.2f}×")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"ours": {f"{t}/{w}": v for (t, w), v in res.items()}, "llama_cpp": lcpp,
                       "ppl": {f"{t}/{w}": v for (t, w), v in ppl.items()}}, f, indent=1)


if __name__ == "__main__":
    main()
