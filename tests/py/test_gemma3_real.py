"""Gemma 3 270M (gemma-3-270m-Q4_K_M.gguf, the pretrained base model): tokenizer vs a
test-only SentencePiece-BPE encoder, logits vs the numpy reference in both activation
modes, greedy decoding vs the reference, the "Paris" answer, the chat layout without a
template, and `info`. Skipped with a message when the file is absent."""
from __future__ import annotations

import json

import numpy as np
import pytest

import pllm_cli
import tolerances as tol
from mini_spm import MiniSPM

# "<bos>The capital of France is" (checked against the tokenizer below).
SHORT_IDS = [2, 818, 5279, 529, 7001, 563]
QA_PROMPT = "Question: What is the capital of France?\nAnswer:"


@pytest.fixture(scope="module")
def spm(gemma3_ref) -> MiniSPM:
    r = gemma3_ref
    return MiniSPM(r.tokens, r.scores, r.token_types, add_space_prefix=r.add_space_prefix)


def tokenize(pllm_bin, model, text: str, *special: str) -> list[int]:
    proc = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["tokenize", "-m", model, "-p", text, *special]))
    return pllm_cli.parse_ids(proc.stdout)


def run_json(pllm_bin, model, args) -> dict:
    proc = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["run", "-m", model, "--json"] + args,
                                              timeout=120))
    return json.loads(proc.stdout.decode("utf-8"))


TOKENIZER_TEXTS = [
    "The capital of France is",
    "Hello world! How are you doing today?",
    "  two leading spaces,\ttabs\t\tand\n\nblank lines\n",
    "naïve café, Grüße, 東京タワー, emoji 🚀🦙 and a rare ǂ",
    "<table><tr><td>cell</td></tr></table> [multimodal] <b>bold</b>",
    "code:\n    if (x) {\n        return y;\n    }",
]


def test_tokenizer_matches_mini_spm(pllm_bin, gemma3_path, gemma3_ref, spm):
    """add_space_prefix false, user-defined tokens ("\\n\\n", runs of spaces and tabs, HTML
    tags) split out even without parse_special, byte fallback for pieces the vocabulary
    lacks; BOS added by --add-special."""
    assert gemma3_ref.add_space_prefix is False
    bos = int(gemma3_ref.bos_id)
    for text in TOKENIZER_TEXTS:
        want = spm.encode(text)
        assert tokenize(pllm_bin, gemma3_path, text) == want, f"text {text!r}"
        assert tokenize(pllm_bin, gemma3_path, text, "--add-special") == [bos] + want
    assert spm.encode("The capital of France is", bos=bos) == SHORT_IDS
    # byte fallback really happens in these texts (<0xXX> tokens are type 6)
    ids = spm.encode(TOKENIZER_TEXTS[3])
    print("byte tokens:", [gemma3_ref.tokens[i] for i in ids if gemma3_ref.token_types[i] == 6])


def test_tokenizer_turn_markers(pllm_bin, gemma3_path, gemma3_ref, spm):
    text = "<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n"
    sot, eot = gemma3_ref.tokens.index("<start_of_turn>"), gemma3_ref.tokens.index("<end_of_turn>")
    want = spm.encode(text, parse_special=True)
    assert want[0] == sot and eot in want
    assert tokenize(pllm_bin, gemma3_path, text, "--parse-special") == want
    # without parse_special the control tokens are plain text
    plain = tokenize(pllm_bin, gemma3_path, text)
    assert sot not in plain and eot not in plain and plain == spm.encode(text)


@pytest.fixture(scope="module")
def short_ref_logits(gemma3_ref):
    return gemma3_ref.forward(SHORT_IDS, kv_dtype="f32")


# The exact-mode bounds assume f32 everywhere: these comparisons use the f32 KV cache.
F32_KV = ["--kv-type", "f32"]


@pytest.mark.parametrize("mode", tol.MODES)
@pytest.mark.parametrize("isa", pllm_cli.available_isas())
def test_logits_match_reference(pllm_bin, gemma3_path, gemma3_ref, short_ref_logits, work_dir,
                                isa, mode):
    got = pllm_cli.run_logits(pllm_bin, gemma3_path, SHORT_IDS, work_dir / "l.f32",
                              gemma3_ref.hp.n_vocab, env=pllm_cli.isa_env(isa),
                              int8_act=mode == tol.INT8, int16_act=mode == tol.I16, extra=F32_KV)
    max_rel, rms_rel = {tol.EXACT: tol.GEMMA3_EXACT_TOL, tol.I16: tol.GEMMA3_I16_TOL}.get(mode, tol.GEMMA3_TOL)
    min_agree = tol.ARGMAX_MIN_FRACTION["float" if mode in (tol.EXACT, tol.I16) else "quant"]
    tol.assert_logits_close(got, short_ref_logits, max_rel, rms_rel, min_agree,
                            what=f"Gemma3 isa={isa} mode={mode}")


def _check_greedy_follows_reference(gen, prompt, ref, n_predict, stops) -> int:
    """Teacher-forced on the engine's tokens: every step whose reference top-1/top-2
    margin exceeds 2 * max_rel * rms (exact-mode bound) must be the reference's choice;
    the comparison ends at the first closer call. Returns the steps checked."""
    logits = ref.forward(prompt + gen, kv_dtype="f32")
    rms = float((logits ** 2).mean() ** 0.5)
    threshold = 2 * tol.GEMMA3_EXACT_TOL[0] * rms
    checked = 0
    for i in range(len(gen) + 1):
        if i == len(gen) and (len(gen) >= n_predict or (gen and gen[-1] in stops)):
            break
        row = logits[len(prompt) + i - 1]
        top2 = np.sort(row)[-2:]
        if float(top2[1] - top2[0]) <= threshold:
            print(f"step {i}: reference margin {top2[1] - top2[0]:.4f} <= {threshold:.4f}; stop")
            break
        want = int(row.argmax())
        if i < len(gen):
            assert gen[i] == want, f"greedy step {i}: engine {gen[i]}, reference {want}"
        else:
            assert want in stops, f"engine stopped after {len(gen)} tokens, reference goes on"
        checked += 1
    return checked


def test_greedy_answer_is_paris(pllm_bin, gemma3_path, gemma3_ref):
    """The base model completes a Q/A prompt (raw, no template) with " Paris" (reference
    margin 1.3 logits at that step), and every greedy step follows the reference."""
    obj = run_json(pllm_bin, gemma3_path, ["--raw", "-p", QA_PROMPT, "--temp", "0", "-n", "16",
                                           "-t", "2"] + F32_KV)
    print(f"engine greedy: {obj['text']!r}")
    assert obj["text"].startswith(" Paris"), obj["text"]
    prompt = tokenize(pllm_bin, gemma3_path, QA_PROMPT, "--add-special")
    checked = _check_greedy_follows_reference(obj["tokens"], prompt, gemma3_ref, 16, set())
    assert checked >= 8


def test_greedy_continuation_follows_reference(pllm_bin, gemma3_path, gemma3_ref):
    obj = run_json(pllm_bin, gemma3_path, ["--raw", "-p", "The capital of France is", "--temp", "0",
                                           "-n", "12", "-t", "2"] + F32_KV)
    print(f"engine greedy: {obj['text']!r}")
    checked = _check_greedy_follows_reference(obj["tokens"], SHORT_IDS, gemma3_ref, 12, set())
    assert checked >= 4


def test_chat_uses_gemma_layout(pllm_bin, gemma3_path, gemma3_ref, spm):
    """No chat template in the file: the gemma turn layout, BOS first; generation stops at
    <end_of_turn> (an end-of-generation token) or -n. The base model's chat answers are
    not meaningful, so only the prompt and the run are checked."""
    q = "What is the capital of France?"
    obj = run_json(pllm_bin, gemma3_path, ["-p", q, "--temp", "0", "-n", "24", "-t", "2"])
    print(f"engine greedy chat answer (base model): {obj['text']!r}")
    rendered = f"<start_of_turn>user\n{q}<end_of_turn>\n<start_of_turn>model\n"
    want = spm.encode(rendered, bos=int(gemma3_ref.bos_id), parse_special=True)
    assert obj["prompt_tokens"] == len(want)
    assert "<end_of_turn>" not in obj["text"]


def test_info(pllm_bin, gemma3_path):
    obj = json.loads(pllm_cli.check_ok(pllm_cli.run_cli(
        pllm_bin, ["info", "-m", gemma3_path, "--json"])).stdout.decode("utf-8"))
    hp = obj["hparams"]
    assert obj["architecture"] == "gemma3" and obj["supported_architecture"] is True
    assert (hp["n_layer"], hp["n_embd"], hp["head_dim"], hp["n_head"], hp["n_head_kv"]) == (18, 640, 256, 4, 1)
    assert (hp["sliding_window"], hp["sliding_window_pattern"]) == (512, 6)
    assert all(t["supported"] for t in obj["tensors"])
