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

import numpy as np
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


# ---- Vulkan: Q3_K, Q5_K, IQ4_NL, IQ4_XS have shaders; Q2_K keeps the model on the CPU ----

@pytest.fixture(scope="module")
def vk_device(pllm_bin) -> dict:
    import test_vulkan as tv
    p = tv._probe(pllm_bin)
    if not p["built"] or not p["available"]:
        pytest.skip("no Vulkan backend or device (test_vulkan.py says which)")
    return p


@pytest.mark.parametrize("mode", (tol.EXACT, tol.INT8))
@pytest.mark.parametrize("mix", ["Q5_K_M", "Q3_K_M", "Q4_K_S", "IQ4_XS", "IQ4_NL"])
def test_runs_on_the_device(pllm_bin, vk_device, lowbit_files, lowbit_refs, work_dir, mix, mode):
    import test_vulkan as tv
    ref = lowbit_refs[mix]
    ids = tm.sample_ids(tm.model_configs()[BASE], 12, seed=5)
    # the device-vs-CPU bound of an f32 cache (test_vulkan.py); int8: the type's int8 bound
    extra = ["--kv-type", "f32"] + (["--int8-act"] if mode == tol.INT8 else [])
    got, rep = tv._logits(pllm_bin, lowbit_files[mix], [ids], work_dir / "vk.f32", ref.hp.n_vocab, chunk=1,
                          extra=extra)
    cpu, _ = tv._logits(pllm_bin, lowbit_files[mix], [ids], work_dir / "cpu.f32", ref.hp.n_vocab,
                        backend="cpu", chunk=1, extra=extra)
    tv._assert_on_device(rep, mix)
    types = _matrix_types(ref)
    if mode == tol.EXACT:
        tv._assert_vs_cpu(got, cpu, mix)
    else:
        tv._assert_vs_cpu(got, cpu, mix, wtype=max(types, key=lambda t: tol.tol_for(t, mode)), mode=mode)
    max_rel, rms_rel = _bound(types, mode)
    tol.assert_logits_close(got[0], ref.forward(ids, kv_dtype="f32"), max_rel, rms_rel,
                            tol.argmax_min_fraction("Q5_K", mode), what=f"{mix} {mode} on the device vs reference")


def test_q2_k_runs_on_the_cpu(pllm_bin, vk_device, lowbit_files, lowbit_refs, work_dir):
    import test_vulkan as tv
    ids = tm.sample_ids(tm.model_configs()[BASE], 12, seed=5)
    n_vocab = lowbit_refs["Q2_K"].hp.n_vocab
    got, rep = tv._logits(pllm_bin, lowbit_files["Q2_K"], [ids], work_dir / "vk.f32", n_vocab, chunk=1)
    cpu, _ = tv._logits(pllm_bin, lowbit_files["Q2_K"], [ids], work_dir / "cpu.f32", n_vocab, backend="cpu", chunk=1)
    assert rep["device_steps"] == 0 and rep["cpu_steps"] == 12 and rep["fallbacks"] == 0, rep
    assert "is Q2_K, which has no device matmul" in rep["reason"], rep
    assert np.array_equal(got[0], cpu[0])


@pytest.mark.parametrize("mix", ["Q5_K_M", "Q4_K_S", "Q3_K_M"])
def test_repacked_int16_is_bit_identical(pllm_bin, lowbit_files, lowbit_refs, work_dir, mix):
    """Q5_K weights held as int16 panels (gemm_i16_panels on AVX2, AVX-VNNI, AVX-512; beside Q4_K /
    Q6_K ones, the other types copied in the file's layout) give the file layout's int16 logits
    bit for bit: whole prompts, chunks and token by token."""
    isas = [i for i in ISAS if i in ("avx2", "avxvnni", "avx512")]
    if not isas:
        pytest.skip("no int16 panel kernel on this CPU")
    ids = tm.sample_ids(tm.model_configs()[BASE], N_IDS)
    n_vocab = lowbit_refs[mix].hp.n_vocab
    for isa in isas:
        env = pllm_cli.isa_env(isa)
        for chunk in (0, 1, 5):
            off = pllm_cli.run_logits(pllm_bin, lowbit_files[mix], ids, work_dir / "off.f32", n_vocab, env=env,
                                      int16_act=True, chunk=chunk, extra=["--repack", "off"])
            on = pllm_cli.run_logits(pllm_bin, lowbit_files[mix], ids, work_dir / "on.f32", n_vocab, env=env,
                                     int16_act=True, chunk=chunk, extra=["--repack", "auto"])
            assert np.array_equal(on, off), f"{mix} {isa} chunk={chunk}"


# ---- the real model: SmolLM2 requantised by llama.cpp to the mixes above ----

@pytest.mark.parametrize("mix", ["Q5_K_M", "Q2_K", "IQ4_XS"])
def test_smollm2_requantised_matches_reference(pllm_bin, smollm2_path, tmp_path_factory, mix):
    """The real SmolLM2 file (Q4_1) requantised by llama-quantize (--allow-requantize): its Q5_K,
    Q3_K, Q2_K, IQ4_XS and Q6_K matrices at the real model's shapes (576, 1536, the 49152-row
    tied head), in exact and int16 mode against the numpy reference within SmolLM2's bounds."""
    if not QUANTIZE.exists():
        pytest.skip(f"{QUANTIZE} not found")
    dst = tmp_path_factory.mktemp("smol") / f"smollm2-{mix}.gguf"
    proc = subprocess.run([str(QUANTIZE), "--allow-requantize", str(smollm2_path), str(dst), mix],
                          capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()[-800:]
    ref = Reference(dst)
    ids = pllm_cli.SMOLLM2_SHORT_IDS
    kv = ["--kv-type", "f32"]  # as test_real_model.py, whose bounds these are
    want = ref.forward(ids, kv_dtype="f32")
    for mode in (tol.EXACT, tol.I16):
        got = pllm_cli.run_logits(pllm_bin, dst, ids, dst.with_suffix(".f32"), ref.hp.n_vocab,
                                  int16_act=mode == tol.I16, extra=kv)
        max_rel, rms_rel = tol.smollm2_tol(mode)
        min_agree = tol.argmax_min_fraction("Q5_K", mode)
        tol.assert_logits_close(got, want, max_rel, rms_rel, min_agree, what=f"SmolLM2 {mix} {mode}")
        if mode == tol.I16:
            tol.assert_logits_close(got, ref.forward(ids, kv_dtype="f32", act_i16=True), max_rel, rms_rel,
                                    min_agree, what=f"SmolLM2 {mix} {mode} vs act_i16")
