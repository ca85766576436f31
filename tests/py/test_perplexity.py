"""`pocketllm perplexity`: the scoring recomputed independently in numpy (which positions, which
targets, BOS handling, the ± error), the --save-logits file, --kl-base, and the error contract.
Tiny random-weight models (context 128, vocabulary 303) keep every run well under a second."""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

import gguf_bytes as gb
import pllm_cli
import tiny_models as tm
from reference import Reference

TEXT = (
    "Once upon a time there was a little robot that lived in a workshop at the end of the street. "
    "Every morning it woke up, oiled its wheels and went to see the old clock maker, who was teaching "
    "it to repair watches. The work was slow and careful, and the robot liked it; small gears made a "
    "hello world of ticking sounds when they turned. In the evening the two of them sat at the window, "
    "and the clock maker told stories of the sea, of ships and of a town where it rained every day.\n"
)
CTX = 32
HEADER = np.dtype([("magic", "S8"), ("version", "<u4"), ("n_vocab", "<u4"), ("n_ctx", "<u4"),
                   ("first", "<u4"), ("n_chunks", "<u4"), ("flags", "<u4"), ("n_rows", "<u8"),
                   ("tokens_hash", "<u8")])


@pytest.fixture(scope="module")
def models(tiny_dir) -> dict[str, Path]:
    names = ["llama-F32", "llama-F16", "llama-Q4_0", "qwen2-F32"]
    paths = tm.generate_all(tiny_dir, names=names)
    # llama-F32's weights with add_bos_token = true: each chunk starts with BOS.
    spec = tm.build_spec(tm.model_configs()["llama-F32"])
    spec.kvs = [dataclasses.replace(kv, value=True) if kv.key == "tokenizer.ggml.add_bos_token" else kv
                for kv in spec.kvs]
    bos_path = tiny_dir / "llama-bos-F32.gguf"
    if not bos_path.exists():
        tm.write_with_gguf_writer(spec, bos_path)
    paths["llama-bos-F32"] = bos_path
    return paths


@pytest.fixture(scope="module")
def text_file(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("ppl") / "text.txt"
    p.write_text(TEXT)
    return p


def ppl_json(pllm_bin, model, text, *extra) -> dict:
    proc = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["perplexity", "-m", model, "-f", text, "-c", CTX,
                                                         "-t", "2", "--json", *extra]))
    return json.loads(proc.stdout)


def tokenize(pllm_bin, model, text) -> list[int]:
    proc = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["tokenize", "-m", model, "-f", text, "--add-special"]))
    return pllm_cli.parse_ids(proc.stdout)


def log_softmax(x: np.ndarray) -> np.ndarray:
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def expected(chunks_logits, chunks_ids, first):
    """Running ppl per chunk, the final ppl and llama.cpp's ± from per-chunk logits."""
    nll, running = [], []
    for logits, ids in zip(chunks_logits, chunks_ids):
        lp = log_softmax(logits)
        nll += [-lp[j, ids[j + 1]] for j in range(first, len(ids) - 1)]
        running.append(math.exp(np.mean(nll)))
    nll = np.array(nll)
    ppl = math.exp(nll.mean())
    sd = ppl * math.sqrt((np.mean(nll ** 2) - nll.mean() ** 2) / (len(nll) - 1))
    return running, ppl, sd, len(nll)


def chunk_ids(pllm_bin, model, text, add_bos, bos):
    ids = tokenize(pllm_bin, model, text)
    assert len(ids) >= 3 * CTX, "the test text should give at least 3 chunks"
    chunks = [ids[c * CTX:(c + 1) * CTX] for c in range(len(ids) // CTX)]
    if add_bos:
        assert ids[0] == bos, "tokenize --add-special must put BOS first on this model"
        for ch in chunks:
            ch[0] = bos
    return chunks


@pytest.mark.parametrize("score_all", [False, True])
@pytest.mark.parametrize("name", ["llama-F32", "llama-bos-F32"])
def test_ppl_matches_logits_command(pllm_bin, models, text_file, work_dir, name, score_all):
    """Every chunk re-run through `pocketllm logits` from position 0; NLL and PPL in numpy. A batch
    of 12 cuts chunks at positions that do not line up with the scored half."""
    add_bos = name == "llama-bos-F32"
    chunks = chunk_ids(pllm_bin, models[name], text_file, add_bos, bos=1)
    got = ppl_json(pllm_bin, models[name], text_file, "-b", "12", *(["--score-all"] if score_all else []))
    logits = [pllm_cli.run_logits(pllm_bin, models[name], ch, work_dir / "l.f32", 303) for ch in chunks]
    first = 0 if score_all else CTX // 2
    running, ppl, sd, n = expected(logits, chunks, first)
    assert got["tokens"] == n == len(chunks) * (CTX - 1 - first)
    assert got["chunks"] == len(chunks) and got["ctx"] == CTX and got["first"] == first
    assert got["bos"] == add_bos
    assert got["ppl"] == pytest.approx(ppl, rel=1e-6)
    assert got["ppl_sd"] == pytest.approx(sd, rel=1e-5)
    assert got["chunk_ppl"] == pytest.approx(running, rel=1e-6)


def test_ppl_matches_numpy_reference(pllm_bin, models, text_file):
    """The whole pipeline against the independent numpy forward pass (float64)."""
    chunks = chunk_ids(pllm_bin, models["llama-bos-F32"], text_file, True, bos=1)[:2]
    ref = Reference(models["llama-bos-F32"])
    _, ppl, _, n = expected([ref.forward(ch) for ch in chunks], chunks, CTX // 2)
    got = ppl_json(pllm_bin, models["llama-bos-F32"], text_file, "--chunks", "2")
    assert got["tokens"] == n
    assert got["ppl"] == pytest.approx(ppl, rel=1e-4)


def test_save_logits_file_and_self_kl(pllm_bin, models, text_file, work_dir):
    m = models["llama-F32"]
    base = work_dir / "base.logp"
    a = ppl_json(pllm_bin, m, text_file, "--save-logits", base)
    assert not (work_dir / "base.logp.part").exists()
    h = np.fromfile(base, dtype=HEADER, count=1)[0]
    assert h["magic"] == b"PLLMLOGP" and h["version"] == 1 and h["n_vocab"] == 303
    assert h["n_ctx"] == CTX and h["first"] == CTX // 2 and h["flags"] == 0
    assert h["n_chunks"] == a["chunks"] and h["n_rows"] == a["tokens"]
    rows = np.fromfile(base, offset=HEADER.itemsize,
                       dtype=[("target", "<i4"), ("argmax", "<i4"), ("logp", "<f2", 303)])
    assert len(rows) == a["tokens"]
    # First chunk: targets, argmax and log-probs against the logits command.
    ids = chunk_ids(pllm_bin, m, text_file, False, bos=1)[0]
    lp = log_softmax(pllm_cli.run_logits(pllm_bin, m, ids, work_dir / "l.f32", 303))[CTX // 2:CTX - 1]
    k = CTX - 1 - CTX // 2
    assert list(rows["target"][:k]) == ids[CTX // 2 + 1:]
    assert list(rows["argmax"][:k]) == list(lp.argmax(axis=1))
    np.testing.assert_allclose(rows["logp"][:k].astype(np.float64), lp, rtol=1e-3, atol=1e-4)
    # The same run against its own baseline.
    b = ppl_json(pllm_bin, m, text_file, "--kl-base", base)
    assert b["kl_mean"] < 1e-5 and b["kl_p99"] < 1e-4
    assert b["top1_agree"] == 1.0
    assert b["ppl_base"] == pytest.approx(b["ppl"], rel=1e-3)
    assert b["ppl"] == a["ppl"]


@pytest.mark.parametrize("other,extra", [("llama-F16", []), ("llama-Q4_0", []), ("llama-Q4_0", ["--int8-act"])])
def test_kl_against_other_weights(pllm_bin, models, text_file, work_dir, other, extra):
    base = work_dir / "base.logp"
    ppl_json(pllm_bin, models["llama-F32"], text_file, "--save-logits", base)
    self_kl = ppl_json(pllm_bin, models["llama-F32"], text_file, "--kl-base", base)["kl_mean"]
    got = ppl_json(pllm_bin, models[other], text_file, "--kl-base", base, *extra)
    assert got["kl_mean"] > 0 and got["kl_mean"] > 10 * self_kl
    assert got["kl_p99"] >= got["kl_mean"] and got["kl_max"] >= got["kl_p99"]
    assert 0.0 < got["top1_agree"] <= 1.0


def test_human_output(pllm_bin, models, text_file):
    proc = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["perplexity", "-m", models["llama-F32"], "-f", text_file,
                                                         "-c", CTX, "--chunks", "2"]))
    err, out = proc.stderr.decode(), proc.stdout.decode()
    assert "[1]" in err and "[2]" in err and "[3]" not in err  # plain lines: stderr is not a tty
    assert out.startswith("Final estimate: PPL = ") and "+/-" in out


def _patched(src: Path, dst: Path, offset: int, value: bytes) -> Path:
    data = bytearray(src.read_bytes())
    data[offset:offset + len(value)] = value
    dst.write_bytes(bytes(data))
    return dst


def test_errors(pllm_bin, models, text_file, work_dir):
    m = models["llama-F32"]
    base = work_dir / "base.logp"
    ppl_json(pllm_bin, m, text_file, "--save-logits", base)
    other_text = work_dir / "other.txt"
    other_text.write_text(TEXT.replace("robot", "rabbit"))
    short = work_dir / "short.txt"
    short.write_text("hello world")
    empty = work_dir / "empty.txt"
    empty.write_text("")
    truncated = work_dir / "trunc.logp"
    truncated.write_bytes(base.read_bytes()[:-10])
    cases = {
        "missing file": (["-f", work_dir / "nope.txt"], "cannot read"),
        "empty file": (["-f", empty], "empty"),
        "too few tokens": (["-f", short], f"needs at least {CTX}"),
        "ctx too small": (["-f", text_file, "-c", "8"], "-c must be"),
        "ctx past training": (["-f", text_file, "-c", "256"], "training context"),
        "batch past ctx": (["-f", text_file, "-b", "100"], "-b must be"),
        "negative chunks": (["-f", text_file, "--chunks", "-1"], "--chunks"),
        "no file": ([], "file"),
        "same save and base": (["-f", text_file, "--save-logits", base, "--kl-base", base], "same file"),
        "unwritable save": (["-f", text_file, "--save-logits", work_dir / "no" / "x"], "cannot write"),
        "base missing": (["-f", text_file, "--kl-base", work_dir / "nope.logp"], "cannot read"),
        "base not a logits file": (["-f", text_file, "--kl-base", text_file], "not a logits file"),
        "base truncated": (["-f", text_file, "--kl-base", truncated], "truncated"),
        "base other vocab": (["-f", text_file, "--kl-base",
                              _patched(base, work_dir / "v.logp", 12, (500).to_bytes(4, "little"))], "vocabulary"),
        "base other ctx": (["-f", text_file, "-c", "48", "--kl-base", base], "-c 32"),
        "base other scoring": (["-f", text_file, "--score-all", "--kl-base", base], "--score-all"),
        "base other chunks": (["-f", text_file, "--chunks", "1", "--kl-base", base], "chunks"),
        "base other text": (["-f", other_text, "--kl-base", base], "different tokens"),
    }
    for what, (args, needle) in cases.items():
        argv = ["perplexity", "-m", m] + ([] if "-c" in args else ["-c", CTX]) + args
        msg = pllm_cli.assert_clean_error(pllm_cli.run_cli(pllm_bin, argv))
        assert needle in msg, f"{what}: {msg}"
    # qwen2's ids differ (specials last): same vocabulary size, different tokens.
    msg = pllm_cli.assert_clean_error(pllm_cli.run_cli(
        pllm_bin, ["perplexity", "-m", models["qwen2-F32"], "-c", CTX, "-f", text_file, "--kl-base", base]))
    assert "different tokens" in msg


def test_real_model_end_to_end(pllm_bin, smollm2_path, work_dir):
    """SmolLM2 on a short English text: a sane perplexity, and --int8-act close to exact mode."""
    text = work_dir / "text.txt"
    text.write_text(TEXT * 2)
    base = work_dir / "base.logp"
    args = ["perplexity", "-m", smollm2_path, "-f", text, "-c", "64", "--chunks", "2", "-t", "2", "--json"]
    a = json.loads(pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, args + ["--save-logits", base])).stdout)
    assert a["bos"] is False and a["tokens"] == 2 * 31
    assert 1.5 < a["ppl"] < 60, a
    b = json.loads(pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, args + ["--int8-act", "--kl-base", base])).stdout)
    assert 0 < b["kl_mean"] < 0.1 and b["top1_agree"] > 0.8, b
    assert b["ppl_base"] == pytest.approx(a["ppl"], rel=1e-3)


def test_windowed_ppl_and_buckets_match_numpy_reference(pllm_bin, models, text_file):
    """One chunk scored on every token through a sliding window with sinks (the ring wraps,
    batch 5), against the reference's StreamingLLM attention; --buckets splits the same
    NLLs into runs of 10 scored tokens."""
    name = "llama-F32"
    chunks = chunk_ids(pllm_bin, models[name], text_file, False, bos=1)[:1]
    ref = Reference(models[name])
    logits = [ref.forward(chunks[0], kv_dtype="f32", window=12, sinks=2)]
    _, ppl, _, n = expected(logits, chunks, 0)
    got = ppl_json(pllm_bin, models[name], text_file, "--chunks", "1", "--score-all", "--kv-type", "f32",
                   "--kv-window", "12", "--kv-sinks", "2", "-b", "5", "--buckets", "10")
    assert got["tokens"] == n and got["kv_window"] == 12 and got["kv_sinks"] == 2
    assert got["ppl"] == pytest.approx(ppl, rel=1e-4)
    lp = log_softmax(logits[0])
    nll = [-lp[j, chunks[0][j + 1]] for j in range(CTX - 1)]
    want = [math.exp(np.mean(nll[i:i + 10])) for i in range(0, len(nll), 10)]
    assert got["ppl_buckets"] == pytest.approx(want, rel=1e-4)


def test_bits_per_byte(pllm_bin, models, text_file):
    """bits_per_byte = sum NLL / ln 2 / the bytes of the scored tokens' text (comparable across
    tokenizers, unlike PPL); every token of this vocabulary is byte-level symbols, one per byte."""
    from gguf import GGUFReader
    chunks = chunk_ids(pllm_bin, models["llama-F32"], text_file, False, bos=1)
    got = ppl_json(pllm_bin, models["llama-F32"], text_file, "--score-all")
    f = GGUFReader(str(models["llama-F32"])).fields
    tokens = [bytes(f["tokenizer.ggml.tokens"].parts[i]).decode() for i in f["tokenizer.ggml.tokens"].data]
    types = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data]
    n_bytes = sum(0 if types[t] == 3 else len(tokens[t]) for ch in chunks for t in ch[1:])
    assert got["bytes"] == n_bytes
    assert got["bits_per_byte"] == pytest.approx(got["nll_mean"] * got["tokens"] / math.log(2) / n_bytes, rel=1e-9)
