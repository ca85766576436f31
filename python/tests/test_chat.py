"""Generation: chat, streaming, raw completion, sampling options."""
from __future__ import annotations

import pytest

import pocketllm
from conftest import CAPITAL

STORY = [{"role": "user", "content": "Write a short story about a robot who learns to paint."}]


def test_greedy_chat_answers_paris(model):
    reply = model.chat(CAPITAL)
    assert isinstance(reply, str) and isinstance(reply, pocketllm.Completion)
    assert "Paris" in reply, reply
    s = reply.stats
    assert s.stop_reason == "eog" and s.n_generated > 0 and s.n_prompt > 10 and s.ttft_ms > 0


def test_int16_session_answers_paris(model):
    """activations="int16": the greedy answer keeps "The capital of France is Paris" (int8
    activations flip its near-tied first token)."""
    reply = model.session(activations="int16").chat(CAPITAL, max_tokens=12)
    assert "Paris" in reply, reply


def test_vulkan_session_answers_like_the_cpu(model):
    """backend="vulkan" (lavapipe where there is no GPU; the CPU when there is no Vulkan
    device at all): the same greedy reply as the CPU session, a few tokens to stay quick."""
    gpu = model.session(backend="vulkan", activations="f32").chat(CAPITAL, max_tokens=8)
    assert str(gpu) == str(model.session(activations="f32").chat(CAPITAL, max_tokens=8))


def test_stream_pieces_concatenate_to_the_reply(model):
    whole = model.chat(STORY, max_tokens=48)
    stream = model.chat(STORY, max_tokens=48, stream=True)
    pieces = list(stream)
    assert len(pieces) > 10 and all(pieces)
    assert "".join(pieces) == stream.text == whole
    assert stream.stats.n_generated == whole.stats.n_generated == 48
    assert stream.stats.stop_reason == "max_tokens"


def test_stream_in_a_with_block(model):
    with model.chat(CAPITAL, stream=True) as stream:
        text = "".join(stream)
    assert "Paris" in text and stream.stats.stop_reason == "eog"


def test_follow_up_turn_reuses_the_conversation(model):
    first = model.chat(CAPITAL)
    history = CAPITAL + [{"role": "assistant", "content": str(first)},
                         {"role": "user", "content": "And of Italy?"}]
    second = model.chat(history, max_tokens=24)
    assert "Rome" in second, second
    assert second.stats.n_reused >= first.stats.n_prompt - 1  # only the new turn was computed


def test_complete_raw_text_and_token_ids(model):
    text = model.complete("The capital of France is", max_tokens=4)
    assert "Paris" in text, text
    ids = model.tokenize("The capital of France is")
    assert model.complete(ids, max_tokens=4) == text


def test_stop_strings(model):
    reply = model.chat(CAPITAL, stop=["Paris"])
    assert "Paris" not in reply and reply.stats.stop_reason == "stop"
    assert model.chat(CAPITAL, stop="capital").stats.stop_reason == "stop"


def test_sampling_is_seeded(model):
    a = model.chat(STORY, max_tokens=16, temperature=1.0, seed=7)
    b = model.chat(STORY, max_tokens=16, temperature=1.0, seed=7)
    assert a == b
    assert model.sampling_defaults["temperature"] == 0.0  # SmolLM2's file says nothing: greedy


def test_sessions_are_separate_conversations(model):
    with model.session(n_ctx=512, kv_type="q8") as s:
        assert s.n_ctx == 512
        assert "Paris" in s.chat(CAPITAL)
        assert 0 < s.kv_committed_bytes <= s.kv_bytes
        s.reset()
        assert s.chat(CAPITAL).stats.n_reused == 0


def test_every_activation_word(model):
    """The C API's words (the CLI's --act); "f32", this binding's older word, is "exact"."""
    exact = str(model.session(activations="exact").chat(CAPITAL, max_tokens=6))
    assert str(model.session(activations="f32").chat(CAPITAL, max_tokens=6)) == exact
    for word in ("int16", "int8", "f16"):
        assert str(model.session(activations=word).chat(CAPITAL, max_tokens=6))
    with pytest.raises(pocketllm.InvalidArgument, match="calibrated scales"):
        model.session(activations="static")
    with pytest.raises(pocketllm.InvalidArgument, match="int16.exact.int8.f16.static"):
        model.session(activations="fp32")


def test_chat_template_kwargs_reach_the_template(model):
    """SmolLM2's template reads no variables (the prompt is unchanged); bad ones are refused."""
    q = CAPITAL
    assert model.apply_chat_template(q, chat_template_kwargs={"enable_thinking": False}) == model.apply_chat_template(q)
    with pytest.raises(pocketllm.InvalidArgument):
        model.apply_chat_template(q, chat_template_kwargs={"messages": []})
    with pytest.raises(pocketllm.InvalidArgument):
        model.apply_chat_template(q, chat_template_kwargs=["enable_thinking"])
    reply = model.chat(q, chat_template_kwargs={"enable_thinking": False})
    assert "Paris" in reply, reply
