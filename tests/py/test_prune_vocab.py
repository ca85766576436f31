"""`pocketllm prune --vocab-keep FILE|N`: vocabulary pruning of the embedding and output head.

Checked independently of the pruner's code, on the tiny models (byte-level BPE vocabularies)
and, when present, on SmolLM2 and Gemma 3:
  * the kept ids are ascending and the pruned file's tokens / token types / merges / named ids
    are the original ones selected (merges: those whose parts and result are kept, in order);
  * text made of the FILE's tokens tokenizes to the original ids renumbered; any other text
    (unicode, unseen words, special-token text) still round-trips through a test-side decoder
    with every id below the new vocabulary size;
  * token_embd / output rows are the original rows' bytes (or, with --output-type, the kept
    rows quantised as gguf-py quantises them);
  * the pruned model's logits are the original logits restricted to the kept ids, and the
    numpy reference agrees with the engine on the pruned file;
  * llama.cpp loads the results (skipped without its binary); bad arguments give one error line.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

import pllm_cli
import tiny_models as tm
import tolerances as tol
from reference import Reference
from test_prune import LLAMA_BENCH, Raw

CONFIGS = tm.model_configs()
KEEP_TEXT = "hello world and the cat is in the hat.\nIt is hot in the garden, and the dog is in it.\n"
CALIB_TEXT = "the cat and the dog: the the the and and in in is\n" * 3
OTHER_TEXTS = [
    "Zebras were ordering twelve formatted strings",
    "naïve café — Ærøskøbing, Ελληνικά, 日本語 🎉🦙",
    "tabs\tand\n\nnewlines  and   spaces   ",
    "<|im_start|>user\nnot parsed<|im_end|>",
    "hellohello worldly hattrick",
]

# (case id, tiny model, prune arguments; FILE / CALIB stand for the module's text files)
CASES = {
    "llama-F32": ("llama-F32", ["--vocab-keep", "FILE"]),
    "llama-untied-Q8_0": ("llama-untied-Q8_0", ["--vocab-keep", "FILE"]),
    "gemma3-F32": ("gemma3-F32", ["--vocab-keep", "FILE"]),
    "qwen2-Q8_0-head-rtn": ("qwen2-Q8_0", ["--vocab-keep", "FILE", "--output-type", "q4_0", "--requant", "rtn"]),
    "llama-Q8_0-head": ("llama-Q8_0", ["--vocab-keep", "FILE", "--output-type", "q4_1"]),
    "llama-Q4_1-ffn": ("llama-Q4_1", ["--vocab-keep", "FILE", "--ffn", "0.25", "--weights-only"]),
    "llama-F32-top": ("llama-F32", ["--vocab-keep", "12", "--calib", "CALIB"]),
}


@pytest.fixture(scope="module")
def texts(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("vocab-texts")
    (d / "keep.txt").write_text(KEEP_TEXT)
    (d / "calib.txt").write_text(CALIB_TEXT)
    return {"FILE": d / "keep.txt", "CALIB": d / "calib.txt"}


def _prune(pllm_bin, src: Path, out: Path, args: list, texts: dict) -> subprocess.CompletedProcess:
    args = [str(texts.get(a, a)) for a in args]
    return pllm_cli.run_cli(pllm_bin, ["prune", src, out] + args, timeout=300)


@pytest.fixture(scope="module")
def pruned(pllm_bin, tiny_models_paths, tmp_path_factory, texts):
    """case id -> (pruned file, prune's stdout), each pruned once per module."""
    cache: dict[str, tuple[Path, str]] = {}
    out_dir = tmp_path_factory.mktemp("vocab-pruned")

    def get(case: str) -> tuple[Path, str]:
        if case not in cache:
            name, args = CASES[case]
            out = out_dir / f"{case}.gguf"
            proc = pllm_cli.check_ok(_prune(pllm_bin, tiny_models_paths[name], out, args, texts))
            cache[case] = (out, proc.stdout.decode())
        return cache[case]
    return get


# ---------------------------------------------------------------------------
# test-side tokenizer view


class Vocab:
    """A file's vocabulary: tokens, types, merges, ids, and a byte-level decoder."""

    def __init__(self, raw: Raw):
        self.tokens = [str(t) for t in raw.field("tokenizer.ggml.tokens")]
        self.types = [int(t) for t in raw.field("tokenizer.ggml.token_type")]
        self.merges = [str(m) for m in raw.field("tokenizer.ggml.merges", [])]
        self.index: dict[str, int] = {}
        for i, t in enumerate(self.tokens):
            self.index.setdefault(t, i)
        self.u2b = {u: b for b, u in tm.bytes_to_unicode().items()}

    def decode(self, ids: list[int]) -> bytes:
        out = bytearray()
        for i in ids:
            if self.types[i] == 3:  # control: not rendered
                continue
            out += bytes(self.u2b[c] for c in self.tokens[i])
        return bytes(out)


def _tokenize(pllm_bin, model: Path, text: str, work_dir: Path) -> list[int]:
    f = work_dir / "text.txt"
    f.write_bytes(text.encode("utf-8"))
    return pllm_cli.parse_ids(pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["tokenize", "-m", model, "-f", f])).stdout)


def _keep(orig: Vocab, out: Vocab) -> list[int]:
    """Old id of every new id (tokens are unique in the tiny vocabularies)."""
    keep = [orig.index[t] for t in out.tokens]
    assert keep == sorted(keep) and len(set(keep)) == len(keep), "ids must stay in ascending old-id order"
    return keep


# ---------------------------------------------------------------------------
# tests


@pytest.mark.parametrize("case", list(CASES))
def test_metadata_is_the_kept_selection(pruned, tiny_models_paths, case):
    path, report = pruned(case)
    orig_raw, out_raw = Raw(tiny_models_paths[CASES[case][0]]), Raw(path)
    orig, out = Vocab(orig_raw), Vocab(out_raw)
    keep = _keep(orig, out)
    n = len(keep)
    assert out.types == [orig.types[i] for i in keep]
    # every special and every byte symbol stays
    assert {i for i, t in enumerate(orig.types) if t != 1} <= set(keep)
    assert {orig.index[u] for u in tm.bytes_to_unicode().values()} <= set(keep)
    # merges: exactly those whose parts and result are kept, in their original order
    kept_text = set(out.tokens)
    expect = [m for m in orig.merges
              if (lambda a, b: a in kept_text and b in kept_text and a + b in kept_text)(*m.split(" ", 1))]
    assert out.merges == expect
    # the closure: every merge producing a kept token is kept
    for m in orig.merges:
        a, b = m.split(" ", 1)
        if a + b in kept_text:
            assert m in out.merges, m
    # named ids name the same tokens; sizes and provenance
    for key in ("bos_token_id", "eos_token_id", "padding_token_id"):
        old, new = orig_raw.field(f"tokenizer.ggml.{key}"), out_raw.field(f"tokenizer.ggml.{key}")
        assert out.tokens[int(new)] == orig.tokens[int(old)], key
    arch = out_raw.field("general.architecture")
    assert int(out_raw.field(f"{arch}.vocab_size")) == n
    assert int(out_raw.field("pocketllm.prune.vocab_before")) == len(orig.tokens)
    source = out_raw.field("pocketllm.prune.vocab_source")
    assert source == ("top 12 of calib.txt" if case.endswith("-top") else "keep.txt"), source
    assert n < len(orig.tokens)
    assert f"vocabulary: {len(orig.tokens)} -> {n} tokens" in report, report
    assert "from the text" in report and "merged from" in report


@pytest.mark.parametrize("case", ["llama-F32", "gemma3-F32", "qwen2-Q8_0-head-rtn", "llama-F32-top"])
def test_kept_text_tokenizes_as_before_other_text_round_trips(pllm_bin, pruned, tiny_models_paths, work_dir, case):
    src = tiny_models_paths[CASES[case][0]]
    path, _ = pruned(case)
    orig, out = Vocab(Raw(src)), Vocab(Raw(path))
    keep = _keep(orig, out)
    new_id = {old: new for new, old in enumerate(keep)}
    seen = KEEP_TEXT if not case.endswith("-top") else CALIB_TEXT
    lines = [l for l in seen.splitlines(keepends=True) if l.strip()]
    n_exact = 0
    for text in [seen] + lines + OTHER_TEXTS:
        before = _tokenize(pllm_bin, src, text, work_dir)
        after = _tokenize(pllm_bin, path, text, work_dir)
        assert all(0 <= i < len(keep) for i in after), text
        if all(i in new_id for i in before):  # made of kept tokens: the same, renumbered
            assert after == [new_id[i] for i in before], text
            n_exact += 1
        else:
            assert len(after) > len(before), text  # smaller pieces
        assert out.decode(after) == orig.decode(before) == text.encode("utf-8"), text
    if not case.endswith("-top"):  # the FILE and its lines: all their tokens were kept
        assert n_exact >= 1 + len(lines)


@pytest.mark.parametrize("case", list(CASES))
def test_rows_are_the_kept_rows(pruned, tiny_models_paths, case):
    from gguf import GGMLQuantizationType, quants
    orig_raw, out_raw = Raw(tiny_models_paths[CASES[case][0]]), Raw(pruned(case)[0])
    keep = np.array(_keep(Vocab(orig_raw), Vocab(out_raw)))
    head = "output.weight" if "output.weight" in orig_raw.raw else "token_embd.weight"
    head_type = out_raw.field("pocketllm.prune.output_type")
    for name in ("token_embd.weight", "output.weight"):
        if name not in orig_raw.raw:
            assert name not in out_raw.raw
            continue
        if name == head and head_type is not None:
            qtype = GGMLQuantizationType[head_type.upper()]
            assert out_raw.type[name] == qtype
            x = orig_raw.val[name][keep].astype(np.float32)
            rtn_raw = np.ascontiguousarray(quants.quantize(x, qtype)).view(np.uint8).reshape(out_raw.raw[name].shape)
            if out_raw.field("pocketllm.prune.requant") == "rtn":
                assert np.array_equal(out_raw.raw[name], rtn_raw), name
            else:  # the block search: no block worse than round-to-nearest
                rtn = np.asarray(quants.dequantize(rtn_raw, qtype), dtype=np.float64)
                sse = lambda v: ((v - x) ** 2).reshape(len(keep), -1, 32).sum(axis=2)  # noqa: E731
                assert np.all(sse(out_raw.val[name]) <= sse(rtn) * (1 + 1e-5) + 1e-12), name
            continue
        assert out_raw.type[name] == orig_raw.type[name]
        assert np.array_equal(out_raw.raw[name], orig_raw.raw[name][keep]), name


@pytest.mark.parametrize("case", ["llama-F32", "llama-untied-Q8_0", "gemma3-F32"])
def test_logits_are_the_kept_columns(pllm_bin, pruned, tiny_models_paths, work_dir, case):
    """Rows copied byte for byte: the same logits as before at the kept ids."""
    src = tiny_models_paths[CASES[case][0]]
    path, _ = pruned(case)
    orig, out = Vocab(Raw(src)), Vocab(Raw(path))
    keep = _keep(orig, out)
    new_id = {old: new for new, old in enumerate(keep)}
    ids = _tokenize(pllm_bin, src, KEEP_TEXT, work_dir)[:24]
    before = pllm_cli.run_logits(pllm_bin, src, ids, work_dir / "a.f32", len(orig.tokens))
    after = pllm_cli.run_logits(pllm_bin, path, [new_id[i] for i in ids], work_dir / "b.f32", len(keep))
    np.testing.assert_allclose(after, before[:, keep], rtol=0, atol=1e-5 * np.abs(before).max())


@pytest.mark.parametrize("case", list(CASES))
def test_pruned_model_matches_reference(pllm_bin, pruned, work_dir, case):
    cfg = CONFIGS[CASES[case][0]]
    path, _ = pruned(case)
    ref = Reference(path)
    ids = [i % ref.hp.n_vocab for i in tm.sample_ids(cfg, 16)]
    got = pllm_cli.run_logits(pllm_bin, path, ids, work_dir / "l.f32", ref.hp.n_vocab)
    max_rel, rms_rel = tol.tol_for(cfg.wtype, tol.EXACT)
    tol.assert_logits_close(got, ref.forward(ids), max_rel, rms_rel, tol.argmax_min_fraction(cfg.wtype),
                            what=f"vocab-pruned {case}")


@pytest.mark.parametrize("case", list(CASES))
def test_llama_cpp_loads_vocab_pruned(pruned, case):
    if not LLAMA_BENCH.is_file():
        pytest.skip(f"llama-bench not found at {LLAMA_BENCH} (set LLAMA_BENCH)")
    path, _ = pruned(case)
    proc = subprocess.run([str(LLAMA_BENCH), "-m", str(path), "-p", "8", "-n", "4", "-t", "2"],
                          capture_output=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:] + proc.stdout.decode()[-2000:]
    assert b"tg4" in proc.stdout, proc.stdout.decode()


def test_top_n_keeps_the_most_frequent(pruned, tiny_models_paths, pllm_bin, work_dir):
    src = tiny_models_paths["llama-F32"]
    ids = _tokenize(pllm_bin, src, CALIB_TEXT, work_dir)
    counts: dict[int, int] = {}
    for i in ids:
        counts[i] = counts.get(i, 0) + 1
    top = sorted(counts, key=lambda i: (-counts[i], i))[:12]
    orig, out = Vocab(Raw(src)), Vocab(Raw(pruned("llama-F32-top")[0]))
    keep = set(_keep(orig, out))
    assert set(top) <= keep
    assert set(counts) - set(top) - keep, "a token outside the top 12 should have been dropped"


@pytest.mark.parametrize("arg, extra, needle", [
    ("MISSING", [], "cannot read"),
    ("EMPTY", [], "is empty"),
    ("DIR", [], "directory"),
    ("0", [], "at least 1"),
    ("=-4", [], "at least 1"),
    ("100000", ["--calib", "CALIB"], "more than the vocabulary"),
    ("20", [], "--calib"),
])
def test_bad_vocab_keep(pllm_bin, tiny_models_paths, work_dir, texts, arg, extra, needle):
    (work_dir / "empty.txt").write_text("")
    (work_dir / "dir").mkdir()
    names = {"MISSING": str(work_dir / "missing.txt"), "EMPTY": str(work_dir / "empty.txt"),
             "DIR": str(work_dir / "dir")}
    out = work_dir / "x.gguf"
    flag = ["--vocab-keep" + arg] if arg.startswith("=") else ["--vocab-keep", names.get(arg, arg)]
    proc = _prune(pllm_bin, tiny_models_paths["llama-F32"], out, flag + extra, texts)
    msg = pllm_cli.assert_clean_error(proc)
    assert needle in msg, msg
    assert not out.exists()


def test_a_file_named_like_a_number_is_a_file(pllm_bin, tiny_models_paths, work_dir, texts):
    """An existing path wins over N: "12" in the working directory is the FILE."""
    (work_dir / "12").write_text(KEEP_TEXT)
    out = work_dir / "x.gguf"
    proc = subprocess.run([str(pllm_bin), "prune", str(tiny_models_paths["llama-F32"]), str(out), "--vocab-keep", "12"],
                          capture_output=True, timeout=120, stdin=subprocess.DEVNULL, cwd=work_dir)
    pllm_cli.check_ok(proc)
    assert Raw(out).field("pocketllm.prune.vocab_source") == "12"


# ---------------------------------------------------------------------------
# real models


def _real_model_check(pllm_bin, model: Path, work_dir: Path, keep_bytes: int) -> dict:
    corpus = model.parent / "corpus" / "python-docs.txt"
    if not corpus.is_file():
        pytest.skip(f"no corpus at {corpus} (scripts/make_corpus.sh)")
    keep_file = work_dir / "keep.txt"
    keep_file.write_bytes(corpus.read_bytes()[:keep_bytes])
    out = work_dir / "vocab-pruned.gguf"
    proc = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["prune", model, out, "--vocab-keep", keep_file], timeout=600))
    report = proc.stdout.decode()
    print(report)
    tok = lambda m: pllm_cli.parse_ids(pllm_cli.check_ok(pllm_cli.run_cli(  # noqa: E731
        pllm_bin, ["tokenize", "-m", m, "-f", keep_file])).stdout)
    from gguf import GGUFReader
    def tokens(p):
        f = GGUFReader(str(p)).fields["tokenizer.ggml.tokens"]
        return [bytes(f.parts[i]) for i in f.data]
    orig_t, out_t = tokens(model), tokens(out)
    index: dict[bytes, int] = {}
    for i, t in enumerate(orig_t):
        index.setdefault(t, i)
    keep = [index[t] for t in out_t]
    assert keep == sorted(keep)
    before, after = tok(model), tok(out)
    new_id = {o: n for n, o in enumerate(keep)}
    assert after == [new_id[i] for i in before], "the kept text tokenizes differently"
    # greedy generation from a prompt out of the kept text: the same 16 tokens
    prompt = corpus.read_bytes()[2600:3000].decode("utf-8", "ignore")
    def run(m):
        p = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["run", "-m", m, "--raw", "--temp", "0", "-n", "16",
                                                          "--no-cache", "--json", "-p", prompt], timeout=300))
        return json.loads(p.stdout.decode())
    g0, g1 = run(model), run(out)
    print("greedy:", repr(g0["text"]))
    assert all(t in new_id for t in g0["tokens"]), "the original continuation uses a dropped token"
    assert g1["text"] == g0["text"] and g1["tokens"] == [new_id[t] for t in g0["tokens"]]
    # llama.cpp tokenizes the pruned vocabulary the same way: the same greedy text
    completion = LLAMA_BENCH.parent / "llama-completion"
    if completion.is_file():
        def llama(m):
            p = subprocess.run([str(completion), "-m", str(m), "-p", prompt, "-n", "16", "--temp", "0", "-t", "2",
                                "-no-cnv", "--no-warmup"], capture_output=True, timeout=300, stdin=subprocess.DEVNULL)
            assert p.returncode == 0, p.stderr.decode()[-2000:]
            return p.stdout
        assert llama(out) == llama(model)
    return {"report": report, "out": out, "n_before": len(orig_t), "n_after": len(keep)}


def test_prune_vocab_smollm2(pllm_bin, smollm2_path, work_dir):
    r = _real_model_check(pllm_bin, smollm2_path, work_dir, 200_000)
    print(f"SmolLM2: vocab {r['n_before']} -> {r['n_after']}, file {smollm2_path.stat().st_size / 1e6:.2f} MB -> "
          f"{r['out'].stat().st_size / 1e6:.2f} MB")
    assert r["n_after"] < r["n_before"] // 4
    assert r["out"].stat().st_size < smollm2_path.stat().st_size - 20e6  # the 30 MB tied head shrinks
    if LLAMA_BENCH.is_file():
        proc = subprocess.run([str(LLAMA_BENCH), "-m", str(r["out"]), "-p", "8", "-n", "4", "-t", "2"],
                              capture_output=True, timeout=300, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stderr.decode()[-2000:]


def test_prune_vocab_gemma3(pllm_bin, gemma3_path, work_dir):
    """SentencePiece: the same guarantees on Gemma 3's 262K vocabulary."""
    r = _real_model_check(pllm_bin, gemma3_path, work_dir, 100_000)
    assert r["n_after"] < r["n_before"] // 8
