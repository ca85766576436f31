"""Load-time weight repacking (`--repack`, model/repack.h): Q4_0/Q4_1/Q8_0 (and, for the int16
kernels, Q4_K and Q6_K) matrices held as 16-row panels where the CPU has panel kernels (AVX2, AVX-VNNI
and AVX-512 for int16; AVX-512 VNNI, and the scalar twins when PLLM_ISA=scalar, for int8).

The kernels themselves are checked against the file layout's in tests/cpp (test_matvec_rows,
test_gemm). Here: int8 logits with panels meet the int8 bounds against the numpy
reference; int16 logits over panels equal the file layout's bit for bit (the panel kernel
repeats the tile's arithmetic); every other path unpacks the panels into the file's layout
and runs the same kernels, so exact-mode logits must be bit-identical too."""
from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest

import pllm_cli
import tiny_models as tm
import tolerances as tol
from reference import Reference, compare, format_stats

MODELS = ["llama-Q4_0", "qwen2-Q4_1", "llama-Q8_0"]
# The ISAs whose table repacks for int8: the scalar twin always; avx512 where the CPU runs it
# (avx2 and avxvnni have int16 panel kernels only).
ISAS = [i for i in pllm_cli.available_isas() if i in ("scalar", "avx512")]


def _n_vocab(path) -> int:
    return Reference(path).hp.n_vocab


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", MODELS)
def test_repacked_int8_matches_reference(pllm_bin, tiny_models_paths, tiny_ref_cache, work_dir,
                                         name, isa):
    """Repacked int8 logits against the numpy reference with the int8-mode bounds every
    int8 path meets (tolerances.py). Two int8 runs that differ only in f32 summation
    order can already differ by int8 rounding flips of the next layer's inputs (measured
    up to max_rel 4e-2 between the file layout's own prefill and decode paths), so the
    comparison is with the reference, not with the other layout."""
    cfg = tm.model_configs()[name]
    if name not in tiny_ref_cache:
        tiny_ref_cache[name] = Reference(tiny_models_paths[name])
    ref = tiny_ref_cache[name]
    ids = tm.sample_ids(cfg, 16)
    want = ref.forward(ids)
    max_rel, rms_rel = tol.tol_for(cfg.wtype, tol.INT8)
    for chunk in (0, 1):  # prefill (GEMM over panels) and token-by-token decode
        got = pllm_cli.run_logits(pllm_bin, tiny_models_paths[name], ids, work_dir / "on.f32",
                                  ref.hp.n_vocab, env=pllm_cli.isa_env(isa), int8_act=True,
                                  chunk=chunk, extra=["--repack", "on"])
        tol.assert_logits_close(got, want, max_rel, rms_rel, tol.argmax_min_fraction(cfg.wtype, tol.INT8),
                                what=f"{name} isa={isa} chunk={chunk} repacked")


@pytest.mark.parametrize("name", MODELS)
def test_repacked_exact_mode_is_bit_identical(pllm_bin, tiny_models_paths, work_dir, name):
    path = tiny_models_paths[name]
    ids = tm.sample_ids(tm.model_configs()[name], 16)
    n_vocab = _n_vocab(path)
    env = pllm_cli.isa_env(ISAS[-1])
    for chunk in (0, 1):
        off = pllm_cli.run_logits(pllm_bin, path, ids, work_dir / "off.f32", n_vocab, env=env,
                                  chunk=chunk, extra=["--repack", "off"])
        on = pllm_cli.run_logits(pllm_bin, path, ids, work_dir / "on.f32", n_vocab, env=env,
                                 chunk=chunk, extra=["--repack", "on"])
        assert np.array_equal(on, off), f"{name} chunk={chunk}: {format_stats(compare(on, off))}"


def _bench(pllm_bin, model, *extra, env=None):
    p = subprocess.run([str(pllm_bin), "bench", "-m", str(model), "-p", "32", "-n", "16", "-r", "1",
                        "-t", "2", "--bw-mib", "0", "--json", *extra], capture_output=True, timeout=300,
                       env=None if env is None else {**os.environ, **env})
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)


@pytest.mark.parametrize("name", MODELS + ["llama-Q4_K", "qwen2-Q6_K", "llama-F16", "gemma3-mix-Q5_0"])
def test_repacked_int16_is_bit_identical(pllm_bin, tiny_models_paths, work_dir, name):
    """int16 activations over panels (gemm_i16_panels: AVX2, AVX-VNNI, AVX-512) give the file
    layout's int16 logits bit for bit, whole prompts, chunks and token by token: the kernel
    repeats the tile's arithmetic step for step (tests/cpp/test_i16act.cpp). The types no
    panel kernel reads (F16, Q5_x) are copied in the file's layout beside the panels:
    the same bytes, so the same logits."""
    isas = [i for i in pllm_cli.available_isas() if i in ("avx2", "avxvnni", "avx512")]
    if not isas:
        pytest.skip("no int16 panel kernel on this CPU")
    path = tiny_models_paths[name]
    ids = tm.sample_ids(tm.model_configs()[name], 16)
    n_vocab = _n_vocab(path)
    for isa in isas:
        env = pllm_cli.isa_env(isa)
        for chunk in (0, 1, 5):
            off = pllm_cli.run_logits(pllm_bin, path, ids, work_dir / "off.f32", n_vocab, env=env, int16_act=True,
                                      chunk=chunk, extra=["--repack", "off"])
            on = pllm_cli.run_logits(pllm_bin, path, ids, work_dir / "on.f32", n_vocab, env=env, int16_act=True,
                                     chunk=chunk, extra=["--repack", "auto"])
            assert np.array_equal(on, off), f"{name} {isa} chunk={chunk}: {format_stats(compare(on, off))}"


def test_real_model_repacks_without_more_memory(pllm_bin, smollm2_path):
    """SmolLM2 Q4_1: with --int8-act, repacking is on by default where panel kernels exist;
    every matrix is repacked once (the tied output counts once) and the file's pages are
    released, so peak RSS stays within a few MB of the file layout's."""
    if "avx512" not in pllm_cli.available_isas():
        pytest.skip("no panel kernel on this CPU: nothing is repacked")
    on = _bench(pllm_bin, smollm2_path, "--int8-act")
    off = _bench(pllm_bin, smollm2_path, "--int8-act", "--repack", "off")
    assert off["repacked_tensors"] == 0
    assert on["repacked_tensors"] == 30 * 7 + 1, on["repacked_tensors"]
    assert on["peak_rss_mb"] <= off["peak_rss_mb"] + 8, (on["peak_rss_mb"], off["peak_rss_mb"])
    exact = _bench(pllm_bin, smollm2_path, "--exact")
    assert exact["repacked_tensors"] == 0, "auto must not repack for exact-mode sessions"
    default = _bench(pllm_bin, smollm2_path)  # int16 activations: their panel kernels exist here
    assert default["repacked_tensors"] == 30 * 7 + 1, default["repacked_tensors"]
    assert _bench(pllm_bin, smollm2_path, env={"PLLM_ISA": "avx2"})["repacked_tensors"] == 30 * 7 + 1
    if "avxvnni" in pllm_cli.available_isas():  # its own int16 panel kernels, as avx2's
        assert _bench(pllm_bin, smollm2_path, env={"PLLM_ISA": "avxvnni"})["repacked_tensors"] == 30 * 7 + 1
        on8 = _bench(pllm_bin, smollm2_path, "--int8-act", env={"PLLM_ISA": "avxvnni"})
        assert on8["repacked_tensors"] == 0, "avxvnni has no int8 panel kernels (the avx2 table's int8 kernels)"
    assert _bench(pllm_bin, smollm2_path, env={"PLLM_ISA": "scalar"})["repacked_tensors"] == 0, (
        "auto must keep the file's layout where int16 has no panel kernel")
    on8 = _bench(pllm_bin, smollm2_path, "--int8-act", env={"PLLM_ISA": "avx2"})
    assert on8["repacked_tensors"] == 0, "with --int8-act, auto repacks for int8 panel kernels only"


def test_k_quant_model_is_copied_to_huge_pages_without_more_memory(pllm_bin, gemma3_path):
    """Gemma 3 270M Q4_K_M: the default (int16) load repacks the matrices an int16 panel kernel
    reads (Q4_K attn_output in 18 layers and ffn_down in 9, Q6_K ffn_down in the other 9, Q8_0
    attn_v in 9 and the tied Q8_0 table) and copies the others (Q5_0 q/k/gate/up, 9 Q5_0 attn_v)
    in the file's layout into the huge-page arena, and releases the file's pages: peak RSS stays
    within a few MB of the file layout's."""
    if not any(i in pllm_cli.available_isas() for i in ("avx2", "avxvnni", "avx512")):
        pytest.skip("no int16 panel kernel on this CPU: nothing is repacked or copied")
    on = _bench(pllm_bin, gemma3_path)
    off = _bench(pllm_bin, gemma3_path, "--repack", "off")
    assert off["copied_tensors"] == 0 and off["repacked_tensors"] == 0
    assert on["copied_tensors"] + on["repacked_tensors"] == 18 * 7 + 1, on
    assert on["repacked_tensors"] == 18 + 9 + 9 + 9 + 1, on
    assert on["copied_tensors"] == 18 * 4 + 9, on
    assert on["peak_rss_mb"] <= off["peak_rss_mb"] + 8, (on["peak_rss_mb"], off["peak_rss_mb"])
    assert _bench(pllm_bin, gemma3_path, "--exact")["copied_tensors"] == 0, "exact-mode loads keep the file"


def test_real_model_logits_repacked(pllm_bin, smollm2_path, smollm2_ref, work_dir):
    """SmolLM2 decode (token by token, the panel kernel) against the reference, int8 bounds."""
    if "avx512" not in pllm_cli.available_isas():
        pytest.skip("no panel kernel on this CPU")
    ids = list(range(100, 116))
    got = pllm_cli.run_logits(pllm_bin, smollm2_path, ids, work_dir / "on.f32", smollm2_ref.hp.n_vocab,
                              int8_act=True, chunk=1, extra=["--repack", "on", "--kv-type", "f32"])
    max_rel, rms_rel = tol.smollm2_tol(tol.INT8)
    tol.assert_logits_close(got, smollm2_ref.forward(ids), max_rel, rms_rel,
                            tol.ARGMAX_MIN_FRACTION["quant"], what="SmolLM2 repacked decode")


def test_bad_repack_value(pllm_bin, smollm2_path):
    p = pllm_cli.run_cli(pllm_bin, ["run", "-m", smollm2_path, "-p", "hi", "--repack", "maybe"])
    pllm_cli.assert_clean_error(p)
