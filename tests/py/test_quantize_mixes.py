"""`pocketllm quantize` writing llama.cpp's low-bit types (Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS)
and its mixes (--type q2_k, q3_k_m, q4_k_s, q4_k_m, q5_k_m, iq4_nl, iq4_xs):

  * every block written decodes in gguf-py (gguf.quants.dequantize) to the same floats, bit for
    bit, as in our dequantiser (`--type f32` of the written file), so the bits are the layout
    llama.cpp reads;
  * each tensor's type follows llama-quantize's rules (llama_tensor_get_type, no imatrix),
    written out again here from its source (_llama_type), on models of 2 and 6 layers and
    one whose ffn_down rows fit no 256-element block; and, when llama.cpp is built
    (LLAMA_CPP_BIN), the very types llama-quantize chooses for the same file;
  * general.file_type is llama.cpp's code for the mix;
  * the written file loads and generates (`pocketllm run`), and its logits match the numpy
    reference on the same file.
The single types' logits and row-length fallbacks are in test_quantize.py.
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
QUANTIZE = LLAMA_CPP_BIN / "llama-quantize"

NEW_TYPES = ["q5_k", "q3_k", "q2_k", "iq4_nl", "iq4_xs"]
# mix -> (base type, llama.cpp's LLAMA_FTYPE_MOSTLY_* code)
MIXES = {
    "q2_k": ("Q2_K", 10), "q3_k_m": ("Q3_K", 12), "q4_k_s": ("Q4_K", 14), "q4_k_m": ("Q4_K", 15),
    "q5_k_m": ("Q5_K", 17), "iq4_nl": ("IQ4_NL", 25), "iq4_xs": ("IQ4_XS", 30),
}
MODELS = ["llama-F32", "gemma3-F32", "llama-ffnvar-F32"]
BLOCK = {"Q2_K": 256, "Q3_K": 256, "Q4_K": 256, "Q5_K": 256, "Q6_K": 256, "IQ4_XS": 256,
         "IQ4_NL": 32, "Q4_0": 32, "Q5_0": 32, "Q5_1": 32, "Q8_0": 32}
FALLBACK = {"Q2_K": "Q4_0", "Q3_K": "Q4_0", "IQ4_XS": "IQ4_NL", "Q4_K": "Q5_0", "Q5_K": "Q5_1",
            "Q6_K": "Q8_0"}


def quantize(pllm_bin, src: Path, dst: Path, *args) -> str:
    return pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["quantize", src, dst, *args], timeout=300)).stdout.decode()


def reader(path: Path):
    from gguf import GGUFReader
    return GGUFReader(str(path))


def tensor_types(path: Path) -> dict[str, str]:
    return {t.name: t.tensor_type.name for t in reader(path).tensors}


def tensor_cols(path: Path) -> dict[str, int]:
    return {t.name: int(t.shape[0]) for t in reader(path).tensors}


def _field(r, key):
    f = r.fields.get(key)
    return None if f is None else f.contents()


# ---------------------------------------------------------------------------- llama.cpp's rules

def _use_more_bits(i: int, n: int) -> bool:
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def _llama_type(mix: str, name: str, layer: int, n_layer: int, gqa: int, tied: bool, cols: int) -> str:
    """llama_tensor_get_type for a dense model without imatrix, for our mixes, then its
    row-length fallback. Written from llama.cpp's source, independently of type_plan.cpp."""
    base = MIXES[mix][0]
    t = base
    if name == "output.weight" or (tied and name == "token_embd.weight"):
        t = "Q8_0" if cols % BLOCK[base] else "Q6_K"
    elif "attn_v.weight" in name:  # the ordinal equals the layer here: one attn_v per block
        if mix == "q2_k":
            t = "Q4_K" if gqa >= 4 else "Q3_K"
        elif mix == "q3_k_m":
            t = "Q5_K" if layer < 2 else "Q4_K"
        elif mix in ("iq4_nl", "iq4_xs") and gqa >= 4:
            t = "Q5_K"
        elif mix in ("q4_k_m", "q5_k_m") and _use_more_bits(layer, n_layer):
            t = "Q6_K"
        elif mix == "q4_k_s" and layer < 4:
            t = "Q5_K"
    elif "ffn_down" in name:
        if mix == "q2_k":
            t = "Q3_K"
        elif mix == "q3_k_m":
            t = "Q5_K" if layer < n_layer // 16 else "Q4_K"
        elif mix == "q4_k_m" and _use_more_bits(layer, n_layer):
            t = "Q6_K"
        elif mix in ("iq4_nl", "iq4_xs") and layer < n_layer // 8:
            t = "Q5_K"
        elif mix == "q5_k_m" and _use_more_bits(layer, n_layer):
            t = "Q6_K"
        elif mix == "q4_k_s" and layer < n_layer // 8:
            t = "Q5_K"
    elif "attn_output.weight" in name:
        if mix == "q2_k":
            t = "Q3_K"
        elif mix == "q3_k_m":
            t = "Q4_K"
    if cols % BLOCK[t]:
        t = FALLBACK.get(t, "F16")
        if cols % BLOCK[t]:
            t = "F16"
    return t


def _expected_types(src: Path, mix: str) -> dict[str, str]:
    r = reader(src)
    arch = _field(r, "general.architecture")
    n_layer = int(_field(r, f"{arch}.block_count"))
    gqa = int(_field(r, f"{arch}.attention.head_count")) // int(_field(r, f"{arch}.attention.head_count_kv"))
    names = {t.name for t in r.tensors}
    tied = "output.weight" not in names
    out = {}
    for t in r.tensors:
        if len(t.shape) != 2:
            out[t.name] = "F32"
            continue
        m = re.match(r"blk\.(\d+)\.", t.name)
        out[t.name] = _llama_type(mix, t.name, int(m.group(1)) if m else -1, n_layer, gqa, tied, int(t.shape[0]))
    return out


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("mix", list(MIXES))
def test_mix_types_follow_llama_quantize_rules(pllm_bin, tiny_models_paths, work_dir, model, mix):
    src = tiny_models_paths[model]
    dst = work_dir / f"{model}-{mix}.gguf"
    out = quantize(pllm_bin, src, dst, "--type", mix)
    got, want = tensor_types(dst), _expected_types(src, mix)
    assert got == want, {k: (got[k], want[k]) for k in got if got[k] != want.get(k)}
    r = reader(dst)
    assert int(_field(r, "general.file_type")) == MIXES[mix][1]
    assert _field(r, "pocketllm.quantize.type") == mix
    assert f"type {mix}," in out
    # --pure: the base type alone (and f32 for what is not 2-D).
    quantize(pllm_bin, src, dst, "--type", mix, "--pure")
    cols = tensor_cols(dst)
    base = MIXES[mix][0]
    for name, t in tensor_types(dst).items():
        if t != "F32":
            assert t == (base if cols[name] % BLOCK[base] == 0 else FALLBACK[base]), name


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("mix", list(MIXES))
def test_mix_types_equal_llama_quantize_choices(pllm_bin, tiny_models_paths, work_dir, model, mix):
    if not QUANTIZE.exists():
        pytest.skip(f"{QUANTIZE} not found (bench/setup_llamacpp.sh builds it; or set LLAMA_CPP_BIN)")
    src = tiny_models_paths[model]
    ours, theirs = work_dir / "ours.gguf", work_dir / "theirs.gguf"
    quantize(pllm_bin, src, ours, "--type", mix)
    proc = subprocess.run([str(QUANTIZE), str(src), str(theirs), mix.upper()], capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()[-1500:]
    got, want = tensor_types(ours), tensor_types(theirs)
    assert got == want, {k: (got[k], want[k]) for k in got if got[k] != want.get(k)}
    assert _field(reader(ours), "general.file_type") == _field(reader(theirs), "general.file_type")


# ---------------------------------------------------------------------------- the bits

def _assert_gguf_py_decodes_like_us(pllm_bin, path: Path, work_dir: Path):
    from gguf import quants
    ours = work_dir / (path.stem + "-ours-f32.gguf")
    quantize(pllm_bin, path, ours, "--type", "f32")
    decoded = {t.name: np.asarray(t.data, dtype=np.float32).reshape(-1) for t in reader(ours).tensors}
    seen = set()
    for t in reader(path).tensors:
        g = np.asarray(quants.dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(-1)
        d = decoded[t.name]
        diff = g.view(np.uint32) != d.view(np.uint32)
        assert not diff.any(), f"{t.name} ({t.tensor_type.name}): {int(diff.sum())} of {diff.size} values differ"
        seen.add(t.tensor_type.name)
    return seen


@pytest.mark.parametrize("wtype", NEW_TYPES)
@pytest.mark.parametrize("method", ["rtn", "mse"])
def test_written_blocks_decode_bit_for_bit_in_gguf_py(pllm_bin, tiny_models_paths, work_dir, wtype, method):
    dst = work_dir / f"{wtype}-{method}.gguf"
    quantize(pllm_bin, tiny_models_paths["llama-F32"], dst, "--type", wtype, "--method", method, "--pure")
    assert wtype.upper() in _assert_gguf_py_decodes_like_us(pllm_bin, dst, work_dir)


@pytest.mark.parametrize("wtype", NEW_TYPES)
def test_search_lowers_the_weight_error(pllm_bin, tiny_models_paths, work_dir, wtype):
    """Per tensor, mse's squared error is at most rtn's (it is per block) and lower overall."""
    src = tiny_models_paths["llama-F32"]
    from gguf import quants
    w0 = {t.name: np.asarray(t.data, dtype=np.float64).reshape(-1) for t in reader(src).tensors}
    errs = {}
    for method in ("rtn", "mse"):
        dst = work_dir / f"{wtype}-{method}.gguf"
        quantize(pllm_bin, src, dst, "--type", wtype, "--method", method, "--pure")
        errs[method] = {t.name: float(((quants.dequantize(t.data, t.tensor_type).reshape(-1) - w0[t.name]) ** 2).sum())
                        for t in reader(dst).tensors if len(t.shape) == 2}
    for name, e in errs["mse"].items():
        assert e <= errs["rtn"][name] * (1 + 1e-6), (name, e, errs["rtn"][name])
    assert sum(errs["mse"].values()) < sum(errs["rtn"].values())


@pytest.mark.parametrize("mix", list(MIXES))
def test_mix_file_decodes_runs_and_matches_the_reference(pllm_bin, tiny_models_paths, work_dir, mix):
    dst = work_dir / f"{mix}.gguf"
    quantize(pllm_bin, tiny_models_paths["gemma3-F32"], dst, "--type", mix, "--method", "mse")
    types = _assert_gguf_py_decodes_like_us(pllm_bin, dst, work_dir)
    assert MIXES[mix][0] in types
    proc = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["run", "-m", dst, "-p", "hello world", "--temp", "0",
                                                         "-n", "8", "--ignore-eos", "--json", "-t", "2"]))
    obj = json.loads(proc.stdout.decode("utf-8"))
    assert len(obj["tokens"]) == 8, obj
    ref = Reference(dst)
    cfg = tm.model_configs()["gemma3-F32"]
    ids = tm.sample_ids(cfg, 16)
    got = pllm_cli.run_logits(pllm_bin, dst, ids, work_dir / "l.f32", ref.hp.n_vocab)
    quant = {t for t in types if t not in tol.FLOAT_TYPES}
    bounds = [tol.tol_for(t, tol.EXACT) for t in quant]
    tol.assert_logits_close(got, ref.forward(ids), max(b[0] for b in bounds), max(b[1] for b in bounds),
                            min(tol.argmax_min_fraction(t) for t in quant), what=f"mix {mix}")
