"""End-to-end logits of every tiny model (arch x weight type, plus variants) vs the
numpy reference, at every kernel dispatch level, in every activation mode
(default exact f32 activations, `--int8-act`, `--f16-act`, `--int16-act`). Tolerances: see
tolerances.py."""
from __future__ import annotations

import json

import numpy as np
import pytest

import pllm_cli
import tiny_models as tm
import tolerances as tol
from reference import Reference, compare, format_stats

CONFIGS = tm.model_configs()
ISAS = pllm_cli.available_isas()
N_IDS = 16


def _ref(cache: dict, paths: dict, name: str) -> Reference:
    if name not in cache:
        cache[name] = Reference(paths[name])
    return cache[name]


def _logits(pllm_bin, tiny_models_paths, name, ids, out, n_vocab, mode, **kw):
    return pllm_cli.run_logits(pllm_bin, tiny_models_paths[name], ids, out, n_vocab,
                               int8_act=mode == tol.INT8, f16_act=mode == tol.F16,
                               int16_act=mode == tol.I16, **kw)


def _check_vs_reference(pllm_bin, tiny_models_paths, tiny_ref_cache, work_dir, name, isa,
                        mode):
    cfg = CONFIGS[name]
    ref = _ref(tiny_ref_cache, tiny_models_paths, name)
    ids = tm.sample_ids(cfg, N_IDS)
    want = ref.forward(ids)
    got = _logits(pllm_bin, tiny_models_paths, name, ids, work_dir / "logits.f32",
                  ref.hp.n_vocab, mode, env=pllm_cli.isa_env(isa))
    max_rel, rms_rel = tol.tol_for(cfg.wtype, mode, pllm_cli.fp16_arith(isa))
    tol.assert_logits_close(got, want, max_rel, rms_rel,
                            tol.argmax_min_fraction(cfg.wtype, mode),
                            what=f"{name} isa={isa} mode={mode}")
    if mode == tol.F16:
        # also against the reference with its matmul inputs rounded to fp16 the same
        # way: the same bound (see tolerances.py on why it is not much closer)
        tol.assert_logits_close(got, ref.forward(ids, act_f16=True), max_rel, rms_rel,
                                tol.argmax_min_fraction(cfg.wtype, mode),
                                what=f"{name} isa={isa} mode={mode} vs act_f16 reference")
    if mode == tol.I16:
        tol.assert_logits_close(got, ref.forward(ids, act_i16=True), max_rel, rms_rel,
                                tol.argmax_min_fraction(cfg.wtype, mode),
                                what=f"{name} isa={isa} mode={mode} vs act_i16 reference")


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", list(CONFIGS))
def test_logits_match_reference(pllm_bin, tiny_models_paths, tiny_ref_cache, work_dir,
                                name, isa):
    """Default (exact) mode: quantised weights are dequantised to f32 and dotted
    with f32 activations, so every weight type meets the float tolerance."""
    _check_vs_reference(pllm_bin, tiny_models_paths, tiny_ref_cache, work_dir, name, isa,
                        tol.EXACT)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", list(CONFIGS))
def test_logits_match_reference_int8_act(pllm_bin, tiny_models_paths, tiny_ref_cache,
                                         work_dir, name, isa):
    """`logits --int8-act`: W8A8/W4A8 for block-quantised weights (per-type int8
    bounds); float weights keep f32 activations and the float bound."""
    _check_vs_reference(pllm_bin, tiny_models_paths, tiny_ref_cache, work_dir, name, isa,
                        tol.INT8)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", list(CONFIGS))
def test_logits_match_reference_f16_act(pllm_bin, tiny_models_paths, tiny_ref_cache,
                                        work_dir, name, isa):
    """`logits --f16-act`: W4A16 for Q4_0/Q4_1/Q8_0 (bound derived from the fp16
    rounding of activations); every other type is exact mode."""
    _check_vs_reference(pllm_bin, tiny_models_paths, tiny_ref_cache, work_dir, name, isa,
                        tol.F16)


@pytest.mark.parametrize("name", ["llama-F32", "qwen2-BF16", "qwen2-F16", "llama-Q4_K",
                                  "qwen2-Q6_K", "llama-Q4_0", "qwen2-Q4_1", "llama-Q8_0"])
def test_f16_act_flag_effect(pllm_bin, tiny_models_paths, tiny_ref_cache, work_dir, name):
    """--f16-act leaves models without W4A16 kernels (float, K-quants) bit-identical
    to exact mode and really switches Q4_0/Q4_1/Q8_0 ones (their logits then move by
    the fp16 rounding of activations: measured max_rel >= 1e-3, far above exact
    mode's f32 noise of ~1e-6)."""
    cfg = CONFIGS[name]
    ref = _ref(tiny_ref_cache, tiny_models_paths, name)
    ids = tm.sample_ids(cfg, N_IDS)
    exact = pllm_cli.run_logits(pllm_bin, tiny_models_paths[name], ids, work_dir / "e.f32",
                                ref.hp.n_vocab)
    f16 = pllm_cli.run_logits(pllm_bin, tiny_models_paths[name], ids, work_dir / "h.f32",
                              ref.hp.n_vocab, f16_act=True)
    if cfg.wtype not in tol.F16_ACT_TYPES:
        assert np.array_equal(exact, f16), \
            f"{name}: --f16-act changed logits of a type without W4A16 kernels: " \
            f"{format_stats(compare(f16, exact))}"
    else:
        s = compare(f16, exact)
        assert s["max_rel"] > 1e-4, f"{name}: --f16-act seems to be ignored: {format_stats(s)}"


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", list(CONFIGS))
def test_logits_match_reference_int16_act(pllm_bin, tiny_models_paths, tiny_ref_cache,
                                          work_dir, name, isa):
    """`logits --int16-act`: int16 activations for every block-quantised type (the
    exact-mode bound holds, see tolerances.py); float weights keep f32 activations."""
    _check_vs_reference(pllm_bin, tiny_models_paths, tiny_ref_cache, work_dir, name, isa,
                        tol.I16)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", ["llama-F32", "qwen2-BF16", "llama-Q4_0", "qwen2-Q4_1",
                                  "llama-Q8_0", "gemma3-Q5_0", "gemma3-Q5_1", "llama-Q4_K",
                                  "qwen2-Q6_K"])
def test_int16_act_flag_effect(pllm_bin, tiny_models_paths, tiny_ref_cache, work_dir, name, isa):
    """--int16-act leaves float-weight models bit-identical to exact mode and really
    switches every quantised type on every ISA (a type without its tile would silently
    run exact): their decode logits (one id per step) move by the int16 rounding, max_rel
    4.7e-4..9.5e-4 in the reference, far above exact mode's f32 noise of ~1e-6. A prompt (all ids in one
    step) runs the int16 GEMM where the level has one (pllm_cli.int16_prompts): bit-identical to
    the ids fed one per step; elsewhere exact: bit-identical to --exact."""
    cfg = CONFIGS[name]
    ref = _ref(tiny_ref_cache, tiny_models_paths, name)
    ids = tm.sample_ids(cfg, N_IDS)
    env = pllm_cli.isa_env(isa)
    exact = pllm_cli.run_logits(pllm_bin, tiny_models_paths[name], ids, work_dir / "e.f32",
                                ref.hp.n_vocab, env=env, chunk=1)
    i16 = pllm_cli.run_logits(pllm_bin, tiny_models_paths[name], ids, work_dir / "q.f32",
                              ref.hp.n_vocab, env=env, int16_act=True)
    if cfg.wtype in tol.FLOAT_TYPES:
        assert np.array_equal(exact, i16), \
            f"{name}: --int16-act changed float-weight logits: {format_stats(compare(i16, exact))}"
    else:
        s = compare(i16, exact)
        assert s["max_rel"] > 1e-4, f"{name} isa={isa}: --int16-act seems to be ignored: {format_stats(s)}"
    prompt = pllm_cli.run_logits(pllm_bin, tiny_models_paths[name], ids, work_dir / "p.f32",
                                 ref.hp.n_vocab, env=env, int16_act=True, chunk=0)
    if pllm_cli.int16_prompts(isa) and cfg.wtype not in tol.FLOAT_TYPES:
        assert np.array_equal(i16, prompt), \
            f"{name} isa={isa}: an int16-mode prompt differs from its ids one per step: {format_stats(compare(prompt, i16))}"
        return
    exact = pllm_cli.run_logits(pllm_bin, tiny_models_paths[name], ids, work_dir / "e.f32",
                                ref.hp.n_vocab, env=env)
    assert np.array_equal(exact, prompt), \
        f"{name} isa={isa}: an int16-mode prompt is not the exact path: {format_stats(compare(prompt, exact))}"


@pytest.mark.parametrize("name", ["llama-F32", "qwen2-BF16", "qwen2-F16",
                                  "llama-Q4_1", "qwen2-Q8_0", "llama-Q6_K"])
def test_int8_act_flag_effect(pllm_bin, tiny_models_paths, tiny_ref_cache, work_dir, name):
    """--int8-act leaves float-weight models bit-identical and really switches
    quantised ones to int8 activations (their logits then move by far more than
    the exact-mode bound: int8 rounding gives max_rel >= 0.045 on these models)."""
    cfg = CONFIGS[name]
    ref = _ref(tiny_ref_cache, tiny_models_paths, name)
    ids = tm.sample_ids(cfg, N_IDS)
    exact = pllm_cli.run_logits(pllm_bin, tiny_models_paths[name], ids, work_dir / "e.f32",
                                ref.hp.n_vocab)
    int8 = pllm_cli.run_logits(pllm_bin, tiny_models_paths[name], ids, work_dir / "i.f32",
                               ref.hp.n_vocab, int8_act=True)
    if cfg.wtype in tol.FLOAT_TYPES:
        assert np.array_equal(exact, int8), \
            f"{name}: --int8-act changed float-weight logits: {format_stats(compare(int8, exact))}"
    else:
        s = compare(int8, exact)
        assert s["max_rel"] > tol.FLOAT_TOL[0], \
            f"{name}: --int8-act seems to be ignored: {format_stats(s)}"


CONSISTENCY_MODELS = ["llama-F32", "qwen2-Q4_K", "llama-Q8_0", "qwen2-Q4_1", "gemma3-Q5_0"]


@pytest.mark.parametrize("mode", tol.MODES)
@pytest.mark.parametrize("name", CONSISTENCY_MODELS)
def test_thread_count_does_not_change_logits(pllm_bin, tiny_models_paths, tiny_ref_cache,
                                             work_dir, name, mode):
    ref = _ref(tiny_ref_cache, tiny_models_paths, name)
    ids = tm.sample_ids(CONFIGS[name], N_IDS)
    n_vocab = ref.hp.n_vocab
    one = _logits(pllm_bin, tiny_models_paths, name, ids, work_dir / "t1.f32", n_vocab, mode,
                  threads=1)
    two = _logits(pllm_bin, tiny_models_paths, name, ids, work_dir / "t2.f32", n_vocab, mode,
                  threads=2)
    three = _logits(pllm_bin, tiny_models_paths, name, ids, work_dir / "t3.f32", n_vocab, mode,
                    threads=3)
    for other, t in ((two, 2), (three, 3)):
        tol.assert_logits_close(other, one, tol.CONSISTENCY_MAX_REL, tol.CONSISTENCY_MAX_REL,
                                1.0, what=f"{name} mode={mode} -t {t} vs -t 1")


@pytest.mark.parametrize("mode", tol.MODES)
@pytest.mark.parametrize("name", CONSISTENCY_MODELS)
def test_prefix_logits_are_causal(pllm_bin, tiny_models_paths, tiny_ref_cache, work_dir, name,
                                  mode):
    """Logits of ids[:k] equal the first k rows for the full ids (causal mask, no
    dependence on batch size), down to a single token."""
    ref = _ref(tiny_ref_cache, tiny_models_paths, name)
    ids = tm.sample_ids(CONFIGS[name], N_IDS)
    full = _logits(pllm_bin, tiny_models_paths, name, ids, work_dir / "full.f32",
                   ref.hp.n_vocab, mode)
    for k in (1, 5):
        part = _logits(pllm_bin, tiny_models_paths, name, ids[:k], work_dir / f"p{k}.f32",
                       ref.hp.n_vocab, mode)
        tol.assert_logits_close(part, full[:k], tol.CONSISTENCY_MAX_REL,
                                tol.CONSISTENCY_MAX_REL, 1.0,
                                what=f"{name} mode={mode} prefix {k}")


@pytest.mark.parametrize("name", ["llama-Q4_K", "qwen2-F16", "llama-ropefreqs-Q8_0"])
def test_run_json_smoke(pllm_bin, tiny_models_paths, name):
    """Greedy generation on a random-weight model: arbitrary bytes come out, the JSON
    must still be valid and complete."""
    proc = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, [
        "run", "-m", tiny_models_paths[name], "-p", "hello world", "--temp", "0", "-n", "8",
        "--json", "-t", "2"]))
    obj = json.loads(proc.stdout.decode("utf-8"))
    for key in ("text", "tokens", "prompt_tokens", "ttft_ms", "prefill_tps", "decode_tps"):
        assert key in obj, f"missing {key!r} in {obj}"
    assert isinstance(obj["text"], str)


@pytest.mark.parametrize("name", ["llama-F32", "qwen2-Q6_K", "llama-untied-Q8_0", "gemma3-swa2-F32"])
def test_info_json(pllm_bin, tiny_models_paths, name):
    proc = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["info", "-m", tiny_models_paths[name],
                                                         "--json"]))
    obj = json.loads(proc.stdout.decode("utf-8"))
    assert isinstance(obj, dict) and obj, "info --json should print a JSON object"
    cfg = CONFIGS[name]
    if cfg.gemma:
        hp = obj["hparams"]
        assert obj["supported_architecture"] is True
        assert (hp["head_dim"], hp["sliding_window"], hp["sliding_window_pattern"]) == \
            (cfg.dims.head_dim, cfg.sliding_window, cfg.swa_pattern or 6)
        assert hp["rope_order"] == "neox" and hp["rope_freq_base_local"] == 10000.0
    text = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["info", "-m", tiny_models_paths[name]]))
    assert text.stdout.strip(), "info should print something"


def test_logits_rows_are_not_all_equal(pllm_bin, tiny_models_paths, tiny_ref_cache, work_dir):
    """Guard against a degenerate pass (e.g. every position returning the last row)."""
    name = "llama-F32"
    ref = _ref(tiny_ref_cache, tiny_models_paths, name)
    ids = tm.sample_ids(CONFIGS[name], N_IDS)
    got = pllm_cli.run_logits(pllm_bin, tiny_models_paths[name], ids, work_dir / "l.f32",
                              ref.hp.n_vocab)
    assert np.std(got, axis=0).mean() > 0.1 * np.std(got)


# --- Gemma 3: the sliding window on the decode path, and the chat layout ---------------

GEMMA_WINDOW_MODELS = ["gemma3-F32", "gemma3-mix-Q5_0", "gemma3-swa2-F32"]


@pytest.mark.parametrize("chunk", [1, 5])
@pytest.mark.parametrize("name", GEMMA_WINDOW_MODELS)
def test_gemma3_chunked_logits_match_reference(pllm_bin, tiny_models_paths, tiny_ref_cache,
                                               work_dir, name, chunk):
    """24 positions = 3 sliding windows of 8, appended one token (the decode path: the
    window slides over the KV cache) or 5 tokens at a time; exact-mode bound."""
    cfg = CONFIGS[name]
    ref = _ref(tiny_ref_cache, tiny_models_paths, name)
    ids = tm.sample_ids(cfg, 24, seed=3)
    want = ref.forward(ids)
    got = pllm_cli.run_logits(pllm_bin, tiny_models_paths[name], ids, work_dir / "c.f32",
                              ref.hp.n_vocab, chunk=chunk)
    max_rel, rms_rel = tol.tol_for(cfg.wtype, tol.EXACT)
    tol.assert_logits_close(got, want, max_rel, rms_rel, tol.argmax_min_fraction(cfg.wtype),
                            what=f"{name} chunk={chunk}")


def test_gemma3_chat_layout_without_template(pllm_bin, tiny_models_paths, tiny_ref_cache):
    """No tokenizer.chat_template in the file: arch gemma3 selects the gemma layout
    (system text opening the first user turn), and the prompt is tokenised with the turn
    markers as special tokens."""
    from mini_bpe import MiniBPE
    name = "gemma3-F32"
    ref = _ref(tiny_ref_cache, tiny_models_paths, name)
    bpe = MiniBPE(ref.tokens, ref.merges, ref.token_types)
    for args, rendered in [
        (["-p", "hello world"],
         "<start_of_turn>user\nhello world<end_of_turn>\n<start_of_turn>model\n"),
        (["--system", "the cat", "-p", "hello world"],
         "<start_of_turn>user\nthe cat\n\nhello world<end_of_turn>\n<start_of_turn>model\n"),
    ]:
        proc = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["run", "-m", tiny_models_paths[name],
                                                             "--temp", "0", "-n", "1", "--json"]
                                                  + args))
        obj = json.loads(proc.stdout.decode("utf-8"))
        want = bpe.encode(rendered)
        assert ref.tokens.index("<start_of_turn>") in want
        assert obj["prompt_tokens"] == len(want), f"{args}: expected {rendered!r}"
