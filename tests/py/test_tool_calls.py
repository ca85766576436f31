"""Tool calls through `pocketllm serve` with the official `openai` client: `.stream()` with a strict
`pydantic_function_tool` (argument deltas, parsed_arguments, finish_reason "tool_calls"), a second
turn with the tool's result, tool_choice naming one function, "required", "none" and "auto" all
enforced, hot samples whose arguments validate with `jsonschema`, the streamed deltas following
OpenAI's rules (index always; id, type and name once; then argument fragments) and adding up to
the whole reply, and bad tools or a malformed tool history as a 400 naming the field.

SmolLM2's template has no tools of its own, so these run the generic tool prompt and the hermes
format; tests/cpp/test_tool_calls.cpp covers every format's grammar, parser and stream."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from server_util import Server

openai = pytest.importorskip("openai")
jsonschema = pytest.importorskip("jsonschema")
pydantic = pytest.importorskip("pydantic")

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40},
                                                    "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "unit"], "additionalProperties": False}}}
CONVERT = {"type": "function", "function": {
    "name": "convert_currency", "description": "Convert an amount of money",
    "parameters": {"type": "object", "properties": {"amount": {"type": "integer", "minimum": 0, "maximum": 1000000},
                                                    "source": {"enum": ["EUR", "USD", "GBP"]},
                                                    "target": {"enum": ["EUR", "USD", "GBP"]}},
                   "required": ["amount", "source", "target"], "additionalProperties": False}}}
TOOLS = [WEATHER, CONVERT]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def server(pllm_bin, smollm2_path):
    s = Server(pllm_bin, smollm2_path, "--parallel", "4")
    yield s
    s.close()
    assert s.proc.returncode == 0, s.proc.stderr.read()


def model_id(server):
    return server.client().models.list().data[0].id


def chat(server, **kw):
    kw.setdefault("messages", ASK)
    kw.setdefault("max_tokens", 120)
    return server.client().chat.completions.create(model=model_id(server), **kw)


def named(name):
    return {"type": "function", "function": {"name": name}}


def check_calls(message):
    assert message.tool_calls, message.content
    for call in message.tool_calls:
        assert call.type == "function" and call.id
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


def test_openai_stream_with_a_pydantic_function_tool(server):
    class GetWeather(pydantic.BaseModel):
        city: str
        unit: str

    tool = openai.pydantic_function_tool(GetWeather)
    assert tool["function"]["strict"] is True
    deltas = []
    with server.client().chat.completions.stream(model=model_id(server), messages=ASK, tools=[tool],
                                                 tool_choice=named("GetWeather"), max_tokens=120,
                                                 temperature=0) as stream:
        for event in stream:
            if event.type == "tool_calls.function.arguments.delta":
                deltas.append(event.arguments_delta)
        final = stream.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.function.name == "GetWeather"
    assert isinstance(call.function.parsed_arguments, GetWeather)
    assert len(deltas) > 1 and json.loads("".join(deltas)) == json.loads(call.function.arguments)


def test_second_turn_answers_from_the_tool_result(server):
    first = chat(server, tools=TOOLS, tool_choice=named("get_weather"), temperature=0)
    assert first.choices[0].finish_reason == "tool_calls"
    call = first.choices[0].message.tool_calls[0]
    history = ASK + [first.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 21, "sky": "clear"})}]
    second = chat(server, messages=history, tools=TOOLS, tool_choice="none", temperature=0)
    assert second.choices[0].finish_reason in ("stop", "length")
    assert second.choices[0].message.tool_calls is None
    assert second.choices[0].message.content
    # The call and its result are in the prompt the model answered from.
    without = chat(server, messages=ASK, tools=TOOLS, tool_choice="none", temperature=0, max_tokens=1)
    assert second.usage.prompt_tokens > without.usage.prompt_tokens + 20


def test_named_choice_forces_that_function(server):
    def one(seed):
        return chat(server, tools=TOOLS, tool_choice=named("convert_currency"), temperature=1.0, seed=seed)
    with ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(one, range(1, 9)))
    for r in replies:
        assert r.choices[0].finish_reason == "tool_calls", r.choices[0].message
        check_calls(r.choices[0].message)
        assert [c.function.name for c in r.choices[0].message.tool_calls] == ["convert_currency"]


def test_hot_required_calls_all_validate(server):
    """20 samples at temperature 1, four at a time: every reply is calls whose arguments validate."""
    def one(seed):
        return chat(server, tools=TOOLS, tool_choice="required", parallel_tool_calls=False, temperature=1.0,
                    seed=seed)
    with ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(one, range(1, 21)))
    for r in replies:
        assert r.choices[0].finish_reason == "tool_calls", r.choices[0].message
        check_calls(r.choices[0].message)
        assert len(r.choices[0].message.tool_calls) == 1  # parallel_tool_calls false


def test_auto_and_none_are_enforced(server):
    """auto: a reply either calls (valid arguments) or is text with no unparsed call marker;
    none: never a call, never the marker."""
    for choice in ("auto", "none"):
        def one(seed, choice=choice):
            return chat(server, tools=TOOLS, tool_choice=choice, temperature=1.0, seed=seed, max_tokens=200,
                        messages=[{"role": "user", "content": "Convert 20 EUR to USD, call the tool."}])
        with ThreadPoolExecutor(4) as pool:
            replies = list(pool.map(one, range(1, 13)))
        for r in replies:
            m = r.choices[0].message
            if r.choices[0].finish_reason == "length":
                continue  # a call cut off by max_tokens stays text, as written
            assert "<tool_call>" not in (m.content or ""), m.content
            if choice == "none" or not m.tool_calls:
                assert m.tool_calls is None and r.choices[0].finish_reason in ("stop", "length")
            else:
                assert r.choices[0].finish_reason == "tool_calls"
                check_calls(m)


def sse_chunks(server, body):
    status, data = server.post("/v1/chat/completions", {**body, "stream": True})
    assert status == 200, data
    out = []
    for line in data.decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            out.append(json.loads(line[6:]))
    return out


def test_streamed_deltas_follow_openai_and_equal_the_whole_reply(server):
    body = {"model": model_id(server), "messages": ASK, "tools": TOOLS, "tool_choice": "required",
            "temperature": 0, "max_tokens": 200}
    status, data = server.post("/v1/chat/completions", body)
    assert status == 200, data
    whole = json.loads(data)["choices"][0]
    assert whole["finish_reason"] == "tool_calls" and whole["message"]["content"] is None
    chunks = sse_chunks(server, body)
    seen, args = {}, {}
    for c in chunks:
        if not c["choices"]:
            continue
        for d in c["choices"][0]["delta"].get("tool_calls", []):
            assert "index" in d
            i = d["index"]
            if i not in seen:
                assert d["id"] and d["type"] == "function" and d["function"]["name"], d
                seen[i] = (d["id"], d["function"]["name"])
            else:
                assert "id" not in d and "type" not in d and "name" not in d["function"], d
            args[i] = args.get(i, "") + d["function"]["arguments"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    calls = whole["message"]["tool_calls"]
    assert [seen[i][1] for i in range(len(seen))] == [c["function"]["name"] for c in calls]
    assert [json.loads(args[i]) for i in range(len(args))] == [json.loads(c["function"]["arguments"]) for c in calls]


BAD = [
    ("tools", {"tools": [{"type": "function", "function": {"name": "bad name"}}]}, "tools[0].function.name"),
    ("tools", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": "string", "format": "hostname"}}}}}]}, "format"),
    ("tool_choice", {"tools": TOOLS, "tool_choice": named("nope")}, "nope"),
    ("tool_choice", {"tool_choice": "required"}, "tools"),
    ("tool_choice", {"tools": TOOLS, "tool_choice": "sometimes"}, "sometimes"),
    ("functions", {"functions": [{"name": "f"}]}, "tools"),
    ("response_format", {"tools": TOOLS, "response_format": {"type": "json_object"}}, "tools"),
    ("parallel_tool_calls", {"tools": TOOLS, "parallel_tool_calls": "yes"}, "true or false"),
    ("messages", {"messages": ASK + [{"role": "tool", "tool_call_id": "call_1", "content": "21C"}]}, "no tool call"),
    ("messages[1].tool_call_id", {"messages": ASK + [{"role": "tool", "content": "21C"}]}, "tool_call_id"),
    ("messages[1].tool_calls[0].function.arguments", {"messages": ASK + [
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                              "function": {"name": "get_weather", "arguments": "{city"}}]}]},
     "JSON object"),
    ("messages", {"tools": TOOLS, "messages": ASK + [
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                              "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c2", "content": "x"}]}, "c2"),
]


@pytest.mark.parametrize("param,extra,needle", BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_bad_tools_and_history_are_400(server, param, extra, needle):
    body = {"model": model_id(server), "messages": ASK, "max_tokens": 8, **extra}
    status, data = server.post("/v1/chat/completions", body)
    assert status == 400, data
    err = json.loads(data)["error"]
    assert err["param"] == param and needle in err["message"], err
