"""Session: one conversation (its own KV cache) over a model's weights."""
from __future__ import annotations

import ctypes as C
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Optional, Union, overload

from . import _text, _vision
from ._cache import PrefixCache
from ._errors import InvalidArgument, check
from ._generate import Completion, ToolCallStream, parse_tool_reply, run, sampling, tools_of
from ._lib import Owned, SessionParams, lib
from ._stream import Stream

if TYPE_CHECKING:
    from ._model import Model

KV_TYPES = {"f16": 0, "f32": 1, "q8": 2, "q4": 3}
# The activation modes' words are the C API's (pllm_activations_parse): int16, exact, int8, f16,
# static. "f32" is this binding's older word for exact, still accepted.
OLDER_ACTIVATIONS = {"f32": "exact"}
BACKENDS = {"cpu": 0, "auto": 1, "vulkan": 2}  # pllm_backend
SETTINGS = ("n_ctx", "threads", "kv_type", "kv_window", "kv_sinks", "batch", "activations", "backend")


def _i32(name: str, value: Any) -> int:
    # ctypes would wrap an out-of-range int silently.
    if not isinstance(value, int) or isinstance(value, bool) or not -2**31 <= value < 2**31:
        raise InvalidArgument(f"{name} must be a 32-bit int, not {value!r}")
    return value


def activations_value(activations: str) -> int:
    """The pllm_activations a word names (InvalidArgument, listing the words, for any other)."""
    if not isinstance(activations, str):
        raise InvalidArgument(f"activations must be a string, not {activations!r}")
    out = C.c_int32()
    if lib.pllm_activations_parse(OLDER_ACTIVATIONS.get(activations, activations).encode(), C.byref(out)) != 0:
        raise InvalidArgument("activations: " + lib.pllm_last_error().decode("utf-8", errors="replace"))
    return out.value


def session_params(n_ctx: int, threads: int, kv_type: str, kv_window: int, kv_sinks: int, batch: int,
                   activations: str, backend: str = "cpu") -> SessionParams:
    """The Python settings as pllm_session_params (the engine checks the values' ranges)."""
    p = lib.pllm_session_default_params()
    p.n_ctx, p.n_threads = _i32("n_ctx", n_ctx), _i32("threads", threads)
    p.kv_window, p.kv_sinks, p.n_batch = _i32("kv_window", kv_window), _i32("kv_sinks", kv_sinks), _i32("batch", batch)
    if kv_type not in KV_TYPES:
        raise InvalidArgument(f"kv_type must be one of {', '.join(KV_TYPES)}, not {kv_type!r}")
    p.kv_type = KV_TYPES[kv_type]
    p.activations = activations_value(activations)
    if backend not in BACKENDS:
        raise InvalidArgument(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    p.backend = BACKENDS[backend]
    return p


class Session:
    """One conversation over a model's weights: its own KV cache, so several sessions of one
    model hold separate conversations (and may run on separate threads). ``model.session()``
    makes one with the model's settings, any of them overridden; the model's own ``chat`` and
    ``complete`` use a default session.

    Each call passes the whole conversation; the session reuses the longest prefix of it that
    its KV cache already holds, so a chat costs only the new turn. Calls on one session take
    turns (a second one waits for the first, a stream included, to finish).
    """

    def __init__(self, model: "Model", *, prefix_cache: Optional[PrefixCache] = None, **overrides: Any):
        unknown = set(overrides) - set(SETTINGS)
        if unknown:
            raise TypeError(f"unknown session setting(s): {', '.join(sorted(unknown))}")
        settings = {**model._settings, **{k: v for k, v in overrides.items() if v is not None}}
        p = session_params(**settings)
        self._model = model._owned()  # the tokenizer and template come from the model
        self._vision = model._vision  # images in chat messages (None: the model has no mmproj)
        out = C.c_void_p()
        check(lib.pllm_session_create(self._model.ptr, C.byref(p), C.byref(out)))
        self._h = Owned(out.value, lib.pllm_session_free)
        self._lock = threading.Lock()
        self._stop = threading.Event()  # the generation in progress's
        self._cache: Optional[PrefixCache] = None
        if prefix_cache is not None:
            self.prefix_cache = prefix_cache

    # ---- generation ---------------------------------------------------------------------

    @overload
    def chat(self, messages: Sequence[_text.Message], *, stream: Literal[False] = ..., max_tokens: int = ...,
             temperature: Optional[float] = ..., top_p: Optional[float] = ..., top_k: Optional[int] = ...,
             min_p: Optional[float] = ..., repeat_penalty: Optional[float] = ..., seed: Optional[int] = ...,
             stop: Union[str, Sequence[str], None] = ..., response_format: Any = ...,
             grammar: Optional[str] = ..., tools: Optional[Sequence[Any]] = ..., tool_choice: Any = ...,
             parallel_tool_calls: bool = ...) -> Completion: ...

    @overload
    def chat(self, messages: Sequence[_text.Message], *, stream: Literal[True], max_tokens: int = ...,
             temperature: Optional[float] = ..., top_p: Optional[float] = ..., top_k: Optional[int] = ...,
             min_p: Optional[float] = ..., repeat_penalty: Optional[float] = ..., seed: Optional[int] = ...,
             stop: Union[str, Sequence[str], None] = ..., response_format: Any = ...,
             grammar: Optional[str] = ...) -> Stream: ...

    def chat(self, messages, *, stream=False, chat_template_kwargs=None, tools=None, tool_choice=None,
             parallel_tool_calls=True, **sampling_args):
        """Reply to ``messages`` (OpenAI's: [{"role": "system"|"user"|"assistant"|"tool", "content":
        str, ...}], assistant turns may carry ``tool_calls``, tool turns ``tool_call_id``) with the
        model's chat template (``chat_template_kwargs``: variables it reads, e.g.
        ``{"enable_thinking": False}`` for Qwen3). Sampling is the model's own (greedy unless its
        file says otherwise) with the given fields replaced; ``seed`` None keeps the engine's 0.
        ``response_format`` (OpenAI's dicts: json_object, json_schema; or a Pydantic model class)
        or ``grammar`` (GBNF) constrain the reply; a schema keyword the engine cannot enforce
        raises InvalidArgument naming it. ``tools`` (OpenAI tool dicts or Pydantic model
        classes), ``tool_choice`` ("auto", "none", "required" or a function's name) and
        ``parallel_tool_calls``: the reply's calls are in ``.tool_calls`` (valid against their
        schemas; the text is the rest). Returns a Completion (a str with ``.stats``) or, with
        ``stream=True``, a Stream of text pieces (with tools: the content; the calls fill its
        ``tool_calls`` as they come, complete once the stream ends). ``draft`` turns on
        speculative decoding with the same output: "lookup" (n-grams of the prompt), a draft
        Model with the same vocabulary, {"skip_layers": [...]} or {"skip_file": path} (see
        calibrate_draft); ``draft_max`` caps the guesses per verify pass."""
        model = self._model_ptr()
        messages, images = _vision.split_images(messages)
        if images and self._vision is None:
            raise InvalidArgument("image parts need a model loaded with mmproj= (its vision encoder)")
        th = None if tools is None else tools_of(model, tools, tool_choice, parallel_tool_calls)
        if th is None and tool_choice is not None:
            raise InvalidArgument("tool_choice needs tools")
        if th is None and not _text.uses_tool_turns(messages):
            text = _text.apply_template(model, messages, add_generation_prompt=True, template_vars=chat_template_kwargs)
        else:
            text = _text.apply_template_json(model, messages, None if th is None else th.ptr, True,
                                             chat_template_kwargs)
        ids = _vision.prompt_ids(self._vision.ptr, self._ptr(), text, images) if images else _text.prompt_ids(model, text)
        if th is None:
            return self._generate(ids, stream, **sampling_args)
        if stream:
            return self._generate(ids, True, tools=th, **sampling_args)
        tokens: list[int] = []
        done = self._generate(ids, False, tools=th, on_token_id=tokens.append, **sampling_args)
        parsed = parse_tool_reply(th, tokens)
        out = Completion(parsed["content"] or "", done.stats)
        out.tool_calls = parsed["tool_calls"]
        return out

    @overload
    def complete(self, prompt: Union[str, Sequence[int]], *, stream: Literal[False] = ..., **kw: Any) -> Completion: ...

    @overload
    def complete(self, prompt: Union[str, Sequence[int]], *, stream: Literal[True], **kw: Any) -> Stream: ...

    def complete(self, prompt, *, stream=False, **sampling_args):
        """Continue raw text (no chat template; special tokens written in it are parsed, BOS
        added when the model wants one) or a list of token ids. Same options as chat."""
        if isinstance(prompt, str):
            ids = _text.prompt_ids(self._model_ptr(), prompt)
        else:
            ids = [_i32("token id", t) for t in prompt]
        return self._generate(ids, stream, **sampling_args)

    def calibrate_draft(self, text: Union[str, Sequence[int]], path: Union[str, os.PathLike], *,
                        draft_max: int = 8) -> float:
        """Measure which layers a self-speculative draft (draft={"skip_file": path}) leaves out,
        on ``text`` (a calibration text like what the model will write, a few hundred tokens),
        and save them to ``path``. Returns the expected decode speed-up. Resets the session."""
        ids = _text.prompt_ids(self._model_ptr(), text) if isinstance(text, str) else [_i32("token id", t) for t in text]
        arr = (C.c_int32 * len(ids))(*ids)
        speedup = C.c_double()
        with self._lock:
            check(lib.pllm_draft_calibrate(self._ptr(), arr, len(ids), _i32("draft_max", draft_max),
                                           os.fsencode(path), C.byref(speedup)))
        return speedup.value

    def _generate(self, ids: list[int], stream: bool, *, max_tokens: int = 256, temperature: Optional[float] = None,
                  top_p: Optional[float] = None, top_k: Optional[int] = None, min_p: Optional[float] = None,
                  repeat_penalty: Optional[float] = None, seed: Optional[int] = None,
                  stop: Union[str, Sequence[str], None] = None, response_format: Any = None,
                  grammar: Optional[str] = None, tools: Any = None, draft: Any = None, draft_max: int = 8,
                  on_token_id: Any = None) -> Union[Completion, Stream]:
        sp = sampling(self._model_ptr(), _i32("max_tokens", max_tokens), temperature, top_p, top_k, min_p,
                      repeat_penalty, seed, stop, response_format, grammar, tools, draft, draft_max)
        h = self._h  # the generation holds the handle (not the Session) for as long as it runs
        self._lock.acquire()  # released by the worker when the generation ends
        try:
            self._ptr()  # closed (perhaps while this call waited for the lock)?
            self._stop = stop_flag = threading.Event()
            calls = ToolCallStream(tools) if stream and tools is not None else None
            if calls is None:
                def body(on_text, flag):
                    return run(h.ptr, ids, sp, on_text, flag, on_token_id)
            else:  # the shown text is the reply's content; its calls go to the stream's tool_calls
                def body(on_text, flag):
                    def on_token(token):
                        piece = calls.push(token)
                        if piece:
                            on_text(piece)
                    stats = run(h.ptr, ids, sp, lambda _text: None, flag, on_token)
                    rest = calls.finish()
                    if rest:
                        on_text(rest)
                    return stats
            gen = Stream(body, stop_flag, lambda: lib.pllm_session_cancel(h.ptr), self._lock.release)
            gen.tool_calls = calls.tool_calls if calls is not None else []
        except BaseException:
            self._lock.release()
            raise
        if stream:
            return gen
        # A blocking call is a stream read to the end: the engine's callbacks then run on the
        # worker, and Ctrl-C reaches this thread in the queue's wait, where it cancels the
        # generation (raised inside a ctypes callback it would only be printed and lost).
        try:
            for _ in gen:
                pass
        except BaseException:
            gen.cancel()
            raise
        assert gen.stats is not None  # set by the end of a generation that raised nothing
        return Completion(gen.text, gen.stats)

    def cancel(self) -> None:
        """Stop the generation running on this session (from any thread): a stream ends, a
        blocking call returns what it has with stop_reason "cancelled"."""
        self._stop.set()
        if self._h.ptr:
            lib.pllm_session_cancel(self._h.ptr)

    def reset(self) -> None:
        """Forget the conversation (empty the KV cache)."""
        with self._lock:
            lib.pllm_session_reset(self._ptr())

    # ---- state ----------------------------------------------------------------------------

    @property
    def prefix_cache(self) -> Optional[PrefixCache]:
        return self._cache

    @prefix_cache.setter
    def prefix_cache(self, cache: Optional[PrefixCache]) -> None:
        if cache is not None and not isinstance(cache, PrefixCache):
            raise InvalidArgument("prefix_cache must be a PrefixCache or None")
        with self._lock:
            check(lib.pllm_session_set_prefix_cache(self._ptr(), cache._ptr() if cache else None))
            self._cache = cache

    @property
    def n_ctx(self) -> int:
        """Context length in tokens."""
        return lib.pllm_session_n_ctx(self._ptr())

    @property
    def kv_bytes(self) -> int:
        """Bytes the KV cache reserves (what it holds once the context is full)."""
        return lib.pllm_session_kv_bytes(self._ptr())

    @property
    def kv_committed_bytes(self) -> int:
        """Bytes of the KV cache in memory now (it grows as the context fills)."""
        return lib.pllm_session_kv_committed_bytes(self._ptr())

    def close(self) -> None:
        """Stop any generation and free the KV cache. Idempotent."""
        self.cancel()
        with self._lock:
            self._h.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _ptr(self) -> int:
        ptr = self._h.ptr
        if not ptr:
            raise InvalidArgument("the session is closed")
        return ptr

    def _model_ptr(self) -> int:
        ptr = self._model.ptr
        assert ptr, "the session's reference keeps the model's handle open"
        return ptr
