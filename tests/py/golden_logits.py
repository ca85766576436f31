"""Golden logits: the engine's logits, bit for bit, as saved from an earlier tree.

A refactor that must not change a single result (P13: one home per concept) is checked by
running the same cases and comparing the SHA-256 of the raw float32 logits with the ones saved
in tests/data/golden_logits.json. No tolerance: one flipped bit is a failure.

Cases: SmolLM2 and Gemma 3 (the real files) and tiny random-weight models of every weight type
(tiny_models.py) x every activation mode (int16, exact, int8, f16; static on SmolLM2 with scales
calibrated by `calibrate-act`) x every dispatch level this CPU runs (PLLM_ISA) x two ways of
feeding the ids: two sequences stepped together one id per step (the batched decode path) and
in chunks of 5 (the prompt GEMM), 2 threads.

  .venv/bin/python tests/py/golden_logits.py --write     # save (adds/updates this CPU's levels)
  .venv/bin/python tests/py/golden_logits.py             # compare, print every mismatch

The saved keys carry the level; levels this CPU cannot run are skipped (on an AVX2-only machine
the avx512 keys are not checked). A model file whose bytes changed (a new gguf writer) is
reported as such, not as changed logits.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

import pllm_cli
import tiny_models

GOLDEN = pllm_cli.REPO / "tests" / "data" / "golden_logits.json"
MODES = {"int16": ["--int16-act"], "exact": ["--exact"], "int8": ["--int8-act"], "f16": ["--f16-act"],
         "static": ["--static-act"]}
FEEDS = {"decode": 1, "chunk5": 5}  # --chunk: one id per step / prompt chunks
TINY = ["llama-F32", "llama-F16", "llama-BF16", "llama-Q8_0", "llama-Q4_0", "qwen2-Q4_1", "qwen2-Q4_K",
        "qwen2-Q6_K", "llama-ropefreqs-Q8_0", "gemma3-mix-Q5_0", "gemma3-Q8_0"]
CALIB_TEXT = ("The quick brown fox jumps over the lazy dog. A small language model runs on the phone, "
              "answers questions and writes short stories about the sea, the mountains and the stars. ") * 4


def sha256_file(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def real_ids(seq: int, n: int) -> list[int]:
    return [1 + (seq * 7919 + i * 104729) % 40000 for i in range(n)]


def models(work: Path, binary: Path) -> dict[str, tuple[Path, list[list[int]], list[str]]]:
    """name -> (file, two id sequences, modes). Real files that are absent are left out."""
    out = {}
    smol, gemma = pllm_cli.smollm2_path(), pllm_cli.gemma3_path()
    seqs = [real_ids(1, 11), real_ids(2, 7)]
    if smol.is_file():
        out["smollm2"] = (smol, seqs, ["int16", "exact", "int8", "f16"])
        calibrated = work / "smollm2-static.gguf"
        text = work / "calib.txt"
        text.write_text(CALIB_TEXT)
        pllm_cli.check_ok(pllm_cli.run_cli(binary, ["calibrate-act", smol, calibrated, "--calib", text,
                                                    "--calib-tokens", "128", "--calib-ctx", "64", "-t", "2"],
                                           timeout=300))
        out["smollm2-static"] = (calibrated, seqs, ["static"])
    if gemma.is_file():
        out["gemma3"] = (gemma, seqs, ["int16", "exact", "int8", "f16"])
    cfgs = {**tiny_models.model_configs(), **tiny_models.extra_configs()}
    for name, p in tiny_models.generate_all(work / "tiny", TINY).items():
        ids = tiny_models.sample_ids(cfgs[name], 18)
        out[name] = (p, [ids[:11], ids[11:]], ["int16", "exact", "int8", "f16"])
    return out


def logits_sha(binary: Path, model: Path, seqs: list[list[int]], mode: str, feed: str, isa: str,
               out: Path) -> tuple[str, int]:
    ids = ";".join(" ".join(map(str, s)) for s in seqs)
    proc = pllm_cli.run_cli(binary, ["logits", "-m", model, "--ids", ids, "--out", out, "-t", "2",
                                     "--chunk", str(FEEDS[feed])] + MODES[mode],
                            env=pllm_cli.isa_env(isa), timeout=300)
    pllm_cli.check_ok(proc)
    raw = np.fromfile(out, dtype="<f4")
    assert raw.size % sum(map(len, seqs)) == 0 and np.all(np.isfinite(raw)), f"bad logits from {model}"
    return hashlib.sha256(raw.tobytes()).hexdigest(), int(raw.size)


def run_all(binary: Path, isas: list[str]) -> dict[str, dict]:
    got = {}
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        for name, (path, seqs, modes) in models(work, binary).items():
            file_sha = sha256_file(path)
            for mode in modes:
                for isa in isas:
                    for feed in FEEDS:
                        sha, n = logits_sha(binary, path, seqs, mode, feed, isa, work / "out.bin")
                        got[f"{name}|{mode}|{isa}|{feed}"] = {"file": file_sha, "logits": sha, "floats": n}
    return got


def compare(saved: dict[str, dict], got: dict[str, dict]) -> list[str]:
    """Every key run here that differs from the saved one, in words."""
    problems = []
    for key, g in sorted(got.items()):
        s = saved.get(key)
        if s is None:
            problems.append(f"{key}: not in {GOLDEN.name} (run golden_logits.py --write on the tree before the change)")
        elif s["file"] != g["file"]:
            problems.append(f"{key}: the model file itself changed (generator or calibration), not comparable")
        elif s["floats"] != g["floats"] or s["logits"] != g["logits"]:
            problems.append(f"{key}: logits differ from the saved ones")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true", help="save this CPU's results into " + str(GOLDEN))
    a = ap.parse_args()
    binary = pllm_cli.binary_path()
    isas = [i for i in pllm_cli.available_isas() if i != "default"]
    got = run_all(binary, isas)
    if a.write:
        saved = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
        saved.update(got)
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(dict(sorted(saved.items())), indent=1) + "\n")
        print(f"saved {len(got)} cases ({', '.join(isas)}) to {GOLDEN}")
        return 0
    problems = compare(json.loads(GOLDEN.read_text()), got)
    for p in problems:
        print(p)
    print(f"{len(got) - len(problems)} of {len(got)} cases bit for bit ({', '.join(isas)})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
