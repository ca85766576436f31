"""The chat-template interpreter (`pocketllm template`) against Python jinja2, byte for byte.

Every real template in ../shared/testdata/templates/ is rendered with a set of conversations
(system + user, multi-turn, tools with a tool call and its result, generation prompt on and off,
thinking on and off) by jinja2 configured as Hugging Face's apply_chat_template configures it,
and by our interpreter; the outputs must be equal, and where jinja2 raises, ours must fail too
with the template's message.
"""
from __future__ import annotations

import json
import subprocess
from datetime import datetime
from pathlib import Path

import pytest

import pllm_cli

jinja2 = pytest.importorskip("jinja2")
from jinja2.sandbox import ImmutableSandboxedEnvironment  # noqa: E402

TEMPLATES = pllm_cli.REPO.parent / "shared" / "testdata" / "templates"
NOW = 1767225600 + 14 * 86400 + 12 * 3600  # 2026-01-15 12:00 UTC: strftime_now's fixed clock


def reference_render(source: str, variables: dict) -> str:
    """jinja2 exactly as transformers' _compile_jinja_template sets it up."""
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.fromtimestamp(NOW).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(source).render(**variables)


WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city, e.g. Paris"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"},
        "days": {"type": "integer", "description": "Forecast days"}},
        "required": ["city"]}}}
TIME_TOOL = {"type": "function", "function": {
    "name": "get_time", "description": "The time now — in a zone (ünïcode).",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string", "description": "IANA zone"}},
                   "required": ["zone"]}}}
CALL = {"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}

SYSTEM = {"role": "system", "content": "You are a terse assistant."}
USER = {"role": "user", "content": "Hello! What's 2+2?"}
ASSISTANT = {"role": "assistant", "content": "It is 4."}
USER2 = {"role": "user", "content": "  And 3 × 3 <b>?</b>\n"}
THINKING = {"role": "assistant", "content": "<think>\nSimple sum.\n</think>\n\nIt is 4."}
TOOL_CALL = {"role": "assistant", "content": "", "tool_calls": [CALL]}
TOOL_RESULT = {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
               "content": "{\"temperature\": 21, \"sky\": \"clear\"}"}
WEATHER_Q = {"role": "user", "content": "Weather in Paris?"}

CONVERSATIONS = {
    "user": {"messages": [USER]},
    "system_user": {"messages": [SYSTEM, USER]},
    "multi_turn": {"messages": [SYSTEM, USER, ASSISTANT, USER2]},
    "multi_turn_no_system": {"messages": [USER, THINKING, USER2]},
    "assistant_last": {"messages": [USER, ASSISTANT]},
    "tools": {"messages": [SYSTEM, WEATHER_Q], "tools": [WEATHER_TOOL, TIME_TOOL]},
    "tool_call_and_result": {"messages": [SYSTEM, WEATHER_Q, TOOL_CALL, TOOL_RESULT],
                             "tools": [WEATHER_TOOL]},
    "tool_result_then_answer": {"messages": [WEATHER_Q, TOOL_CALL, TOOL_RESULT,
                                             {"role": "assistant", "content": "21 °C and clear."}],
                                "tools": [WEATHER_TOOL]},
    "reasoning_content": {"messages": [USER, {"role": "assistant", "content": "It is 4.",
                                              "reasoning_content": "Add them."}, USER2]},
}


def cases():
    if not TEMPLATES.is_dir():
        return []
    out = []
    for path in sorted(TEMPLATES.glob("*.jinja")):
        for conv in CONVERSATIONS:
            for gen in (False, True):
                out.append(pytest.param(path.name, conv, gen, None, id=f"{path.stem}-{conv}-gen{int(gen)}"))
        for think in (False, True):
            out.append(pytest.param(path.name, "multi_turn", True, think,
                                    id=f"{path.stem}-multi_turn-think{int(think)}"))
    return out


def variables(conv: str, gen: bool, think) -> dict:
    v = {"messages": CONVERSATIONS[conv]["messages"], "tools": CONVERSATIONS[conv].get("tools"),
         "documents": None, "add_generation_prompt": gen, "bos_token": "<s>", "eos_token": "</s>"}
    if think is not None:
        v["enable_thinking"] = think
    return v


@pytest.mark.parametrize("name,conv,gen,think", cases())
def test_template_matches_jinja2(pllm_bin, name, conv, gen, think):
    if not TEMPLATES.is_dir():
        pytest.skip(f"no templates at {TEMPLATES}")
    path = TEMPLATES / name
    source = path.read_bytes().decode("utf-8")
    ctx = variables(conv, gen, think)
    try:
        expected, expected_error = reference_render(source, ctx), None
    except Exception as e:  # noqa: BLE001 -- any failure of the reference must be a failure of ours
        # raise_exception's message must reach our error; Python's own errors are worded differently
        expected, expected_error = None, (str(e) if type(e) is jinja2.exceptions.TemplateError else "")
    r = subprocess.run([str(pllm_bin), "template", str(path), "--now", str(NOW)],
                       input=json.dumps(ctx).encode(), capture_output=True, timeout=60)
    if expected_error is not None:
        assert r.returncode != 0, f"jinja2 raised {expected_error!r}, ours rendered {r.stdout.decode()!r}"
        assert expected_error in r.stderr.decode(), r.stderr.decode()
        return
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode("utf-8") == expected


def test_templates_folder_present():
    if not TEMPLATES.is_dir():
        pytest.skip(f"no templates at {TEMPLATES} (shared/testdata next to the checkout)")
    assert len(list(TEMPLATES.glob("*.jinja"))) >= 14
