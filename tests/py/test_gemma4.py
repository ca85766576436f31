"""gemma4 (Gemma 4 dense, E2B/E4B shape) on its tiny fixtures (tiny_gemma4.py): the engine's
logits against the numpy reference (reference_gemma4.py) and against llama.cpp's, whole, in prompt
chunks, token by token and batched with other sequences; each feature the arch adds moves the
logits far past the bound; the shared-KV layers hold no cache (KV bytes of the 7-layer file = those
of its first 5 layers alone); a prefix-cache snapshot restores the state; the gemma4 tokenizer
matches llama.cpp's; a file missing what the arch needs (or a MoE file) is one clear error."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

import pllm_cli
import tiny_gemma4 as tg
import tiny_models as tm
import tolerances as tol
from reference import compare
from reference_gemma4 import Gemma4Reference

CONFIGS = tg.configs()
NAMES = list(CONFIGS)
LLAMA_DEBUG = Path(__file__).resolve().parents[2] / "bench" / ".cache" / "bin" / "llama-debug"
# 100 positions: past the 48-position window of the sliding layers and past a 64-position KV block.
N_LONG = 100


@pytest.fixture(scope="module")
def paths(tiny_models_paths):
    return tiny_models_paths


@pytest.fixture(scope="module")
def refs(paths):
    return {n: Gemma4Reference(paths[n]) for n in NAMES}


def _check(got, want, wtype, what, mode=tol.EXACT, isa=None):
    max_rel, rms_rel = tol.tol_for(wtype, mode, pllm_cli.fp16_arith(isa) if isa else False)
    return tol.assert_logits_close(got, want, max_rel, rms_rel, tol.argmax_min_fraction(wtype, mode), what=what)


@pytest.mark.parametrize("isa", pllm_cli.available_isas())
@pytest.mark.parametrize("name", NAMES)
def test_whole_prompt_matches_reference(pllm_bin, paths, refs, work_dir, name, isa):
    ids = tg.sample_ids(CONFIGS[name], 16)
    got = pllm_cli.run_logits(pllm_bin, paths[name], ids, work_dir / "l.f32", refs[name].n_vocab,
                              env=pllm_cli.isa_env(isa))
    _check(got, refs[name].forward(ids), CONFIGS[name].wtype, f"{name} isa={isa}", isa=isa)


@pytest.mark.parametrize("chunk", [1, 5, 64])
@pytest.mark.parametrize("name", ["gemma4-F32", "gemma4-Q8_0"])
def test_chunked_and_token_by_token_match_reference(pllm_bin, paths, refs, work_dir, name, chunk):
    """Past the sliding window (48) and a KV block (64): one id per step (the decode path, the
    shared layers reading what their source layers stored in earlier steps) and prompt chunks."""
    ids = tg.sample_ids(CONFIGS[name], N_LONG, seed=1)
    got = pllm_cli.run_logits(pllm_bin, paths[name], ids, work_dir / "l.f32", refs[name].n_vocab, chunk=chunk)
    _check(got, refs[name].forward(ids), CONFIGS[name].wtype, f"{name} chunk={chunk}")


@pytest.mark.parametrize("kv", ["f32", "f16", "q8"])
def test_kv_cache_types_match_reference_on_every_isa(pllm_bin, paths, refs, work_dir, kv):
    """KV caches on per-layer head sizes 64 and 512 (both multiples of q8's group of 64): near the
    reference (measured max / rms relative 2.0e-6 / 3.2e-7 for f32, where only f32 rounding is
    left, 2.0e-3 / 3.3e-4 for f16, 5.0e-2 / 1.1e-2 for q8, whose queries are int8 too), and every
    ISA's kernels within the engine-vs-engine bound of the scalar twin's (the 512-wide heads go
    past what the kernels took before)."""
    name = "gemma4-F32"
    ids = tg.sample_ids(CONFIGS[name], 40, seed=5)
    want = refs[name].forward(ids)
    runs = {isa: pllm_cli.run_logits(pllm_bin, paths[name], ids, work_dir / "l.f32", refs[name].n_vocab,
                                     env=pllm_cli.isa_env(isa), extra=["--kv-type", kv])
            for isa in pllm_cli.available_isas()}
    max_rel, rms_rel = {"f32": (1e-4, 2e-5), "f16": (1e-2, 2e-3), "q8": (0.15, 0.03)}[kv]
    tol.assert_logits_close(runs["scalar"], want, max_rel, rms_rel, tol.argmax_min_fraction("Q8_0", tol.INT8),
                            what=f"{name} kv={kv} scalar vs reference")
    for isa, got in runs.items():
        s = compare(got, runs["scalar"])
        assert s["max_rel"] <= tol.CONSISTENCY_MAX_REL, f"kv={kv} isa={isa} vs scalar: {s}"


def test_default_activation_mode_matches_reference(pllm_bin, paths, refs, work_dir):
    """The engine's default (int16) mode on Q8_0, token by token: its bound is the exact one."""
    name = "gemma4-Q8_0"
    ids = tg.sample_ids(CONFIGS[name], 16, seed=2)
    got = pllm_cli.run_logits(pllm_bin, paths[name], ids, work_dir / "l.f32", refs[name].n_vocab, int16_act=True)
    _check(got, refs[name].forward(ids), CONFIGS[name].wtype, f"{name} int16", mode=tol.I16)


@pytest.mark.parametrize("name", ["gemma4-F32", "gemma4-Q8_0"])
def test_batched_with_other_sequences_matches_reference(pllm_bin, paths, refs, work_dir, name):
    """Ragged sequences stepped together (`logits --ids "a; b; ..."`, chunks of 4)."""
    cfg = CONFIGS[name]
    seqs = [tg.sample_ids(cfg, n, seed=k + 3) for k, n in enumerate((60, 5, 11, 1, 9))]
    spec = "; ".join(" ".join(map(str, s)) for s in seqs)
    out = work_dir / "b.f32"
    pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["logits", "-m", paths[name], "--ids", spec, "--out", out,
                                                  "-t", "2", "--chunk", "4", "--exact"]))
    raw = np.fromfile(out, dtype="<f4").astype(np.float64)
    V, at = refs[name].n_vocab, 0
    assert raw.size == sum(map(len, seqs)) * V
    for k, s in enumerate(seqs):
        got = raw[at * V:(at + len(s)) * V].reshape(len(s), V)
        at += len(s)
        _check(got, refs[name].forward(s), cfg.wtype, f"{name} sequence {k}")


# (what is switched off in the reference) -- each must move the logits.
FEATURES = ["per_layer", "kv_sharing", "v_norm", "window", "out_scale"]


@pytest.mark.parametrize("what", FEATURES)
def test_each_feature_moves_the_logits(refs, what):
    """At least 10x the exact-mode bound: a backend that ignored the feature fails there."""
    ids = tg.sample_ids(CONFIGS["gemma4-F32"], N_LONG, seed=1)
    r = refs["gemma4-F32"]
    s = compare(r.forward(ids, **{what: False}), r.forward(ids))
    assert s["max_rel"] >= 10 * tol.FLOAT_TOL[0], f"{what} barely matters ({s['max_rel']:.2e})"


def test_unrotated_full_layer_pairs_move_the_logits(refs):
    """rope_freqs.weight's 1e30 factors: rotating every pair of the full layers instead moves
    the logits 10x past the bound (the proportional RoPE is applied, not plain RoPE)."""
    r = refs["gemma4-F32"]
    ids = tg.sample_ids(CONFIGS["gemma4-F32"], 40, seed=4)
    want = r.forward(ids)
    saved = r.w["rope_freqs.weight"]
    r.w["rope_freqs.weight"] = np.ones_like(saved)
    try:
        s = compare(r.forward(ids), want)
    finally:
        r.w["rope_freqs.weight"] = saved
    assert s["max_rel"] >= 10 * tol.FLOAT_TOL[0], f"proportional RoPE barely matters ({s['max_rel']:.2e})"


def _llama_debug(model: Path, prompt: str, out_dir: Path):
    proc = subprocess.run([str(LLAMA_DEBUG), "-m", str(model), "-p", prompt, "--save-logits", "--logits-output-dir",
                           str(out_dir), "-c", "256", "-t", "2", "--no-warmup"], capture_output=True, text=True,
                          errors="replace")  # it prints pieces of split UTF-8 characters
    assert proc.returncode == 0, proc.stderr[-800:]
    stem = out_dir / f"llamacpp-{model.stem}"
    ids = np.fromfile(f"{stem}-tokens.bin", dtype=np.int32).tolist()
    return ids, np.fromfile(f"{stem}.bin", dtype=np.float32).astype(np.float64)


# The third is 74 tokens: past the 48-position window, which must then hold as llama.cpp's does.
PROMPTS = ["hello world and the other things in the world",
           "the cat sat on the mat; it is what it is, and so on and on",
           "the quick brown fox jumps over the lazy dog and then it runs far away from the river bank to the hills"]


@pytest.mark.skipif(not LLAMA_DEBUG.is_file(), reason="llama.cpp's llama-debug not built (bench/setup_llamacpp.sh)")
@pytest.mark.parametrize("name", NAMES)
def test_engine_and_reference_match_llama_cpp(pllm_bin, paths, refs, work_dir, name):
    """The last position's logits of three prompts. llama.cpp's CPU graph rounds activations to
    f16 twice here (its GELU goes through an f16 table, its flash attention rounds Q, K and V to
    f16; each alone moves these logits ~6e-4 rms, measured by rounding the reference the same
    way): the F32 fixtures are held to tolerances.py's f16-activation bound against it, the Q8_0
    one (int8 activations in llama.cpp) to the int8 bound; the engine and the reference agree to
    the exact bound (the tests above)."""
    mode = tol.INT8 if CONFIGS[name].wtype == "Q8_0" else tol.F16
    for k, prompt in enumerate(PROMPTS):
        ids, theirs = _llama_debug(paths[name], prompt, work_dir)
        ours = pllm_cli.run_logits(pllm_bin, paths[name], ids, work_dir / "l.f32", refs[name].n_vocab,
                                   int8_act=mode == tol.INT8)[-1:]
        wtype = CONFIGS[name].wtype if mode == tol.INT8 else "Q8_0"  # Q8_0: a type with the f16 bound
        _check(ours, theirs[None], wtype, f"{name} prompt {k}: engine vs llama.cpp", mode=mode)
        _check(refs[name].forward(ids, last_only=True), theirs[None], wtype,
               f"{name} prompt {k}: reference vs llama.cpp", mode=mode)


TOKENIZER_TEXTS = ["hello world", "  two  spaces and a trailing one ", "line one\nline two\n\n\nthree",
                   "héllo wörld, ünïcode → bytes", "<|turn>user\nhi there<turn|>\n<|turn>model\n",
                   "\n\n", "tabs\tand\r\nreturns", "the other model's user", "a <|channel>thought<channel|> b",
                   " leading", "x\n\n\n\ny", "a\n \n b", "\u2581 literal", "日本語 emoji 😀!", "<bos>hi"]


@pytest.mark.skipif(not LLAMA_DEBUG.is_file(), reason="llama.cpp's llama-debug not built (bench/setup_llamacpp.sh)")
def test_tokenizer_matches_llama_cpp(pllm_bin, paths, work_dir):
    """tokenizer.ggml.model "gemma4": the ids llama.cpp's tokenizer gives (llama-debug: BOS added,
    control tokens' text not parsed, user-defined ones (<|channel>) always) for spaces, newlines
    (a run of them that is a token stays whole), bytes outside the vocabulary (<0xXX> fallback)
    and the turn markers' text."""
    model = paths["gemma4-F32"]
    for text in TOKENIZER_TEXTS:
        want, _ = _llama_debug(model, text, work_dir)
        f = work_dir / "prompt.txt"
        f.write_bytes(text.encode())
        proc = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["tokenize", "-m", model, "-f", f, "--add-special"]))
        assert pllm_cli.parse_ids(proc.stdout) == want, f"text {text!r}"
    # With special-token parsing the turn markers are single ids (the chat template's path).
    f.write_bytes("<|turn>user\nhi<turn|>".encode())
    proc = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["tokenize", "-m", model, "-f", f, "--add-special",
                                                         "--parse-special"]))
    ids = pllm_cli.parse_ids(proc.stdout)
    vocab = tg.gemma4_vocab()[0]
    assert [vocab[i] for i in ids] == ["<bos>", "<|turn>", "user", "\n", "h", "i", "<turn|>"], ids


def test_info_names_what_the_arch_adds(pllm_bin, paths):
    proc = pllm_cli.run_cli(pllm_bin, ["info", "-m", paths["gemma4-F32"], "--json"])
    pllm_cli.check_ok(proc)
    hp = json.loads(proc.stdout)["hparams"]
    cfg = CONFIGS["gemma4-F32"]
    want = {"n_layer": cfg.n_layer, "head_dim": cfg.head_full, "head_dim_local": cfg.head_swa,
            "sliding_window": cfg.window, "local_layers": [l for l in range(cfg.n_layer) if cfg.pattern[l]],
            "kv_shared_layers": {"5": 3, "6": 4}, "n_embd_per_layer": cfg.n_pl, "sliding_window_pattern": None,
            "final_logit_softcapping": cfg.softcap, "n_rot_local": cfg.head_swa}
    for k, v in want.items():
        assert hp.get(k) == v, f"info: {k} = {hp.get(k)!r}, expected {v!r}"


def _kv_mb(pllm_bin, path) -> float:
    proc = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["bench", "-m", path, "-p", "8", "-n", "8", "-r", "1",
                                                         "--bw-mib", "0", "-t", "1", "--json"]))
    return json.loads(proc.stdout)["kv_mb"]


def test_shared_kv_layers_hold_no_cache(pllm_bin, paths, work_dir):
    """The 7-layer file's KV cache is exactly that of its first 5 layers alone (layers 5 and 6
    read layers 3 and 4's), and smaller than the same 7 layers each with its own KV."""
    base = tg.Gemma4Config("gemma4-F32")
    first5 = tm.write_with_gguf_writer(tg.build_spec(tg.Gemma4Config("g5", pattern=base.pattern[:5], n_shared=0)),
                                       work_dir / "first5.gguf")
    unshared = tm.write_with_gguf_writer(tg.build_spec(tg.Gemma4Config("g7", n_shared=0)), work_dir / "own7.gguf")
    shared_mb, first5_mb, own_mb = (_kv_mb(pllm_bin, p) for p in (paths["gemma4-F32"], first5, unshared))
    assert shared_mb == first5_mb
    assert own_mb > shared_mb * 1.3, (own_mb, shared_mb)


def test_prefix_cache_restores_the_state(pllm_bin, paths):
    """A KV snapshot through the server's prefix cache (RAM tier): the sliding layers' rings have
    not wrapped at 64 positions (48 + a batch), so their rows are in place and snapshot like a
    full layer's; the shared layers have no part of their own. The greedy reply's every top-5
    log-probability equals a server's without the cache, for the same prompt and for another
    continuation of its prefix."""
    from test_hybrid_state import check_prefix_cache_round_trip
    check_prefix_cache_round_trip(pllm_bin, paths["gemma4-F32"])


@pytest.mark.parametrize("change,needle", [
    ({"kv": "gemma4.attention.sliding_window"}, "gemma4.attention.sliding_window"),
    ({"kv": "gemma4.attention.sliding_window_pattern"}, "sliding_window_pattern"),
    ({"tensor": "per_layer_token_embd.weight"}, "per_layer_token_embd.weight"),
    ({"tensor": "blk.2.inp_gate.weight"}, "blk.2.inp_gate.weight"),
    ({"tensor": "blk.4.attn_k_norm.weight"}, "blk.4.attn_k_norm.weight"),
    ({"tensor": "blk.6.post_ffw_norm.weight"}, "blk.6.post_ffw_norm.weight"),
    ({"tensor": "rope_freqs.weight"}, "rope_freqs.weight"),
])
def test_a_file_missing_what_the_arch_needs_is_one_error(pllm_bin, work_dir, change, needle):
    path = tm.write_with_gguf_writer(tm.without(tg.build_spec(CONFIGS["gemma4-F32"]), **change), work_dir / "bad.gguf")
    proc = pllm_cli.run_cli(pllm_bin, ["logits", "-m", path, "--ids", "5 6 7", "--out", work_dir / "x.f32"])
    assert needle in pllm_cli.assert_clean_error(proc)


def test_bad_shapes_and_moe_files_are_one_error(pllm_bin, work_dir):
    """A misshapen per-layer tensor names itself; a file with experts (26B-A4B) is unsupported;
    shared layers whose source layer is of the other kind are refused, as llama.cpp's reuse map
    would read the wrong cache."""
    spec = tg.build_spec(CONFIGS["gemma4-F32"])
    spec.tensors = [tm.gb.Tensor(t.name, t.type_name, [t.dims[0], t.dims[1] - 8],
                                 t.data[: len(t.data) * (t.dims[1] - 8) // t.dims[1]])
                    if t.name == "blk.1.inp_gate.weight" else t for t in spec.tensors]
    path = tm.write_with_gguf_writer(spec, work_dir / "shape.gguf")
    proc = pllm_cli.run_cli(pllm_bin, ["logits", "-m", path, "--ids", "5 6 7", "--out", work_dir / "x.f32"])
    assert "blk.1.inp_gate.weight" in pllm_cli.assert_clean_error(proc)

    spec = tg.build_spec(CONFIGS["gemma4-F32"])
    spec.kvs.append(tm.gb.KV("gemma4.expert_count", tm.gb.U32, 8))
    path = tm.write_with_gguf_writer(spec, work_dir / "moe.gguf")
    proc = pllm_cli.run_cli(pllm_bin, ["logits", "-m", path, "--ids", "5 6 7", "--out", work_dir / "x.f32"])
    assert "mixture-of-experts" in pllm_cli.assert_clean_error(proc)

    spec = tg.build_spec(tg.Gemma4Config("swapped", pattern=(1, 1, 0, 0, 1, 1, 0)))
    path = tm.write_with_gguf_writer(spec, work_dir / "swapped.gguf")
    proc = pllm_cli.run_cli(pllm_bin, ["logits", "-m", path, "--ids", "5 6 7", "--out", work_dir / "x.f32"])
    assert "the other kind" in pllm_cli.assert_clean_error(proc)
