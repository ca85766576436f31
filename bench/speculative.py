#!/usr/bin/env python3
"""Speculative decoding against plain decoding (P19), side by side with llama.cpp.

For each model and workload (rewrite a given text, edit given code, open chat), in each round,
alternated: `pocketllm run --json --raw` plain and with each drafter (lookup, skip, model), then
llama.cpp's `llama-lookup` and `llama-speculative` (same file, same draft model, same prompt:
the chat template rendered once by pocketllm, same threads, greedy). Reports the median decode
tokens/s, the ratio to the engine's own plain decoding, the acceptance rate (guesses kept /
guesses verified) and tokens per verify pass. pocketllm's drafted runs must write plain
decoding's tokens (checked).

  bench/speculative.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf --skip-layers 14,16,18,20,22,24 \
      --draft-layers 8 [--rounds 3] [-n 128] [-t 2] [--llama-bin bench/.cache/bin]

--cost prints only what a verify pass of r rows costs in plain decode steps, on both engines (the
cost side, for random-weight files whose guesses mean nothing).

--draft-layers N writes the model's first N blocks as a draft model (bench/.cache/) for both
engines. Plain llama.cpp decode speed comes from llama-bench (tg) in the same round. Prints a
Markdown table (docs/PERFORMANCE.md, "Speculative decoding").
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORKLOADS = {
    "rewrite": ("Rewrite the following paragraph, keeping every sentence but fixing the spelling: "
                "The comittee met on tuesday to discus the budget for next year. They agreed that the "
                "new library wil open at nine in the morning and close at eight in the evening. The "
                "repairs to the old bridge over the river wil start in march and take six weeks."),
    "code edit": ("Rename the variable `total` to `running_sum` in this Python function and return the "
                  "whole function:\n\ndef add_all(values):\n    total = 0\n    for v in values:\n"
                  "        total = total + v\n    return total\n"),
    "open chat": "Tell me about the history of tea and how it spread around the world.",
}


def cut_layers(src: str, n_keep: int, out: str) -> str:
    """The first n_keep blocks of src (same vocabulary, embeddings and head) as a GGUF of their
    own: a draft model for both engines (written once, reused)."""
    if os.path.exists(out):
        return out
    import gguf
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from make_size_models import copy_keys
    r = gguf.GGUFReader(src)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    w = gguf.GGUFWriter(out, arch)
    copy_keys(w, src, lambda key: key not in ("general.architecture", f"{arch}.block_count"))
    w.add_uint32(f"{arch}.block_count", n_keep)
    for t in r.tensors:
        if t.name.startswith("blk.") and int(t.name.split(".")[1]) >= n_keep:
            continue
        w.add_tensor(t.name, t.data, raw_shape=t.data.shape, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out


def run(binary: str, model: str, prompt: str, n: int, threads: int, extra: list[str]) -> dict:
    cmd = [binary, "run", "-m", model, "-t", str(threads), "-n", str(n), "--json", "--raw", "-p", prompt, *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        sys.exit(f"error: {' '.join(cmd[:8])} ...: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def llama(tool: str, model: str, prompt: str, n: int, threads: int, draft_max: int, draft: str = "") -> dict:
    """llama-lookup / llama-speculative, greedy: decode tok/s and the guesses drafted and kept."""
    cmd = [tool, "-m", model, "-p", prompt, "-n", str(n), "-t", str(threads), "--temp", "0", "-c", "2048",
           "--spec-draft-n-max", str(draft_max), "--spec-draft-n-min", "0"]
    if draft:
        cmd += ["-md", draft, "-td", str(threads), "--spec-draft-p-min", "0"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    speed = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds, speed:\s+([\d.]+) t/s", out)
    drafted = re.search(r"n_drafted\s*=\s*(\d+)", out)
    accepted = re.search(r"n_accept\s*=\s*(\d+)", out)
    if proc.returncode != 0 or not speed:
        sys.exit(f"error: {' '.join(cmd[:3])} ... failed ({proc.returncode}):\n{out[-2000:]}")
    return {"decode_tps": float(speed.group(3)), "drafted": int(drafted.group(1)) if drafted else 0,
            "draft_accepted": int(accepted.group(1)) if accepted else 0}


def llama_plain(bench: str, model: str, n: int, threads: int) -> float:
    proc = subprocess.run([bench, "-m", model, "-p", "0", "-n", str(n), "-t", str(threads), "-r", "1", "-o", "json"],
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        sys.exit(f"error: llama-bench failed: {proc.stderr[-1000:]}")
    return float(json.loads(proc.stdout)[0]["avg_ts"])


def cost_table(binary: str, llama_bin: str, model: str, threads: int, rounds: int, rows=(2, 3, 5, 9)) -> None:
    """What a verify pass of r rows (r - 1 guesses) costs, in plain decode steps. Ours: build/
    verify_cost (every row's logits, rows as one-row steps, at a 256-token context). llama.cpp:
    llama-bench's pp of r tokens against its tg, a lower bound (pp computes only the last row's
    logits; a verify pass needs them all)."""
    verify = os.path.join(os.path.dirname(binary), "verify_cost")
    print(f"| {os.path.basename(model)} | " + " | ".join(f"{r} rows" for r in rows) + " |")
    print("|---|" + "---|" * len(rows))
    ours = {r: [] for r in rows}
    theirs = {r: [] for r in rows}
    for _ in range(rounds):
        proc = subprocess.run([verify, model, str(threads), "256", *map(str, rows)], capture_output=True, text=True,
                              timeout=900)
        if proc.returncode != 0:
            sys.exit(f"error: verify_cost failed: {proc.stderr.strip()}")
        d = json.loads(proc.stdout)
        for r in rows:
            ours[r].append(d["rows"][str(r)] / d["step_ms"])
        if llama_bin:
            for r in rows:
                proc = subprocess.run([os.path.join(llama_bin, "llama-bench"), "-m", model, "-p", str(r), "-n", "32",
                                       "-r", "2", "-t", str(threads), "-o", "json"], capture_output=True, text=True,
                                      timeout=900)
                pp, tg = (float(x["avg_ts"]) for x in json.loads(proc.stdout))
                theirs[r].append((r / pp) * tg)
    print("| pocketllm (verify pass) | " + " | ".join(f"{statistics.median(ours[r]):.2f}" for r in rows) + " |")
    if llama_bin:
        print("| llama.cpp (pp, lower bound) | " + " | ".join(f"{statistics.median(theirs[r]):.2f}" for r in rows) + " |")


def chat_text(model: str, user: str) -> str:
    import pocketllm
    with pocketllm.Model(model) as m:
        return m.apply_chat_template([{"role": "user", "content": user}])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, action="append", help="GGUF file (repeatable)")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "pocketllm"))
    ap.add_argument("--llama-bin", default=os.path.join(ROOT, "bench", ".cache", "bin"),
                    help="llama.cpp's tools (bench/setup_llamacpp.sh); '' to leave llama.cpp out")
    ap.add_argument("--skip-layers", action="append", default=[],
                    help="layers a skip draft leaves out, one list per --model ('' for none)")
    ap.add_argument("--draft-layers", action="append", type=int, default=[],
                    help="per --model: a draft model of its first N blocks (0: none)")
    ap.add_argument("--workload", action="append", choices=list(WORKLOADS), help="default: all")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-n", type=int, default=128, help="tokens to generate")
    ap.add_argument("-t", type=int, default=2, help="threads")
    ap.add_argument("--draft-max", type=int, default=8)
    ap.add_argument("--cost", action="store_true",
                    help="only the cost side: a verify pass of r rows in plain decode steps, both engines")
    a = ap.parse_args()
    if a.cost:
        for model in a.model:
            cost_table(a.bin, a.llama_bin, model, a.t, a.rounds)
        return

    print("| model | workload | engine | drafter | decode tok/s | vs its plain | acceptance | tokens / verify pass |")
    print("|---|---|---|---|---|---|---|---|")
    for i, model in enumerate(a.model):
        name = os.path.basename(model)
        drafters = {"plain": [], "lookup": ["--draft", "lookup"]}
        if i < len(a.skip_layers) and a.skip_layers[i]:
            drafters["skip"] = ["--draft", "skip", "--draft-skip-layers", a.skip_layers[i]]
        draft = ""
        if i < len(a.draft_layers) and a.draft_layers[i] > 0:
            os.makedirs(os.path.join(ROOT, "bench", ".cache"), exist_ok=True)
            draft = cut_layers(model, a.draft_layers[i],
                               os.path.join(ROOT, "bench", ".cache", f"{name}.first{a.draft_layers[i]}.gguf"))
            drafters["model"] = ["--draft", "model", "--draft-model", draft]
        tools = {}
        if a.llama_bin:
            tools = {"plain": None, "lookup": (os.path.join(a.llama_bin, "llama-lookup"), "")}
            if draft:
                tools["model"] = (os.path.join(a.llama_bin, "llama-speculative"), draft)
        for wname in a.workload or list(WORKLOADS):
            prompt = chat_text(model, WORKLOADS[wname])
            ours: dict[str, list[float]] = {d: [] for d in drafters}
            theirs: dict[str, list[float]] = {d: [] for d in tools}
            last: dict[str, dict] = {}
            for _ in range(a.rounds):
                for d, extra in drafters.items():  # alternated within each round
                    r = run(a.bin, model, prompt, a.n, a.t, [*extra, "--draft-max", str(a.draft_max)] if extra else [])
                    ours[d].append(r["decode_tps"])
                    last[d] = r
                for d, tool in tools.items():
                    if tool is None:
                        theirs[d].append(llama_plain(os.path.join(a.llama_bin, "llama-bench"), model, a.n, a.t))
                        continue
                    r = llama(tool[0], model, prompt, a.n, a.t, a.draft_max, tool[1])
                    theirs[d].append(r["decode_tps"])
                    last["llama." + d] = r
            rows = [("pocketllm", d, statistics.median(ours[d]), last[d]) for d in drafters]
            rows += [("llama.cpp", d, statistics.median(theirs[d]), last.get("llama." + d, {})) for d in tools]
            for engine, d, med, r in rows:
                if engine == "pocketllm" and r["tokens"] != last["plain"]["tokens"]:
                    sys.exit(f"error: {d} on {wname} wrote other tokens than plain decoding")
                base = statistics.median(ours["plain"] if engine == "pocketllm" else theirs["plain"])
                acc = f"{r['draft_accepted'] / r['drafted']:.2f}" if r.get("drafted") else "–"
                per_pass = (f"{(r['draft_accepted'] + r['draft_passes']) / r['draft_passes']:.2f}"
                            if r.get("draft_passes") else "–")
                print(f"| {name} | {wname} | {engine} | {d} | {med:.1f} | {med / base:.2f}× | {acc} | {per_pass} |",
                      flush=True)


if __name__ == "__main__":
    main()
