#!/usr/bin/env python3
"""Logits of every architecture's random-weight fixture against llama.cpp's and against the
numpy reference (tests/py/reference.py), side by side with the archs that were already
verified (llama, qwen2, gemma3), so that the new archs' distances can be read against the
bounds the existing ones meet.

For each fixture (tests/py/tiny_models.py, F32 / F16 / Q8_0 written by the gguf package, and
Q4_K_M made from the F32 file by llama-quantize) and each prompt:
  * llama-debug --save-logits gives llama.cpp's token ids and the last position's logits;
  * `pocketllm logits` on the same ids, exact (f32 activations) and default (int16) modes;
  * the numpy reference on the same ids.
Distances: max_rel = max |a - b| / rms(b), rms_rel = rms(a - b) / rms(b), and whether the
argmax agrees. phi3 runs at -c 256 (rope_factors_short: the context is not above
original_context_length 256; llama.cpp pads its context to a multiple of 256, so a smaller
one would not stay short there) and -c 512 (rope_factors_long).

  bench/setup_llamacpp.sh                           # builds llama-debug and llama-quantize
  .venv/bin/python bench/arch_vs_llamacpp.py [--archs qwen3,phi3] [--md out.md]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "py"))
import tiny_models as tm  # noqa: E402
from reference import Reference  # noqa: E402

BIN = ROOT / "bench" / ".cache" / "bin"
PROMPTS = ["hello world and the other things in the world",
           "the cat sat on the mat; it is what it is, and so on and on"]
ARCHS = ["llama", "qwen2", "gemma3", "qwen3", "smollm3", "granite", "minicpm", "phi3", "gemma2", "lfm2"]


def dist(a: np.ndarray, b: np.ndarray) -> tuple[float, float, bool]:
    rms = float(np.sqrt(np.mean(b * b)))
    d = a - b
    return float(np.max(np.abs(d)) / rms), float(np.sqrt(np.mean(d * d)) / rms), int(np.argmax(a)) == int(np.argmax(b))


def llama_debug(model: Path, prompt: str, ctx: int, out_dir: Path) -> tuple[list[int], np.ndarray]:
    proc = subprocess.run([str(BIN / "llama-debug"), "-m", str(model), "-p", prompt, "--save-logits",
                           "--logits-output-dir", str(out_dir), "-c", str(ctx), "-t", "2", "--no-warmup"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"llama-debug failed on {model.name}: {proc.stderr[-800:]}")
    stem = out_dir / f"llamacpp-{model.stem}"
    ids = np.fromfile(f"{stem}-tokens.bin", dtype=np.int32).tolist()
    return ids, np.fromfile(f"{stem}.bin", dtype=np.float32).astype(np.float64)


def ours(model: Path, ids: list[int], ctx: int, mode: str, n_vocab: int, out: Path) -> np.ndarray:
    proc = subprocess.run([str(ROOT / "build" / "pocketllm"), "logits", "-m", str(model), "--ids",
                           " ".join(map(str, ids)), "--out", str(out), "-t", "2", "-c", str(ctx), "--act", mode],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"pocketllm logits failed on {model.name}: {proc.stderr[-800:]}")
    return np.fromfile(out, dtype="<f4").astype(np.float64).reshape(len(ids), n_vocab)[-1]


def fixtures(archs: list[str], work: Path) -> list[tuple[str, Path]]:
    cfgs = tm.model_configs()
    names = [n for n in cfgs if n.split("-")[0] in archs and n.split("-", 1)[1] in ("F32", "F16", "Q8_0")]
    paths = tm.generate_all(work, names)
    out = [(n, paths[n]) for n in names]
    for n in [n for n in names if n.endswith("-F32")]:  # Q4_K_M by llama-quantize
        dst = work / f"{n[:-4]}-Q4_K_M.gguf"
        if not dst.exists():
            q = subprocess.run([str(BIN / "llama-quantize"), str(paths[n]), str(dst), "Q4_K_M"], capture_output=True,
                               text=True)
            if q.returncode != 0:
                print(f"llama-quantize {n}: {q.stderr[-300:]}", file=sys.stderr)
                continue
        out.append((dst.stem, dst))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--archs", default=",".join(ARCHS))
    ap.add_argument("--work", default=str(ROOT / "bench" / ".cache" / "arch_fixtures"))
    ap.add_argument("--md", default="")
    a = ap.parse_args()
    for tool in ("llama-debug", "llama-quantize"):
        if not (BIN / tool).exists():
            sys.exit(f"{BIN / tool} is missing: run bench/setup_llamacpp.sh")
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    rows = ["| fixture | ctx | prompt tokens | ours exact vs llama.cpp (max / rms rel, argmax) "
            "| ours int16 vs llama.cpp | reference vs llama.cpp | ours exact vs reference |",
            "|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name, path in fixtures(a.archs.split(","), work):
            ref = Reference(path)
            for ctx in ((256, 512) if name.startswith("phi3") else (128,)):
                for prompt in PROMPTS:
                    ids, lc = llama_debug(path, prompt, ctx, tmp)
                    ex = ours(path, ids, ctx, "exact", ref.hp.n_vocab, tmp / "o.f32")
                    i16 = ours(path, ids, ctx, "int16", ref.hp.n_vocab, tmp / "o.f32")
                    rf = ref.forward(ids, last_only=True, n_ctx=ctx)[0]
                    cells = [dist(ex, lc), dist(i16, lc), dist(rf, lc), dist(ex, rf)]
                    fmt = " | ".join(f"{m:.1e} / {r:.1e} {'=' if same else 'DIFF'}" for m, r, same in cells)
                    rows.append(f"| {name} | {ctx} | {len(ids)} | {fmt} |")
                    print(rows[-1], flush=True)
    text = "\n".join(rows) + "\n"
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    text = f"Machine: {cpu}, {os.cpu_count()} cores. llama.cpp: {BIN}.\n\n" + text
    if a.md:
        Path(a.md).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
