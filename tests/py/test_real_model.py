"""SmolLM2-135M-Instruct (Q4_1): logits vs the numpy reference in all activation
modes (default exact, `--int8-act`, `--f16-act`, `--int16-act`), the greedy "Paris" answer, greedy decoding vs
the reference, seeded sampling and the `run --json` schema."""
from __future__ import annotations

import json

import numpy as np
import pytest

import pllm_cli
import tolerances as tol
from mini_bpe import MiniBPE
from reference import compare, format_stats

SHORT_IDS = pllm_cli.SMOLLM2_SHORT_IDS
QUESTION = "What is the capital of France?"
SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def run_json(pllm_bin, model, args) -> dict:
    proc = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["run", "-m", model, "--json"] + args,
                                              timeout=120))
    out = proc.stdout.decode("utf-8")
    try:
        return json.loads(out)
    except json.JSONDecodeError as e:
        pytest.fail(f"stdout is not one JSON object ({e}):\n{out[:2000]}")


# The exact-mode bounds assume f32 everywhere, so those tests pick the f32 KV cache;
# the default f16 cache is checked on its own below.
F32_KV = ["--kv-type", "f32"]


@pytest.fixture(scope="module")
def short_ref_logits(smollm2_ref):
    return smollm2_ref.forward(SHORT_IDS, kv_dtype="f32")


@pytest.mark.parametrize("mode", tol.MODES)
@pytest.mark.parametrize("isa", pllm_cli.available_isas())
def test_logits_match_reference(pllm_bin, smollm2_path, smollm2_ref, short_ref_logits, work_dir,
                                isa, mode):
    """Exact mode: f32 rounding only (tight bound); --int8-act: W4A8 bound; --f16-act:
    bound from the fp16 rounding of activations, also against the reference that rounds
    its matmul inputs the same way."""
    got = pllm_cli.run_logits(pllm_bin, smollm2_path, SHORT_IDS, work_dir / "l.f32",
                              smollm2_ref.hp.n_vocab, env=pllm_cli.isa_env(isa),
                              int8_act=mode == tol.INT8, f16_act=mode == tol.F16,
                              int16_act=mode == tol.I16,
                              extra=F32_KV)
    max_rel, rms_rel = tol.smollm2_tol(mode, pllm_cli.fp16_arith(isa))
    min_agree = tol.ARGMAX_MIN_FRACTION["float" if mode == tol.EXACT else "quant"]
    tol.assert_logits_close(got, short_ref_logits, max_rel, rms_rel, min_agree,
                            what=f"SmolLM2 isa={isa} mode={mode}")
    if mode == tol.F16:
        tol.assert_logits_close(got, smollm2_ref.forward(SHORT_IDS, act_f16=True), max_rel,
                                rms_rel, min_agree, what=f"SmolLM2 isa={isa} mode={mode} vs act_f16")
    if mode == tol.I16:
        want = smollm2_ref.forward(SHORT_IDS, kv_dtype="f32", act_i16=True)
        tol.assert_logits_close(got, want, max_rel, rms_rel, min_agree,
                                what=f"SmolLM2 isa={isa} mode={mode} vs act_i16")


def test_f16_kv_cache_logits_match_reference(pllm_bin, smollm2_path, smollm2_ref, work_dir):
    """Default f16 KV cache vs the reference rounding its keys and values to f16 too.
    Both round the same values, but the engine's keys differ from the reference's by
    f32 rounding, which now and then flips an f16 rounding by one step (~5e-4 relative
    on one element): the engine-vs-engine bound for such flips applies."""
    want = smollm2_ref.forward(SHORT_IDS, kv_dtype="f16")
    got = pllm_cli.run_logits(pllm_bin, smollm2_path, SHORT_IDS, work_dir / "l16.f32",
                              smollm2_ref.hp.n_vocab)
    tol.assert_logits_close(got, want, tol.CONSISTENCY_MAX_REL, tol.CONSISTENCY_MAX_REL / 5,
                            tol.ARGMAX_MIN_FRACTION["float"], what="SmolLM2 f16 KV")
    # ... and it is really f16: against an f32-KV reference the error is larger than
    # the exact-mode bound allows (a fallback to f32 storage would pass that bound).
    exact = smollm2_ref.forward(SHORT_IDS, kv_dtype="f32")
    s = compare(got, exact)
    assert s["rms_rel"] > tol.SMOLLM2_EXACT_TOL[1] / 10, format_stats(s)


CHATML_NO_SYSTEM = f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n"


def default_rendered_prompt() -> str:
    return (f"<|im_start|>system\n{SMOLLM2_SYSTEM}<|im_end|>\n"
            f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n")


def stop_ids(ref) -> set[int]:
    ids = {int(ref.eos_id)} if ref.eos_id is not None else set()
    for t in ("<|im_end|>", "<|endoftext|>"):
        if t in ref.tokens:
            ids.add(ref.tokens.index(t))
    return ids


def test_greedy_answer_is_paris(pllm_bin, smollm2_path):
    """The spec: the greedy chat answer to 'What is the capital of France?' with the
    model's DEFAULT chat template (SmolLM2's default system prompt) contains
    "Paris". In exact mode the engine follows the reference's greedy path
    ("The capital of France is Paris."), whose closest call is the first token
    ("The" 25.33 vs "L" 25.24, margin 0.08 logits, ~1000x the engine's measured
    logit error; see test_greedy_default_template_follows_reference)."""
    obj = run_json(pllm_bin, smollm2_path, ["-p", QUESTION, "--temp", "0", "-n", "32"])
    print(f"engine greedy (default template): {obj['text']!r}")
    assert "Paris" in obj["text"], f"greedy answer: {obj['text']!r}"


@pytest.mark.parametrize("mode", tol.MODES)
def test_greedy_chatml_raw_answer_is_paris(pllm_bin, smollm2_path, mode):
    """Greedy answer to the ChatML prompt without a system turn (--raw). Along the
    reference's greedy path ("The capital of France is Paris.") every top-1/top-2
    margin is >= 1.6 logits, well above even the int8-activation noise (rms ~0.4
    logits), so the answer is robust in every mode."""
    obj = run_json(pllm_bin, smollm2_path, ["--raw", "-p", CHATML_NO_SYSTEM, "-n", "32",
                                            "--temp", "0", "-t", "2"] + tol.mode_args(mode))
    assert "Paris" in obj["text"], f"greedy answer ({mode}): {obj['text']!r}"


def test_greedy_default_template_follows_reference(pllm_bin, smollm2_path, smollm2_ref):
    """Exact mode, default chat template: the engine's greedy tokens must EQUAL the
    reference's greedy tokens for as long as the reference's top-1/top-2 margin
    exceeds 2 * max_rel * rms(ref logits) with the exact-mode SmolLM2 bound (no
    allowed error can flip such a choice), including stopping where the reference
    would emit an end-of-turn token. Past the first closer call either choice is
    legitimate and the comparison ends. Along the current path the closest call
    is the first token (margin 0.08 vs a threshold of ~0.015), so the whole answer
    is checked."""
    bpe = MiniBPE(smollm2_ref.tokens, smollm2_ref.merges, smollm2_ref.token_types)
    n_predict = 32
    obj = run_json(pllm_bin, smollm2_path, ["-p", QUESTION, "-n", str(n_predict), "--temp", "0",
                                            "-t", "2"] + F32_KV)
    gen = obj["tokens"]
    if not isinstance(gen, list):
        pytest.skip("run --json does not report the generated ids")
    print(f"engine greedy (default template): {obj['text']!r}")
    prompt = bpe.encode(default_rendered_prompt())
    # Teacher-forced on the engine's tokens: while they agree, row i is exactly the
    # reference's greedy step i.
    logits = smollm2_ref.forward(prompt + gen, kv_dtype="f32")
    rms = float((logits ** 2).mean() ** 0.5)
    threshold = 2 * tol.SMOLLM2_EXACT_TOL[0] * rms
    stops = stop_ids(smollm2_ref)
    checked = 0
    for i in range(len(gen) + 1):
        if i == len(gen) and (len(gen) >= n_predict or (gen and gen[-1] in stops)):
            break  # stopped by -n, or the reported last token is the stop token
        row = logits[len(prompt) + i - 1]
        top2 = np.sort(row)[-2:]
        margin = float(top2[1] - top2[0])
        want = int(row.argmax())
        if margin <= threshold:
            print(f"step {i}: reference margin {margin:.4f} <= {threshold:.4f}; "
                  f"comparison ends here")
            break
        so_far = bpe.decode(gen[:i])
        if i < len(gen):
            assert gen[i] == want, (
                f"greedy step {i}: engine chose {bpe.decode([gen[i]])!r}, reference "
                f"{bpe.decode([want])!r} with margin {margin:.3f} > {threshold:.3f} logits. "
                f"text so far: {so_far!r}")
        else:
            assert want in stops, (
                f"engine stopped after {len(gen)} tokens but the reference continues with "
                f"{bpe.decode([want])!r} (margin {margin:.3f} > {threshold:.3f}). "
                f"text: {so_far!r}")
        checked += 1
    print(f"{checked} greedy steps matched the reference exactly (threshold {threshold:.4f})")
    assert checked >= 1, "the reference's first choice is a near-tie; nothing was checked"


def test_greedy_default_template_follows_reference_int8_act(pllm_bin, smollm2_path,
                                                            smollm2_ref):
    """--int8-act, default chat template (SmolLM2's default system prompt).

    Here the reference's first token is a near-tie ("The" 25.33 vs "L" 25.24), far
    inside the int8-activation noise, so the engine may legitimately start with
    either and "Paris" is not guaranteed. Instead every generated token must be a
    reference argmax up to that noise, given the engine's own prefix: its reference
    logit within 3*sqrt(2)*rms_rel_bound*rms(ref logits) of the top (a logit
    difference whose two errors each stay within the SmolLM2 int8 rms bound, at 3
    sigma). A broken decode path (positions, KV cache) produces tokens many logits off."""
    bpe = MiniBPE(smollm2_ref.tokens, smollm2_ref.merges, smollm2_ref.token_types)
    obj = run_json(pllm_bin, smollm2_path, ["-p", QUESTION, "-n", "32", "--temp", "0",
                                            "-t", "2", "--int8-act"])
    gen = obj["tokens"]
    if not isinstance(gen, list):
        pytest.skip("run --json does not report the generated ids")
    print(f"engine greedy (default template, --int8-act): {obj['text']!r}")
    prompt = bpe.encode(default_rendered_prompt())
    logits = smollm2_ref.forward(prompt + gen)
    rms = float((logits ** 2).mean() ** 0.5)
    bound = 3 * 2 ** 0.5 * tol.SMOLLM2_TOL[1] * rms
    for i, t in enumerate(gen):
        row = logits[len(prompt) + i - 1]
        gap = float(row.max() - row[t])
        assert gap <= bound, (f"generated token {i} ({bpe.decode([t])!r}) is {gap:.2f} logits "
                              f"below the reference's top ({bpe.decode([int(row.argmax())])!r}); "
                              f"allowed {bound:.2f}. text so far: {bpe.decode(gen[:i + 1])!r}")


def test_prompt_tokens_follow_chat_template(pllm_bin, smollm2_path, smollm2_ref):
    """The default chat template (with SmolLM2's default system prompt) is applied."""
    bpe = MiniBPE(smollm2_ref.tokens, smollm2_ref.merges, smollm2_ref.token_types)
    rendered = default_rendered_prompt()
    obj = run_json(pllm_bin, smollm2_path, ["-p", QUESTION, "-n", "1", "--temp", "0"])
    assert obj["prompt_tokens"] == len(bpe.encode(rendered)), \
        f"prompt_tokens {obj['prompt_tokens']} != {len(bpe.encode(rendered))} for {rendered!r}"


def test_json_schema(pllm_bin, smollm2_path):
    obj = run_json(pllm_bin, smollm2_path, ["-p", QUESTION, "-n", "8", "--temp", "0"])
    assert isinstance(obj, dict)
    for key in ("text", "tokens", "prompt_tokens", "ttft_ms", "prefill_tps", "decode_tps"):
        assert key in obj, f"missing {key!r}: {obj}"
    assert isinstance(obj["text"], str)
    # "tokens": generated token count, or the generated ids
    if isinstance(obj["tokens"], list):
        assert all(isinstance(t, int) and not isinstance(t, bool) for t in obj["tokens"])
        assert 1 <= len(obj["tokens"]) <= 8
    else:
        assert isinstance(obj["tokens"], int) and not isinstance(obj["tokens"], bool)
        assert 1 <= obj["tokens"] <= 8
    assert isinstance(obj["prompt_tokens"], int) and obj["prompt_tokens"] > 0
    for key in ("ttft_ms", "prefill_tps", "decode_tps"):
        v = obj[key]
        assert isinstance(v, (int, float)) and not isinstance(v, bool), f"{key}={v!r}"
        assert v >= 0, f"{key}={v!r}"
    assert obj["ttft_ms"] > 0 and obj["prefill_tps"] > 0


def test_seed_reproducible(pllm_bin, smollm2_path):
    args = ["-p", "Write a short poem about the sea.", "-n", "24", "--temp", "0.8",
            "--seed", "1234"]
    a = run_json(pllm_bin, smollm2_path, args)
    b = run_json(pllm_bin, smollm2_path, args)
    assert a["text"] == b["text"] and a["tokens"] == b["tokens"], (a["text"], b["text"])


def test_seed_changes_sample(pllm_bin, smollm2_path):
    """Guards against --seed being ignored or temp>0 silently falling back to greedy."""
    texts = set()
    for seed in ("1", "2", "3"):
        obj = run_json(pllm_bin, smollm2_path, ["-p", "Write a short poem about the sea.",
                                                "-n", "24", "--temp", "0.8", "--seed", seed])
        texts.add(obj["text"])
    assert len(texts) > 1, f"seeds 1, 2, 3 all gave {texts}"
