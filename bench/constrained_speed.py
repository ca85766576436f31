#!/usr/bin/env python3
"""Decode speed under a grammar (issue P17, "Speed"): tokens/s of replies constrained by JSON
schemas against free replies, on `pocketllm serve` and llama.cpp's `llama-server` (its grammar
sampler, the same `response_format`), same file, threads and prompts, runs alternated.

    bench/setup_llamacpp.sh                  # once: builds bench/.cache/bin/llama-server
    bench/constrained_speed.py               # SmolLM2 Q4_1, -t 2, 3 rounds
    bench/constrained_speed.py -m models/gemma-3-270m-Q4_K_M.gguf --only pllm

One client, one request at a time (a phone app's case), greedy, streamed; per request decode
tok/s = (completion_tokens - 1) / (last content chunk - first content chunk), timed on the
client (bench/server_compare.py's stream_chat). Each server is one process per round, warmed by
one unmeasured request; the order alternates by round. The schemas (tests/data/schemas/ plus a
long array) give replies of 40-300 tokens; the free requests ask for text of similar length.
Reported: the median decode tok/s per (server, mode) and the constrained / free ratio per
server (the issue's goal: >= 0.95 on SmolLM2 for pocketllm).
"""
import argparse
import collections
import json
import os
import pathlib
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_compare import make_server, stream_chat  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent

LONG_LIST = {"type": "object", "properties": {"items": {"type": "array", "minItems": 12, "maxItems": 12, "items": {
    "type": "object", "properties": {"name": {"type": "string", "maxLength": 24},
                                     "price": {"type": "integer", "minimum": 0, "maximum": 10000},
                                     "tags": {"type": "array", "items": {"enum": ["new", "sale", "eco"]}, "maxItems": 2}},
    "required": ["name", "price", "tags"], "additionalProperties": False}}},
    "required": ["items"], "additionalProperties": False}


def schemas():
    out = [("long-list", LONG_LIST)]
    for f in sorted((ROOT / "tests" / "data" / "schemas").glob("*.json")):
        out.append((f.stem, json.loads(f.read_text())))
    return out


def request(kind, schema):
    """The same prompt both ways (decode speed depends on the context length), with and without
    the schema enforced."""
    msgs = [{"role": "user", "content": "Reply with JSON that follows this schema:\n" + json.dumps(schema)}]
    if kind == "free":
        return msgs, {}
    return msgs, {"response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": schema}}}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=300)
    ap.add_argument("--only", choices=["pllm", "llama"])
    ap.add_argument("--pllm", default=str(ROOT / "build" / "pocketllm"))
    ap.add_argument("--llama-server", default=str(ROOT / "bench" / ".cache" / "bin" / "llama-server"))
    ap.add_argument("--pllm-flags", default="")
    ap.add_argument("--llama-flags", default="")
    a = ap.parse_args()
    a.slots = 1
    names = [n for n in ("pllm", "llama") if a.only in (None, n)]
    per_schema = collections.defaultdict(list)
    refused = {}
    failures = []

    def tps(n, k):  # over the schemas every server accepted
        return [x for (n2, k2, sname), xs in per_schema.items() if n2 == n and k2 == k and sname not in refused
                for x in xs]
    logdir = tempfile.mkdtemp(prefix="constrained_speed-")
    for rnd in range(a.rounds):
        order = names if rnd % 2 == 0 else names[::-1]
        for name in order:
            server, _ = make_server(a, name, 4096, logdir, rnd, 1)
            server.start()
            try:
                stream_chat(server.port, [{"role": "user", "content": "Hi"}], 8, {})  # warm-up
                for sname, schema in schemas():
                    if sname in refused:
                        continue
                    for kind in ("free", "constrained"):
                        msgs, extra = request(kind, schema)
                        try:
                            r = stream_chat(server.port, msgs, a.max_tokens, extra)
                        except RuntimeError as e:  # a schema one server refuses is left out for both
                            refused[sname] = f"{name}: {e}"[:160]
                            break
                        if kind == "constrained" and r["finish_reason"] == "stop":
                            try:
                                json.loads(r["text"])
                            except ValueError:
                                failures.append((name, sname, r["text"][:200]))
                        if r["decode_tps"] and r["completion_tokens"] >= 20:
                            per_schema[(name, kind, sname)].append(r["decode_tps"])
            finally:
                server.stop()
            print(f"round {rnd} {name}: " + ", ".join(
                f"{k} {statistics.median(tps(name, k)):.1f}" for k in ("free", "constrained") if tps(name, k)),
                flush=True)
    print(f"\n{pathlib.Path(a.model).name}, -t {a.threads}, {a.rounds} rounds, median decode tok/s per request")
    print("| server | free | constrained (JSON schema) | constrained / free |")
    print("|---|---|---|---|")
    for n in names:
        f, c = statistics.median(tps(n, "free")), statistics.median(tps(n, "constrained"))
        label = "pocketllm" if n == "pllm" else "llama.cpp"
        print(f"| {label} | {f:.1f} | {c:.1f} | {c / f:.3f} |")
    if len(names) == 2:
        print(f"constrained, pocketllm / llama.cpp: "
              f"{statistics.median(tps('pllm', 'constrained')) / statistics.median(tps('llama', 'constrained')):.2f}x")
    print(f"schemas: {len(schemas()) - len(refused)} measured, {len(refused)} left out")
    for sname, why in refused.items():
        print(f"  left out {sname}: {why}")
    for f in failures:
        print("  not JSON:", *f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
