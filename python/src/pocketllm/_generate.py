"""One pllm_generate call, with its results: Stats, Completion (the non-streaming reply) and the
sampling parameters."""
from __future__ import annotations

import ctypes as C
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from ._errors import InvalidArgument, check
from ._lib import TOKEN_FN, DraftParams, GenerationStats, Owned, SamplingParams, lib, take_string

# pllm_stop_reason by value. The package stops a generation through the token callback only
# to cancel it, so PLLM_STOP_CALLBACK reads "cancelled" like PLLM_STOP_CANCELLED.
STOP_REASONS = ("eog", "max_tokens", "stop", "cancelled", "cancelled", "context_full")


@dataclass(frozen=True)
class Stats:
    """What one generation did (pllm_generation_stats)."""

    n_prompt: int        #: prompt tokens
    n_reused: int        #: of them already in the session's KV cache (cached ones included)
    n_cached: int        #: of them restored from the prefix cache
    n_generated: int     #: tokens generated
    ttft_ms: float       #: from the call to the first generated token
    prefill_tps: float
    decode_tps: float
    #: "eog" (the model ended its turn), "max_tokens", "stop" (a stop string), "cancelled",
    #: "context_full"
    stop_reason: str
    #: speculative decoding (``draft=``): verify passes with guesses, guesses verified, kept
    n_draft_passes: int = 0
    n_drafted: int = 0
    n_draft_accepted: int = 0


class Completion(str):
    """The reply text (a str) with the generation's ``stats``; with tools, ``tool_calls``: the
    calls the reply made, as OpenAI's assistant message lists them ([{"id", "type": "function",
    "function": {"name", "arguments": "<JSON>"}}]; pass them back in the next turn's history)."""

    stats: Stats
    tool_calls: list = []

    def __new__(cls, text: str, stats: Stats) -> "Completion":
        obj = super().__new__(cls, text)
        obj.stats = stats
        return obj


GRAMMAR_GBNF, GRAMMAR_JSON_SCHEMA, GRAMMAR_JSON = 0, 1, 2  # pllm_grammar_kind


def _closed(schema: Any) -> Any:
    """A Pydantic schema with no extra keys on its objects (as OpenAI's strict schemas have):
    Pydantic ignores extra keys when it validates, so the reply loses nothing it could use, and
    the model cannot wander into keys of its own."""
    if isinstance(schema, dict):
        out = {k: _closed(v) for k, v in schema.items()}
        if out.get("type") == "object" and "properties" in out:
            out.setdefault("additionalProperties", False)
        return out
    if isinstance(schema, list):
        return [_closed(v) for v in schema]
    return schema


def grammar_of(model: int, response_format: Any, grammar: str | None) -> Optional[Owned]:
    """The compiled constraint of a call: ``response_format`` as OpenAI's ({"type": "text" |
    "json_object"}, {"type": "json_schema", "json_schema": {"schema": {...}}}) or a Pydantic
    model class, or ``grammar`` (GBNF text). None when the reply is free text."""
    if response_format is not None and grammar is not None:
        raise InvalidArgument("response_format and grammar exclude each other")
    kind, text = None, None
    if grammar is not None:
        if not isinstance(grammar, str):
            raise InvalidArgument("grammar must be GBNF text (a str)")
        kind, text = GRAMMAR_GBNF, grammar
    elif hasattr(response_format, "model_json_schema"):  # a Pydantic model class
        kind, text = GRAMMAR_JSON_SCHEMA, json.dumps(_closed(response_format.model_json_schema()))
    elif response_format is not None:
        if not isinstance(response_format, dict) or not isinstance(response_format.get("type"), str):
            raise InvalidArgument("response_format must be a dict with a 'type' (or a Pydantic model class)")
        t = response_format["type"]
        if t == "json_object":  # OpenAI's JSON mode: one JSON object
            kind, text = GRAMMAR_JSON_SCHEMA, '{"type": "object"}'
        elif t == "json_schema":
            js = response_format.get("json_schema")
            if not isinstance(js, dict) or "schema" not in js:
                raise InvalidArgument("response_format json_schema needs {'json_schema': {'schema': ...}}")
            kind, text = GRAMMAR_JSON_SCHEMA, json.dumps(js["schema"])
        elif t != "text":
            raise InvalidArgument(f"response_format type {t!r} is not one of text, json_object, json_schema")
    if kind is None:
        return None
    out = C.c_void_p()
    check(lib.pllm_grammar_create(model, kind, None if text is None else text.encode("utf-8"), C.byref(out)))
    return Owned(out.value, lib.pllm_grammar_free)


def tool_of(tool: Any) -> Any:
    """An OpenAI tool dict as it is, or a Pydantic model class as a strict function tool (its
    class name the function's, its fields the arguments, objects closed)."""
    if hasattr(tool, "model_json_schema"):
        schema = _closed(tool.model_json_schema())
        schema.pop("title", None)
        return {"type": "function", "function": {"name": tool.__name__, "description": (tool.__doc__ or "").strip(),
                                                  "parameters": schema, "strict": True}}
    return tool


def tools_of(model: int, tools: Sequence[Any], tool_choice: Any, parallel_tool_calls: bool) -> Owned:
    """A pllm_tools handle: tools (OpenAI dicts or Pydantic classes), tool_choice ("auto",
    "none", "required", a function's name or OpenAI's {"type": "function", ...})."""
    if isinstance(tools, (str, bytes, dict)) or not isinstance(tools, Sequence):
        raise InvalidArgument("tools must be a list of OpenAI tool dicts or Pydantic model classes")
    if isinstance(tool_choice, str) and tool_choice not in ("auto", "none", "required"):
        tool_choice = {"type": "function", "function": {"name": tool_choice}}
    try:
        tools_json = json.dumps([tool_of(t) for t in tools])
        choice_json = None if tool_choice is None else json.dumps(tool_choice)
    except (TypeError, ValueError) as e:
        raise InvalidArgument(f"tools and tool_choice must be JSON-serialisable: {e}") from None
    out = C.c_void_p()
    check(lib.pllm_tools_create(model, tools_json.encode("utf-8"),
                                None if choice_json is None else choice_json.encode("utf-8"),
                                int(bool(parallel_tool_calls)), C.byref(out)))
    return Owned(out.value, lib.pllm_tools_free)


def parse_tool_reply(tools: Owned, tokens: Sequence[int]) -> dict:
    """{"content": str | None, "tool_calls": [...]} of a reply's tokens (pllm_tools_parse)."""
    arr = (C.c_int32 * max(len(tokens), 1))(*tokens)
    out = C.c_void_p()
    check(lib.pllm_tools_parse(tools.ptr, arr, len(tokens), C.byref(out)))
    return json.loads(take_string(out.value))


class ToolCallStream:
    """A reply's calls read as its tokens come (pllm_tools_stream_*): ``push(token)`` returns the
    text that can be shown now and adds to ``tool_calls`` (OpenAI's dicts, complete once the
    reply ends: ``finish()``)."""

    def __init__(self, tools: Owned):
        out = C.c_void_p()
        check(lib.pllm_tools_stream_create(tools.ptr, C.byref(out)))
        self._tools = tools  # the stream reads the tools' vocabulary and format
        self._h = Owned(out.value, lib.pllm_tools_stream_free)
        self.tool_calls: list[dict] = []

    def _take(self, token: int) -> str:
        out = C.c_void_p()
        check(lib.pllm_tools_stream_push(self._h.ptr, token, C.byref(out)))
        delta = json.loads(take_string(out.value))
        for d in delta["tool_calls"]:
            if "id" in d:  # a call's first delta
                self.tool_calls.append({"id": d["id"], "type": "function",
                                        "function": {"name": d["name"], "arguments": ""}})
            self.tool_calls[d["index"]]["function"]["arguments"] += d["arguments"]
        return delta["content"]

    def push(self, token: int) -> str:
        return self._take(token)

    def finish(self) -> str:
        return self._take(-1)


DRAFT_LOOKUP, DRAFT_MODEL, DRAFT_SKIP = 1, 2, 3  # pllm_draft_kind


def draft_of(draft: Any, draft_max: int) -> Optional[DraftParams]:
    """Speculative decoding's parameters: None or "none" (plain decoding), "lookup", a Model
    (a draft model with the same vocabulary), {"skip_layers": [...]} or {"skip_file": path}
    (Session.calibrate_draft's file). The struct keeps what its pointers point at."""
    if draft is None or draft == "none":
        return None
    dp = lib.pllm_draft_default_params()
    if not isinstance(draft_max, int) or not 1 <= draft_max <= 32:
        raise InvalidArgument("draft_max must be an int in 1..32")
    dp.max_tokens = draft_max
    if draft == "lookup":
        dp.kind = DRAFT_LOOKUP
    elif hasattr(draft, "_owned"):
        dp.kind = DRAFT_MODEL
        dp.model_owner = draft._owned()
        dp.model = dp.model_owner.ptr
    elif isinstance(draft, dict) and len(draft) == 1 and "skip_layers" in draft:
        layers = list(draft["skip_layers"])
        if not layers or not all(isinstance(v, int) and 0 <= v < 2**31 for v in layers):
            raise InvalidArgument("skip_layers must be a non-empty list of layer indices")
        dp.kind = DRAFT_SKIP
        dp.layers_buf = (C.c_int32 * len(layers))(*layers)
        dp.skip_layers, dp.n_skip_layers = dp.layers_buf, len(layers)
    elif isinstance(draft, dict) and len(draft) == 1 and "skip_file" in draft:
        dp.kind = DRAFT_SKIP
        dp.skip_file = str(draft["skip_file"]).encode("utf-8")
    else:
        raise InvalidArgument('draft must be None, "none", "lookup", a Model, {"skip_layers": [...]} or '
                              '{"skip_file": path}')
    return dp


def sampling(model: int, max_tokens: int, temperature: float | None, top_p: float | None,
             top_k: int | None, min_p: float | None, repeat_penalty: float | None, seed: int | None,
             stop: str | Sequence[str] | None, response_format: Any = None,
             grammar: str | None = None, tools: Optional[Owned] = None, draft: Any = None,
             draft_max: int = 8) -> SamplingParams:
    """The model's own sampling (pllm_model_sampling_params: greedy unless its file says
    otherwise) with the given fields replaced. The stop strings' buffers and the grammar live as
    long as the struct (ctypes keeps what is assigned to a pointer field; the grammar's owner is
    kept on the struct)."""
    sp = lib.pllm_model_sampling_params(model)
    if tools is not None and (response_format is not None or grammar is not None):
        raise InvalidArgument("tools exclude response_format and grammar")
    sp.grammar_owner = tools if tools is not None else grammar_of(model, response_format, grammar)
    if tools is not None:
        sp.grammar = lib.pllm_tools_grammar(tools.ptr)  # owned by the tools handle kept above
    elif sp.grammar_owner is not None:
        sp.grammar = sp.grammar_owner.ptr
    sp.draft_owner = draft_of(draft, draft_max)
    if sp.draft_owner is not None:
        sp.draft = C.addressof(sp.draft_owner)
    sp.max_tokens = max_tokens
    for name, value in (("temperature", temperature), ("top_p", top_p), ("top_k", top_k),
                        ("min_p", min_p), ("repeat_penalty", repeat_penalty)):
        if value is not None:
            setattr(sp, name, value)
    if seed is not None:
        if not 0 <= seed < 2**64:
            raise InvalidArgument("seed must be in [0, 2**64)")
        sp.seed = seed
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if stops:
        if not all(isinstance(s, str) and s and "\0" not in s for s in stops):
            raise InvalidArgument("stop strings must be non-empty str without NUL")
        arr = (C.c_char_p * len(stops))(*(s.encode("utf-8") for s in stops))
        sp.stop_strings, sp.n_stop_strings = arr, len(stops)
    return sp


def run(session: Optional[int], ids: Sequence[int], sp: SamplingParams, on_text: Callable[[str], None],
        stop_flag: threading.Event, on_token_id: Optional[Callable[[int], None]] = None) -> Stats:
    """Generate on this thread, calling on_text with each piece of text. Stops early when
    stop_flag is set (checked at every token; pllm_session_cancel covers the prefill)."""
    raised: list[BaseException] = []

    def on_token(token: int, text, n: int, _user) -> int:
        # Nothing may propagate into C: an exception (KeyboardInterrupt included) stops the
        # generation and is raised again once pllm_generate has returned.
        try:
            if on_token_id is not None:
                on_token_id(token)
            if n:
                on_text(C.string_at(text, n).decode("utf-8", errors="replace"))
            return 1 if stop_flag.is_set() else 0
        except BaseException as e:  # noqa: BLE001 - re-raised below
            raised.append(e)
            return 1

    cb = TOKEN_FN(on_token)
    arr = (C.c_int32 * len(ids))(*ids)
    st = GenerationStats()
    status = lib.pllm_generate(session, arr, len(ids), C.byref(sp), cb, None, C.byref(st))
    if raised:
        raise raised[0]
    check(status)
    reason = STOP_REASONS[st.stop_reason] if 0 <= st.stop_reason < len(STOP_REASONS) else str(st.stop_reason)
    return Stats(st.n_prompt_tokens, st.n_reused_tokens, st.n_cached_tokens, st.n_generated, st.ttft_ms,
                 st.prefill_tps, st.decode_tps, reason, st.n_draft_passes, st.n_drafted, st.n_draft_accepted)
