#!/usr/bin/env python3
"""Time from process start to the first token, and peak RSS, side by side with llama.cpp.

What an app's user waits for when it opens a model: the process maps the file, repacks what it
repacks, builds the tokenizer, reads a short chat prompt and samples one token. Both engines run
as a fresh process per measurement with the same file, prompt and threads, `-n 1`, greedy:

    ours:      pocketllm run -m FILE -p PROMPT -n 1 -t T --temp 0 -c 4096
    llama.cpp: llama-completion -m FILE -p PROMPT -n 1 -t T --temp 0 -c 4096 -no-cnv

The same context on both sides (ours defaults to min(the model's, 4096); llama.cpp's tools to the
model's whole training context, 128K tokens of f16 KV for these files: gigabytes and seconds).

The wall time runs from the spawn to the process's exit (after the first token, both print it and
tear down), and the peak RSS is the child's (wait4). Two page-cache states:

    warm  the file is in the page cache (a second launch; the usual case on a phone)
    cold  the file's pages are dropped first (posix_fadvise DONTNEED on the whole file, no root
          needed), so the load reads it from disk

Runs alternate between the engines (order flipped each round), after waiting for idle CPUs.

    bench/setup_llamacpp.sh && bench/make_size_models.py qwen2-1.5b --types Q4_0,Q4_K_M   # once
    bench/startup.py models/sizes/qwen2-1.5b.Q4_0.gguf models/sizes/qwen2-1.5b.Q4_K_M.gguf --rounds 5
"""
import argparse
import os
import statistics
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
import compare  # noqa: E402  (run_measured, wait_for_idle)
import size_compare  # noqa: E402  (cpu_name)

PROMPT = "You are a helpful assistant. Give me three ideas for a short weekend trip near the sea."


def drop_cache(path):
    """Evict the file's pages from the page cache (dirty pages are flushed first)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def warm_cache(path):
    with open(path, "rb") as f:
        while f.read(64 << 20):
            pass


def timed(cmd, env=None):
    t0 = time.monotonic()
    _, rss, other = compare.run_measured(cmd, env)
    return {"s": time.monotonic() - t0, "rss": rss, "other_load": other}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+", help="GGUF files")
    ap.add_argument("--pocketllm", default=os.path.join(compare.ROOT, "build", "pocketllm"))
    ap.add_argument("--llama", default=os.path.join(BENCH, ".cache", "bin", "llama-completion"))
    ap.add_argument("-t", type=int, default=2, help="threads for both engines (default 2)")
    ap.add_argument("-c", "--ctx", type=int, default=4096, help="context for both engines (default 4096)")
    ap.add_argument("--rounds", type=int, default=5, help="alternated rounds per file and cache state (default 5)")
    ap.add_argument("--states", default="warm,cold", help="page-cache states, comma-separated (default warm,cold)")
    ap.add_argument("--min-idle", type=float, default=0.8)
    ap.add_argument("--max-wait", type=float, default=60)
    args = ap.parse_args()
    for exe in (args.pocketllm, args.llama):
        if not os.access(exe, os.X_OK):
            sys.exit(f"error: {exe} not found (build it; llama-completion comes from bench/setup_llamacpp.sh)")
    states = args.states.split(",")
    for s in states:
        if s not in ("warm", "cold"):
            sys.exit(f"error: unknown state {s!r} (warm or cold)")
    runners = {
        "ours": lambda m: [args.pocketllm, "run", "-m", m, "-p", PROMPT, "-n", "1", "-t", str(args.t), "--temp", "0",
                           "-c", str(args.ctx)],
        "llama.cpp": lambda m: [args.llama, "-m", m, "-p", PROMPT, "-n", "1", "-t", str(args.t), "--temp", "0",
                                "-c", str(args.ctx), "-no-cnv"],
    }
    results = {}
    for model in args.models:
        if not os.path.exists(model):
            sys.exit(f"error: {model} not found")
        for state in states:
            runs = {k: [] for k in runners}
            for r in range(args.rounds):
                order = list(runners) if r % 2 == 0 else list(reversed(runners))
                for name in order:
                    compare.wait_for_idle(args)
                    (drop_cache if state == "cold" else warm_cache)(model)
                    runs[name].append(timed(runners[name](model)))
                    x = runs[name][-1]
                    print(f"{os.path.basename(model)} {state} {name}: {x['s']:.3f} s, {x['rss']:.0f} MiB", file=sys.stderr)
            results[(os.path.basename(model), state)] = runs

    print(f"Machine: {size_compare.cpu_name()}; {args.t} threads; medians of {args.rounds} alternated rounds\n")
    print("| file | page cache | ours s | llama.cpp s | ours / llama.cpp | peak RSS ours / llama.cpp MiB |")
    print("|---|---|---|---|---|---|")
    for (name, state), runs in results.items():
        o = statistics.median(x["s"] for x in runs["ours"])
        l = statistics.median(x["s"] for x in runs["llama.cpp"])
        orss = statistics.median(x["rss"] for x in runs["ours"])
        lrss = statistics.median(x["rss"] for x in runs["llama.cpp"])
        print(f"| {name} | {state} | {o:.3f} | {l:.3f} | **{o / l:.2f}** | {orss:.0f} / {lrss:.0f} |")


if __name__ == "__main__":
    main()
