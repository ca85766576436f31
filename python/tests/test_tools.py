"""Tool calls from Python: ``chat(..., tools=...)`` returns the reply's calls in ``.tool_calls``
(arguments valid against their schemas), tool_choice is enforced, a second turn with the tool's
result renders and answers, and bad tools or history raise InvalidArgument naming the field."""
from __future__ import annotations

import json

import pytest

import pocketllm

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40},
                                                    "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "unit"], "additionalProperties": False}}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def test_required_call_validates(model):
    jsonschema = pytest.importorskip("jsonschema")
    for seed in range(1, 6):
        reply = model.chat(ASK, tools=[WEATHER], tool_choice="required", parallel_tool_calls=False,
                           max_tokens=120, temperature=1.0, seed=seed)
        assert reply.stats.stop_reason == "eog", reply
        assert len(reply.tool_calls) == 1
        call = reply.tool_calls[0]
        assert call["type"] == "function" and call["id"] and call["function"]["name"] == "get_weather"
        jsonschema.validate(json.loads(call["function"]["arguments"]), WEATHER["function"]["parameters"])


def test_pydantic_tool_and_named_choice(model):
    pydantic = pytest.importorskip("pydantic")

    class Convert(pydantic.BaseModel):
        """Convert an amount of money"""
        amount: int
        target: str

    reply = model.chat(ASK, tools=[WEATHER, Convert], tool_choice="Convert", max_tokens=120)
    assert [c["function"]["name"] for c in reply.tool_calls] == ["Convert"]
    Convert.model_validate_json(reply.tool_calls[0]["function"]["arguments"])


def test_second_turn_with_the_result(model):
    first = model.chat(ASK, tools=[WEATHER], tool_choice="required", parallel_tool_calls=False, max_tokens=120)
    history = ASK + [{"role": "assistant", "content": None, "tool_calls": first.tool_calls},
                     {"role": "tool", "tool_call_id": first.tool_calls[0]["id"], "content": "21 C, clear"}]
    second = model.chat(history, tools=[WEATHER], tool_choice="none", max_tokens=40)
    assert second and second.tool_calls == []
    # The history alone (no tools) renders too: earlier calls and results need no tool list.
    assert model.chat(history, max_tokens=4).stats.n_prompt > 0


def test_none_and_auto(model):
    for choice in ("none", "auto"):
        reply = model.chat(ASK, tools=[WEATHER], tool_choice=choice, max_tokens=60, temperature=1.0, seed=3)
        assert "<tool_call>" not in reply or reply.stats.stop_reason == "max_tokens"
        if choice == "none":
            assert reply.tool_calls == []


@pytest.mark.parametrize("kw,needle", [
    ({"tools": [{"type": "function", "function": {"name": "bad name"}}]}, "tools[0].function.name"),
    ({"tools": [WEATHER], "tool_choice": "nope"}, "nope"),
    ({"tool_choice": "required"}, "tool_choice needs tools"),
    ({"tools": [WEATHER], "response_format": {"type": "json_object"}}, "exclude"),
    ({"messages": ASK + [{"role": "tool", "tool_call_id": "x", "content": "1"}]}, "no tool call"),
])
def test_errors(model, kw, needle):
    messages = kw.pop("messages", ASK)
    with pytest.raises(pocketllm.InvalidArgument, match=needle.replace("[", r"\[").replace("]", r"\]")):
        model.chat(messages, max_tokens=4, **kw)


def test_streamed_calls_equal_the_whole_reply(model):
    """stream=True with tools: the pieces are the content, the calls fill ``tool_calls`` and end
    equal to the blocking reply's (greedy); under auto, text streams as text."""
    whole = model.chat(ASK, tools=[WEATHER], tool_choice="required", parallel_tool_calls=False, max_tokens=120)
    stream = model.chat(ASK, tools=[WEATHER], tool_choice="required", parallel_tool_calls=False, max_tokens=120,
                        stream=True)
    pieces = list(stream)
    assert "".join(pieces).strip() == str(whole)
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in stream.tool_calls] == \
        [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in whole.tool_calls]
    free = model.chat(ASK, tools=[WEATHER], tool_choice="none", max_tokens=24)
    streamed_free = model.chat(ASK, tools=[WEATHER], tool_choice="none", max_tokens=24, stream=True)
    assert "".join(streamed_free) == str(free) and streamed_free.tool_calls == []
