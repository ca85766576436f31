"""Several sequences stepped together on one engine (`pocketllm logits --ids "a; b; c"`:
every forward pass takes the next chunk of each sequence that has ids left, so one step
holds rows of several sequences at different positions) give each sequence the logits of
the numpy reference run of that sequence alone, within the exact-mode bound of
tolerances.py, on every kernel dispatch level; and the same logits as the engine's own solo
run up to f32 summation order."""
from __future__ import annotations

import numpy as np
import pytest

import pllm_cli
import tiny_models as tm
import tolerances as tol
from reference import Reference

CONFIGS = tm.model_configs()
ISAS = pllm_cli.available_isas()
LENGTHS = (16, 5, 11, 1, 9)  # ragged: steps hold 5, 4, 3 and 1 sequences
CHUNK = 4


def _run_together(pllm_bin, model, seqs, out, n_vocab, env=None, extra=(), chunk=CHUNK):
    spec = "; ".join(" ".join(map(str, s)) for s in seqs)
    mode = pllm_cli.exact_unless_chosen(extra)
    proc = pllm_cli.run_cli(pllm_bin, ["logits", "-m", model, "--ids", spec, "--out", out, "-t", "2",
                                       "--chunk", str(chunk), *mode, *extra], env=env)
    pllm_cli.check_ok(proc)
    raw = np.fromfile(out, dtype="<f4").astype(np.float64)
    total = sum(len(s) for s in seqs)
    assert raw.size == total * n_vocab
    got, at = [], 0
    for s in seqs:
        got.append(raw[at * n_vocab:(at + len(s)) * n_vocab].reshape(len(s), n_vocab))
        at += len(s)
    return got


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", list(CONFIGS))
def test_batched_sequences_match_reference(pllm_bin, tiny_models_paths, tiny_ref_cache, work_dir, name, isa):
    cfg = CONFIGS[name]
    if name not in tiny_ref_cache:
        tiny_ref_cache[name] = Reference(tiny_models_paths[name])
    ref = tiny_ref_cache[name]
    seqs = [tm.sample_ids(cfg, n, seed=k + 1) for k, n in enumerate(LENGTHS)]
    got = _run_together(pllm_bin, tiny_models_paths[name], seqs, work_dir / "batched.f32", ref.hp.n_vocab,
                        env=pllm_cli.isa_env(isa))
    max_rel, rms_rel = tol.tol_for(cfg.wtype, tol.EXACT, pllm_cli.fp16_arith(isa))
    for k, s in enumerate(seqs):
        tol.assert_logits_close(got[k], ref.forward(s), max_rel, rms_rel,
                                tol.argmax_min_fraction(cfg.wtype, tol.EXACT),
                                what=f"{name} isa={isa} sequence {k} of {len(seqs)}")


@pytest.mark.parametrize("name", ["llama-Q4_0", "qwen2-Q8_0", "gemma3-swa2-F32", "llama-ffnvar-F32", "lfm2-Q8_0"])
def test_batched_equals_solo_engine_run(pllm_bin, tiny_models_paths, work_dir, name):
    """Against the engine's own solo runs (same chunks, f32 KV so that no value is rounded
    to f16 after a sum whose order changed): only the order of f32 sums differs (several
    rows per weight block; attention split), a few ulp of the logits' scale; a row landing
    in the wrong sequence or position would differ by O(1)."""
    cfg = CONFIGS[name]
    n_vocab = Reference(tiny_models_paths[name]).hp.n_vocab
    seqs = [tm.sample_ids(cfg, n, seed=k + 1) for k, n in enumerate(LENGTHS)]
    got = _run_together(pllm_bin, tiny_models_paths[name], seqs, work_dir / "batched.f32", n_vocab,
                        extra=("--kv-type", "f32"))
    for k, s in enumerate(seqs):
        solo = pllm_cli.run_logits(pllm_bin, tiny_models_paths[name], s, work_dir / "solo.f32", n_vocab, chunk=CHUNK,
                                   extra=("--kv-type", "f32"))
        rms = np.sqrt(np.mean(solo ** 2))
        assert np.max(np.abs(got[k] - solo)) <= 1e-5 * rms, f"{name} sequence {k}"


def _decode_together_vs_solo(pllm_bin, model, work_dir, name, isa, mode_flag, seed):
    """The LENGTHS sequences decoded one token per step, together and each alone, with f32 KV
    and `mode_flag`: per sequence, max |together - alone| over the RMS of its solo logits."""
    n_vocab = Reference(model).hp.n_vocab
    seqs = [tm.sample_ids(CONFIGS[name], n, seed=k + seed) for k, n in enumerate(LENGTHS)]
    env = pllm_cli.isa_env(isa)
    kv = ("--kv-type", "f32")
    got = _run_together(pllm_bin, model, seqs, work_dir / "batched.f32", n_vocab, env=env, extra=kv + (mode_flag,),
                        chunk=1)
    errs = []
    for k, s in enumerate(seqs):
        solo = pllm_cli.run_logits(pllm_bin, model, s, work_dir / "solo.f32", n_vocab, chunk=1, env=env,
                                   extra=kv + (mode_flag,))
        errs.append(np.max(np.abs(got[k] - solo)) / np.sqrt(np.mean(solo ** 2)))
        print(f"{name} isa={isa} {mode_flag} sequence {k}: max |batched - solo| = {errs[-1]:.2e} x rms")
    return errs


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", ["llama-Q4_0", "qwen2-Q4_1", "llama-Q8_0", "gemma3-Q4_0"])
def test_int8_batched_decode_equals_solo_engine_run(pllm_bin, tiny_models_paths, work_dir, name, isa):
    """--int8-act, one token per sequence per step: every step holds 1-5 decode rows, which
    take the multi-row int8 kernel (vec_dot_rows_multi); the solo runs take the one-row
    kernel. Each activation row is quantised on its own and the integer block sums are exact,
    so only the order of f32 sums may differ (as in the exact-mode test above)."""
    for k, err in enumerate(_decode_together_vs_solo(pllm_bin, tiny_models_paths[name], work_dir, name, isa,
                                                     "--int8-act", seed=7)):
        assert err <= 1e-5, f"{name} isa={isa} sequence {k}"


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", ["llama-Q4_0", "qwen2-Q4_1", "llama-Q8_0", "gemma3-Q5_0", "llama-Q4_K"])
def test_int16_batched_decode_equals_solo_engine_run(pllm_bin, tiny_models_paths, work_dir, name, isa):
    """int16 activations (the default), one token per sequence per step: the batched steps' 1-5
    rows and the solo runs' single rows go through the same tile, whose result for a (weight
    row, token) pair does not depend on how many tokens share the call, and each row's
    activations are quantised on their own. So only the attention's f32 order may differ;
    where it moves an activation across an int16 rounding step the logits move by ~1e-4 of
    their RMS, still far inside this bound (a misrouted row would differ by O(1)). Measured on
    scalar and AVX2: bit-identical."""
    for k, err in enumerate(_decode_together_vs_solo(pllm_bin, tiny_models_paths[name], work_dir, name, isa,
                                                     "--int16-act", seed=11)):
        assert err <= 1e-3, f"{name} isa={isa} sequence {k}"


def test_empty_sequence_is_an_error(pllm_bin, tiny_models_paths, work_dir):
    proc = pllm_cli.run_cli(pllm_bin, ["logits", "-m", tiny_models_paths["llama-F32"], "--ids", "1 2;;3",
                                       "--out", work_dir / "x.f32"])
    assert "sequence has no token ids" in pllm_cli.assert_clean_error(proc)
