"""Whole-model logits on files made by llama.cpp's own quantiser: the tiny F32 llama fixture
(tiny_models.py; every row a multiple of 256, so no tensor falls back to a 32-element type for
its shape) through `llama-quantize` to the mixes phone users pick (Q2_K, Q3_K_M, Q4_K_S, Q5_K_M,
IQ4_XS, IQ4_NL), which hold Q2_K, Q3_K, Q5_K, IQ4_NL and IQ4_XS tensors beside Q4_K / Q6_K.
The engine's logits against the numpy reference (reference.py: weights dequantised by
gguf.quants) at every kernel dispatch level, in every activation mode, within the bounds the
types already computed use (tolerances.py: a file's bound is its loosest type's).

Skipped when llama-quantize is absent (bench/setup_llamacpp.sh builds it; LLAMA_CPP_BIN names
its directory)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import pllm_cli
import tiny_models as tm
import tolerances as tol
from reference import Reference

LLAMA_CPP_BIN = Path(os.environ.get("LLAMA_CPP_BIN", "/work/main/bench/.cache/bin"))
QUANTIZE = LLAMA_CPP_BIN / "llama-quantize"
BASE = "llama-F32"
N_IDS = 16

# llama-quantize's mix -> the types its file must hold (so the test cannot pass on a file
# where llama.cpp chose other types).
MIXES = {
    "Q2_K": {"Q2_K", "Q3_K"},
    "Q3_K_M": {"Q3_K", "Q5_K"},
    "Q4_K_S": {"Q4_K", "Q5_K"},
    "Q5_K_M": {"Q5_K", "Q6_K"},
    "IQ4_XS": {"IQ4_XS"},
    "IQ4_NL": {"IQ4_NL"},
}
ISAS = pllm_cli.available_isas()
MODES = (tol.EXACT, tol.I16, tol.INT8)


@pytest.fixture(scope="module")
def lowbit_files(tiny_models_paths, tmp_path_factory) -> dict[str, Path]:
    if not QUANTIZE.exists():
        pytest.skip(f"{QUANTIZE} not found (bench/setup_llamacpp.sh builds it; or set LLAMA_CPP_BIN)")
    out = tmp_path_factory.mktemp("lowbit")
    files = {}
    for mix in MIXES:
        dst = out / f"llama-{mix}.gguf"
        proc = subprocess.run([str(QUANTIZE), str(tiny_models_paths[BASE]), str(dst), mix],
                              capture_output=True, timeout=120)
        assert proc.returncode == 0, f"llama-quantize {mix}: {proc.stderr.decode()[-800:]}"
        files[mix] = dst
    return files


@pytest.fixture(scope="module")
def lowbit_refs(lowbit_files) -> dict[str, Reference]:
    return {mix: Reference(p) for mix, p in lowbit_files.items()}


def _matrix_types(ref: Reference) -> set[str]:
    return {t for name, t in ref.wtype.items() if t not in tol.FLOAT_TYPES}


@pytest.mark.parametrize("mix", list(MIXES))
def test_llama_quantize_wrote_the_types(lowbit_refs, mix):
    types = _matrix_types(lowbit_refs[mix])
    print(f"{mix}: {sorted(types)}")
    assert MIXES[mix] <= types, f"{mix} holds {sorted(types)}"


def _bound(types: set[str], mode: str) -> tuple[float, float]:
    bounds = [tol.tol_for(t, mode) for t in types]
    return max(b[0] for b in bounds), max(b[1] for b in bounds)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("mix", list(MIXES))
def test_logits_match_reference(pllm_bin, lowbit_files, lowbit_refs, work_dir, mix, isa, mode):
    cfg = tm.model_configs()[BASE]
    ref = lowbit_refs[mix]
    ids = tm.sample_ids(cfg, N_IDS)
    want = ref.forward(ids)
    got = pllm_cli.run_logits(pllm_bin, lowbit_files[mix], ids, work_dir / "logits.f32", ref.hp.n_vocab,
                              int8_act=mode == tol.INT8, int16_act=mode == tol.I16, env=pllm_cli.isa_env(isa))
    types = _matrix_types(ref)
    max_rel, rms_rel = _bound(types, mode)
    min_agree = tol.argmax_min_fraction(next(iter(types)), mode)  # the rule is the same for every quantised type
    what = f"{mix} isa={isa} mode={mode}"
    tol.assert_logits_close(got, want, max_rel, rms_rel, min_agree, what=what)
    if mode == tol.I16:
        tol.assert_logits_close(got, ref.forward(ids, act_i16=True), max_rel, rms_rel, min_agree,
                                what=what + " vs act_i16 reference")
