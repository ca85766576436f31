"""Text <-> tokens through the model's tokenizer and chat template (shared by Model and Session)."""
from __future__ import annotations

import ctypes as C
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Optional

from ._errors import InvalidArgument, check
from ._lib import ChatMessage, lib, take_string

Message = Mapping[str, str]


def grow_tokens(text: str, call, extra: int = 8) -> list[int]:
    """call(data, out, cap, n): a pllm_* call writing token ids with the capacity rules."""
    data = text.encode("utf-8")
    # A token covers at least one byte, plus a few specials (and `extra`, e.g. image rows): one
    # call nearly always suffices; when not, the first one reports the size needed.
    cap = len(data) + extra
    for _ in range(2):
        out = (C.c_int32 * cap)()
        n = C.c_size_t()
        st = call(data, out, cap, C.byref(n))
        if st == 5 and n.value > cap:  # PLLM_ERR_OUT_OF_RANGE: buffer too small
            cap = n.value
            continue
        check(st)
        return list(out[:n.value])
    raise AssertionError("unreachable: the second call had the size the first one asked for")


def tokenize(model: int, text: str, add_special: bool, parse_special: bool) -> list[int]:
    return grow_tokens(text, lambda data, out, cap, n: lib.pllm_tokenize(
        model, data, len(data), int(add_special), int(parse_special), out, cap, n))


def detokenize(model: int, ids: Iterable[int], render_special: bool) -> str:
    ids = list(ids)
    arr = (C.c_int32 * len(ids))(*ids) if ids else None
    cap = 16 * len(ids) + 64
    for _ in range(2):
        out = C.create_string_buffer(cap)
        n = C.c_size_t()
        st = lib.pllm_detokenize(model, arr, len(ids), int(render_special), out, cap, C.byref(n))
        if st == 5 and n.value > cap:
            cap = n.value
            continue
        check(st)
        # A slice of a sequence may cut a character in two: keep what decodes.
        return out.raw[:n.value].decode("utf-8", errors="replace")
    raise AssertionError("unreachable: the second call had the size the first one asked for")


def _c_text(value: object, what: str) -> bytes:
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be a str, not {type(value).__name__}")
    if "\0" in value:  # C strings end at NUL: the rest would be dropped silently
        raise InvalidArgument(f"{what} contains a NUL character")
    return value.encode("utf-8")


def apply_template(model: int, messages: Sequence[Message], add_generation_prompt: bool,
                   template_vars: Optional[Mapping] = None) -> str:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidArgument("messages must be a list of {'role': ..., 'content': ...} dicts")
    arr = (ChatMessage * max(len(messages), 1))()
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or "role" not in m or "content" not in m:
            raise InvalidArgument(f"message {i} must be a dict with 'role' and 'content'")
        role, content = _c_text(m["role"], f"message {i}'s role"), _c_text(m["content"], f"message {i}'s content")
        arr[i].role, arr[i].content = role, content
    out = C.c_void_p()
    if template_vars is not None and not isinstance(template_vars, Mapping):
        raise InvalidArgument("chat_template_kwargs must be a dict of template variables")
    vars_json = None if template_vars is None else _c_text(json.dumps(template_vars), "chat_template_kwargs")
    check(lib.pllm_chat_apply_template_vars(model, arr, len(messages), int(add_generation_prompt), vars_json,
                                            C.byref(out)))
    return take_string(out.value)


def prompt_ids(model: int, text: str) -> list[int]:
    """A prompt's tokens the way the CLI makes them (pllm_tokenize_prompt): specials parsed
    (the template writes them as text), one BOS."""
    return grow_tokens(text, lambda data, out, cap, n: lib.pllm_tokenize_prompt(model, data, len(data), out, cap, n))


def uses_tool_turns(messages: Sequence[Message]) -> bool:
    """Whether the conversation holds earlier tool calls or tool results (rendered as JSON)."""
    return any(isinstance(m, Mapping) and (m.get("role") == "tool" or m.get("tool_calls")) for m in messages)


def apply_template_json(model: int, messages: Sequence[Message], tools: Optional[int], add_generation_prompt: bool,
                        template_vars: Optional[Mapping] = None) -> str:
    """The conversation as OpenAI's messages (tool_calls, tool results) with tools (a pllm_tools
    handle or None), through pllm_chat_apply_template_json."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidArgument("messages must be a list of message dicts")
    if template_vars is not None and not isinstance(template_vars, Mapping):
        raise InvalidArgument("chat_template_kwargs must be a dict of template variables")
    try:
        text = json.dumps(list(messages))
    except (TypeError, ValueError) as e:
        raise InvalidArgument(f"messages must be JSON-serialisable: {e}") from None
    vars_json = None if template_vars is None else _c_text(json.dumps(template_vars), "chat_template_kwargs")
    out = C.c_void_p()
    check(lib.pllm_chat_apply_template_json(model, _c_text(text, "messages"), tools, int(add_generation_prompt),
                                            vars_json, C.byref(out)))
    return take_string(out.value)
