#!/usr/bin/env python3
"""P12's frame-budget sweep: does the frame budget ever make the UI worse, what does it cost in
throughput, and does an interactive request's first token stay within 1.5x of the same request
alone? Runs `pocketllm simulate` on generated scenarios:

  UI work per frame 2, 4, 6, 8, 10, 12, 14 ms at 60 Hz and 3, 5, 7 ms at 120 Hz; three
  background sessions (a 200-token request each, restarted every 2 s) and three interactive
  questions, all greedy (so both sides of a comparison do the same work); each cell run with the budget, with --no-frame-budget, and "alone" (the same
  interactive requests and UI, budget on, no background), in alternated order, --rounds times,
  for default (int16) and int8 activations.

  .venv/bin/pip install -r bench/requirements.txt
  .venv/bin/python bench/frame_sweep.py --rounds 5            # runs, then writes the summary
  .venv/bin/python bench/frame_sweep.py --summarize-only      # from bench/.cache/frame_sweep/

Writes every run's report to bench/.cache/frame_sweep/runs.jsonl, a Markdown table with every
round's figures to stdout (and --md), and the plot docs/img/frame_sweep.png.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "bench" / ".cache" / "frame_sweep"
CELLS = [(60, ui) for ui in (2, 4, 6, 8, 10, 12, 14)] + [(120, ui) for ui in (3, 5, 7)]
MODES = ["int16", "int8"]
KINDS = ["budget", "none", "alone"]
BACKGROUND = ["Summarise the history of the printing press in detail.",
              "Write a long essay about the ocean and its creatures.",
              "Explain how compilers work, step by step, at length."]
QUESTION = "What is the capital of France? Answer in one short sentence, please."


def scenario(hz, ui_ms, mode, kind, duration_s):
    period = 1000.0 / hz
    reqs = []
    if kind != "alone":
        for i, p in enumerate(BACKGROUND):
            reqs.append({"at_ms": 0, "class": "background", "session": f"bg{i}", "prompt": p, "max_tokens": 200, "temperature": 0,
                         "reset": True, "repeat": int(duration_s * 1000 // 2000) + 1, "every_ms": 2000})
    reqs.append({"at_ms": 1000, "class": "interactive", "session": "chat", "reset": True, "prompt": QUESTION,
                 "max_tokens": 24, "temperature": 0, "repeat": 3, "every_ms": (duration_s * 1000 - 1500) / 3})
    return {"description": f"frame sweep: {hz} Hz, UI {ui_ms} ms, {mode}, {kind}",
            "model": "SmolLM2-135M-Instruct.Q4_1.gguf", "threads": 2, "duration_s": duration_s,
            "activations": mode,
            "frame": {"period_ms": round(period, 3), "ui_work_ms": ui_ms, 
                      "max_tokens_per_frame": 3},
            "requests": reqs}


def run_one(binary, hz, ui_ms, mode, kind, duration_s):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(scenario(hz, ui_ms, mode, kind, duration_s), f)
        path = f.name
    flags = ["--no-frame-budget"] if kind == "none" else []
    out = subprocess.run([binary, "simulate", path, "--json", *flags], capture_output=True, text=True, check=False)
    os.unlink(path)
    if out.returncode != 0:
        sys.exit(f"simulate {hz} Hz {ui_ms} ms {mode} {kind} failed: {out.stderr.strip()}")
    r = json.loads(out.stdout)
    r.pop("timeline", None)
    return r


def cpu_line():
    name, flags = "unknown CPU", ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name") and name == "unknown CPU":
                name = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = line
    except OSError:
        pass
    level = os.environ.get("PLLM_ISA") or ("avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "?")
    return f"{name}, {os.cpu_count()} cores, kernels: {level}"


def summarize(rows, md_path, png_path):
    by = {}
    for r in rows:
        by.setdefault((r["mode"], r["hz"], r["ui_ms"], r["kind"]), []).append(r)
    lines = [f"Machine: {rows[0]['cpu']}. Rounds: {max(r['round'] for r in rows) + 1}.", "",
             "| mode | cell | missed: budget / none (every round) | median | 5x needed | tok/s budget / none | cost "
             "| TTFT p95 budget / alone ms (every round) | worst ratio |",
             "|---|---|---|---|---|---|---|---|---|"]
    verdict = {"misses": True, "five": True, "cost": True, "ttft": True}
    plot = {}
    for mode in MODES:
        for hz, ui in CELLS:
            b, n, a = (by.get((mode, hz, ui, k), []) for k in KINDS)
            if not (b and n and a):
                continue
            mb, mn = [x["frames_missed"] for x in b], [x["frames_missed"] for x in n]
            frames = b[0]["frames"]
            med_b, med_n = statistics.median(mb), statistics.median(mn)
            five = med_n >= 0.1 * frames
            tb = statistics.median(x["tokens_per_s"] for x in b)
            tn = statistics.median(x["tokens_per_s"] for x in n)
            cost = 1 - tb / tn if tn else 0
            p95_b = [x["ttft_ms"]["interactive"]["p95"] for x in b]
            p95_a = [x["ttft_ms"]["interactive"]["p95"] for x in a]
            alone = statistics.median(p95_a)
            worst = max(p95_b) / alone if alone else float("inf")
            verdict["misses"] &= med_b <= med_n
            verdict["five"] &= (not five) or med_b * 5 <= med_n
            verdict["cost"] &= cost <= 0.20
            verdict["ttft"] &= worst <= 1.5
            lines.append(f"| {mode} | {hz} Hz, UI {ui} ms | {' '.join(map(str, mb))} / {' '.join(map(str, mn))} of {frames} "
                         f"| {med_b:g} / {med_n:g} | {'yes' if five else 'no'}"
                         f"{(' (' + ('met' if med_b * 5 <= med_n else 'NOT met') + ')') if five else ''} "
                         f"| {tb:.1f} / {tn:.1f} | {cost * 100:+.1f} % "
                         f"| {' '.join(f'{x:.0f}' for x in p95_b)} / {' '.join(f'{x:.0f}' for x in p95_a)} | {worst:.2f} |")
            plot.setdefault(mode, []).append((f"{hz}/{ui}", mb, mn, worst, cost))
    lines += ["", "Targets: misses with the budget <= without (median) in every cell: "
              + ("met" if verdict["misses"] else "NOT met") + "; >= 5x fewer where none misses >= 10 %: "
              + ("met" if verdict["five"] else "NOT met") + "; throughput cost <= 20 %: "
              + ("met" if verdict["cost"] else "NOT met") + "; interactive TTFT p95 <= 1.5x alone in every round: "
              + ("met" if verdict["ttft"] else "NOT met") + "."]
    text = "\n".join(lines) + "\n"
    print(text)
    if md_path:
        Path(md_path).write_text(text)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib missing: no plot; pip install -r bench/requirements.txt)", file=sys.stderr)
        return
    fig, axes = plt.subplots(2, len(plot), figsize=(6 * len(plot), 6.5), squeeze=False)
    for col, (mode, cells) in enumerate(plot.items()):
        ax = axes[0][col]
        xs = range(len(cells))
        for i, (_, mb, mn, _, _) in enumerate(cells):
            ax.scatter([i - 0.12] * len(mb), mb, color="tab:green", s=12, label="budget" if i == 0 else None)
            ax.scatter([i + 0.12] * len(mn), mn, color="tab:red", s=12, label="no budget" if i == 0 else None)
        ax.set_xticks(list(xs), [c[0] for c in cells], rotation=45, fontsize=8)
        ax.set_ylabel("missed frames (every round)")
        ax.set_title(f"{mode}: missed frames by Hz / UI ms per frame")
        ax.legend()
        ax = axes[1][col]
        ax.bar([i - 0.2 for i in xs], [c[3] for c in cells], width=0.4, label="worst TTFT p95 / alone")
        ax.bar([i + 0.2 for i in xs], [1 - c[4] for c in cells], width=0.4, label="tok/s budget / none")
        ax.axhline(1.5, color="gray", ls="--", lw=0.8)
        ax.axhline(0.8, color="gray", ls=":", lw=0.8)
        ax.set_xticks(list(xs), [c[0] for c in cells], rotation=45, fontsize=8)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)
    print(f"plot: {png_path}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pocketllm", default=str(ROOT / "build" / "pocketllm"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--cells", default="", help="only these cells, e.g. 120:7,120:3 (Hz:UI ms); default all")
    ap.add_argument("--log", default=str(CACHE / "runs.jsonl"), help="where every run's report goes")
    ap.add_argument("--summarize-only", action="store_true")
    ap.add_argument("--md", default=str(CACHE / "summary.md"))
    ap.add_argument("--png", default=str(ROOT / "docs" / "img" / "frame_sweep.png"))
    a = ap.parse_args()
    CACHE.mkdir(parents=True, exist_ok=True)
    log = Path(a.log)
    cells = CELLS
    if a.cells:
        cells = [tuple(int(v) for v in c.split(":")) for c in a.cells.split(",")]
        unknown = [c for c in cells if c not in CELLS]
        if unknown:
            sys.exit(f"--cells: {unknown} not among {CELLS}")
    if not a.summarize_only:
        log.write_text("")
        cpu = cpu_line()
        modes = a.modes.split(",")
        for rnd in range(a.rounds):
            for mode in modes:
                for ci, (hz, ui) in enumerate(cells):
                    order = KINDS[(rnd + ci) % 3:] + KINDS[:(rnd + ci) % 3]  # alternated
                    for kind in order:
                        r = run_one(a.pocketllm, hz, ui, mode, kind, a.duration)
                        rec = {"round": rnd, "mode": mode, "hz": hz, "ui_ms": ui, "kind": kind, "cpu": cpu, **r}
                        with open(log, "a") as f:
                            f.write(json.dumps(rec) + "\n")
                        print(f"round {rnd} {mode} {hz} Hz UI {ui} {kind}: missed {r['frames_missed']}/{r['frames']} "
                              f"tok/s {r['tokens_per_s']:.1f} ttft p95 {r['ttft_ms']['interactive']['p95']:.0f}",
                              file=sys.stderr, flush=True)
    rows = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    if not rows:
        sys.exit("no runs to summarize")
    summarize(rows, a.md, a.png)


if __name__ == "__main__":
    main()
