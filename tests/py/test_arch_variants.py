"""The llama block's variants (qwen3, smollm3, granite, minicpm, phi3, lfm2) and gemma2: their tiny fixtures
exercise every feature they add (each one, switched off in the reference, moves the logits far
past the bounds the engine is held to), phi3's LongRoPE picks its table by the session's context
on both sides of rope.scaling.original_context_length, `info` names what an arch adds, and files
missing what an arch needs give one clear error.

Whole prompts, chunks, token by token, batched and every activation mode are covered for these
archs by the tests parametrized over tiny_models.model_configs() (test_tiny_logits.py,
test_batched_logits.py); logits against llama.cpp are in bench/arch_vs_llamacpp.py."""
from __future__ import annotations

import json

import numpy as np
import pytest

import pllm_cli
import tiny_models as tm
import tolerances as tol
from reference import Reference, compare

CONFIGS = tm.model_configs()
N_IDS = 16


def _ref(cache, paths, name) -> Reference:
    if name not in cache:
        cache[name] = Reference(paths[name])
    return cache[name]


def _qwen3_no_qk_norm(r):
    for k in [k for k in r.w if k.endswith(("attn_q_norm.weight", "attn_k_norm.weight"))]:
        del r.w[k]


def _lfm2_no_conv_history(r):
    forward = r.forward
    r.forward = lambda ids, **kw: forward(ids, conv_history=False, **kw)


# (fixture, what is switched off, how) -- each must move the logits.
FEATURES = [
    ("smollm3-F32", "NoPE layers", lambda r: setattr(r.hp, "no_rope_step", 0)),
    ("granite-F32", "embedding_scale", lambda r: setattr(r.hp, "embed_scale", 1.0)),
    ("granite-F32", "residual_scale", lambda r: setattr(r.hp, "residual_scale", 1.0)),
    ("granite-F32", "attention.scale", lambda r: setattr(r.hp, "attn_scale", 0.0)),
    ("granite-F32", "logit_scale", lambda r: setattr(r.hp, "logit_mul", 1.0)),
    ("minicpm-F32", "default embedding scale", lambda r: setattr(r.hp, "embed_scale", 1.0)),
    ("minicpm-F32", "default residual scale", lambda r: setattr(r.hp, "residual_scale", 1.0)),
    ("phi3-F32", "rope attn_factor", lambda r: setattr(r.hp, "attn_factor", 1.0)),
    ("qwen3-F32", "q/k norms", _qwen3_no_qk_norm),
    ("gemma2-F32", "attention soft-capping", lambda r: setattr(r.hp, "attn_softcap", 0.0)),
    ("gemma2-F32", "final soft-capping", lambda r: setattr(r.hp, "final_softcap", 0.0)),
    ("lfm2-F32", "convolution over earlier positions", _lfm2_no_conv_history),
    ("lfm2-F32", "q/k norms", _qwen3_no_qk_norm),
]


@pytest.mark.parametrize("name,what,switch_off", FEATURES, ids=[f"{n}:{w}" for n, w, _ in FEATURES])
def test_each_feature_moves_the_logits(tiny_models_paths, name, what, switch_off):
    """At least 10x the exact-mode bound: a backend that ignored the feature fails there."""
    ids = tm.sample_ids(CONFIGS[name], N_IDS)
    with_it = Reference(tiny_models_paths[name]).forward(ids)
    r = Reference(tiny_models_paths[name])
    switch_off(r)
    s = compare(r.forward(ids), with_it)
    max_rel, _ = tol.tol_for(CONFIGS[name].wtype, tol.EXACT, False)
    print(f"{name} without {what}: max_rel {s['max_rel']:.3f}")
    assert s["max_rel"] >= 10 * max_rel, f"{name}: {what} barely matters ({s['max_rel']:.2e})"


@pytest.mark.parametrize("isa", pllm_cli.available_isas())
@pytest.mark.parametrize("name", ["phi3-F32", "phi3-Q8_0"])
def test_phi3_longrope_table_follows_the_context(pllm_bin, tiny_models_paths, tiny_ref_cache, work_dir, name, isa):
    """-c 256 (= original_context_length): rope_factors_short; -c 512: rope_factors_long. Each run
    matches the reference with that context, and the two differ by far more than the bound."""
    ref = _ref(tiny_ref_cache, tiny_models_paths, name)
    ids = tm.sample_ids(CONFIGS[name], N_IDS)
    max_rel, rms_rel = tol.tol_for(CONFIGS[name].wtype, tol.EXACT, pllm_cli.fp16_arith(isa))
    got = {}
    for ctx in (256, 512):
        got[ctx] = pllm_cli.run_logits(pllm_bin, tiny_models_paths[name], ids, work_dir / f"l{ctx}.f32", ref.hp.n_vocab,
                                       env=pllm_cli.isa_env(isa), extra=("-c", str(ctx)))
        tol.assert_logits_close(got[ctx], ref.forward(ids, n_ctx=ctx), max_rel, rms_rel,
                                tol.argmax_min_fraction(CONFIGS[name].wtype, tol.EXACT),
                                what=f"{name} isa={isa} ctx={ctx}")
    assert compare(got[256], got[512])["max_rel"] >= 10 * max_rel


@pytest.mark.parametrize("name,expect", [
    ("qwen3-F32", {"q_k_norm": True, "head_dim": 128, "rope_order": "neox"}),
    ("smollm3-F32", {"no_rope_every": 4}),
    ("granite-F32", {"embedding_scale": 0.5, "residual_scale": 0.7, "logit_scale": 4.0, "attn_scale": 0.08}),
    ("phi3-F32", {"fused_qkv": True, "n_rot": 48, "rope_original_context": 256}),
    ("minicpm-F32", {"embedding_scale": 12.0, "logit_scale": 1.0}),
    ("gemma2-F32", {"attn_logit_softcapping": 2.0, "final_logit_softcapping": 5.0, "sliding_window": 8,
                    "sliding_window_pattern": 2}),
    ("lfm2-F32", {"conv_layers": [0, 1, 3], "conv_taps": 3, "n_head_kv": 2, "q_k_norm": True}),
])
def test_info_names_what_the_arch_adds(pllm_bin, tiny_models_paths, name, expect):
    proc = pllm_cli.run_cli(pllm_bin, ["info", "-m", tiny_models_paths[name], "--json"])
    pllm_cli.check_ok(proc)
    hp = json.loads(proc.stdout)["hparams"]
    for k, v in expect.items():
        if k == "logit_scale" and v == 1.0:  # minicpm at n_embd 256: 256 / 256, not reported
            assert k not in hp
            continue
        assert k in hp, f"{name}: info lacks {k}: {hp}"
        assert hp[k] == pytest.approx(v), f"{name}: {k} = {hp[k]}, expected {v}"


def _without(spec, *, kv_suffix=None, tensor=None):
    spec.kvs = [kv for kv in spec.kvs if not (kv_suffix and kv.key.endswith(kv_suffix))]
    spec.tensors = [t for t in spec.tensors if not (tensor and t.name == tensor)]
    return spec


@pytest.mark.parametrize("name,change,needle", [
    ("granite-F32", {"kv_suffix": ".logit_scale"}, "granite.logit_scale"),
    ("qwen3-F32", {"tensor": "blk.1.attn_k_norm.weight"}, "blk.1.attn_k_norm.weight"),
    ("phi3-F32", {"kv_suffix": ".rope.scaling.original_context_length"}, "original_context_length"),
    ("phi3-F32", {"tensor": "rope_factors_short.weight"}, "rope_factors_short"),
    ("phi3-F32", {"tensor": "blk.1.attn_qkv.weight"}, "blk.1.attn_q.weight"),
    ("lfm2-F32", {"kv_suffix": ".shortconv.l_cache"}, "lfm2.shortconv.l_cache"),
    ("lfm2-F32", {"tensor": "blk.1.shortconv.conv.weight"}, "blk.1.shortconv.conv.weight"),
    ("lfm2-F32", {"tensor": "token_embd_norm.weight"}, "token_embd_norm.weight"),
])
def test_a_file_missing_what_the_arch_needs_is_one_error(pllm_bin, work_dir, name, change, needle):
    path = tm.write_with_gguf_writer(_without(tm.build_spec(CONFIGS[name]), **change), work_dir / "broken.gguf")
    proc = pllm_cli.run_cli(pllm_bin, ["logits", "-m", path, "--ids", "5 6 7", "--out", work_dir / "x.f32"])
    assert needle in pllm_cli.assert_clean_error(proc)


def _retyped(spec, name, new_type, data):
    for i, t in enumerate(spec.tensors):
        if t.name == name:
            spec.tensors[i] = tm.gb.Tensor(name, new_type, t.dims, data)
    return spec


def test_lfm2_layers_without_attention_only_where_the_arch_builds_them(pllm_bin, work_dir):
    """A head_count_kv of 0 marks a convolution layer for lfm2 only; elsewhere it is one error,
    as is an lfm2 convolution kernel that is not F32 (llama.cpp keeps it F32)."""
    spec = tm.build_spec(CONFIGS["qwen3-F32"])
    spec.kvs = [tm.gb.KV(kv.key, tm.gb.ARRAY, [0, 2, 2, 2], elem_type=tm.gb.I32)
                if kv.key.endswith("head_count_kv") else kv for kv in spec.kvs]
    path = tm.write_with_gguf_writer(spec, work_dir / "qwen3-conv.gguf")
    proc = pllm_cli.run_cli(pllm_bin, ["logits", "-m", path, "--ids", "5 6 7", "--out", work_dir / "x.f32"])
    assert "layers without attention are not supported for qwen3" in pllm_cli.assert_clean_error(proc)
    d = tm.LFM2
    half = (0.5 * np.ones((d.n_embd, tm.LFM2_TAPS))).astype(np.float16).tobytes()
    spec = _retyped(tm.build_spec(CONFIGS["lfm2-F32"]), "blk.0.shortconv.conv.weight", "F16", half)
    path = tm.write_with_gguf_writer(spec, work_dir / "lfm2-f16conv.gguf")
    proc = pllm_cli.run_cli(pllm_bin, ["logits", "-m", path, "--ids", "5 6 7", "--out", work_dir / "x.f32"])
    assert "blk.0.shortconv.conv.weight' must be F32" in pllm_cli.assert_clean_error(proc)
