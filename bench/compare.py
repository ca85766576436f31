#!/usr/bin/env python3
"""Side-by-side throughput of `pocketllm bench` and llama.cpp's `llama-bench` on the same GGUF files.

For every file and every round it runs, in this order,
    pocketllm (first of --modes) -> llama-bench -> pocketllm (second mode) -> llama-bench -> ...
(default modes: exact, int16, int8; the order flips on odd rounds), each a separate process with one repetition, the same thread
count and the same prompt/generation lengths, so slow drifts of the machine (thermal state, other
load) hit both engines alike. The table reports mean +- sd over the rounds and ours/llama.cpp ratios.

    bench/setup_llamacpp.sh && bench/make_quants.sh     # once
    bench/compare.py --pocketllm build/pocketllm -t 2 -p 512 -n 128 --rounds 3
    bench/compare.py --isa avx2 ...    # on an AVX-512 machine: ours as an AVX2 machine would run it

Columns: pp = prompt tokens per second; tg@0 = generated tokens per second from an empty context
(what llama-bench's tg test measures); tg@P = ours, generated after the P-token prompt; RSS = peak
resident set of the whole process (os.wait4 rusage), weights included as they are mapped and touched;
other load = mean CPU cores used by other processes during the row's runs (before each run the
script waits, up to --max-wait seconds, for the CPUs to be --min-idle idle). A second table keeps
only the runs during which other processes used at most --quiet-load cores.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS_DIR = os.environ.get("POCKETLLM_MODELS", os.path.join(ROOT, "models"))
DEFAULT_MODELS = [os.path.join(MODELS_DIR, f"SmolLM2-135M-Instruct.{t}.gguf") for t in ("Q4_0", "Q4_1", "Q8_0")] + [
    os.path.join(MODELS_DIR, "gemma-3-270m-Q4_K_M.gguf")]  # K-quants: what most published GGUF files are


def cpu_idle_fraction(interval=0.5):
    """Fraction of all CPUs idle over `interval` seconds (from /proc/stat)."""
    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return v[3] + v[4], sum(v)  # idle + iowait, total
    i0, t0 = snap()
    time.sleep(interval)
    i1, t1 = snap()
    return (i1 - i0) / max(1, t1 - t0)


def wait_for_idle(args):
    """Other processes on a 2-core machine distort a 2-thread benchmark (llama.cpp's spinning
    thread pool suffers most), so wait until the CPUs are idle. Returns the seconds waited."""
    if args.max_wait <= 0:
        return 0.0
    start = time.monotonic()
    while cpu_idle_fraction() < args.min_idle:
        if time.monotonic() - start > args.max_wait:
            print(f"warning: CPUs still busy after {args.max_wait}s; measuring anyway", file=sys.stderr)
            break
    return time.monotonic() - start


def cpu_busy_seconds():
    """CPU-seconds spent non-idle on all CPUs since boot (from /proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / os.sysconf("SC_CLK_TCK")  # user nice system irq softirq


def run_measured(cmd, env=None):
    """Run cmd; return (stdout text, peak RSS of the child in MiB, other load). The other load is
    the CPU time other processes used while cmd ran, in cores (0 = the machine was ours alone).
    Raise on failure."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        busy0, t0 = cpu_busy_seconds(), time.monotonic()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(p.pid, 0)
        wall, busy = time.monotonic() - t0, cpu_busy_seconds() - busy0
        p.returncode = os.waitstatus_to_exitcode(status)
        other = max(0.0, busy - usage.ru_utime - usage.ru_stime) / max(wall, 1e-9)
        out.seek(0)
        err.seek(0)
        text = out.read().decode("utf-8", "replace")
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{err.read().decode('utf-8', 'replace')}")
        return text, usage.ru_maxrss / 1024.0, other  # ru_maxrss is in kB on Linux


def ours_env(args):
    """--isa caps our kernels with PLLM_ISA (e.g. avx2 on an AVX-512 machine: the stand-in for AVX2
    machines); llama.cpp runs as built."""
    env = dict(os.environ)
    if args.isa:
        env["PLLM_ISA"] = args.isa
    return env


# Our activation modes and their flags; "default" is what a user gets without flags.
MODE_FLAGS = {"default": [], "exact": ["--exact"], "int16": ["--int16-act"], "int8": ["--int8-act"],
              "f16": ["--f16-act"]}


def run_ours(args, model, mode):
    cmd = [args.pocketllm, "bench", "-m", model, "-p", str(args.p), "-n", str(args.n), "-t", str(args.t),
           "-r", "1", "--json", "--bw-mib", "0", "--tg-empty"] + MODE_FLAGS[mode]
    text, rss, other = run_measured(cmd, ours_env(args))
    j = json.loads(text)
    return {"pp": j["pp_tps"], "tg0": j["tg0_tps"], "tgP": j["tg_tps"], "ttft_ms": j["ttft_ms"], "rss": rss,
            "other_load": other, "bytes_per_token": j["bytes_per_token_mb"] * 1e6, "isa": j["isa"]}


def run_llama(args, model):
    cmd = [args.llama_bench, "-m", model, "-p", str(args.p), "-n", str(args.n), "-t", str(args.t),
           "-r", "1", "-o", "json"]
    text, rss, other = run_measured(cmd)
    res = {"rss": rss, "other_load": other}
    for t in json.loads(text):
        if t.get("n_prompt", 0) > 0 and t.get("n_gen", 0) == 0:
            res["pp"] = t["avg_ts"]
        elif t.get("n_gen", 0) > 0 and t.get("n_prompt", 0) == 0:
            res["tg0"] = t["avg_ts"]
    if "pp" not in res or "tg0" not in res:
        raise RuntimeError(f"unexpected llama-bench output:\n{text}")
    return res


def bandwidth(args, model):
    text, _, _ = run_measured([args.pocketllm, "bench", "-m", model, "-p", "8", "-n", "4", "-r", "1", "-t", str(args.t),
                               "--json"], ours_env(args))
    return json.loads(text)["bandwidth_gbs"]


def ms(values):
    m = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return m, sd


def fmt(values):
    m, sd = ms(values)
    return f"{m:.1f} ± {sd:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*",
                    help="GGUF files (default: SmolLM2-135M-Instruct Q4_0, Q4_1, Q8_0 and Gemma 3 270M Q4_K_M)")
    ap.add_argument("--pocketllm", default=os.path.join(ROOT, "build", "pocketllm"))
    ap.add_argument("--llama-bench", help="llama-bench binary (default bench/.cache/bin/llama-bench; with --isa avx2 "
                                          "bench/.cache/bin-avx2/llama-bench where LLAMA_ISA=avx2 bench/setup_llamacpp.sh built it)")
    ap.add_argument("-p", type=int, default=512, help="prompt tokens (default 512)")
    ap.add_argument("-n", type=int, default=128, help="generated tokens (default 128)")
    ap.add_argument("-t", type=int, default=2, help="threads for both engines (default 2)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per file (default 3)")
    ap.add_argument("--min-idle", type=float, default=0.8,
                    help="before each run wait until this fraction of the CPUs is idle (default 0.8)")
    ap.add_argument("--max-wait", type=float, default=60, help="give up waiting for idle CPUs after this many seconds (0 = never wait)")
    ap.add_argument("--quiet-load", type=float, default=0.1,
                    help="second table: only runs during which other processes used at most this many cores")
    ap.add_argument("--isa", help="cap our kernels at this level (PLLM_ISA: avx2 on an AVX-512 machine stands in for "
                                  "AVX2 machines; the tables say so); llama.cpp runs its AVX2 build where there is "
                                  "one, else as built")
    ap.add_argument("--json-out", help="also write every measurement to this file")
    ap.add_argument("--modes", default="exact,int16,int8",
                    help=f"our activation modes, comma-separated, from {', '.join(MODE_FLAGS)} (default exact,int16,int8)")
    ap.add_argument("--from-json", nargs="+", metavar="FILE",
                    help="print the tables of earlier --json-out files (same -p/-n/-t; runs pooled) and exit")
    args = ap.parse_args()
    args.modes = args.modes.split(",")
    args.llama_isa = "native"
    if not args.llama_bench:
        avx2 = os.path.join(ROOT, "bench", ".cache", "bin-avx2", "llama-bench")
        if args.isa == "avx2" and os.access(avx2, os.X_OK):
            args.llama_bench, args.llama_isa = avx2, "avx2"
        else:
            args.llama_bench = os.path.join(ROOT, "bench", ".cache", "bin", "llama-bench")
    for m in args.modes:
        if m not in MODE_FLAGS:
            sys.exit(f"error: unknown mode {m!r} (choose from {', '.join(MODE_FLAGS)})")

    if args.from_json:
        pooled, rounds = {}, 0
        for path in args.from_json:
            with open(path) as f:
                saved = json.load(f)
            rounds += saved["rounds"]
            for name, r in saved["results"].items():
                dst = pooled.setdefault(name, {"llama": [], "bandwidth_gbs": 0.0})
                for key, runs in r.items():
                    if key != "bandwidth_gbs":
                        dst[key] = dst.get(key, []) + runs
                dst["bandwidth_gbs"] = max(dst["bandwidth_gbs"], r["bandwidth_gbs"])
        print_tables(pooled, saved["p"], saved["n"], saved["threads"], rounds, args.quiet_load, saved.get("isa_cap"),
                     saved.get("llama_isa", "native"))
        return

    for exe in (args.pocketllm, args.llama_bench):
        if not os.access(exe, os.X_OK):
            sys.exit(f"error: {exe} not found (build it; llama-bench comes from bench/setup_llamacpp.sh)")
    models = args.models or [m for m in DEFAULT_MODELS if os.path.exists(m)]
    missing = [m for m in (args.models or DEFAULT_MODELS) if not os.path.exists(m)]
    for m in missing:
        print(f"warning: skipping missing {m} (bench/make_quants.sh makes the Q4_0/Q8_0 files; scripts/test.sh fetches the Gemma file)", file=sys.stderr)
    if not models:
        sys.exit("error: no model files")

    wait_for_idle(args)
    bw = bandwidth(args, models[0])
    results = {}
    for model in models:
        name = os.path.basename(model)
        r = results[name] = {**{m: [] for m in args.modes}, "llama": [], "bandwidth_gbs": bw}
        for rnd in range(args.rounds):
            steps = []
            for m in args.modes:
                steps += [(m, lambda m=m: run_ours(args, model, m)), ("llama", lambda: run_llama(args, model))]
            if rnd % 2:
                steps.reverse()
            for key, fn in steps:
                waited = wait_for_idle(args)
                res = fn()
                res["waited_s"] = waited
                r[key].append(res)
                print(f"[{name} round {rnd + 1}/{args.rounds}] {key:5s} pp {res['pp']:8.1f}  tg@0 {res['tg0']:7.1f}"
                      f"  RSS {res['rss']:6.1f} MiB  other load {res['other_load']:.2f} cores", file=sys.stderr, flush=True)

    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"p": args.p, "n": args.n, "threads": args.t, "rounds": args.rounds, "isa_cap": args.isa,
                       "llama_isa": args.llama_isa, "results": results}, f, indent=1)
    print_tables(results, args.p, args.n, args.t, args.rounds, args.quiet_load, args.isa, args.llama_isa)


def print_table(results, P, N, max_load=None):
    """Markdown table; with max_load, only runs during which other processes used at most that many cores."""
    def keep(runs):
        return [x for x in runs if max_load is None or x["other_load"] <= max_load]
    print(f"| file | activations | ours pp{P} | llama.cpp pp{P} | ratio | ours tg{N} | llama.cpp tg{N} | ratio "
          f"| ours tg{N} after pp{P} | roofline tg | ours RSS MiB | llama.cpp RSS MiB | runs ours/llama | other load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        bw = r["bandwidth_gbs"]
        llama = keep(r["llama"])
        for mode in [k for k in r if k not in ("llama", "bandwidth_gbs")]:
            runs = keep(r[mode])
            if not runs or not llama:
                print(f"| {name} | {mode} | – | – | – | – | – | – | – | – | – | – | {len(runs)}/{len(llama)} | – |")
                continue
            lpp, ltg = [x["pp"] for x in llama], [x["tg0"] for x in llama]
            opp, otg, otgp = [x["pp"] for x in runs], [x["tg0"] for x in runs], [x["tgP"] for x in runs]
            roof = bw * 1e9 / runs[0]["bytes_per_token"]
            print(f"| {name} | {mode} | {fmt(opp)} | {fmt(lpp)} | {ms(opp)[0] / ms(lpp)[0]:.2f} | {fmt(otg)} "
                  f"| {fmt(ltg)} | {ms(otg)[0] / ms(ltg)[0]:.2f} | {fmt(otgp)} | {roof:.0f} "
                  f"| {max(x['rss'] for x in runs):.0f} | {max(x['rss'] for x in llama):.0f} "
                  f"| {len(runs)}/{len(llama)} | {statistics.fmean(x['other_load'] for x in runs + llama):.2f} |")


def print_tables(results, P, N, threads, rounds, quiet_load, isa_cap=None, llama_isa="native"):
    first = next(iter(results.values()))
    isa = next(runs[0]["isa"] for k, runs in first.items() if k not in ("llama", "bandwidth_gbs") and runs)
    print(f"\nthreads {threads}, {rounds} rounds, read bandwidth {first['bandwidth_gbs']:.1f} GB/s, our ISA {isa}"
          + (f" (capped with PLLM_ISA={isa_cap}: a stand-in for machines whose best level that is)" if isa_cap else "")
          + "; llama.cpp " + ("built for AVX2 (GGML_NATIVE=OFF: AVX2 + FMA + F16C + BMI2)" if llama_isa == "avx2"
                              else "built with -march=native (everything this CPU has)") + "\n\nAll runs:\n")
    print_table(results, P, N)
    print(f"\nOnly runs during which other processes used <= {quiet_load} cores:\n")
    print_table(results, P, N, quiet_load)


if __name__ == "__main__":
    main()
