"""ctypes declarations of the C API (include/pocketllm/pocketllm.h) and the library's loading.

The structs mirror the header field for field; keep them in step with it. The library is a
CDLL, so ctypes releases the GIL for the whole of every call: generation on one Python thread
does not hold up the others.
"""
from __future__ import annotations

import ctypes as C
import os
import sys
from pathlib import Path
from typing import Optional

c_int, c_i32, c_i64, c_u64, c_size, c_float, c_double = (
    C.c_int, C.c_int32, C.c_int64, C.c_uint64, C.c_size_t, C.c_float, C.c_double)
c_void_p, c_char_p = C.c_void_p, C.c_char_p

PROGRESS_FN = C.CFUNCTYPE(c_int, c_float, c_void_p)
# The text argument is a pointer plus length (it need not end in NUL), so not c_char_p.
TOKEN_FN = C.CFUNCTYPE(c_int, c_i32, C.POINTER(C.c_char), c_size, c_void_p)


class ModelParams(C.Structure):
    _fields_ = [("vocab_only", c_int), ("progress", PROGRESS_FN), ("progress_user_data", c_void_p),
                ("repack_weights", c_int), ("chat_template", c_int)]


class Image(C.Structure):  # pllm_image
    _fields_ = [("data", C.c_void_p), ("size", C.c_size_t)]


class SessionParams(C.Structure):
    _fields_ = [(name, c_i32) for name in (
        "n_ctx", "n_threads", "int8_activations", "no_fuse", "profile", "kv_type", "kv_window",
        "kv_sinks", "n_batch", "f16_activations", "static_activations", "backend",
        "activations")]


class SamplingParams(C.Structure):
    _fields_ = [("temperature", c_float), ("top_k", c_i32), ("top_p", c_float), ("min_p", c_float),
                ("repeat_penalty", c_float), ("repeat_last_n", c_i32), ("seed", c_u64),
                ("max_tokens", c_i32), ("stop_strings", C.POINTER(c_char_p)), ("n_stop_strings", c_size),
                ("ignore_eos", c_i32), ("grammar", c_void_p), ("draft", c_void_p)]


class DraftParams(C.Structure):
    _fields_ = [("kind", c_int), ("max_tokens", c_i32), ("model", c_void_p), ("skip_layers", C.POINTER(c_i32)),
                ("n_skip_layers", c_size), ("skip_file", c_char_p)]


class GenerationStats(C.Structure):
    _fields_ = [("n_prompt_tokens", c_i32), ("n_reused_tokens", c_i32), ("n_generated", c_i32),
                ("ttft_ms", c_double), ("prefill_tps", c_double), ("decode_tps", c_double),
                ("stop_reason", c_int), ("n_cached_tokens", c_i32), ("n_draft_passes", c_i32),
                ("n_drafted", c_i32), ("n_draft_accepted", c_i32)]


class ChatMessage(C.Structure):
    _fields_ = [("role", c_char_p), ("content", c_char_p)]


class PrefixCacheParams(C.Structure):
    _fields_ = [("ram_bytes", c_u64), ("dir", c_char_p), ("disk_bytes", c_u64), ("ttl_seconds", c_i64)]


CACHE_COUNTERS = ("ram_hits", "ram_misses", "disk_hits", "disk_misses", "inserts", "ram_entries",
                  "ram_bytes", "disk_writes", "disk_write_bytes", "disk_evictions", "disk_bad_files",
                  "disk_write_errors", "restored_tokens", "computed_tokens")


class PrefixCacheCounters(C.Structure):
    _fields_ = [(name, c_u64) for name in CACHE_COUNTERS]


def _library_path() -> str:
    # POCKETLLM_LIBRARY points the package at another build of the library (a sanitizer
    # build, a developer's tree); by default it is the one installed beside this file.
    env = os.environ.get("POCKETLLM_LIBRARY")
    if env:
        return env
    name = {"darwin": "libpocketllm.dylib", "win32": "pocketllm.dll"}.get(sys.platform, "libpocketllm.so")
    return str(Path(__file__).with_name(name))


lib = C.CDLL(_library_path())

P = C.POINTER
_SIGNATURES = {
    # name: (restype, argtypes)
    "pllm_last_error": (c_char_p, []),
    "pllm_status_string": (c_char_p, [c_int]),
    "pllm_version": (c_char_p, []),
    "pllm_isa": (c_char_p, []),
    "pllm_default_threads": (c_i32, []),
    "pllm_model_default_params": (ModelParams, []),
    "pllm_model_load": (c_int, [c_char_p, P(ModelParams), P(c_void_p)]),
    "pllm_model_free": (None, [c_void_p]),
    "pllm_model_n_vocab": (c_i32, [c_void_p]),
    "pllm_model_n_ctx_train": (c_i32, [c_void_p]),
    "pllm_model_bos": (c_i32, [c_void_p]),
    "pllm_model_eos": (c_i32, [c_void_p]),
    "pllm_model_is_eog": (c_int, [c_void_p, c_i32]),
    "pllm_tokenize": (c_int, [c_void_p, c_char_p, c_size, c_int, c_int, P(c_i32), c_size, P(c_size)]),
    "pllm_tokenize_prompt": (c_int, [c_void_p, c_char_p, c_size, P(c_i32), c_size, P(c_size)]),
    "pllm_detokenize": (c_int, [c_void_p, P(c_i32), c_size, c_int, C.c_char_p, c_size, P(c_size)]),
    "pllm_chat_apply_template": (c_int, [c_void_p, P(ChatMessage), c_size, c_int, P(c_void_p)]),
    "pllm_chat_apply_template_vars": (c_int, [c_void_p, P(ChatMessage), c_size, c_int, c_char_p, P(c_void_p)]),
    "pllm_string_free": (None, [c_void_p]),
    "pllm_vision_load": (c_int, [c_void_p, c_char_p, c_int, P(c_void_p)]),
    "pllm_vision_free": (None, [c_void_p]),
    "pllm_vision_tokens_per_tile": (c_i32, [c_void_p]),
    "pllm_vision_tokenize": (c_int, [c_void_p, c_void_p, c_char_p, c_size, P(Image), c_size, P(c_i32), c_size,
                                     P(c_size)]),
    "pllm_activations_parse": (c_int, [c_char_p, P(c_i32)]),
    "pllm_activations_name": (c_char_p, [c_i32]),
    "pllm_activations_repack": (c_i32, [c_i32]),
    "pllm_session_default_params": (SessionParams, []),
    "pllm_session_create": (c_int, [c_void_p, P(SessionParams), P(c_void_p)]),
    "pllm_session_free": (None, [c_void_p]),
    "pllm_session_n_ctx": (c_i32, [c_void_p]),
    "pllm_session_kv_bytes": (c_u64, [c_void_p]),
    "pllm_session_kv_committed_bytes": (c_u64, [c_void_p]),
    "pllm_session_reset": (None, [c_void_p]),
    "pllm_session_cancel": (None, [c_void_p]),
    "pllm_model_sampling_params": (SamplingParams, [c_void_p]),
    "pllm_grammar_create": (c_int, [c_void_p, c_int, c_char_p, P(c_void_p)]),
    "pllm_grammar_free": (None, [c_void_p]),
    "pllm_tools_create": (c_int, [c_void_p, c_char_p, c_char_p, c_int, P(c_void_p)]),
    "pllm_tools_free": (None, [c_void_p]),
    "pllm_tools_grammar": (c_void_p, [c_void_p]),
    "pllm_chat_apply_template_json": (c_int, [c_void_p, c_char_p, c_void_p, c_int, c_char_p, P(c_void_p)]),
    "pllm_tools_parse": (c_int, [c_void_p, P(c_i32), c_size, P(c_void_p)]),
    "pllm_tools_stream_create": (c_int, [c_void_p, P(c_void_p)]),
    "pllm_tools_stream_free": (None, [c_void_p]),
    "pllm_tools_stream_push": (c_int, [c_void_p, c_i32, P(c_void_p)]),
    "pllm_generate": (c_int, [c_void_p, P(c_i32), c_size, P(SamplingParams), TOKEN_FN, c_void_p,
                              P(GenerationStats)]),
    "pllm_draft_default_params": (DraftParams, []),
    "pllm_draft_calibrate": (c_int, [c_void_p, P(c_i32), c_size, c_i32, c_char_p, P(c_double)]),
    "pllm_prefix_cache_default_params": (PrefixCacheParams, []),
    "pllm_prefix_cache_create": (c_int, [c_void_p, P(PrefixCacheParams), P(c_void_p)]),
    "pllm_prefix_cache_free": (None, [c_void_p]),
    "pllm_session_set_prefix_cache": (c_int, [c_void_p, c_void_p]),
    "pllm_prefix_cache_stats": (c_int, [c_void_p, P(PrefixCacheCounters)]),
    "pllm_prefix_cache_flush": (None, [c_void_p]),
}
for _name, (_res, _args) in _SIGNATURES.items():
    _fn = getattr(lib, _name)
    _fn.restype, _fn.argtypes = _res, _args


def take_string(ptr: int | None) -> str:
    """The text of a string the library allocated, freed with pllm_string_free."""
    if not ptr:
        return ""
    try:
        return C.string_at(ptr).decode("utf-8", errors="replace")
    finally:
        lib.pllm_string_free(ptr)


class Owned:
    """A C handle freed once: on close(), or when the last Python object holding it (a Model,
    its Sessions, a running generation) lets go. Generations hold the handle, not the
    Session, so dropping a Session mid-stream never frees what the engine is using."""

    __slots__ = ("ptr", "_free")

    def __init__(self, ptr: Optional[int], free):
        self.ptr, self._free = ptr, free

    def close(self) -> None:
        ptr, self.ptr = self.ptr, None
        if ptr:
            self._free(ptr)

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone already
            pass
