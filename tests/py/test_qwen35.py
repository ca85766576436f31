"""qwen35 (Qwen3.5, Gated DeltaNet hybrid) on its tiny fixtures (tiny_qwen35.py): the engine's
logits against the numpy reference (reference_qwen35.py) and against llama.cpp's, whole, in
prompt chunks, token by token and batched with other sequences, within the exact-mode bounds of
tolerances.py; the reference itself against llama.cpp; each feature the arch adds moves the
logits far past the bound; a file missing what the arch needs is one clear error. The DeltaNet
state through the server's prefix cache (snapshots at block boundaries) is in
test_hybrid_state.py, the cache's rules for it in tests/cpp/test_kv_cache.cpp."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

import pllm_cli
import tiny_models as tm
import tiny_qwen35 as tq
import tolerances as tol
from reference import compare
from reference_qwen35 import Qwen35Reference

CONFIGS = tq.configs()
NAMES = list(CONFIGS)
LLAMA_DEBUG = Path(__file__).resolve().parents[2] / "bench" / ".cache" / "bin" / "llama-debug"
# 70 positions: the DeltaNet checkpoint at 64 (KvCache::kDeltaCheckpoint) is crossed.
N_LONG = 70


@pytest.fixture(scope="module")
def refs(tiny_models_paths):
    return {n: Qwen35Reference(tiny_models_paths[n]) for n in NAMES}


def _check(got, want, wtype, what, mode=tol.EXACT, isa=None):
    max_rel, rms_rel = tol.tol_for(wtype, mode, pllm_cli.fp16_arith(isa) if isa else False)
    tol.assert_logits_close(got, want, max_rel, rms_rel, tol.argmax_min_fraction(wtype, mode), what=what)


@pytest.mark.parametrize("isa", pllm_cli.available_isas())
@pytest.mark.parametrize("name", NAMES)
def test_whole_prompt_matches_reference(pllm_bin, tiny_models_paths, refs, work_dir, name, isa):
    ids = tq.sample_ids(CONFIGS[name], 16)
    got = pllm_cli.run_logits(pllm_bin, tiny_models_paths[name], ids, work_dir / "l.f32", refs[name].n_vocab,
                              env=pllm_cli.isa_env(isa))
    _check(got, refs[name].forward(ids), CONFIGS[name].wtype, f"{name} isa={isa}", isa=isa)


@pytest.mark.parametrize("chunk", [1, 5, 64])
@pytest.mark.parametrize("name", ["qwen35-F32", "qwen35-Q8_0"])
def test_chunked_and_token_by_token_match_reference(pllm_bin, tiny_models_paths, refs, work_dir, name, chunk):
    """The state carried from step to step (conv rows and delta-rule matrices in the cache):
    one id per step (the decode path), prompt chunks of 5 and a chunk ending at the checkpoint."""
    ids = tq.sample_ids(CONFIGS[name], N_LONG, seed=1)
    got = pllm_cli.run_logits(pllm_bin, tiny_models_paths[name], ids, work_dir / "l.f32", refs[name].n_vocab,
                              chunk=chunk)
    _check(got, refs[name].forward(ids), CONFIGS[name].wtype, f"{name} chunk={chunk}")


def test_default_activation_mode_matches_reference(pllm_bin, tiny_models_paths, refs, work_dir):
    """The engine's default (int16) mode on Q8_0, token by token: its bound is the exact one."""
    name = "qwen35-Q8_0"
    ids = tq.sample_ids(CONFIGS[name], 16, seed=2)
    got = pllm_cli.run_logits(pllm_bin, tiny_models_paths[name], ids, work_dir / "l.f32", refs[name].n_vocab,
                              int16_act=True)
    _check(got, refs[name].forward(ids), CONFIGS[name].wtype, f"{name} int16", mode=tol.I16)


@pytest.mark.parametrize("name", ["qwen35-F32", "qwen35-Q8_0"])
def test_batched_with_other_sequences_matches_reference(pllm_bin, tiny_models_paths, refs, work_dir, name):
    """Ragged sequences stepped together (`logits --ids "a; b; ..."`, chunks of 4): every step's
    rows belong to several sequences, each with its own state."""
    cfg = CONFIGS[name]
    seqs = [tq.sample_ids(cfg, n, seed=k + 3) for k, n in enumerate((16, 5, 11, 1, 9))]
    spec = "; ".join(" ".join(map(str, s)) for s in seqs)
    out = work_dir / "b.f32"
    pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["logits", "-m", tiny_models_paths[name], "--ids", spec, "--out", out,
                                                  "-t", "2", "--chunk", "4", "--exact"]))
    raw = np.fromfile(out, dtype="<f4").astype(np.float64)
    V, at = refs[name].n_vocab, 0
    assert raw.size == sum(map(len, seqs)) * V
    for k, s in enumerate(seqs):
        got = raw[at * V:(at + len(s)) * V].reshape(len(s), V)
        at += len(s)
        _check(got, refs[name].forward(s), cfg.wtype, f"{name} sequence {k}")


# (what is switched off in the reference) -- each must move the logits.
FEATURES = ["conv_history", "state_history", "out_gate"]


@pytest.mark.parametrize("what", FEATURES)
def test_each_feature_moves_the_logits(refs, what):
    """At least 10x the exact-mode bound: a backend that ignored the feature fails there."""
    ids = tq.sample_ids(CONFIGS["qwen35-F32"], 16)
    r = refs["qwen35-F32"]
    s = compare(r.forward(ids, **{what: False}), r.forward(ids))
    assert s["max_rel"] >= 10 * tol.FLOAT_TOL[0], f"{what} barely matters ({s['max_rel']:.2e})"


def test_unrotated_fourth_rope_section_moves_the_logits(tiny_models_paths):
    """qwen35-layers-F32's sections (1, 1, 1, 1) leave pairs 3 and 7 unrotated for text; rotating
    them (one section over every pair) moves the logits 10x past the bound."""
    r = Qwen35Reference(tiny_models_paths["qwen35-layers-F32"])
    ids = tq.sample_ids(CONFIGS["qwen35-layers-F32"], 16)
    want = r.forward(ids)
    r.sections = [r.n_rot // 2, 0, 0, 0]
    s = compare(r.forward(ids), want)
    assert s["max_rel"] >= 10 * tol.FLOAT_TOL[0], f"the fourth section barely matters ({s['max_rel']:.2e})"


def _llama_debug(model: Path, prompt: str, out_dir: Path):
    proc = subprocess.run([str(LLAMA_DEBUG), "-m", str(model), "-p", prompt, "--save-logits", "--logits-output-dir",
                           str(out_dir), "-c", "256", "-t", "2", "--no-warmup"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-800:]
    stem = out_dir / f"llamacpp-{model.stem}"
    ids = np.fromfile(f"{stem}-tokens.bin", dtype=np.int32).tolist()
    return ids, np.fromfile(f"{stem}.bin", dtype=np.float32).astype(np.float64)


@pytest.mark.skipif(not LLAMA_DEBUG.is_file(), reason="llama.cpp's llama-debug not built (bench/setup_llamacpp.sh)")
@pytest.mark.parametrize("name", NAMES)
def test_engine_and_reference_match_llama_cpp(pllm_bin, tiny_models_paths, refs, work_dir, name):
    """The last position's logits of two prompts. llama.cpp multiplies Q8_0 weights with int8
    activations: that fixture is held to the int8 bound against it (exact against the reference)."""
    mode = tol.INT8 if CONFIGS[name].wtype == "Q8_0" else tol.EXACT
    for k, prompt in enumerate(["hello world and the other things in the world",
                                "the cat sat on the mat; it is what it is, and so on and on"]):
        ids, theirs = _llama_debug(tiny_models_paths[name], prompt, work_dir)
        ours = pllm_cli.run_logits(pllm_bin, tiny_models_paths[name], ids, work_dir / "l.f32", refs[name].n_vocab,
                                   int8_act=mode == tol.INT8)[-1:]
        _check(ours, theirs[None], CONFIGS[name].wtype, f"{name} prompt {k}: engine vs llama.cpp", mode=mode)
        _check(refs[name].forward(ids, last_only=True), theirs[None], CONFIGS[name].wtype,
               f"{name} prompt {k}: reference vs llama.cpp", mode=mode)


def test_info_names_what_the_arch_adds(pllm_bin, tiny_models_paths):
    """The MTP block is not a layer: 4 of the file's 5 blocks; layers 0-2 DeltaNet."""
    proc = pllm_cli.run_cli(pllm_bin, ["info", "-m", tiny_models_paths["qwen35-mtp-F32"], "--json"])
    pllm_cli.check_ok(proc)
    hp = json.loads(proc.stdout)["hparams"]
    cfg = CONFIGS["qwen35-mtp-F32"]
    want = {"n_layer": 4, "conv_layers": [0, 1, 2], "conv_taps": cfg.conv_kernel, "delta_net_head": cfg.head_k_dim,
            "delta_net_k_heads": cfg.n_k_heads, "delta_net_v_heads": cfg.n_v_heads, "attn_output_gate": True,
            "rope_sections": list(cfg.sections), "n_rot": cfg.n_rot, "q_k_norm": True}
    for k, v in want.items():
        assert hp.get(k) == v, f"info: {k} = {hp.get(k)!r}, expected {v!r}"


@pytest.mark.parametrize("change,needle", [
    ({"kv": "qwen35.ssm.conv_kernel"}, "qwen35.ssm.conv_kernel"),
    ({"kv": "qwen35.rope.dimension_sections"}, "qwen35.rope.dimension_sections"),
    ({"tensor": "blk.1.ssm_a"}, "blk.1.ssm_a"),
    ({"tensor": "blk.0.ssm_conv1d.weight"}, "blk.0.ssm_conv1d.weight"),
    ({"tensor": "blk.3.attn_q_norm.weight"}, "blk.3.attn_q_norm.weight"),
    ({"tensor": "blk.2.post_attention_norm.weight"}, "blk.2.post_attention_norm.weight"),
])
def test_a_file_missing_what_the_arch_needs_is_one_error(pllm_bin, work_dir, change, needle):
    path = tm.write_with_gguf_writer(tm.without(tq.build_spec(CONFIGS["qwen35-F32"]), **change), work_dir / "bad.gguf")
    proc = pllm_cli.run_cli(pllm_bin, ["logits", "-m", path, "--ids", "5 6 7", "--out", work_dir / "x.f32"])
    assert needle in pllm_cli.assert_clean_error(proc)


@pytest.mark.parametrize("key,kv,needle", [
    ("qwen35.ssm.inner_size", tm.gb.KV("qwen35.ssm.inner_size", tm.gb.U32, 96), "inner_size"),
    ("qwen35.ssm.state_size", tm.gb.KV("qwen35.ssm.state_size", tm.gb.U32, 4096), "state_size"),
    ("qwen35.full_attention_interval", tm.gb.KV("qwen35.attention.recurrent_layers", tm.gb.ARRAY, [True, False],
                                                elem_type=tm.gb.BOOL), "one value per layer"),
    ("qwen35.full_attention_interval", tm.gb.KV("qwen35.attention.recurrent_layers", tm.gb.ARRAY, [True] * 4,
                                                elem_type=tm.gb.BOOL), "without attention layers"),
])
def test_bad_hyperparameters_are_one_error(pllm_bin, work_dir, key, kv, needle):
    spec = tq.build_spec(CONFIGS["qwen35-F32"])
    spec.kvs = [kv if x.key == key else x for x in spec.kvs]
    path = tm.write_with_gguf_writer(spec, work_dir / "bad.gguf")
    proc = pllm_cli.run_cli(pllm_bin, ["logits", "-m", path, "--ids", "5 6 7", "--out", work_dir / "x.f32"])
    assert needle in pllm_cli.assert_clean_error(proc)
