"""Helpers for running the pocketllm CLI from tests."""
from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
SMOLLM2_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
# "Once upon a time there was a little" in SmolLM2's vocabulary (test_reference.py
# checks this against the mini BPE).
SMOLLM2_SHORT_IDS = [6403, 1980, 253, 655, 665, 436, 253, 1838]

# Every CLI call in the suite gets this long at most; a tiny model takes well under a second.
DEFAULT_TIMEOUT_S = 60


def binary_path() -> Path:
    env = os.environ.get("POCKETLLM_BIN")
    return Path(env) if env else REPO / "build" / "pocketllm"


def smollm2_path() -> Path:
    env = os.environ.get("POCKETLLM_MODELS")
    if env:
        return Path(env) / SMOLLM2_NAME
    return REPO / "models" / SMOLLM2_NAME


GEMMA3_NAME = "gemma-3-270m-Q4_K_M.gguf"


def gemma3_path() -> Path:
    env = os.environ.get("POCKETLLM_MODELS")
    return (Path(env) if env else REPO / "models") / GEMMA3_NAME


def _cpu_flags() -> set[str]:
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    flags = set()
    for line in cpuinfo.splitlines():
        if line.startswith(("flags", "Features")):
            flags.update(line.split(":", 1)[1].split())
    return flags


def available_isas() -> list[str]:
    """Dispatch levels to exercise through PLLM_ISA ("default" = variable unset). Under the
    sanitizers (POCKETLLM_SANITIZED=1) only the default (best) level and the scalar twins: the
    intermediate levels' numerics are covered by the release pass, and the sanitizer pass is
    about memory and UB on the paths the engine takes."""
    isas = ["default", "scalar"]
    if os.environ.get("POCKETLLM_SANITIZED") == "1":
        return isas
    machine = platform.machine().lower()
    flags = _cpu_flags()
    if machine in ("x86_64", "amd64"):
        if {"avx2", "fma", "f16c"} <= flags:
            isas.append("avx2")
            if "avx_vnni" in flags:  # AVX-VNNI (ymm vpdpwssd); /proc/cpuinfo spells it avx_vnni
                isas.append("avxvnni")
        if {"avx512f", "avx512bw"} <= flags:
            isas.append("avx512")
    elif machine in ("aarch64", "arm64"):
        isas.append("neon")
        if "asimddp" in flags:
            isas.append("dotprod")
            if "i8mm" in flags:
                isas.append("i8mm")
    return isas


def int16_prompts(isa: str) -> bool:
    """Whether int16 mode runs a prompt's rows in int16 at this level (it has an int16 GEMM of
    its own, bit for bit the decode tiles' results: the avx2, avxvnni and avx512 tables) rather
    than exact (scalar, NEON)."""
    if isa == "scalar" or platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    return isa in ("default", "avx2", "avxvnni", "avx512")


def fp16_arith(isa: str) -> bool:
    """Whether the W4A16 (--f16-act) kernels of this level accumulate in fp16: every NEON
    level on a CPU with FP16 arithmetic (asimdhp); never the scalar twins or x86."""
    machine = platform.machine().lower()
    return machine in ("aarch64", "arm64") and isa != "scalar" and "asimdhp" in _cpu_flags()


def isa_env(isa: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PLLM_ISA", None)
    if isa != "default":
        env["PLLM_ISA"] = isa
    return env


def run_cli(binary: Path, args: list[str], *, env: dict | None = None,
            timeout: float = DEFAULT_TIMEOUT_S) -> subprocess.CompletedProcess:
    """Run the CLI; a hang is a test failure (the child is killed)."""
    cmd = [str(binary)] + [str(a) for a in args]
    try:
        return subprocess.run(cmd, capture_output=True, env=env, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"pocketllm hung (> {timeout}s): {' '.join(cmd)}")


def describe(proc: subprocess.CompletedProcess) -> str:
    err = proc.stderr.decode("utf-8", "replace")
    out = proc.stdout.decode("utf-8", "replace")
    return (f"cmd: {' '.join(map(str, proc.args))}\nexit: {proc.returncode}\n"
            f"stderr ({len(err.splitlines())} lines):\n{err[-3000:]}\nstdout:\n{out[-1500:]}")


def check_ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, "pocketllm failed\n" + describe(proc)
    return proc


def assert_clean_error(proc: subprocess.CompletedProcess) -> str:
    """The error contract: non-zero exit (not a signal), exactly one stderr line,
    starting with "error: " and saying something. Returns the message."""
    rc = proc.returncode
    assert rc >= 0, f"killed by signal {-rc}\n" + describe(proc)
    assert rc != 0, "expected failure, got exit 0\n" + describe(proc)
    assert rc < 128, f"exit code {rc} looks like a signal/abort\n" + describe(proc)
    lines = proc.stderr.decode("utf-8", "replace").splitlines()
    assert len(lines) == 1, f"expected exactly one stderr line, got {len(lines)}\n" + describe(proc)
    assert lines[0].startswith("error: "), "stderr must start with 'error: '\n" + describe(proc)
    assert len(lines[0].strip()) > len("error:"), "empty error message\n" + describe(proc)
    return lines[0]


# Flags that choose an activation mode.
ACT_FLAGS = {"--exact", "--int8-act", "--f16-act", "--int16-act", "--static-act"}


def exact_unless_chosen(args) -> list[str]:
    """["--exact"] unless `args` already choose an activation mode: the reference comparisons'
    bounds are exact mode's, and the engine's default is int16."""
    return [] if ACT_FLAGS & set(map(str, args)) else ["--exact"]


def run_logits(binary: Path, model: Path, ids: list[int], out_file: Path, n_vocab: int, *,
               threads: int = 2, env: dict | None = None, int8_act: bool = False,
               f16_act: bool = False, int16_act: bool = False, extra: list | tuple = (),
               chunk: int | None = None) -> np.ndarray:
    """Engine logits [len(ids), n_vocab] as float64; `int8_act` adds --int8-act, `f16_act`
    --f16-act, `int16_act` --int16-act, and without any of them (nor one in `extra`) --exact,
    which the reference comparisons assume (the engine's default is int16); `chunk` appends
    the ids in calls of that many tokens (1: each through the decode path; 0: all in one call).
    Its default is 0, and 1 with `int16_act`: where int16 mode runs a prompt's rows exact
    (int16_prompts), only one id per step reaches the int16 kernels, so its checks feed the ids
    that way everywhere. `extra` more CLI arguments (e.g. KV options)."""
    if chunk is None:
        chunk = 1 if int16_act else 0
    args = [flag for flag, on in (("--int8-act", int8_act), ("--f16-act", f16_act), ("--int16-act", int16_act))
            if on] + [str(a) for a in extra]
    proc = run_cli(binary, ["logits", "-m", model, "--ids", " ".join(map(str, ids)),
                            "--out", out_file, "-t", str(threads)]
                   + exact_unless_chosen(args) + (["--chunk", str(chunk)] if chunk else []) + args, env=env)
    check_ok(proc)
    raw = np.fromfile(out_file, dtype="<f4")
    assert raw.size == len(ids) * n_vocab, (
        f"logits file has {raw.size} floats, expected n_ids*n_vocab = {len(ids)}*{n_vocab}")
    got = raw.reshape(len(ids), n_vocab).astype(np.float64)
    assert np.all(np.isfinite(got)), "non-finite logits"
    return got


def parse_ids(stdout: bytes) -> list[int]:
    text = stdout.decode("utf-8")
    lines = [l for l in text.splitlines() if l.strip()]
    assert len(lines) == 1, f"tokenize should print one line, got {text!r}"
    assert lines[0].startswith(" ") or lines[0] == "", f"each id is preceded by a space: {text!r}"
    return [int(x) for x in lines[0].split()]
