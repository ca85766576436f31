#!/usr/bin/env python3
"""The runtime's numbers and plots for docs/RUNTIME.md (issue P8), from `pocketllm simulate`.

Three comparisons, each run as alternating pairs (A, B, A, B, ...) so the machine's drift
hits both sides alike:
  frames   bench/scenarios/typing.json with the frame budget vs --no-frame-budget
  frames_int8  the same with int8 activations (typing_int8.json)
  ttft     bench/scenarios/ttft_alone.json vs ttft_with_background.json
  thermal  bench/scenarios/hot_day.json with the governor vs --no-governor

  .venv/bin/pip install -r bench/requirements.txt
  .venv/bin/python bench/runtime_plots.py --rounds 3 [--only frames,ttft,thermal]

Writes docs/img/runtime_*.png, the raw reports to --out (default bench/.cache/runtime/) and
prints a Markdown summary (medians over the rounds) with the issue's targets.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCEN = ROOT / "bench" / "scenarios"

PAIRS = {
    "frames": (("budget", "typing.json", []), ("no budget", "typing.json", ["--no-frame-budget"])),
    "frames_int8": (("budget", "typing_int8.json", []), ("no budget", "typing_int8.json", ["--no-frame-budget"])),
    "ttft": (("alone", "ttft_alone.json", []), ("3 background", "ttft_with_background.json", [])),
    "thermal": (("governor", "hot_day.json", []), ("no governor", "hot_day.json", ["--no-governor"])),
}


def run(binary, scenario, flags, env):
    out = subprocess.run([binary, "simulate", str(SCEN / scenario), "--json", *flags], env=env,
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(f"simulate {scenario} {' '.join(flags)} failed: {out.stderr.strip()}")
    return json.loads(out.stdout)


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def isa():
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    return "AVX-512" if "avx512f" in flags else ("AVX2" if "avx2" in flags else platform.machine())


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def plot_frames(runs, png):
    import matplotlib.pyplot as plt
    labels = [k for k in runs]
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.4))
    for ax, key, title in zip(axes, ["frames_missed", "ui_p99_ms", "tokens_per_s"],
                              ["missed frames (of ~600)", "UI frame latency p99 (ms)", "tokens/s"]):
        vals = [[r[key] for r in runs[k]] for k in labels]
        ax.bar(labels, [med(v) for v in vals], color=["tab:green", "tab:red"])
        for i, v in enumerate(vals):
            ax.scatter([i] * len(v), v, color="black", s=10, zorder=3)
        ax.set_title(title)
    fig.suptitle("typing.json: 60 Hz UI needing 12 ms CPU per frame, 3 background sessions")
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def plot_ttft(runs, png):
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    labels = list(runs)
    p50 = [med([r["ttft_ms"]["interactive"]["p50"] for r in runs[k]]) for k in labels]
    p95 = [med([r["ttft_ms"]["interactive"]["p95"] for r in runs[k]]) for k in labels]
    x = range(len(labels))
    ax.bar([i - 0.2 for i in x], p50, width=0.4, label="p50")
    ax.bar([i + 0.2 for i in x], p95, width=0.4, label="p95")
    ax.set_xticks(list(x), labels)
    ax.set_ylabel("interactive TTFT (ms)")
    ax.set_title("A chat reply alone vs while 3 background sessions generate")
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def plot_thermal(runs, png):
    import matplotlib.pyplot as plt
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(8, 5.5), sharex=True)
    limit = None
    for (label, rs), color in zip(runs.items(), ["tab:green", "tab:red"]):
        tl = rs[0]["timeline"]
        limit = rs[0]["limit_c"]
        t = [s["t_s"] for s in tl]
        a1.plot(t, [s["temp_c"] for s in tl], color=color, label=label)
        # tokens/s over 1 s windows from the cumulative token count
        step = 10  # samples are 100 ms apart
        ts, rate = [], []
        for i in range(step, len(tl), step):
            dt = tl[i]["t_s"] - tl[i - step]["t_s"]
            ts.append(tl[i]["t_s"])
            rate.append((tl[i]["tokens"] - tl[i - step]["tokens"]) / dt if dt > 0 else 0)
        a2.plot(ts, rate, color=color, label=label)
    a1.axhline(limit, color="black", linestyle="--", linewidth=1, label=f"limit {limit:.0f} C")
    a1.set_ylabel("simulated temperature (C)")
    a1.legend()
    a2.set_ylabel("tokens/s")
    a2.set_xlabel("time (s)")
    a2.legend()
    fig.suptitle("hot_day.json: 4 sessions generating, RC thermal model heated by the engine's busy time")
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="frames,frames_int8,ttft,thermal")
    ap.add_argument("--bin", default=str(ROOT / "build" / "pocketllm"))
    ap.add_argument("--out", default=str(ROOT / "bench" / ".cache" / "runtime"))
    ap.add_argument("--img", default=str(ROOT / "docs" / "img"))
    args = ap.parse_args()
    env = dict(os.environ)
    env.setdefault("POCKETLLM_MODELS", str(ROOT / "models"))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    Path(args.img).mkdir(parents=True, exist_ok=True)
    print(f"machine: {cpu_name()}, {isa()}, {os.cpu_count()} cores; {args.rounds} alternating rounds\n")
    for name in args.only.split(","):
        runs = {label: [] for label, _, _ in PAIRS[name]}
        for rnd in range(args.rounds):
            for label, scenario, flags in PAIRS[name]:
                r = run(args.bin, scenario, flags, env)
                runs[label].append(r)
                print(f"  {name} round {rnd + 1} {label}: {r['frames_missed']} missed, ui p99 {r['ui_p99_ms']:.1f} ms, "
                      f"{r['tokens_per_s']:.1f} tok/s, ttft {r['ttft_ms']['interactive']['p50']:.0f} ms, "
                      f"peak {r['peak_temp_c']}", file=sys.stderr)
        json.dump(runs, open(Path(args.out) / f"{name}.json", "w"), indent=1)
        (a, b) = [label for label, _, _ in PAIRS[name]]
        if name.startswith("frames"):
            plot_frames(runs, Path(args.img) / f"runtime_{name}.png")
            ma, mb = med([r["frames_missed"] for r in runs[a]]), med([r["frames_missed"] for r in runs[b]])
            ta, tb = med([r["tokens_per_s"] for r in runs[a]]), med([r["tokens_per_s"] for r in runs[b]])
            print(f"| {name} | missed frames | UI p99 ms | tokens/s |\n|---|---|---|---|")
            for lab in (a, b):
                print(f"| {lab} | {med([r['frames_missed'] for r in runs[lab]]):.0f} of {runs[lab][0]['frames']} | "
                      f"{med([r['ui_p99_ms'] for r in runs[lab]]):.1f} | {med([r['tokens_per_s'] for r in runs[lab]]):.1f} |")
            print(f"\nfewer missed frames: {mb / max(ma, 1):.0f}x (target >= 5x; {ma:.0f} counted as at least 1); "
                  f"throughput cost {100 * (1 - ta / tb):.1f} % (target <= 20 %)\n")
        elif name == "ttft":
            plot_ttft(runs, Path(args.img) / "runtime_ttft.png")
            pa = med([r["ttft_ms"]["interactive"]["p50"] for r in runs[a]])
            pb = med([r["ttft_ms"]["interactive"]["p50"] for r in runs[b]])
            qa = med([r["ttft_ms"]["interactive"]["p95"] for r in runs[a]])
            qb = med([r["ttft_ms"]["interactive"]["p95"] for r in runs[b]])
            print("| interactive TTFT | p50 ms | p95 ms | background tokens/s |\n|---|---|---|---|")
            for lab in (a, b):
                print(f"| {lab} | {med([r['ttft_ms']['interactive']['p50'] for r in runs[lab]]):.0f} | "
                      f"{med([r['ttft_ms']['interactive']['p95'] for r in runs[lab]]):.0f} | "
                      f"{med([r['tokens_per_s'] for r in runs[lab]]):.1f} |")
            print(f"\nTTFT with 3 background / alone: p50 {pb / pa:.2f}x, p95 {qb / qa:.2f}x (target <= 1.5x)\n")
        else:
            plot_thermal(runs, Path(args.img) / "runtime_thermal.png")
            print("| hot_day.json | peak C | s over limit | tokens/s | governor changes |\n|---|---|---|---|---|")
            for lab in (a, b):
                print(f"| {lab} | {med([r['peak_temp_c'] for r in runs[lab]]):.1f} | "
                      f"{med([r['time_over_limit_s'] for r in runs[lab]]):.1f} | "
                      f"{med([r['tokens_per_s'] for r in runs[lab]]):.1f} | "
                      f"{med([r['governor_changes'] for r in runs[lab]]):.0f} |")
            print()


if __name__ == "__main__":
    main()
