#!/usr/bin/env python3
"""Two builds of pocketllm against each other: is a refactor's speed unchanged within noise?

For every file, mode and round it runs `pocketllm bench` of build A, then of build B (the order
flips on odd rounds), each a separate process with one repetition, waiting for idle CPUs before
each run as bench/compare.py does (its helpers are reused). Prints mean ± sd per build and the
ratio B/A of prompt and generation speed.

    bench/ab_speed.py --a /tmp/pocketllm_base --b build/pocketllm --rounds 4
    bench/ab_speed.py ... --isa avx2     # both capped at AVX2 (PLLM_ISA)

The modes use the older flags (--int8-act, ...), which every build reads.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (bench/compare.py: run_ours, wait_for_idle, ms, fmt, MODE_FLAGS)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", help="GGUF files (default: those of bench/compare.py that exist)")
    ap.add_argument("--a", required=True, help="the baseline pocketllm binary")
    ap.add_argument("--b", required=True, help="the pocketllm binary to compare with it")
    ap.add_argument("-p", type=int, default=128)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--modes", default="default,exact,int8")
    ap.add_argument("--isa", help="PLLM_ISA for both builds")
    ap.add_argument("--min-idle", type=float, default=0.8)
    ap.add_argument("--max-wait", type=float, default=30)
    args = ap.parse_args()
    models = args.models or [m for m in compare.DEFAULT_MODELS if os.path.exists(m)]
    if not models:
        sys.exit("error: no model files")
    modes = args.modes.split(",")
    for m in modes:
        if m not in compare.MODE_FLAGS:
            sys.exit(f"error: unknown mode {m!r} (choose from {', '.join(compare.MODE_FLAGS)})")
    print("| file | mode | A pp | B pp | B/A | A tg | B tg | B/A |")
    print("|---|---|---|---|---|---|---|---|")
    for model in models:
        for mode in modes:
            runs = {"a": [], "b": []}
            for rnd in range(args.rounds):
                order = ["a", "b"] if rnd % 2 == 0 else ["b", "a"]
                for which in order:
                    args.pocketllm = getattr(args, which)
                    compare.wait_for_idle(args)
                    runs[which].append(compare.run_ours(args, model, mode))
            a_pp, b_pp = [r["pp"] for r in runs["a"]], [r["pp"] for r in runs["b"]]
            a_tg, b_tg = [r["tg0"] for r in runs["a"]], [r["tg0"] for r in runs["b"]]
            print(f"| {os.path.basename(model)} | {mode} | {compare.fmt(a_pp)} | {compare.fmt(b_pp)} "
                  f"| {compare.ms(b_pp)[0] / compare.ms(a_pp)[0]:.3f} | {compare.fmt(a_tg)} | {compare.fmt(b_tg)} "
                  f"| {compare.ms(b_tg)[0] / compare.ms(a_tg)[0]:.3f} |", flush=True)
    print(f"\nisa {runs['a'][0]['isa']}, threads {args.t}, pp{args.p}, tg{args.n}, {args.rounds} rounds alternated")


if __name__ == "__main__":
    main()
