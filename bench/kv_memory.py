#!/usr/bin/env python3
"""KV memory grows with use: peak RSS of 1 and of N sessions each holding T tokens, at a large
context beside a small one (build/kv_memory, bench/kv_memory.cpp, one process per figure).

With the KV cache committed in blocks of 64 positions as it fills, a session holding 100 tokens
costs the same at -c 4096 as at -c 128: the difference in peak RSS should stay within one KV
block per session. Exits 1 when it does not.

  bench/kv_memory.py [--model PATH] [--bin build/kv_memory] [--tokens 100] [--sessions 1 4]
                     [--ctx 4096 128] [--kv f16]
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KV_BLOCK = 64  # KvCache::kBlock


def measure(binary, model, n_ctx, sessions, tokens, kv):
    out = subprocess.run([binary, model, str(n_ctx), str(sessions), str(tokens), kv],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    models = os.environ.get("POCKETLLM_MODELS", os.path.join(ROOT, "models"))
    ap.add_argument("--model", default=os.path.join(models, "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "kv_memory"))
    ap.add_argument("--tokens", type=int, default=100)
    ap.add_argument("--sessions", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--ctx", type=int, nargs=2, default=[4096, 128], metavar=("LARGE", "SMALL"))
    ap.add_argument("--kv", default="f16", choices=["f16", "f32", "q8", "q4"])
    a = ap.parse_args()

    large, small = a.ctx
    print(f"model {os.path.basename(a.model)}, KV {a.kv}, {a.tokens} tokens per session")
    print("| sessions | n_ctx | peak RSS (MiB) | KV reserved (MiB) | KV committed (MiB) |")
    print("|---:|---:|---:|---:|---:|")
    ok = True
    for n in a.sessions:
        r = {c: measure(a.bin, a.model, c, n, a.tokens, a.kv) for c in (large, small)}
        for c in (large, small):
            x = r[c]
            print(f"| {n} | {c} | {x['hwm_kib'] / 1024:.1f} | {x['kv_reserved_bytes'] / 2**20:.1f} | "
                  f"{x['kv_committed_bytes'] / 2**20:.2f} |")
        # One KV block of one session at the large context: its reservation over its blocks.
        block_kib = r[large]["kv_reserved_bytes"] / n / (large / KV_BLOCK) / 1024
        diff_kib = r[large]["hwm_kib"] - r[small]["hwm_kib"]
        within = diff_kib <= n * block_kib
        ok &= within
        print(f"|  | diff | {diff_kib / 1024:+.2f} (limit {n} x {block_kib / 1024:.2f} block) | "
              f"{'ok' if within else 'OVER'} | |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
