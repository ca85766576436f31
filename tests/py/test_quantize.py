"""`pocketllm quantize` end to end on tiny random models (tiny_models.py):

  * what it writes is read back by the `gguf` package with the input's metadata (plus
    the provenance keys) and the input's tensor names and shapes, and by our reader
    (`pocketllm info --json`);
  * the engine's logits on the written file match the numpy reference run on the same
    file (the reference dequantises whatever the file holds) for every output type;
  * `--type f32` / `--type f16` of a quantised file reproduce its dequantised values;
  * the output-head rule, `--pure`, `--tensor-type` and the row-length fallbacks;
  * calibration statistics equal the ones computed from the model in numpy, and the
    activation-aware method lowers the importance-weighted weight error;
  * bad arguments fail with one clear error line;
  * llama.cpp loads the output (skipped when its build is absent).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import pllm_cli
import tiny_models as tm
import tolerances as tol
from reference import Reference

LLAMA_CPP_BIN = Path(os.environ.get("LLAMA_CPP_BIN", "/work/main/bench/.cache/bin"))

CALIB_TEXT = ("The quick brown fox jumps over the lazy dog. Hello world, and the other "
              "world is there; it is in the hall and it is not. ") * 12


def quantize(pllm_bin, src: Path, dst: Path, *args, timeout=120) -> subprocess.CompletedProcess:
    return pllm_cli.run_cli(pllm_bin, ["quantize", src, dst, *args], timeout=timeout)


def quantize_ok(pllm_bin, src: Path, dst: Path, *args) -> str:
    proc = pllm_cli.check_ok(quantize(pllm_bin, src, dst, *args))
    return proc.stdout.decode()


def reader(path: Path):
    from gguf import GGUFReader
    return GGUFReader(str(path))


def fields(r) -> dict:
    out = {}
    for k, f in r.fields.items():
        if k.startswith("GGUF."):
            continue
        v = f.contents()
        out[k] = v
    return out


def tensor_types(r) -> dict[str, str]:
    return {t.name: t.tensor_type.name for t in r.tensors}


def dequantized(r) -> dict[str, np.ndarray]:
    from gguf import quants
    return {t.name: np.asarray(quants.dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(-1)
            for t in r.tensors}


@pytest.fixture(scope="module")
def calib_file(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("calib") / "calib.txt"
    p.write_text(CALIB_TEXT)
    return p


# ---------------------------------------------------------------------------- file format

def test_written_file_reads_back_with_the_input_metadata(pllm_bin, tiny_models_paths, work_dir):
    src = tiny_models_paths["qwen2-F32"]
    dst = work_dir / "q.gguf"
    quantize_ok(pllm_bin, src, dst, "--type", "q4_k", "--method", "mse")
    a, b = reader(src), reader(dst)
    fa, fb = fields(a), fields(b)
    ours = {"general.file_type", "general.quantization_version", "pocketllm.quantize.type",
            "pocketllm.quantize.method"}
    assert set(fb) == set(fa) | ours, set(fb) ^ (set(fa) | ours)
    for k, v in fa.items():
        if k not in ours:
            assert fb[k] == v, k
    for k in fa:  # the value types too
        assert [int(t) for t in a.fields[k].types] == [int(t) for t in b.fields[k].types], k
    assert fb["general.file_type"] == 14  # LLAMA_FTYPE_MOSTLY_Q4_K_S
    assert fb["pocketllm.quantize.type"] == "q4_k"
    assert fb["pocketllm.quantize.method"] == "mse"
    assert [t.name for t in a.tensors] == [t.name for t in b.tensors]
    for ta, tb in zip(a.tensors, b.tensors):
        assert list(ta.shape) == list(tb.shape), ta.name
    types = tensor_types(b)
    assert all(types[n] == "F32" for n in types if "norm" in n or n.endswith(".bias"))
    assert types["output.weight"] == "Q6_K"  # the 4-bit rule for the output head
    assert types["blk.0.ffn_down.weight"] == "Q4_K"

    # Our own reader agrees on names, types and shapes.
    info = json.loads(pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["info", "-m", dst, "--json"])).stdout)
    ours_t = {t["name"]: (t["type"], t["dims"]) for t in info["tensors"]}
    assert {n: (types[n], list(map(int, t.shape))) for n, t in ((t.name, t) for t in b.tensors)} == ours_t


@pytest.mark.parametrize("wtype", ["f16", "bf16", "q8_0", "q6_k", "q5_0", "q5_1", "q4_0", "q4_1", "q4_k",
                                   "q5_k", "q3_k", "q2_k", "iq4_nl", "iq4_xs"])
@pytest.mark.parametrize("method", ["rtn", "mse"])
def test_engine_logits_match_the_reference_on_the_written_file(pllm_bin, tiny_models_paths, work_dir,
                                                               wtype, method):
    src = tiny_models_paths["llama-F32"]
    dst = work_dir / f"{wtype}.gguf"
    quantize_ok(pllm_bin, src, dst, "--type", wtype, "--method", method, "--pure")
    types = tensor_types(reader(dst))
    assert types["blk.1.ffn_up.weight"] == wtype.upper()
    ref = Reference(dst)
    cfg = tm.model_configs()["llama-F32"]
    ids = tm.sample_ids(cfg, 16)
    got = pllm_cli.run_logits(pllm_bin, dst, ids, work_dir / "l.f32", ref.hp.n_vocab)
    max_rel, rms_rel = tol.tol_for(wtype.upper(), tol.EXACT)
    tol.assert_logits_close(got, ref.forward(ids), max_rel, rms_rel, tol.argmax_min_fraction(wtype.upper()),
                            what=f"quantized {wtype} {method}")


@pytest.mark.parametrize("src_name", ["llama-Q4_1", "llama-Q4_K", "llama-Q6_K"])
def test_float_output_reproduces_the_dequantized_values(pllm_bin, tiny_models_paths, work_dir, src_name):
    src = tiny_models_paths[src_name]
    want = dequantized(reader(src))
    for t in ("f32", "f16"):
        dst = work_dir / f"{t}.gguf"
        quantize_ok(pllm_bin, src, dst, "--type", t)
        r = reader(dst)
        assert set(tensor_types(r).values()) <= {"F32", t.upper()}
        got, types = dequantized(r), tensor_types(r)
        for name, v in want.items():
            # F32 holds every dequantised value exactly; F16 is their round-to-nearest-even.
            expect = v.astype(np.float16).astype(np.float32) if types[name] == "F16" else v
            np.testing.assert_array_equal(got[name], expect, err_msg=f"{src_name} -> {t}: {name}")


# ---------------------------------------------------------------------------- type rules

def test_output_head_rule_pure_and_tensor_type(pllm_bin, tiny_models_paths, work_dir):
    tied, untied = tiny_models_paths["llama-F32"], tiny_models_paths["llama-untied-F32"]
    dst = work_dir / "o.gguf"
    quantize_ok(pllm_bin, tied, dst, "--type", "q4_0")
    assert tensor_types(reader(dst))["token_embd.weight"] == "Q6_K"  # tied: the embedding is the head
    quantize_ok(pllm_bin, untied, dst, "--type", "q4_0")
    t = tensor_types(reader(dst))
    assert t["output.weight"] == "Q6_K" and t["token_embd.weight"] == "Q4_0"
    quantize_ok(pllm_bin, untied, dst, "--type", "q8_0")
    assert tensor_types(reader(dst))["output.weight"] == "Q8_0"
    quantize_ok(pllm_bin, untied, dst, "--type", "q4_1", "--pure")
    assert set(v for k, v in tensor_types(reader(dst)).items() if "norm" not in k) == {"Q4_1"}
    out = quantize_ok(pllm_bin, untied, dst, "--type", "q4_0", "--tensor-type", r"attn_(q|k)=q8_0",
                      "--tensor-type", "ffn_down=f16", "--tensor-type", "output=q4_0")
    t = tensor_types(reader(dst))
    assert t["blk.0.attn_q.weight"] == t["blk.1.attn_k.weight"] == "Q8_0"
    assert t["blk.0.attn_v.weight"] == "Q4_0" and t["blk.1.ffn_down.weight"] == "F16"
    assert t["output.weight"] == "Q4_0"  # an explicit rule beats the head rule
    assert "fallbacks: none" in out


def _odd_shapes_file(path: Path) -> Path:
    """A minimal GGUF with 2-D tensors whose rows are 64 (not a K-quant block multiple),
    40 (not a multiple of 32) and 512 elements long, and a 1-D tensor."""
    import gguf
    w = gguf.GGUFWriter(str(path), "llama")
    rng = np.random.default_rng(5)
    for name, cols, rows in (("a.weight", 64, 3), ("b.weight", 40, 2), ("c.weight", 512, 2)):
        w.add_tensor(name, (0.05 * rng.standard_normal((rows, cols))).astype(np.float32))
    w.add_tensor("n.weight", np.ones(7, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize("wtype,want", [
    ("q4_k", {"a.weight": "Q5_0", "b.weight": "F16", "c.weight": "Q4_K"}),
    ("q6_k", {"a.weight": "Q8_0", "b.weight": "F16", "c.weight": "Q6_K"}),
    ("q4_0", {"a.weight": "Q4_0", "b.weight": "F16", "c.weight": "Q4_0"}),
    ("q5_k", {"a.weight": "Q5_1", "b.weight": "F16", "c.weight": "Q5_K"}),
    ("q3_k", {"a.weight": "Q4_0", "b.weight": "F16", "c.weight": "Q3_K"}),
    ("q2_k", {"a.weight": "Q4_0", "b.weight": "F16", "c.weight": "Q2_K"}),  # the mix: no rule names these
    ("iq4_xs", {"a.weight": "IQ4_NL", "b.weight": "F16", "c.weight": "IQ4_XS"}),
])
def test_rows_that_do_not_fit_the_block_fall_back_explicitly(pllm_bin, work_dir, wtype, want):
    src = _odd_shapes_file(work_dir / "odd.gguf")
    dst = work_dir / "odd-q.gguf"
    out = quantize_ok(pllm_bin, src, dst, "--type", wtype, "--method", "mse")
    r = reader(dst)
    types = tensor_types(r)
    assert types == {**want, "n.weight": "F32"}
    for name, t in want.items():
        if t != wtype.upper():
            cols = {"a.weight": 64, "b.weight": 40}[name]
            assert re.search(rf"fallback: 1 tensor\(s\) {wtype} -> {t.lower()} \(row length {cols} .*{name}", out), out
    # Values survive: dequantised output close to the input (f16 exact to fp16 rounding).
    a, b = dequantized(reader(src)), dequantized(r)
    np.testing.assert_array_equal(b["b.weight"], a["b.weight"].astype(np.float16).astype(np.float32))
    # Within a quarter of the largest magnitude for 4 bits or more; 2-bit q2_k has 4 levels, so
    # a half step alone is up to a third of it (and the search may clip): half.
    frac = 0.5 if wtype == "q2_k" else 0.25
    for name in want:
        assert np.max(np.abs(a[name] - b[name])) < frac * np.max(np.abs(a[name])), name


# ---------------------------------------------------------------------------- calibration

def test_calibration_statistics_match_numpy(pllm_bin, tiny_models_paths, work_dir, calib_file):
    src = tiny_models_paths["llama-F32"]
    stats = work_dir / "stats.gguf"
    quantize_ok(pllm_bin, src, work_dir / "q.gguf", "--type", "q4_0", "--method", "act", "--calib", calib_file,
                "--calib-tokens", "100", "--calib-ctx", "32", "--save-stats", stats)
    ids = pllm_cli.parse_ids(pllm_cli.check_ok(pllm_cli.run_cli(
        pllm_bin, ["tokenize", "-m", src, "-f", calib_file, "--add-special"])).stdout)[:100]
    ref = Reference(src)
    x = ref.w["token_embd.weight"][np.array(ids)].astype(np.float64)
    h = ref._rmsnorm(x, ref.w["blk.0.attn_norm.weight"].astype(np.float64), ref.hp.rms_eps)
    r = reader(stats)
    f = fields(r)
    assert f["general.type"] == "pocketllm.act_stats"
    assert f["pocketllm.act_stats.tokens"] == 100
    assert f["pocketllm.act_stats.source"] == "calib.txt"
    t = {tt.name: np.asarray(tt.data, dtype=np.float64) for tt in r.tensors}
    assert t["blk.0.attn_q.weight.count"][0] == 100
    np.testing.assert_allclose(t["blk.0.attn_q.weight.sum_sq"], (h * h).sum(0), rtol=2e-5)
    np.testing.assert_allclose(t["blk.0.attn_q.weight.sum_abs"], np.abs(h).sum(0), rtol=2e-5)
    np.testing.assert_allclose(t["blk.0.attn_q.weight.max_abs"], np.abs(h).max(0), rtol=2e-5)
    names = {n.rsplit(".", 1)[0] for n in t}
    assert names == {f"blk.{i}.{m}.weight" for i in range(2) for m in
                     ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")} | \
        {"token_embd.weight"}  # tied: the output head is the embedding

    # The provenance keys of the quantised file.
    fq = fields(reader(work_dir / "q.gguf"))
    assert fq["pocketllm.quantize.method"] == "act"
    assert fq["pocketllm.quantize.calib_source"] == "calib.txt"
    assert fq["pocketllm.quantize.calib_tokens"] == 100


@pytest.mark.parametrize("wtype", ["q4_0", "q4_k", "q3_k", "iq4_xs"])
def test_act_lowers_the_importance_weighted_error(pllm_bin, tiny_models_paths, work_dir, calib_file, wtype):
    src = tiny_models_paths["llama-F32"]
    stats = work_dir / "stats.gguf"
    quantize_ok(pllm_bin, src, work_dir / "act.gguf", "--type", wtype, "--method", "act", "--calib", calib_file,
                "--calib-ctx", "64", "--save-stats", stats, "--pure")
    quantize_ok(pllm_bin, src, work_dir / "act2.gguf", "--type", wtype, "--method", "act", "--stats", stats,
                "--pure")
    quantize_ok(pllm_bin, src, work_dir / "mse.gguf", "--type", wtype, "--method", "mse", "--pure")
    assert (work_dir / "act.gguf").read_bytes() == (work_dir / "act2.gguf").read_bytes()  # --stats == --calib
    w0 = dequantized(reader(src))
    wa, wm = dequantized(reader(work_dir / "act.gguf")), dequantized(reader(work_dir / "mse.gguf"))
    st = {t.name: np.asarray(t.data, dtype=np.float64) for t in reader(stats).tensors}
    ea = em = 0.0
    for name in ("blk.0.attn_q.weight", "blk.1.ffn_up.weight", "blk.1.ffn_down.weight"):
        imp = st[name + ".sum_sq"] / st[name + ".count"][0]
        cols = imp.size
        d_a = (w0[name] - wa[name]).reshape(-1, cols) ** 2
        d_m = (w0[name] - wm[name]).reshape(-1, cols) ** 2
        ea += float((d_a * imp).sum())
        em += float((d_m * imp).sum())
    assert ea < em, (ea, em)


# ---------------------------------------------------------------------------- errors

@pytest.mark.parametrize("args,fragment", [
    (["--type", "q3_k_l"], "unknown type 'q3_k_l'"),
    (["--type", "q4_k_m", "--sensitivity", "--calib", "x.txt"], "not the mix q4_k_m"),
    (["--type", "q4_0", "--method", "awq"], "unknown method"),
    (["--type", "q4_0", "--method", "act"], "--method act needs activation statistics"),
    (["--type", "q4_0", "--tensor-type", "attn_q"], "REGEX=TYPE"),
    (["--type", "q4_0", "--tensor-type", "attn_(q=q8_0"], "bad regex"),
    (["--type", "q4_0", "--tensor-type", "attn_q=q4_k_m"], "unknown type"),  # a mix is not one type
    (["--type", "q4_0", "--save-stats", "s.gguf"], "--save-stats needs --calib"),
    (["--type", "q4_0", "--calib-tokens", "0", "--calib", "x.txt"], "--calib-tokens"),
    (["--type", "q4_0", "--method", "mse", "--calib", "x.txt"], "--calib is used by"),
    (["--type", "q4_0", "--stats", "s.gguf"], "--stats is used by"),
    (["--type", "q4_0", "--method", "act", "--stats", "s.gguf", "--calib", "x.txt"], "exclude each other"),
])
def test_bad_arguments_fail_cleanly(pllm_bin, tiny_models_paths, work_dir, args, fragment):
    proc = quantize(pllm_bin, tiny_models_paths["llama-F32"], work_dir / "x.gguf", *args)
    msg = pllm_cli.assert_clean_error(proc)
    assert fragment in msg, msg
    assert not (work_dir / "x.gguf").exists()


def test_missing_input_and_missing_type_fail_cleanly(pllm_bin, work_dir):
    msg = pllm_cli.assert_clean_error(quantize(pllm_bin, work_dir / "nope.gguf", work_dir / "x.gguf",
                                               "--type", "q4_0"))
    assert "nope.gguf" in msg
    msg = pllm_cli.assert_clean_error(pllm_cli.run_cli(pllm_bin, ["quantize", work_dir / "a", work_dir / "b"]))
    assert "--type" in msg


def test_stats_from_another_model_fail_cleanly(pllm_bin, tiny_models_paths, work_dir, calib_file):
    stats = work_dir / "stats.gguf"
    quantize_ok(pllm_bin, tiny_models_paths["llama-F32"], work_dir / "q.gguf", "--type", "q4_0", "--method", "act",
                "--calib", calib_file, "--calib-tokens", "32", "--save-stats", stats)
    for other in ("llama-custom-F32", "llama-Q8_0"):  # same shapes, other weights; other types
        proc = quantize(pllm_bin, tiny_models_paths[other], work_dir / "x.gguf", "--type", "q4_0", "--method", "act",
                        "--stats", stats)
        msg = pllm_cli.assert_clean_error(proc)
        assert "another model" in msg, msg
    not_stats = quantize(pllm_bin, tiny_models_paths["llama-F32"], work_dir / "x.gguf", "--type", "q4_0",
                         "--method", "act", "--stats", tiny_models_paths["llama-F32"])
    assert "not an activation statistics file" in pllm_cli.assert_clean_error(not_stats)


# ---------------------------------------------------------------------------- llama.cpp

def _llama_bench() -> Path:
    p = LLAMA_CPP_BIN / "llama-bench"
    if not (p.is_file() and os.access(p, os.X_OK)):
        pytest.skip(f"llama.cpp's llama-bench not found at {p} (set LLAMA_CPP_BIN)")
    return p


@pytest.mark.parametrize("wtype", ["q4_0", "q4_1", "q8_0", "q4_k", "q6_k", "f16", "q5_k", "q3_k", "q2_k",
                                   "iq4_nl", "iq4_xs", "q4_k_m"])
def test_llama_cpp_loads_the_output(pllm_bin, tiny_models_paths, work_dir, wtype):
    bench = _llama_bench()
    dst = work_dir / f"{wtype}.gguf"
    quantize_ok(pllm_bin, tiny_models_paths["llama-F32"], dst, "--type", wtype, "--method", "mse")
    proc = subprocess.run([str(bench), "-m", str(dst), "-p", "8", "-n", "2", "-r", "1", "-t", "2", "-o", "json"],
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    runs = json.loads(proc.stdout)
    assert len(runs) == 2 and all(r["avg_ts"] > 0 for r in runs), runs


# ---------------------------------------------------------------------------- sensitivity

def _kl(base: np.ndarray, cur: np.ndarray) -> float:
    """Mean over positions of KL(softmax(base) || softmax(cur)), in float64."""
    def log_softmax(x):
        m = x.max(axis=1, keepdims=True)
        return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))
    lb, lc = log_softmax(base), log_softmax(cur)
    return float((np.exp(lb) * (lb - lc)).sum(axis=1).mean())


def test_sensitivity_equals_the_kl_of_quantizing_that_tensor_alone(pllm_bin, tiny_models_paths, work_dir,
                                                                   calib_file):
    src = tiny_models_paths["llama-F32"]
    js = work_dir / "sens.json"
    out = quantize_ok(pllm_bin, src, work_dir / "unused.gguf", "--type", "q4_0", "--method", "mse", "--calib",
                      calib_file, "--sensitivity", "--sens-tokens", "24", "--sensitivity-out", js)
    rep = json.loads(js.read_text())
    assert rep["tokens"] == 24 and rep["method"] == "mse"
    kls = [t["kl"] for t in rep["tensors"]]
    assert kls == sorted(kls, reverse=True) and all(k > 0 for k in kls)
    assert {t["name"] for t in rep["tensors"]} == {t.name for t in reader(src).tensors if len(t.shape) == 2}
    top = rep["tensors"][0]["name"]
    assert re.search(rf"^  1\s+{re.escape(top)}\s+q4_0\s", out, re.M), out  # the table, sorted the same way

    ids = pllm_cli.parse_ids(pllm_cli.check_ok(pllm_cli.run_cli(
        pllm_bin, ["tokenize", "-m", src, "-f", calib_file, "--add-special"])).stdout)[:24]
    n_vocab = Reference(src).hp.n_vocab
    base = pllm_cli.run_logits(pllm_bin, src, ids, work_dir / "b.f32", n_vocab, extra=["--kv-type", "f32"])
    for entry in (rep["tensors"][0], rep["tensors"][-1]):  # the most and the least sensitive
        name = entry["name"]
        one = work_dir / "one.gguf"
        quantize_ok(pllm_bin, src, one, "--type", "f32", "--method", "mse",
                    "--tensor-type", "^" + re.escape(name) + "$=q4_0")
        assert tensor_types(reader(one))[name] == "Q4_0"
        assert entry["bytes"] == next(t.n_bytes for t in reader(one).tensors if t.name == name)
        cur = pllm_cli.run_logits(pllm_bin, one, ids, work_dir / "c.f32", n_vocab, extra=["--kv-type", "f32"])
        np.testing.assert_allclose(entry["kl"], _kl(base, cur), rtol=1e-3, err_msg=name)
        # Candidates: the measured base first, then every other type the 256/512-wide rows
        # hold, each predicted as KL(base) * E(U) / E(base) with E the squared weight error
        # (plain for mse), recomputed here from that tensor written alone at U.
        c = entry["candidates"]
        assert c[0]["measured"] and c[0]["type"] == "q4_0" and c[0]["kl"] == entry["kl"]
        assert [x["type"] for x in c[1:]] == ["q4_k", "q4_1", "q5_0", "q5_1", "q6_k", "q8_0", "f16"]
        assert not any(x["measured"] for x in c[1:])
        w = dequantized(reader(src))[name]

        def written_at(t):
            quantize_ok(pllm_bin, src, one, "--type", "f32", "--method", "mse",
                        "--tensor-type", "^" + re.escape(name) + "$=" + t)
            r = reader(one)
            assert tensor_types(r)[name] == t.upper()
            return dequantized(r)[name], next(int(x.n_bytes) for x in r.tensors if x.name == name)

        e_base = float(((w - written_at("q4_0")[0]).astype(np.float64) ** 2).sum())
        np.testing.assert_allclose(entry["weight_error"], e_base, rtol=1e-6, err_msg=name)
        for cand in c[1:]:
            deq, n_bytes = written_at(cand["type"])
            e_u = float(((w - deq).astype(np.float64) ** 2).sum())
            assert cand["bytes"] == n_bytes, (name, cand)
            np.testing.assert_allclose(cand["kl"], entry["kl"] * e_u / e_base, rtol=1e-6,
                                       err_msg=f"{name} {cand['type']}")


def _plan_from_output(out: str) -> dict[str, str]:
    """The tensors the printed plan moves off the base type (q4_0): name -> type."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^  (\S+)\s+q4_0\s+-> (\S+)", out, re.M)}


def _check_plan_was_written(out: str, dst: Path, target: float, rep: dict) -> dict[str, str]:
    """The file holds exactly the printed plan, within the budget; returns name -> type."""
    bpw = float(re.search(r"2-D weights: .* MiB, ([0-9.]+) bits per weight", out).group(1))
    planned = float(re.search(r"plan for --target-bpw [0-9.]+: ([0-9.]+) bits per weight", out).group(1))
    assert bpw == pytest.approx(planned, abs=1e-3)
    moved = _plan_from_output(out)
    r = reader(dst)
    types = {t.name: t.tensor_type.name.lower() for t in r.tensors if len(t.shape) == 2}
    for name, t in types.items():
        assert t == moved.get(name, "q4_0"), name  # the plan is what was written
    counts = dict(re.findall(r"(\w+) (\d+)", re.search(r"^plan types: (.*)$", out, re.M).group(1)))
    assert {k: int(v) for k, v in counts.items()} == {t: list(types.values()).count(t) for t in set(types.values())}
    # Within the budget, counted exactly in bits: bytes * 8 <= target * elements.
    bits = sum(int(t.n_bytes) * 8 for t in r.tensors if len(t.shape) == 2)
    elements = sum(int(t.n_elements) for t in r.tensors if len(t.shape) == 2)
    assert bits <= target * elements
    # Every chosen type is one of the tensor's candidates; the printed predicted KL is the
    # sum of the chosen candidates' KLs.
    by_name = {t["name"]: {c["type"]: c for c in t["candidates"]} for t in rep["tensors"]}
    assert set(by_name) == set(types)
    total = sum(by_name[n][t]["kl"] for n, t in types.items())
    predicted = float(re.search(r"predicted KL ([0-9.e+-]+)", out).group(1))
    assert predicted == pytest.approx(total, rel=1e-3)
    return types


@pytest.mark.parametrize("model,target", [("llama-untied-F32", 4.5), ("llama-untied-F32", 4.75),
                                          ("llama-untied-F32", 5.5), ("llama-untied-F32", 7.0),
                                          ("llama-ffnvar-F32", 4.5), ("llama-ffnvar-F32", 4.75)])
def test_target_bpw_plan_fits_the_budget(pllm_bin, tiny_models_paths, work_dir, calib_file, model, target):
    src = tiny_models_paths[model]
    dst = work_dir / "plan.gguf"
    js = work_dir / "sens.json"
    out = quantize_ok(pllm_bin, src, dst, "--type", "q4_0", "--calib", calib_file, "--sens-tokens", "16",
                      "--target-bpw", str(target), "--sensitivity-out", js)
    rep = json.loads(js.read_text())
    types = _check_plan_was_written(out, dst, target, rep)
    # q4_k is a candidate exactly where the rows fit its 256-element blocks (ffnvar's
    # ffn_down rows are 288 and 448 long: q4_0's 32-element blocks only).
    cols = {t.name: int(t.shape[0]) for t in reader(src).tensors if len(t.shape) == 2}
    q4k = {t["name"]: c["kl"] for t in rep["tensors"] for c in t["candidates"] if c["type"] == "q4_k"}
    assert set(q4k) == {n for n, c in cols.items() if c % 256 == 0}
    if model == "llama-ffnvar-F32":
        assert {n for n, c in cols.items() if c % 256} == {"blk.0.ffn_down.weight", "blk.1.ffn_down.weight"}
    # q4_k costs what q4_0 costs: wherever it is predicted to do better than the measured
    # q4_0, the plan never keeps q4_0.
    better = {t["name"] for t in rep["tensors"] if t["name"] in q4k and q4k[t["name"]] < t["kl"]}
    assert better, "q4_k should be predicted better than q4_0 somewhere (random Gaussian weights)"
    assert not any(types[n] == "q4_0" for n in better), better
    if target == 4.5:
        # No slack at all: only the lateral move q4_0 -> q4_k, exactly where it helps, and
        # nothing else (the rows without a q4_k candidate stay q4_0).
        assert {n for n, t in types.items() if t == "q4_k"} == better
        assert {n for n, t in types.items() if t == "q4_0"} == set(types) - better
        assert re.search(r"plan for --target-bpw 4.500: 4.500 bits per weight", out), out
    else:
        # Some tensor gets more than 4.5 bits, the most sensitive one among them.
        assert any(t not in ("q4_0", "q4_k") for t in types.values()), types
        assert types[rep["tensors"][0]["name"]] not in ("q4_0", "q4_k")


def test_sensitivity_in_reuses_the_measurement(pllm_bin, tiny_models_paths, work_dir, calib_file):
    src = tiny_models_paths["llama-untied-F32"]
    js = work_dir / "sens.json"
    quantize_ok(pllm_bin, src, work_dir / "a.gguf", "--type", "q4_0", "--calib", calib_file, "--sens-tokens", "16",
                "--target-bpw", "5.5", "--sensitivity-out", js)
    rep = json.loads(js.read_text())
    out = quantize_ok(pllm_bin, src, work_dir / "b.gguf", "--type", "q4_0", "--sensitivity-in", js,
                      "--target-bpw", "5.5", "--sensitivity")
    assert (work_dir / "a.gguf").read_bytes() == (work_dir / "b.gguf").read_bytes()
    assert re.search(r"^  1\s+" + re.escape(rep["tensors"][0]["name"]) + r"\s+q4_0\s", out, re.M), out
    # Another budget from the same figures.
    out = quantize_ok(pllm_bin, src, work_dir / "c.gguf", "--type", "q4_0", "--sensitivity-in", js,
                      "--target-bpw", "7")
    _check_plan_was_written(out, work_dir / "c.gguf", 7.0, rep)


def test_sensitivity_in_refuses_figures_that_do_not_fit(pllm_bin, tiny_models_paths, work_dir, calib_file):
    src = tiny_models_paths["llama-untied-F32"]
    js = work_dir / "sens.json"
    pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["quantize", src, "--type", "q4_0", "--calib", calib_file,
                                                  "--sensitivity", "--sens-tokens", "8", "--sensitivity-out", js]))
    rep = json.loads(js.read_text())

    def refused(doc, *args, model=src, text=None):
        bad = work_dir / "bad.json"
        bad.write_text(text if text is not None else json.dumps(doc))
        proc = quantize(pllm_bin, model, work_dir / "x.gguf", "--type", "q4_0", "--sensitivity-in", bad,
                        "--target-bpw", "6", *args)
        msg = pllm_cli.assert_clean_error(proc)
        assert not (work_dir / "x.gguf").exists()
        return msg

    import copy
    assert "another model" in refused(rep, model=tiny_models_paths["llama-untied-Q8_0"])
    assert "another model" in refused(rep, model=tiny_models_paths["llama-custom-F32"])  # tied: other tensors too
    assert "--method mse" in refused(rep, "--method", "mse")
    assert "not valid JSON" in refused(None, text=js.read_text()[:-20])
    doc = copy.deepcopy(rep)
    doc["tensors"] = doc["tensors"][1:]
    assert "is missing" in refused(doc)
    doc = copy.deepcopy(rep)
    doc["tensors"].append(copy.deepcopy(doc["tensors"][0]))
    assert "twice" in refused(doc)
    doc = copy.deepcopy(rep)
    doc["tensors"][0]["candidates"][2]["bytes"] += 1
    assert "wrong size" in refused(doc)
    doc = copy.deepcopy(rep)
    doc["tensors"][0]["candidates"][1]["type"] = "q2_k"
    assert "q2_k" in refused(doc)
    doc = copy.deepcopy(rep)
    doc["tensors"][0]["candidates"][1]["kl"] = -1.0
    assert "bad KL" in refused(doc)
    doc = copy.deepcopy(rep)
    del doc["tensors"][0]["n_elements"]
    assert "n_elements" in refused(doc)
    doc = copy.deepcopy(rep)
    doc["tensors"][0]["candidates"] = doc["tensors"][0]["candidates"][1:]  # no measured base
    assert "measured base type" in refused(doc)
    for args, frag in ((["--sens-tokens", "8"], "--sens-tokens"),
                       (["--sensitivity-out", work_dir / "o.json"], "exclude each other")):
        msg = pllm_cli.assert_clean_error(quantize(pllm_bin, src, work_dir / "x.gguf", "--type", "q4_0",
                                                   "--sensitivity-in", js, "--target-bpw", "6", *args))
        assert frag in msg, (args, msg)
    msg = pllm_cli.assert_clean_error(quantize(pllm_bin, src, work_dir / "x.gguf", "--type", "q4_0",
                                               "--sensitivity-in", js))
    assert "--sensitivity-in needs" in msg


def test_sensitivity_argument_errors(pllm_bin, tiny_models_paths, work_dir, calib_file):
    src = tiny_models_paths["llama-F32"]
    for args, frag in ((["--sensitivity"], "--calib"),
                       (["--target-bpw", "3", "--calib", calib_file], "below"),
                       (["--target-bpw", "5", "--calib", calib_file, "--tensor-type", "x=q8_0"], "--tensor-type"),
                       (["--sensitivity-out", "x.json"], "--sensitivity-out needs")):
        msg = pllm_cli.assert_clean_error(quantize(pllm_bin, src, work_dir / "x.gguf", "--type", "q4_0", *args))
        assert frag in msg, (args, msg)
    # --sensitivity alone needs no output file.
    proc = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["quantize", src, "--type", "q4_0", "--calib", calib_file,
                                                         "--sensitivity", "--sens-tokens", "8"]))
    assert b"sensitivity: mean KL" in proc.stdout
