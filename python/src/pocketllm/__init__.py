"""PocketLLM: small language models (GGUF) on the CPU, from Python.

    import pocketllm
    with pocketllm.Model("SmolLM2-135M-Instruct.Q4_1.gguf") as model:
        print(model.chat([{"role": "user", "content": "What is the capital of France?"}]))
        for piece in model.chat([{"role": "user", "content": "Tell me a story."}], stream=True):
            print(piece, end="", flush=True)

Bindings (ctypes) over the engine's C API, libpocketllm, which the package carries. See
python/README.md in the repository for the whole API.
"""
from __future__ import annotations

__version__ = "0.1.0"

from ._cache import CacheCounters, PrefixCache
from ._errors import (BadFormat, Cancelled, Error, InternalError, InvalidArgument, IoError, OutOfMemory,
                      OutOfRange, Unsupported)
from ._generate import Completion, Stats
from ._lib import lib as _lib
from ._model import Model
from ._session import Session
from ._stream import Stream


def engine_version() -> str:
    """The version of the C library (pllm_version)."""
    return _lib.pllm_version().decode()


def isa() -> str:
    """The kernel instruction set the engine chose for this CPU ("avx512", "avx2", "neon", ...)."""
    return _lib.pllm_isa().decode()


def default_threads() -> int:
    """Threads a session uses by default: one per performance core."""
    return _lib.pllm_default_threads()


__all__ = ["Model", "Session", "Stream", "Completion", "Stats", "PrefixCache", "CacheCounters", "Error",
           "InvalidArgument", "IoError", "BadFormat", "Unsupported", "OutOfRange", "OutOfMemory", "Cancelled",
           "InternalError", "engine_version", "isa", "default_threads", "__version__"]
