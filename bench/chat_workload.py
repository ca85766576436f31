#!/usr/bin/env python3
"""The prefix-cache workload (issue P5): a ~1,000-token system prompt and 10 user turns typed at
a known rate, run through `pocketllm chat-bench` in each mode, one process per mode:

  none      a fresh session per turn, no cache (every turn prefills the whole conversation)
  session   one session: in-session reuse of the previous turn's KV cache
  ram       a fresh session per turn + the RAM prefix cache (L1)
  disk      a fresh session per turn + the disk cache (L2) filled by an earlier process
            (a "fill" run with an empty directory precedes it: the process restart)
  prewarm   one session + L1 + pre-warm of the conversation so far while the user types

Prints a markdown table of TTFT P50/P95, the ratio to `none`, and the cache counters.

    bench/chat_workload.py --pocketllm build/pocketllm -f models/corpus/python-docs.txt
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(a, mode, cache_dir=None):
    cmd = [a.pocketllm, "chat-bench", "-f", a.file, "--system-tokens", str(a.system_tokens), "--turns",
           str(a.turns), "-n", str(a.n_gen), "--cps", str(a.cps), "--mode", mode, "-t", str(a.threads),
           "--json"]
    if a.model:
        cmd += ["-m", a.model]
    if cache_dir:
        cmd += ["--cache-dir", cache_dir]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr[-2000:]}")
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pocketllm", default=os.path.join(ROOT, "build", "pocketllm"))
    ap.add_argument("-m", "--model")
    ap.add_argument("-f", "--file", default=os.path.join(ROOT, "models", "corpus", "python-docs.txt"))
    ap.add_argument("--system-tokens", type=int, default=1000)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("-n", "--n-gen", type=int, default=16)
    ap.add_argument("--cps", type=float, default=15.0, help="typing speed, characters per second")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--json", help="write the raw results here")
    a = ap.parse_args()

    res = {}
    with tempfile.TemporaryDirectory() as d:
        for mode in ("none", "session", "ram"):
            res[mode] = run(a, mode)
        res["disk (fill)"] = run(a, "disk", d)
        res["disk"] = run(a, "disk", d)  # a new process: everything comes from the files
        res["prewarm"] = run(a, "prewarm")
    base = res["none"]["ttft_p95_ms"]
    print(f"\n{a.system_tokens}-token system prompt, {a.turns} turns typed at {a.cps:g} chars/s, "
          f"{a.n_gen} tokens per reply, {a.threads} threads\n")
    print("| mode | TTFT P50 ms | TTFT P95 ms | P95 vs no cache | prompt tokens reused (session or cache) / computed | cache hit rate |")
    print("|---|---|---|---|---|---|")
    for mode, r in res.items():
        hits = (f"RAM {100 * r['ram_hit_rate']:.0f} %" if mode in ("ram", "prewarm")
                else f"disk {100 * r['disk_hit_rate']:.0f} %" if mode.startswith("disk") else "—")
        restored = sum(r["reused_tokens"])
        computed = sum(r["prompt_tokens"]) - restored
        print(f"| {mode} | {r['ttft_p50_ms']:.0f} | {r['ttft_p95_ms']:.0f} | {base / r['ttft_p95_ms']:.1f}× lower | "
              f"{restored} / {computed} | {hits} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
