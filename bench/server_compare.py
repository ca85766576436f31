#!/usr/bin/env python3
"""TTFT and tokens/s of `pocketllm serve` beside llama.cpp's `llama-server` with 1, 4 and 8
concurrent streaming clients (issue P9), on the same GGUF file, threads and prompts.

    bench/setup_llamacpp.sh                      # once: builds bench/.cache/bin/llama-server
    bench/server_compare.py                      # defaults: SmolLM2 Q4_1, -t 2, levels 1,4,8, 3 rounds
    bench/server_compare.py --only pllm --rounds 1 -k 2     # smoke test without llama-server

Each (round, level, server) is one fresh server process: it is started, waited on (/health),
warmed with one short unmeasured request, measured, and stopped. The servers alternate
(round 0: pllm 1, llama 1, pllm 4, llama 4, ...; odd rounds start with llama) so slow drifts of
a shared machine hit both alike. At a level of N clients, N threads each stream K requests one
after the other to /v1/chat/completions (closed loop, all clients released together).

Per request (timed on the client, with time.perf_counter):
  TTFT          send -> the first SSE chunk whose delta.content is not empty (both servers send
                a role-only chunk first; it is not counted)
  decode tok/s  (completion_tokens - 1) / (last content chunk - first content chunk)
Per level and round:
  aggregate tok/s   sum of completion_tokens / (first send -> last response end)
completion_tokens comes from the usage chunk (stream_options.include_usage), not from counting
chunks. Reported: medians over all requests (TTFT, decode) or rounds (aggregate), and the ratio
pllm / llama (TTFT: below 1 is pllm faster; tok/s: above 1 is pllm faster).

Fairness:
  * Same file, same threads (-t; llama-server also gets -tb, its prefill threads), temperature 0
    (greedy), the same max_tokens, 8 slots on both (--parallel 8 / -np 8), per-request context
    -c on both (llama-server gets -c 8*C, its total, split across the 8 slots).
  * EOS: llama-server takes `ignore_eos` but pocketllm serve does not, so neither gets it: the
    replies end where greedy decoding ends them, some before max_tokens. Both servers get
    exactly the same prompts (request i of client c at level N in round r has the same text on
    both), so greedy decoding gives the same replies up to the kernels' rounding; the table shows
    the mean completion tokens of each server, and a warning is printed when they differ by
    more than 5 %. Decode tok/s is per request and hardly depends on the length; aggregate
    tok/s counts the tokens actually generated.
  * Prompt caches: both servers have one (pocketllm: the shared RAM prefix cache; llama-server:
    each slot's KV reuse, cache_prompt, plus its host-memory prompt cache --cache-ram). Every
    request's system message starts with a unique tag, so no two prompts share more than the
    first few template tokens and neither cache can hit (--prompts shared turns this off: one
    system prompt for all, both caches may reuse it). usage.prompt_tokens_details.cached_tokens
    is recorded and shown.
  * The client runs on the same machine and takes some CPU from both alike. With -t equal to
    the machine's cores (2 threads on 2 cores), the client, the servers' HTTP threads and any
    other load preempt the compute threads, and a preempted thread holds up the others at every
    barrier. Seen on a busy 2-core machine (other jobs using about 2 cores): llama-server
    (an OpenMP build: libgomp spins at its barriers before it sleeps) fell from ~25-40 to ~1 tok/s
    per request at 1 to 8 clients, burning a whole core, while pocketllm (its pool yields while
    it waits) kept 7-26 tok/s. OMP_WAIT_POLICY=passive in the environment (only llama-server
    links libgomp) or -t 1 brought llama-server back to 25-40 tok/s. The "server CPU ms/token"
    column (the server's user + system time over the level / tokens generated) shows such lost
    time. Measure on an otherwise idle machine, and rerun with -t 1 or OMP_WAIT_POLICY=passive
    when llama-server's CPU per token is far above pocketllm's.
Also shown: the share of requests whose reply text is the same on both servers and the median
common prefix of the two texts (greedy replies part after a few dozen tokens, as the engines
round differently: llama.cpp quantizes activations to 8 bits, pocketllm's default does not),
and a warning for replies without a single token (a server fault).
"""
import argparse
import hashlib
import http.client
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SYSTEM = "You are a helpful assistant. Answer in detail, with several paragraphs."
QUESTIONS = [
    "Explain how a hash table works and what happens when two keys collide.",
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Describe the water cycle, step by step, for a ten-year-old.",
    "What are the advantages and disadvantages of electric cars compared with petrol cars?",
    "Explain the difference between a process and a thread in an operating system.",
    "Give me a detailed plan for learning to play the guitar in three months.",
    "Describe how bread is made, from the wheat field to the bakery.",
    "Why is the sky blue? Explain the physics behind it.",
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One server process; start() returns once /health answers 200."""

    def __init__(self, name, cmd, port, log_path):
        self.name, self.cmd, self.port, self.log_path = name, cmd, port, log_path
        self.proc = None

    def start(self, timeout=120):
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; log: {self.log_path}\n"
                                   + open(self.log_path).read()[-3000:])
            if self.port is None:  # pocketllm --port 0 names the port on its first stderr line
                m = re.search(r"listening on http://[^:]+:(\d+)", open(self.log_path).read())
                if m:
                    self.port = int(m.group(1))
            if self.port is not None:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                        if r.status == 200:
                            return
                except Exception:
                    pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.name} not healthy after {timeout} s; log: {self.log_path}")

    def cpu_seconds(self):
        """user + system CPU time of the server process so far (all its threads)."""
        try:
            with open(f"/proc/{self.proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return float("nan")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if getattr(self, "log", None):
            self.log.close()


def stream_chat(port, messages, max_tokens, extra):
    """One streamed chat completion; returns the per-request record (times relative to send)."""
    body = dict(messages=messages, max_tokens=max_tokens, temperature=0, stream=True,
                stream_options={"include_usage": True}, **extra)
    data = json.dumps(body).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body=data, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:500]!r}")
    t_first = t_last = None
    n_chunks, usage, finish, text = 0, None, None, []
    while True:
        line = resp.readline()
        if not line:
            break
        now = time.perf_counter()
        line = line.strip()
        if not line.startswith(b"data:"):
            continue  # blank separators and `: ping` comments
        payload = line[5:].strip()
        if payload == b"[DONE]":
            break
        ev = json.loads(payload)
        if "error" in ev:
            raise RuntimeError(f"stream error: {ev['error']}")
        if ev.get("usage"):
            usage = ev["usage"]
        for ch in ev.get("choices") or []:
            content = (ch.get("delta") or {}).get("content")
            if content:
                if t_first is None:
                    t_first = now
                t_last = now
                n_chunks += 1
                text.append(content)
            if ch.get("finish_reason"):
                finish = ch["finish_reason"]
    t_end = time.perf_counter()
    conn.close()
    if usage is None:
        raise RuntimeError("no usage chunk in the stream")
    n = int(usage.get("completion_tokens", 0))
    cached = ((usage.get("prompt_tokens_details") or {}).get("cached_tokens")) or 0
    dec = (n - 1) / (t_last - t_first) if t_first is not None and n > 1 and t_last > t_first else None
    return dict(t_send=t0, t_end=t_end, ttft_s=(t_first - t0) if t_first is not None else None,
                decode_tps=dec, completion_tokens=n, content_chunks=n_chunks,
                prompt_tokens=int(usage.get("prompt_tokens", 0)), cached_tokens=int(cached),
                finish_reason=finish, text="".join(text))


def messages_for(a, tag, q):
    # distinct: a hash of the tag opens the system prompt, so prompts part right after the template's header
    system = SYSTEM if a.prompts == "shared" else f"{hashlib.sha1(tag.encode()).hexdigest()[:8]}. {SYSTEM}"
    return [{"role": "system", "content": system}, {"role": "user", "content": QUESTIONS[q % len(QUESTIONS)]}]


def run_level(a, server, n_clients, rnd, extra):
    """N clients x K requests against a started server; returns (records, aggregate tok/s, wall s, CPU s)."""
    records, errors = [], []
    lock = threading.Lock()
    barrier = threading.Barrier(n_clients)

    def client(ci):
        try:
            barrier.wait()
            for k in range(a.requests):
                q = ci * a.requests + k
                tag = f"{rnd}.{n_clients}.{ci}.{k}"  # the same for both servers: the same prompts
                rec = stream_chat(server.port, messages_for(a, tag, q), a.max_tokens, extra)
                rec.update(client=ci, k=k)
                with lock:
                    records.append(rec)
        except Exception as e:  # noqa: BLE001 - reported below
            with lock:
                errors.append(f"client {ci}: {e}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n_clients)]
    cpu0 = server.cpu_seconds()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"{server.name} at {n_clients} clients: " + "; ".join(errors[:3]))
    cpu = server.cpu_seconds() - cpu0
    t0 = min(r["t_send"] for r in records)
    t1 = max(r["t_end"] for r in records)
    toks = sum(r["completion_tokens"] for r in records)
    return records, toks / (t1 - t0), t1 - t0, cpu


def make_server(a, name, ctx, logdir, rnd, n):
    log = os.path.join(logdir, f"{name}-r{rnd}-c{n}.log")
    if name == "pllm":
        cmd = [a.pllm, "serve", "-m", a.model, "--port", "0", "-t", str(a.threads), "--parallel",
               str(a.slots), "-c", str(ctx)] + a.pllm_flags.split()
        return Server(name, cmd, None, log), {}
    port = free_port()
    # -np slots, -c is the total context (split over the slots), -t/-tb decode/prefill threads,
    # -ngl 0: a CPU-only build anyway; --no-webui: nothing to serve; continuous batching is on by default.
    cmd = [a.llama_server, "-m", a.model, "--host", "127.0.0.1", "--port", str(port), "-t", str(a.threads),
           "-tb", str(a.threads), "-np", str(a.slots), "-c", str(ctx * a.slots), "-ngl", "0",
           "--no-webui"] + a.llama_flags.split()
    return Server(name, cmd, port, log), {}


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def pct(xs, p):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--pllm", default=os.path.join(ROOT, "build", "pocketllm"), help="the pocketllm binary")
    ap.add_argument("--llama-server", default=os.path.join(ROOT, "bench", ".cache", "bin", "llama-server"))
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-c", "--ctx", type=int, default=1024, help="context per request (slot)")
    ap.add_argument("--slots", type=int, default=8, help="--parallel / -np of both servers")
    ap.add_argument("--levels", default="1,4,8", help="concurrent clients")
    ap.add_argument("-k", "--requests", type=int, default=8, help="requests per client per level")
    ap.add_argument("-n", "--max-tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompts", choices=("distinct", "shared"), default="distinct",
                    help="distinct: a unique tag opens every system prompt, no cache hits (default); "
                         "shared: one system prompt for all requests")
    ap.add_argument("--only", choices=("pllm", "llama"), help="run one server only (smoke tests)")
    ap.add_argument("--pllm-flags", default="", help="extra flags for pocketllm serve")
    ap.add_argument("--llama-flags", default="", help="extra flags for llama-server")
    ap.add_argument("--log-dir", help="keep the server logs here (default: a temporary directory)")
    ap.add_argument("--json", help="write all per-request records and the summary here")
    a = ap.parse_args()
    levels = [int(x) for x in a.levels.split(",")]
    if max(levels) > a.slots:
        print(f"note: {max(levels)} clients > {a.slots} slots: the rest queue", file=sys.stderr)
    names = ["pllm", "llama"] if a.only is None else [a.only]
    for exe, name in ((a.pllm, "pllm"), (a.llama_server, "llama")):
        if name in names and not os.access(exe, os.X_OK):
            sys.exit(f"error: {exe} not found" + (" (build it with bench/setup_llamacpp.sh)" if name == "llama" else ""))
    if not os.path.exists(a.model):
        sys.exit(f"error: {a.model} not found")

    logdir = a.log_dir or tempfile.mkdtemp(prefix="server_compare-")
    os.makedirs(logdir, exist_ok=True)
    recs = {(s, n): [] for s in names for n in levels}
    aggs = {(s, n): [] for s in names for n in levels}
    cpus = {(s, n): [] for s in names for n in levels}  # server CPU seconds per generated token
    t_start = time.monotonic()
    cmds = {}
    for rnd in range(a.rounds):
        order = names if rnd % 2 == 0 else names[::-1]
        for n in levels:
            for s in order:
                server, extra = make_server(a, s, a.ctx, logdir, rnd, n)
                cmds[s] = server.cmd
                try:
                    server.start()
                    # warm-up, unmeasured: first touch of the mapped weights and the buffers
                    stream_chat(server.port, messages_for(a, f"warmup.{rnd}.{n}", 0), 16, extra)
                    r, agg, wall, cpu = run_level(a, server, n, rnd, extra)
                finally:
                    server.stop()
                for x in r:
                    x.update(round=rnd)
                recs[(s, n)] += r
                aggs[(s, n)].append(agg)
                cpus[(s, n)].append(cpu / max(1, sum(x["completion_tokens"] for x in r)))
                print(f"[round {rnd}] {s:5s} {n} clients: {len(r)} requests in {wall:.1f} s, "
                      f"TTFT p50 {1e3 * median([x['ttft_s'] for x in r]):.0f} ms, "
                      f"decode p50 {median([x['decode_tps'] for x in r]):.1f} tok/s, aggregate {agg:.1f} tok/s, "
                      f"server CPU {cpu:.1f} s ({cpu / wall:.2f} cores)",
                      file=sys.stderr, flush=True)
    wall_total = time.monotonic() - t_start

    summary = {}
    for (s, n), r in recs.items():
        summary[f"{s}/{n}"] = dict(
            server=s, clients=n, requests=len(r),
            ttft_p50_ms=1e3 * median([x["ttft_s"] for x in r]), ttft_p90_ms=1e3 * pct([x["ttft_s"] for x in r], 90),
            decode_tps_p50=median([x["decode_tps"] for x in r]),
            aggregate_tps_median=median(aggs[(s, n)]), aggregate_tps_rounds=aggs[(s, n)],
            completion_tokens_mean=statistics.mean(x["completion_tokens"] for x in r),
            prompt_tokens_mean=statistics.mean(x["prompt_tokens"] for x in r),
            cached_tokens_total=sum(x["cached_tokens"] for x in r),
            finish_length=sum(1 for x in r if x["finish_reason"] == "length"),
            empty_replies=sum(1 for x in r if x["completion_tokens"] == 0),
            server_cpu_ms_per_token=1e3 * median(cpus[(s, n)]))
        if summary[f"{s}/{n}"]["empty_replies"]:
            print(f"warning: {s} at {n} clients: {summary[f'{s}/{n}']['empty_replies']} replies without a token",
                  file=sys.stderr)
    if len(names) == 2:  # do both servers write the same replies? (greedy; they differ only by rounding)
        for n in levels:
            by = {(x["round"], x["client"], x["k"]): x["text"] for x in recs[("llama", n)]}
            pairs = [(x["text"], by.get((x["round"], x["client"], x["k"]))) for x in recs[("pllm", n)]]
            same = sum(1 for p, l in pairs if p == l)
            prefix = [len(os.path.commonprefix([p, l])) / max(1, len(p), len(l)) for p, l in pairs if l is not None]
            for s in names:
                summary[f"{s}/{n}"].update(same_reply_fraction=same / max(1, len(pairs)),
                                           common_prefix_fraction_median=median(prefix))

    with open("/proc/cpuinfo") as f:
        flags = next((l for l in f if l.startswith("flags")), "")
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "other"
    print(f"\n{os.path.basename(a.model)}, {isa}, {a.threads} threads, {a.slots} slots, -c {a.ctx} per request, "
          f"max_tokens {a.max_tokens}, temperature 0, {a.requests} requests per client, {a.rounds} rounds, "
          f"{a.prompts} prompts, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}; "
          f"wall {wall_total:.0f} s\n")
    if len(names) == 2:
        print("| clients | TTFT p50 ms pllm | llama | pllm/llama | TTFT p90 ms pllm | llama "
              "| decode tok/s p50 pllm | llama | pllm/llama | aggregate tok/s pllm | llama | pllm/llama "
              "| mean tokens pllm / llama | cached tokens pllm / llama | same replies / common prefix | server CPU ms/token pllm / llama |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for n in levels:
            p, l = summary[f"pllm/{n}"], summary[f"llama/{n}"]
            print(f"| {n} | {p['ttft_p50_ms']:.0f} | {l['ttft_p50_ms']:.0f} | {p['ttft_p50_ms'] / l['ttft_p50_ms']:.2f} "
                  f"| {p['ttft_p90_ms']:.0f} | {l['ttft_p90_ms']:.0f} "
                  f"| {p['decode_tps_p50']:.1f} | {l['decode_tps_p50']:.1f} | {p['decode_tps_p50'] / l['decode_tps_p50']:.2f} "
                  f"| {p['aggregate_tps_median']:.1f} | {l['aggregate_tps_median']:.1f} "
                  f"| {p['aggregate_tps_median'] / l['aggregate_tps_median']:.2f} "
                  f"| {p['completion_tokens_mean']:.1f} / {l['completion_tokens_mean']:.1f} "
                  f"| {p['cached_tokens_total']} / {l['cached_tokens_total']} | {100 * p['same_reply_fraction']:.0f} % / {100 * p['common_prefix_fraction_median']:.0f} % "
                  f"| {p['server_cpu_ms_per_token']:.1f} / {l['server_cpu_ms_per_token']:.1f} |")
            cp, cl = p["completion_tokens_mean"], l["completion_tokens_mean"]
            if abs(cp - cl) > 0.05 * max(cp, cl):
                print(f"warning: {n} clients: mean completion tokens differ (pllm {cp:.1f}, llama {cl:.1f})",
                      file=sys.stderr)
            if p["prompt_tokens_mean"] != l["prompt_tokens_mean"]:
                print(f"note: {n} clients: mean prompt tokens pllm {p['prompt_tokens_mean']:.1f}, "
                      f"llama {l['prompt_tokens_mean']:.1f}", file=sys.stderr)
    else:
        print("| server | clients | TTFT p50 ms | TTFT p90 ms | decode tok/s p50 | aggregate tok/s | mean tokens "
              "| cached tokens | server CPU ms/token |")
        print("|---|---|---|---|---|---|---|---|---|")
        for n in levels:
            x = summary[f"{names[0]}/{n}"]
            print(f"| {names[0]} | {n} | {x['ttft_p50_ms']:.0f} | {x['ttft_p90_ms']:.0f} | {x['decode_tps_p50']:.1f} "
                  f"| {x['aggregate_tps_median']:.1f} | {x['completion_tokens_mean']:.1f} | {x['cached_tokens_total']} "
                  f"| {x['server_cpu_ms_per_token']:.1f} |")
    print(f"\nserver logs: {logdir}", file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(args=vars(a), commands=cmds, wall_s=wall_total, summary=summary,
                           env={k: os.environ[k] for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "PLLM_ISA")
                                if k in os.environ},
                           requests={f"{s}/{n}": r for (s, n), r in recs.items()}), f, indent=1)


if __name__ == "__main__":
    main()
