#!/usr/bin/env python3
"""Decode and prefill at the sizes phones run (0.5B-3B), side by side with llama.cpp, and decode
as a fraction of the machine's measured read bandwidth.

The files come from bench/make_size_models.py (random weights, published shapes, real
vocabularies; Q4_0, Q4_K_M and Q8_0 by llama-quantize). For each file and round this runs
`pocketllm bench` (default flags unless --modes) and `llama-bench` alternately, one process per
run, the same thread count and lengths, the order flipped on odd rounds (bench/compare.py's
runner: it also waits for idle CPUs before each run and records other load).

The read bandwidth is measured right after each of our runs, by `pocketllm bench --bw-mib 1024` (each of the -t threads sums its slice of a 1 GiB buffer on transparent huge
pages, far larger than the last-level cache; best of 5): on a shared VM it moves between runs
(31-64 GB/s seen on a 2-vCPU Zen 4), so each run's decode is taken as a fraction of the
bandwidth measured right after it, and the table gives the median of those fractions and the
range of the bandwidths. "decode GB/s" is the weight bytes a token streams (the file's
matrices, as `bench` counts them) times tokens per second.

    bench/setup_llamacpp.sh && bench/make_size_models.py      # once
    bench/size_compare.py --rounds 2 -p 512 -n 128 --json-out /tmp/sizes.json
    bench/size_compare.py --from-json /tmp/sizes.json          # the tables again
    bench/size_compare.py --isa avx2 ...                       # ours capped at AVX2, llama.cpp's AVX2 build
"""
import argparse
import json
import os
import platform
import statistics
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
import compare  # noqa: E402  (the runners and the idle wait)
from make_size_models import SHAPES, TYPES  # noqa: E402

MODELS = os.path.join(os.environ.get("POCKETLLM_MODELS", os.path.join(compare.ROOT, "models")), "sizes")


def cpu_name():
    """Model name, family / model (a VM may name only the vendor) and the AVX-512 flag."""
    info = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            if ":" in line:
                k, v = (x.strip() for x in line.split(":", 1))
                info.setdefault(k, v)
    flags = info.get("flags", "").split()
    return (f"{info.get('model name', platform.processor())} (family {info.get('cpu family', '?')} model "
            f"{info.get('model', '?')}, {os.cpu_count()} CPUs, {'AVX-512' if 'avx512f' in flags else 'AVX2'})")


def run_ours(args, model, mode):
    """compare.run_ours, then the read bandwidth measured right after it (a process of its own, so
    the 1 GiB buffer stays out of the run's peak RSS)."""
    res = compare.run_ours(args, model, mode)
    text, _, _ = compare.run_measured([args.pocketllm, "bench", "-m", model, "-p", "1", "-n", "1", "-r", "1",
                                       "-t", str(args.t), "--bw-mib", "1024", "--json"], compare.ours_env(args))
    res["bandwidth_gbs"] = json.loads(text)["bandwidth_gbs"]
    return res


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def table(saved):
    P, N = saved["p"], saved["n"]
    out = [f"| file | GB/token | ours tg{N} | llama.cpp tg{N} | decode ratio | ours pp{P} | llama.cpp pp{P} "
           f"| prefill ratio | ours decode GB/s | of read bandwidth (range GB/s) | llama.cpp GB/s "
           f"| RSS ours / llama.cpp MiB | rounds |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in saved["results"].items():
        for mode in [k for k in r if k != "llama"]:
            ours, llama = r[mode], r["llama"]
            if not ours or not llama:
                continue
            gb = ours[0]["bytes_per_token"] / 1e9
            otg, ltg = med([x["tg0"] for x in ours]), med([x["tg0"] for x in llama])
            opp, lpp = med([x["pp"] for x in ours]), med([x["pp"] for x in llama])
            label = name if mode == "default" else f"{name} ({mode})"
            bws = [x["bandwidth_gbs"] for x in ours if x.get("bandwidth_gbs")]
            frac = med([x["tg0"] * gb / x["bandwidth_gbs"] for x in ours if x.get("bandwidth_gbs")])
            bw = f"{frac:.0%} ({min(bws):.0f}-{max(bws):.0f})" if bws else "-"
            out.append(f"| {label} | {gb:.3f} | {otg:.2f} | {ltg:.2f} | **{otg / ltg:.2f}** | {opp:.1f} | {lpp:.1f} "
                       f"| **{opp / lpp:.2f}** | {otg * gb:.1f} | {bw} | {ltg * gb:.1f} "
                       f"| {max(x['rss'] for x in ours):.0f} / {max(x['rss'] for x in llama):.0f} | {len(ours)} |")
    return "\n".join(out)


def header(saved):
    return (f"{saved['cpu']}, {saved['threads']} threads, our ISA {saved['isa']}"
            + (f" (capped with PLLM_ISA={saved['isa_cap']})" if saved.get("isa_cap") else "")
            + f", llama.cpp {'AVX2 build' if saved['llama_isa'] == 'avx2' else '-march=native'}; "
            f"medians of {saved['rounds']} alternated rounds, pp{saved['p']} / tg{saved['n']} (tg from an empty context); "
            f"read bandwidth measured in each of our runs with {saved['threads']} threads")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--types", default=",".join(TYPES))
    ap.add_argument("--models-dir", default=MODELS)
    ap.add_argument("--pocketllm", default=os.path.join(compare.ROOT, "build", "pocketllm"))
    ap.add_argument("--llama-bench")
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--modes", default="default", help=f"ours, comma-separated, from {', '.join(compare.MODE_FLAGS)}")
    ap.add_argument("--isa")
    ap.add_argument("--min-idle", type=float, default=0.8)
    ap.add_argument("--max-wait", type=float, default=60)
    ap.add_argument("--json-out")
    ap.add_argument("--from-json")
    args = ap.parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            saved = json.load(f)
        print(header(saved) + "\n\n" + table(saved))
        return
    args.llama_isa = "native"
    if not args.llama_bench:
        avx2 = os.path.join(BENCH, ".cache", "bin-avx2", "llama-bench")
        if args.isa == "avx2" and os.access(avx2, os.X_OK):
            args.llama_bench, args.llama_isa = avx2, "avx2"
        else:
            args.llama_bench = os.path.join(BENCH, ".cache", "bin", "llama-bench")
    modes = args.modes.split(",")
    for m in modes:
        if m not in compare.MODE_FLAGS:
            sys.exit(f"error: unknown mode {m!r}")
    files = []
    for s in args.shapes.split(","):
        for t in args.types.split(","):
            path = os.path.join(args.models_dir, f"{s}.{t}.gguf")
            if os.path.exists(path):
                files.append(path)
            else:
                print(f"warning: {path} missing (bench/make_size_models.py {s} --types {t})", file=sys.stderr)
    if not files:
        sys.exit("error: no model files")
    for exe in (args.pocketllm, args.llama_bench):
        if not os.access(exe, os.X_OK):
            sys.exit(f"error: {exe} not found")

    results = {}
    for path in files:
        name = os.path.basename(path)[:-len(".gguf")]
        r = results[name] = {**{m: [] for m in modes}, "llama": []}
        for rnd in range(args.rounds):
            steps = [(m, lambda m=m: run_ours(args, path, m)) for m in modes]
            steps.append(("llama", lambda: compare.run_llama(args, path)))
            if rnd % 2:
                steps.reverse()
            for key, fn in steps:
                compare.wait_for_idle(args)
                res = fn()
                r[key].append(res)
                print(f"[{name} {rnd + 1}/{args.rounds}] {key:7s} pp {res['pp']:7.1f} tg {res['tg0']:6.2f} "
                      f"RSS {res['rss']:6.0f} MiB other load {res['other_load']:.2f}", file=sys.stderr, flush=True)
    first = next(iter(results.values()))
    saved = {"cpu": cpu_name(), "threads": args.t, "p": args.p, "n": args.n, "rounds": args.rounds,
             "isa": first[modes[0]][0]["isa"], "isa_cap": args.isa, "llama_isa": args.llama_isa, "results": results}
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(saved, f, indent=1)
    print(header(saved) + "\n\n" + table(saved))


if __name__ == "__main__":
    main()
