#!/usr/bin/env python3
"""Aggregate decode throughput of N sequences advanced together: `pocketllm bench --parallel N`
beside llama.cpp's `llama-batched-bench` (S_TG at B = N) on the same file and threads.

For each file and round: pocketllm for every N, then llama-batched-bench once with -npl N1,N2,...
(the order flips on odd rounds), so slow drifts hit both engines alike. Both sides prefill
-p tokens per sequence and then generate -n tokens per sequence; ours reports tg_agg_tps
(decode tokens per second summed over the sequences), llama.cpp S_TG (the same quantity).

    bench/setup_llamacpp.sh && bench/make_quants.sh     # once
    bench/parallel_compare.py --pocketllm build/pocketllm -t 2 -p 128 -n 64 --rounds 3
    bench/parallel_compare.py --isa avx2 ...   # on an AVX-512 machine: both engines as an AVX2 machine runs them
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.environ.get("POCKETLLM_MODELS", os.path.join(ROOT, "models"))
DEFAULT_MODELS = [os.path.join(MODELS, f"SmolLM2-135M-Instruct.{t}.gguf") for t in ("Q4_0", "Q4_1", "Q8_0")]


def ours(a, model, n, extra):
    cmd = [a.pocketllm, "bench", "-m", model, "-t", str(a.threads), "-p", str(a.n_prompt), "-n", str(a.n_gen),
           "-r", "1", "--parallel", str(n), "--bw-mib", "0", "--json"] + extra
    j = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return j["tg_agg_tps"], j["pp_agg_tps"], j["tg_step_ms"]


def theirs(a, model, ns):
    ctx = max(ns) * (a.n_prompt + a.n_gen) + 256
    cmd = [a.batched_bench, "-m", model, "-t", str(a.threads), "-c", str(ctx), "-b", "2048", "-ub", "512",
           "-npp", str(a.n_prompt), "-ntg", str(a.n_gen), "-npl", ",".join(map(str, ns))]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():  # | PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s |
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 10 and re.fullmatch(r"\d+", cells[2] or ""):
            rows[int(cells[2])] = (float(cells[7]), float(cells[5]))
    missing = [n for n in ns if n not in rows]
    if missing:
        raise RuntimeError(f"no llama-batched-bench row for B={missing}:\n{out}")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", default=DEFAULT_MODELS)
    ap.add_argument("--pocketllm", default=os.path.join(ROOT, "build", "pocketllm"))
    ap.add_argument("--batched-bench", help="llama-batched-bench binary (default bench/.cache/bin/; with --isa avx2 "
                                            "bench/.cache/bin-avx2/ where LLAMA_ISA=avx2 bench/setup_llamacpp.sh built it)")
    ap.add_argument("--isa", help="cap our kernels at this level (PLLM_ISA), e.g. avx2 on an AVX-512 machine")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-p", "--n-prompt", type=int, default=128)
    ap.add_argument("-n", "--n-gen", type=int, default=64)
    ap.add_argument("--parallel", default="1,2,4,8")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ours-flags", default="", help="extra flags for pocketllm bench, e.g. --int8-act")
    a = ap.parse_args()
    ns = [int(x) for x in a.parallel.split(",")]
    extra = a.ours_flags.split()
    llama_isa = "native"
    if a.isa:
        os.environ["PLLM_ISA"] = a.isa
    if not a.batched_bench:
        avx2 = os.path.join(ROOT, "bench", ".cache", "bin-avx2", "llama-batched-bench")
        if a.isa == "avx2" and os.access(avx2, os.X_OK):
            a.batched_bench, llama_isa = avx2, "avx2"
        else:
            a.batched_bench = os.path.join(ROOT, "bench", ".cache", "bin", "llama-batched-bench")
    for exe in (a.pocketllm, a.batched_bench):
        if not os.path.exists(exe):
            sys.exit(f"error: {exe} not found (llama-batched-bench comes from bench/setup_llamacpp.sh)")
    with open("/proc/cpuinfo") as f:
        flags = next((l for l in f if l.startswith("flags")), "")
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "other"
    print(f"# {isa} machine, {a.threads} threads, -p {a.n_prompt} -n {a.n_gen}, {a.rounds} rounds, "
          f"ours: default flags {' '.join(extra)}; PLLM_ISA={os.environ.get('PLLM_ISA', '(native)')}; llama.cpp "
          + ("built for AVX2 (GGML_NATIVE=OFF)" if llama_isa == "avx2" else "built with -march=native"))
    print("| file | N | ours tg_agg tok/s | llama.cpp S_TG tok/s | ratio | ours pp_agg | llama.cpp S_PP | ours step ms |")
    print("|---|---|---|---|---|---|---|---|")
    for model in a.models:
        res = {n: {"o": [], "t": [], "op": [], "tp": [], "ms": []} for n in ns}
        for r in range(a.rounds):
            order = [0, 1] if r % 2 == 0 else [1, 0]
            for side in order:
                if side == 0:
                    for n in ns:
                        tg, pp, ms = ours(a, model, n, extra)
                        res[n]["o"].append(tg), res[n]["op"].append(pp), res[n]["ms"].append(ms)
                else:
                    for n, (tg, pp) in theirs(a, model, ns).items():
                        res[n]["t"].append(tg), res[n]["tp"].append(pp)
        for n in ns:
            m = {k: statistics.mean(v) for k, v in res[n].items()}
            print(f"| {os.path.basename(model)} | {n} | {m['o']:.1f} | {m['t']:.1f} | {m['o'] / m['t']:.2f}x | "
                  f"{m['op']:.1f} | {m['tp']:.1f} | {m['ms']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
