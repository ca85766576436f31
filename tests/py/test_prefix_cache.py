"""Prefix cache on disk (--cache-dir), end to end through the CLI on SmolLM2: a second
process restores the prompt's block-aligned prefix instead of computing it and prints the
same greedy text; damaged files are reported, deleted and recomputed; the disk budget
evicts; processes sharing a directory leave it consistent; --no-cache turns it off."""
from __future__ import annotations

import json
import os
import struct
import subprocess
from pathlib import Path

import pytest

import pllm_cli

BLOCK = 64
MAGIC = b"PLLMKVSN"


def prompt_text(seed: int, words: int = 220) -> str:
    vocab = ("the quick brown fox jumps over a lazy dog near the river while city lights "
             "shine on an old bridge in the morning and the evening").split()
    out, x = [], seed * 7919 + 1
    for _ in range(words):
        x = (x * 1103515245 + 12345) % (1 << 31)
        out.append(vocab[x % len(vocab)])
    return " ".join(out) + "\nSummarize the text above in one sentence."


def run(pllm_bin, model, text: str, extra: list, env=None, n: int = 12) -> tuple[dict, str]:
    args = ["run", "-m", model, "--json", "-p", text, "--temp", "0", "-n", n, "-t", "2"] + extra
    proc = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, args, env=env, timeout=300))
    return json.loads(proc.stdout.decode("utf-8")), proc.stderr.decode("utf-8", "replace")


def entries(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.suffix == ".kv")


def check_entry(p: Path) -> int:
    """A complete snapshot file: header sizes agree with the file; returns its token count."""
    data = p.read_bytes()
    assert data[:8] == MAGIC, p
    n_pos, = struct.unpack_from("<I", data, 36)
    payload, = struct.unpack_from("<Q", data, 48)
    assert len(data) == 64 + payload, p
    assert n_pos % BLOCK == 0 and n_pos > 0
    return n_pos


@pytest.mark.parametrize("kv", ["f16", "q4"])
def test_second_process_restores_and_prints_the_same(pllm_bin, smollm2_path, tmp_path, kv):
    cache = tmp_path / "cache"
    text = prompt_text(1)
    base, _ = run(pllm_bin, smollm2_path, text, ["--kv-type", kv, "--no-cache"])
    first, _ = run(pllm_bin, smollm2_path, text, ["--kv-type", kv, "--cache-dir", cache])
    assert first["cached_tokens"] == 0
    assert first["text"] == base["text"]
    files = entries(cache)
    assert len(files) == 1 and not [p for p in cache.iterdir() if p.name.startswith(".tmp")]
    n = check_entry(files[0])
    assert n == first["prompt_tokens"] // BLOCK * BLOCK
    second, err = run(pllm_bin, smollm2_path, text, ["--kv-type", kv, "--cache-dir", cache])
    assert second["cached_tokens"] == n > 0
    assert second["cache"]["disk_hits"] == 1
    assert second["cache"]["computed_tokens"] == second["prompt_tokens"] - n
    assert second["text"] == base["text"]
    assert second["tokens"] == base["tokens"]
    # A different KV type does not pick up this entry (its key differs).
    other, _ = run(pllm_bin, smollm2_path, text, ["--kv-type", "q8", "--cache-dir", cache])
    assert other["cached_tokens"] == 0


def test_corrupt_file_warns_and_output_is_unchanged(pllm_bin, smollm2_path, tmp_path):
    cache = tmp_path / "cache"
    text = prompt_text(2)
    first, _ = run(pllm_bin, smollm2_path, text, ["--cache-dir", cache])
    [f] = entries(cache)
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0x40
    f.write_bytes(bytes(data))
    again, err = run(pllm_bin, smollm2_path, text, ["--cache-dir", cache])
    assert again["text"] == first["text"]
    assert again["cached_tokens"] == 0
    assert again["cache"]["disk_bad_files"] == 1
    warn = [l for l in err.splitlines() if "pocketllm: prefix cache" in l]
    assert len(warn) == 1 and "checksum" in warn[0], err
    # Deleted and rewritten from the recomputed prefix: the next run restores again.
    [f2] = entries(cache)
    check_entry(f2)
    third, err3 = run(pllm_bin, smollm2_path, text, ["--cache-dir", cache])
    assert third["cached_tokens"] > 0 and third["text"] == first["text"]
    assert "pocketllm: prefix cache" not in err3
    # Truncated and foreign (bad magic) files are handled the same way.
    for damage in (lambda b: b[: len(b) // 3], lambda b: b"NOTASNAP" + b[8:]):
        [f] = entries(cache)
        f.write_bytes(damage(f.read_bytes()))
        out, err = run(pllm_bin, smollm2_path, text, ["--cache-dir", cache])
        assert out["text"] == first["text"] and out["cached_tokens"] == 0
        assert "pocketllm: prefix cache" in err


def test_disk_budget_evicts_least_recently_used(pllm_bin, smollm2_path, tmp_path):
    cache = tmp_path / "cache"
    # ~300-token prompts: a 256-token f16 snapshot of SmolLM2 is ~5.9 MB; room for one.
    for seed in (3, 4):
        run(pllm_bin, smollm2_path, prompt_text(seed), ["--cache-dir", cache, "--cache-disk", "8"])
    files = entries(cache)
    assert len(files) == 1
    assert sum(p.stat().st_size for p in files) <= 8 * 1024 * 1024
    newest, _ = run(pllm_bin, smollm2_path, prompt_text(4), ["--cache-dir", cache, "--cache-disk", "8"])
    assert newest["cached_tokens"] > 0
    oldest, _ = run(pllm_bin, smollm2_path, prompt_text(3), ["--cache-dir", cache, "--cache-disk", "8"])
    assert oldest["cached_tokens"] == 0


def test_concurrent_writers_leave_the_directory_consistent(pllm_bin, smollm2_path, tmp_path):
    cache = tmp_path / "cache"
    texts = [prompt_text(5), prompt_text(5), prompt_text(6)]
    procs = [subprocess.Popen([str(pllm_bin), "run", "-m", str(smollm2_path), "--json", "-p", t, "--temp", "0",
                               "-n", "4", "-t", "1", "--cache-dir", str(cache)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
             for t in texts]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()
        assert b"pocketllm: prefix cache" not in err, err.decode()
        outs.append(json.loads(out))
    assert outs[0]["text"] == outs[1]["text"]
    assert [p.name for p in cache.iterdir() if p.name.startswith(".tmp")] == []
    files = entries(cache)
    assert len(files) == 2
    for f in files:
        check_entry(f)
    for t, o in zip(texts, outs):
        again, err = run(pllm_bin, smollm2_path, t, ["--cache-dir", cache], n=4)
        assert again["cached_tokens"] > 0 and again["text"] == o["text"]
        assert "pocketllm: prefix cache" not in err


def test_no_cache_and_environment_default(pllm_bin, smollm2_path, tmp_path):
    cache = tmp_path / "envcache"
    env = dict(os.environ, POCKETLLM_CACHE_DIR=str(cache))
    text = prompt_text(7, words=120)
    off, _ = run(pllm_bin, smollm2_path, text, ["--no-cache"], env=env)
    assert "cache" not in off and off["cached_tokens"] == 0
    assert not cache.exists() or entries(cache) == []
    on, _ = run(pllm_bin, smollm2_path, text, [], env=env)
    assert len(entries(cache)) == 1
    again, _ = run(pllm_bin, smollm2_path, text, [], env=env)
    assert again["cached_tokens"] > 0 and again["text"] == on["text"] == off["text"]


def test_windowed_session_ignores_the_cache(pllm_bin, smollm2_path, tmp_path):
    cache = tmp_path / "cache"
    text = prompt_text(8, words=120)
    a, _ = run(pllm_bin, smollm2_path, text, ["--cache-dir", cache, "--kv-window", "512"])
    b, _ = run(pllm_bin, smollm2_path, text, ["--cache-dir", cache, "--kv-window", "512"])
    assert a["cached_tokens"] == b["cached_tokens"] == 0 and a["text"] == b["text"]
    assert entries(cache) == []


@pytest.mark.parametrize("name", ["lfm2-F32", "lfm2-Q8_0"])
def test_hybrid_model_restores_its_convolution_state(pllm_bin, tiny_models_paths, tmp_path, name):
    """lfm2: a cache entry holds the convolution layers' state at its end besides the attention
    layers' keys and values; the second process restores it and continues exactly (--ignore-eos:
    the random model's text is compared token for token)."""
    model, cache = tiny_models_paths[name], tmp_path / "cache"
    text = prompt_text(3, words=14)
    extra = ["-c", "128", "--ignore-eos"]
    base, _ = run(pllm_bin, model, text, extra + ["--no-cache"], n=16)
    assert 64 <= base["prompt_tokens"] < 100, base["prompt_tokens"]
    first, _ = run(pllm_bin, model, text, extra + ["--cache-dir", cache], n=16)
    second, _ = run(pllm_bin, model, text, extra + ["--cache-dir", cache], n=16)
    assert first["cached_tokens"] == 0 and second["cached_tokens"] == 64
    assert first["tokens"] == second["tokens"] == base["tokens"]
