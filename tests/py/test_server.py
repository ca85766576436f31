"""`pocketllm serve` against the official `openai` client and plain HTTP: answers, streaming
shape (role first, finish_reason last, one usage chunk only when asked), errors as OpenAI error
bodies with the right 4xx, /metrics in Prometheus' format, and a client that disconnects has
its request cancelled."""
from __future__ import annotations

import http.client
import json
import time

import pytest

import pllm_cli
from server_util import Server

openai = pytest.importorskip("openai")
pytest.importorskip("prometheus_client.parser")  # Server.metrics()

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


def model_id(server):
    return server.client().models.list().data[0].id


def test_chat_answers_and_reports_usage(server):
    r = server.client().chat.completions.create(model=model_id(server), messages=QUESTION, max_tokens=24,
                                                temperature=0)
    assert "Paris" in r.choices[0].message.content
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens > 10 and r.usage.completion_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_stream_shape_and_text_equal_non_stream(server):
    c = server.client()
    full = c.chat.completions.create(model=model_id(server), messages=QUESTION, max_tokens=24, temperature=0)
    chunks = list(c.chat.completions.create(model=model_id(server), messages=QUESTION, max_tokens=24, temperature=0,
                                            stream=True))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == full.choices[0].finish_reason
    assert all(ch.usage is None for ch in chunks)
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks)
    assert text == full.choices[0].message.content
    with_usage = list(c.chat.completions.create(model=model_id(server), messages=QUESTION, max_tokens=24,
                                                temperature=0, stream=True, stream_options={"include_usage": True}))
    usage = [ch for ch in with_usage if ch.usage is not None]
    assert len(usage) == 1 and usage[0] is with_usage[-1] and usage[0].choices == []
    assert usage[0].usage.completion_tokens == full.usage.completion_tokens


def test_completions_and_stop(server):
    c = server.client()
    r = c.completions.create(model=model_id(server), prompt="The capital of France is", max_tokens=8, temperature=0)
    assert r.choices[0].text
    s = "".join(ch.choices[0].text for ch in c.completions.create(
        model=model_id(server), prompt="The capital of France is", max_tokens=8, temperature=0, stream=True))
    assert s == r.choices[0].text
    first_word = r.choices[0].text.split()[0]
    stopped = c.completions.create(model=model_id(server), prompt="The capital of France is", max_tokens=8,
                                   temperature=0, stop=[first_word])
    assert first_word not in stopped.choices[0].text and stopped.choices[0].finish_reason == "stop"


def test_logprobs(server):
    r = server.client().chat.completions.create(model=model_id(server), messages=QUESTION, max_tokens=4,
                                                temperature=0, logprobs=True, top_logprobs=2)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for t in content:
        assert t.logprob <= 0 and len(t.top_logprobs) == 2
        assert t.top_logprobs[0].logprob == pytest.approx(t.logprob)


@pytest.mark.parametrize("body,status,code", [
    (b"{not json", 400, None),
    ({"messages": []}, 400, None),
    ({"messages": QUESTION, "temperature": "hot"}, 400, None),
    ({"messages": QUESTION, "max_tokens": 0}, 400, None),
    ({"messages": QUESTION, "n": 2}, 400, None),
    ({"messages": QUESTION, "model": "gpt-9"}, 404, "model_not_found"),
    ({"messages": QUESTION, "max_tokens": 100000}, 400, "context_length_exceeded"),
    ({"messages": [{"role": "user", "content": "word " * 2000}]}, 400, "context_length_exceeded"),
    ({"messages": [{"role": "wizard", "content": "hi"}]}, 400, None),
    ({"messages": QUESTION, "chat_template_kwargs": "think"}, 400, None),
    ({"messages": QUESTION, "chat_template_kwargs": {"messages": []}}, 400, None),
])
def test_bad_requests_get_openai_errors(server, body, status, code):
    got, data = server.post("/v1/chat/completions", body)
    assert got == status, data
    err = json.loads(data)["error"]
    assert err["message"] and err["type"]
    if code:
        assert err["code"] == code


def test_chat_template_kwargs_are_accepted(server):
    """Variables reach the file's template (tests/cpp/test_chat_prompt.cpp shows Qwen3's
    enable_thinking at work); SmolLM2's template reads none, so the prompt is unchanged."""
    body = {"messages": QUESTION, "max_tokens": 4, "temperature": 0}
    plain = json.loads(server.post("/v1/chat/completions", body)[1])
    got, data = server.post("/v1/chat/completions", {**body, "chat_template_kwargs": {"enable_thinking": False}})
    assert got == 200, data
    assert json.loads(data)["usage"]["prompt_tokens"] == plain["usage"]["prompt_tokens"]


def test_oversized_body_and_unknown_route(server):
    got, _ = server.post("/v1/chat/completions", b"x" * (2 << 20))
    assert got == 413
    got, data = server.get("/v1/nothing")
    assert got == 404 and "error" in json.loads(data)


def test_tokenize_round_trip(server):
    status, data = server.post("/tokenize", {"content": "Hello, world!"})
    assert status == 200
    tokens = json.loads(data)["tokens"]
    status, data = server.post("/detokenize", {"tokens": tokens})
    assert status == 200 and json.loads(data)["content"] == "Hello, world!"
    assert server.post("/detokenize", {"tokens": [-1]})[0] == 400


def test_disconnect_cancels_and_metrics_parse(server):
    before = server.metrics()
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    c.request("POST", "/v1/chat/completions",
              json.dumps({"messages": [{"role": "user", "content": "Write a very long story."}], "max_tokens": 400,
                          "stream": True}), {"Content-Type": "application/json"})
    r = c.getresponse()
    seen = 0
    while seen < 3:  # wait for a few tokens, then hang up mid-generation
        line = r.fp.readline()
        if line.startswith(b"data: {"):
            seen += 1
    c.sock.shutdown(2)
    c.close()
    deadline = time.time() + 10
    while time.time() < deadline:
        m = server.metrics()
        if m["pocketllm_cancelled_requests_total"] > before["pocketllm_cancelled_requests_total"] and \
                m["pocketllm_queue_depth"] == 0:
            break
        time.sleep(0.1)
    assert m["pocketllm_cancelled_requests_total"] == before["pocketllm_cancelled_requests_total"] + 1
    assert m["pocketllm_queue_depth"] == 0
    assert m["pocketllm_generated_tokens_total"] >= before["pocketllm_generated_tokens_total"]
    assert "pocketllm_time_to_first_token_seconds_count" in m
    assert m["pocketllm_ttft_over_bound_total"] >= before["pocketllm_ttft_over_bound_total"]


def test_api_key(pllm_bin, smollm2_path):
    s = Server(pllm_bin, smollm2_path, "--api-key", "sekret")
    try:
        with pytest.raises(openai.AuthenticationError):
            s.client("wrong").models.list()
        assert s.client("sekret").models.list().data
        assert s.get("/health")[0] == 200  # health needs no key
    finally:
        s.close()
