"""One word per activation mode on every surface: `--act int16|exact|int8|f16|static` on the CLI
commands and `serve`, the older flags (--int8-act, --f16-act, --static-act, --int16-act, --exact)
kept as aliases that give the same logits bit for bit, and one clear error for a bad word or two
flags that disagree."""
from __future__ import annotations

import numpy as np
import pytest

import pllm_cli
from pllm_cli import SMOLLM2_SHORT_IDS, assert_clean_error, check_ok, run_cli

OLDER = {"int8": "--int8-act", "f16": "--f16-act", "int16": "--int16-act", "exact": "--exact"}


def logits(binary, model, out, flags):
    check_ok(run_cli(binary, ["logits", "-m", model, "--ids", " ".join(map(str, SMOLLM2_SHORT_IDS)),
                              "--out", out, "-t", "2", "--chunk", "4"] + flags))
    return np.fromfile(out, dtype="<f4")


@pytest.mark.parametrize("word", list(OLDER))
def test_act_word_equals_the_older_flag(pllm_bin, smollm2_path, tmp_path, word):
    by_word = logits(pllm_bin, smollm2_path, tmp_path / "a.f32", ["--act", word])
    by_flag = logits(pllm_bin, smollm2_path, tmp_path / "b.f32", [OLDER[word]])
    assert by_word.size == len(SMOLLM2_SHORT_IDS) * 49152
    assert np.array_equal(by_word.view(np.uint32), by_flag.view(np.uint32)), f"--act {word} != {OLDER[word]}"
    both = logits(pllm_bin, smollm2_path, tmp_path / "c.f32", ["--act", word, OLDER[word]])
    assert np.array_equal(both.view(np.uint32), by_word.view(np.uint32))


def test_default_is_int16_and_modes_differ(pllm_bin, smollm2_path, tmp_path):
    default = logits(pllm_bin, smollm2_path, tmp_path / "d.f32", [])
    int16 = logits(pllm_bin, smollm2_path, tmp_path / "i.f32", ["--act", "int16"])
    exact = logits(pllm_bin, smollm2_path, tmp_path / "e.f32", ["--act", "exact"])
    assert np.array_equal(default.view(np.uint32), int16.view(np.uint32))
    assert not np.array_equal(int16, exact), "the word changed nothing: the other checks would prove nothing"


@pytest.mark.parametrize("flags,needle", [
    (["--act", "int4"], "int16|exact|int8|f16|static"),
    (["--act", "f32"], "unknown activation mode"),
    (["--act", "int8", "--exact"], "different activation modes"),
    (["--act", "exact", "--f16-act"], "different activation modes"),
    (["--int8-act", "--f16-act"], "different activation modes"),
    (["--act", "static"], "calibrated scales"),
])
def test_bad_act_is_one_clear_error(pllm_bin, smollm2_path, tmp_path, flags, needle):
    proc = run_cli(pllm_bin, ["logits", "-m", smollm2_path, "--ids", "1 2", "--out", tmp_path / "o.f32"] + flags)
    assert needle in assert_clean_error(proc)


def test_static_with_int8_is_static(pllm_bin, smollm2_path, tmp_path):
    """--static-act implies int8, so naming both is not a contradiction (the file has no scales,
    so the static mode's own error is what must come back)."""
    proc = run_cli(pllm_bin, ["logits", "-m", smollm2_path, "--ids", "1 2", "--out", tmp_path / "o.f32",
                              "--int8-act", "--static-act"])
    assert "calibrated scales" in assert_clean_error(proc)


def test_serve_knows_every_word(pllm_bin):
    help_text = check_ok(run_cli(pllm_bin, ["serve", "--help"])).stdout.decode()
    assert "--act" in help_text
    for flag in OLDER.values():
        assert flag in help_text
    proc = run_cli(pllm_bin, ["serve", "-m", "x.gguf", "--act", "int4"])
    assert "int16|exact|int8|f16|static" in assert_clean_error(proc)
