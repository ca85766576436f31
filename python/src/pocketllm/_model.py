"""Model: a loaded GGUF file (weights, tokenizer, chat template) and its default session."""
from __future__ import annotations

import ctypes as C
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, Optional, Union, overload

from . import _text
from ._cache import PrefixCache
from ._errors import InvalidArgument, check
from ._generate import Completion
from ._lib import PROGRESS_FN, Owned, lib
from ._session import Session, activations_value, session_params
from ._stream import Stream


class Model:
    """A GGUF model loaded for inference.

    ``n_ctx`` (0: min(training context, 4096)), ``threads`` (0: one per performance core),
    ``kv_type`` ("f16", "q8", "q4", "f32"), ``kv_window``/``kv_sinks`` (a sliding context),
    ``batch`` (prefill tokens per pass, 0: 64) and ``activations`` ("int16" the default, "exact",
    "int8", "f16", "static": the C API's words; "f32" is still accepted for "exact") are the
    settings of its sessions. ``repack`` holds Q4_0/Q4_1/Q8_0 (for the int16 kernels also Q4_K, Q5_K, Q6_K)
    weights as panels for the x86 kernels that read them (None: what suits the activation mode,
    pllm_activations_repack: for the int16 kernels, every panel type with int8/static, none with
    exact/f16; True: every panel type; False: none). ``vocab_only``
    loads the tokenizer alone (tokenize, templates; no generation). ``progress(fraction)``
    is called during the load; returning False aborts it (Cancelled).

    ``chat``/``complete``/``cancel``/``reset``/``prefix_cache`` act on the model's default
    session; ``session()`` makes more. Close it with ``close()`` or a ``with`` block.

    ``mmproj``: a vision encoder (llama.cpp's mmproj GGUF for this model: SmolVLM's idefics3 or
    Gemma 3's projector); chat messages may then hold images as content parts (``image_url``
    with a data: URI, or ``{"type": "image", "image": path or bytes}``). ``image_int8``: the
    encoder's products with int8 activations (by default int16 on quantised weights, exact on
    F16 / F32 ones, as the text path).
    """

    def __init__(self, path: Union[str, os.PathLike], *, n_ctx: int = 0, threads: int = 0, kv_type: str = "f16",
                 kv_window: int = 0, kv_sinks: int = 4, batch: int = 0, activations: str = "int16",
                 backend: str = "cpu", repack: Optional[bool] = None, vocab_only: bool = False,
                 progress: Optional[Callable[[float], Optional[bool]]] = None,
                 mmproj: Union[str, os.PathLike, None] = None, image_int8: bool = False):
        self.path = os.fspath(path)
        self._settings: dict[str, Any] = dict(n_ctx=n_ctx, threads=threads, kv_type=kv_type, kv_window=kv_window,
                              kv_sinks=kv_sinks, batch=batch, activations=activations, backend=backend)
        session_params(**self._settings)  # a bad setting fails before the (slow) load
        mp = lib.pllm_model_default_params()
        mp.vocab_only = int(vocab_only)
        if repack is None:  # PLLM_REPACK_ON (1), _AUTO (0) or _OFF (-1)
            mp.repack_weights = lib.pllm_activations_repack(activations_value(activations))
        else:
            mp.repack_weights = 1 if repack else -1
        raised: list[BaseException] = []
        if progress is not None:
            def on_progress(fraction: float, _user) -> int:
                try:
                    return 1 if progress(fraction) is False else 0
                except BaseException as e:  # noqa: BLE001 - nothing may cross into C; raised below
                    raised.append(e)
                    return 1
            mp.progress = PROGRESS_FN(on_progress)
        out = C.c_void_p()
        status = lib.pllm_model_load(os.fsencode(self.path), C.byref(mp), C.byref(out))
        if raised:
            raise raised[0]
        check(status)
        self._m: Optional[Owned] = Owned(out.value, lib.pllm_model_free)
        self.vocab_only = vocab_only
        self._vision: Optional[Owned] = None
        if mmproj is not None:  # before the sessions: their batch must hold an image tile
            v = C.c_void_p()
            check(lib.pllm_vision_load(self._m.ptr, os.fsencode(mmproj), int(image_int8), C.byref(v)))
            self._vision = Owned(v.value, lib.pllm_vision_free)
            tile = lib.pllm_vision_tokens_per_tile(v.value)
            self._settings["batch"] = max(self._settings["batch"] or 64, tile)
        # Made now so that a setting the engine refuses (or too little memory) shows here.
        self._session: Optional[Session] = None if vocab_only else Session(self)

    # ---- tokenizer and template -----------------------------------------------------------

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = False) -> list[int]:
        """Token ids of ``text``: with ``add_special`` the BOS the model wants; with
        ``parse_special`` special tokens written as text (``<|im_start|>``) become their ids."""
        if not isinstance(text, str):
            raise InvalidArgument(f"text must be a str, not {type(text).__name__}")
        return _text.tokenize(self._ptr(), text, add_special, parse_special)

    def detokenize(self, ids: Iterable[int], render_special: bool = False) -> str:
        """The text of token ids (special tokens written out with ``render_special``)."""
        return _text.detokenize(self._ptr(), ids, render_special)

    def apply_chat_template(self, messages: Sequence[_text.Message], add_generation_prompt: bool = True,
                            chat_template_kwargs: Optional[Mapping[str, Any]] = None) -> str:
        """``messages`` rendered with the model's chat template (what ``chat`` generates from);
        ``chat_template_kwargs`` are variables the template reads, e.g. ``{"enable_thinking": False}``."""
        return _text.apply_template(self._ptr(), messages, add_generation_prompt, chat_template_kwargs)

    # ---- generation on the default session ----------------------------------------------

    @overload
    def chat(self, messages: Sequence[_text.Message], *, stream: Literal[False] = ..., **kw: Any) -> Completion: ...

    @overload
    def chat(self, messages: Sequence[_text.Message], *, stream: Literal[True], **kw: Any) -> Stream: ...

    def chat(self, messages, *, stream=False, **kw):
        """Session.chat on the model's default session: ``max_tokens=256``, ``temperature``,
        ``top_p``, ``top_k``, ``min_p``, ``repeat_penalty``, ``seed``, ``stop``."""
        return self._default().chat(messages, stream=stream, **kw)

    @overload
    def complete(self, prompt: Union[str, Sequence[int]], *, stream: Literal[False] = ..., **kw: Any) -> Completion: ...

    @overload
    def complete(self, prompt: Union[str, Sequence[int]], *, stream: Literal[True], **kw: Any) -> Stream: ...

    def complete(self, prompt, *, stream=False, **kw):
        """Session.complete on the model's default session."""
        return self._default().complete(prompt, stream=stream, **kw)

    def cancel(self) -> None:
        """Stop the default session's generation (from any thread)."""
        if self._session is not None:
            self._session.cancel()

    def reset(self) -> None:
        """Forget the default session's conversation."""
        self._default().reset()

    def session(self, **overrides: Any) -> Session:
        """A new session (its own conversation and KV cache) with the model's settings;
        keyword arguments override them (n_ctx, threads, kv_type, ..., prefix_cache)."""
        return Session(self, **overrides)

    @property
    def prefix_cache(self) -> Optional[PrefixCache]:
        """The default session's prefix cache (a PrefixCache of this model, or None)."""
        return self._default().prefix_cache

    @prefix_cache.setter
    def prefix_cache(self, cache: Optional[PrefixCache]) -> None:
        self._default().prefix_cache = cache

    # ---- facts ------------------------------------------------------------------------------

    @property
    def n_vocab(self) -> int:
        return lib.pllm_model_n_vocab(self._ptr())

    @property
    def n_ctx_train(self) -> int:
        return lib.pllm_model_n_ctx_train(self._ptr())

    @property
    def bos(self) -> Optional[int]:
        t = lib.pllm_model_bos(self._ptr())
        return t if t >= 0 else None

    @property
    def eos(self) -> Optional[int]:
        t = lib.pllm_model_eos(self._ptr())
        return t if t >= 0 else None

    def is_eog(self, token: int) -> bool:
        """True for the tokens that end the model's turn."""
        return bool(lib.pllm_model_is_eog(self._ptr(), token))

    @property
    def sampling_defaults(self) -> dict[str, Union[int, float]]:
        """The sampling the model's file asks for (greedy, temperature 0, when it says nothing)."""
        sp = lib.pllm_model_sampling_params(self._ptr())
        # The C floats, shown as their shortest decimal (0.95, not 0.949999988...).
        as_float = lambda v: float(f"{v:.7g}")  # noqa: E731
        return {"temperature": as_float(sp.temperature), "top_k": sp.top_k, "top_p": as_float(sp.top_p),
                "min_p": as_float(sp.min_p), "repeat_penalty": as_float(sp.repeat_penalty),
                "repeat_last_n": sp.repeat_last_n}

    # ---- lifetime -----------------------------------------------------------------------

    def close(self) -> None:
        """Stop and free the default session and let go of the weights (they are freed once
        the sessions made with ``session()`` are closed too). Idempotent."""
        if self._session is not None:
            self._session.close()
            self._session = None
        self._m = None
        self._vision = None

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._m is None else f"n_vocab={self.n_vocab}"
        return f"pocketllm.Model({self.path!r}, {state})"

    def _owned(self) -> Owned:
        if self._m is None:
            raise InvalidArgument("the model is closed")
        return self._m

    def _ptr(self) -> int:
        ptr = self._owned().ptr
        assert ptr, "a Model's handle is closed only by dropping it"
        return ptr

    def _default(self) -> Session:
        self._owned()
        if self._session is None:
            raise InvalidArgument("a vocab_only model cannot generate")
        return self._session
