"""`pocketllm tokenize` vs the test-only mini BPE.

The texts are plain ASCII words separated by single spaces, with punctuation only
after words: on such text the GPT-2, "smollm" and "qwen2" pre-tokenizers all split
the same way (they differ on digit runs, tabs/newlines and punctuation directly
before letters), so the mini BPE's simple split is exact."""
from __future__ import annotations

import pytest

import pllm_cli
from mini_bpe import MiniBPE
from reference import Reference

TEXTS = [
    "hello world and the cat is in the house",
    "The theory of everything, or: is it?",
    "it is: the end... or is it?!",
]


@pytest.mark.parametrize("name", ["llama-F32", "qwen2-F32"])
def test_tiny_tokenize_matches_bpe(pllm_bin, tiny_models_paths, tiny_ref_cache, work_dir, name):
    if name not in tiny_ref_cache:
        tiny_ref_cache[name] = Reference(tiny_models_paths[name])
    ref = tiny_ref_cache[name]
    bpe = MiniBPE(ref.tokens, ref.merges, ref.token_types)
    for text in TEXTS:
        want = bpe.encode(text)
        proc = pllm_cli.check_ok(pllm_cli.run_cli(
            pllm_bin, ["tokenize", "-m", tiny_models_paths[name], "-p", text]))
        assert pllm_cli.parse_ids(proc.stdout) == want, f"text {text!r}"
        f = work_dir / "prompt.txt"
        f.write_bytes(text.encode())
        proc = pllm_cli.check_ok(pllm_cli.run_cli(
            pllm_bin, ["tokenize", "-m", tiny_models_paths[name], "-f", f]))
        assert pllm_cli.parse_ids(proc.stdout) == want, f"-f with text {text!r}"


def test_smollm2_tokenize_matches_bpe(pllm_bin, smollm2_path, smollm2_ref):
    bpe = MiniBPE(smollm2_ref.tokens, smollm2_ref.merges, smollm2_ref.token_types)
    for text in ["What is the capital of France?", "Once upon a time there was a little",
                 "Hello world! How are you doing today?"]:
        proc = pllm_cli.check_ok(pllm_cli.run_cli(
            pllm_bin, ["tokenize", "-m", smollm2_path, "-p", text]))
        assert pllm_cli.parse_ids(proc.stdout) == bpe.encode(text), f"text {text!r}"
