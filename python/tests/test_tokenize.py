"""Tokenizer and chat template through the package."""
from __future__ import annotations

import pytest

import pocketllm

TEXTS = ["Hello world", "Once upon a time there was a little", "  spaces\tand\nnewlines  ",
         "Ünïcödé — 東京 🙂", "x = [i ** 2 for i in range(10)]", ""]


def test_version_matches_the_library():
    assert pocketllm.__version__ == pocketllm.engine_version()
    assert pocketllm.isa()
    assert pocketllm.default_threads() >= 1


@pytest.mark.parametrize("text", TEXTS)
def test_round_trip(model, text):
    ids = model.tokenize(text, add_special=False)
    assert all(isinstance(i, int) and 0 <= i < model.n_vocab for i in ids)
    assert model.detokenize(ids) == text


def test_known_ids(model):
    # The same ids the C++ and CLI suites pin (tests/py/pllm_cli.py, SMOLLM2_SHORT_IDS).
    assert model.tokenize("Once upon a time there was a little", add_special=False) == \
        [6403, 1980, 253, 655, 665, 436, 253, 1838]


def test_long_text_grows_the_buffer(model):
    text = "ab " * 5000
    ids = model.tokenize(text, add_special=False)
    assert len(ids) > 1000 and model.detokenize(ids) == text


def test_special_tokens(model):
    marker = "<|im_start|>"
    parsed = model.tokenize(marker, add_special=False, parse_special=True)
    assert len(parsed) == 1
    assert len(model.tokenize(marker, add_special=False)) > 1  # plain text otherwise
    assert model.detokenize(parsed, render_special=True) == marker
    assert model.is_eog(model.eos)


def test_chat_template(model):
    text = model.apply_chat_template([{"role": "system", "content": "Be brief."},
                                      {"role": "user", "content": "Hi!"}])
    assert "Be brief." in text and "Hi!" in text
    assert text.rstrip().endswith("assistant")


def test_vocab_only_model_tokenizes_but_does_not_generate(smollm2):
    with pocketllm.Model(smollm2, vocab_only=True) as m:
        assert m.tokenize("Hello world", add_special=False) == [19556, 905]
        with pytest.raises(pocketllm.InvalidArgument, match="vocab_only"):
            m.chat([{"role": "user", "content": "Hi"}])
