"""The prefix cache: KV snapshots of 64-token prompt prefixes shared by a model's sessions."""
from __future__ import annotations

import ctypes as C
import os
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Optional, Union

from ._errors import InvalidArgument, check
from ._lib import CACHE_COUNTERS, Owned, PrefixCacheCounters, lib

if TYPE_CHECKING:
    from ._model import Model


@dataclass(frozen=True)
class CacheCounters:
    """pllm_prefix_cache_counters: hits and misses per tier, what was stored and restored."""

    ram_hits: int
    ram_misses: int
    disk_hits: int
    disk_misses: int
    inserts: int           #: snapshots offered by generations
    ram_entries: int
    ram_bytes: int
    disk_writes: int
    disk_write_bytes: int
    disk_evictions: int
    disk_bad_files: int    #: corrupt, truncated, foreign or old files deleted
    disk_write_errors: int
    restored_tokens: int   #: prompt tokens restored instead of computed
    computed_tokens: int   #: prompt tokens computed by prefill (sessions using the cache)


assert tuple(f.name for f in fields(CacheCounters)) == CACHE_COUNTERS


class PrefixCache:
    """A prompt-prefix cache for one model's sessions: a prompt that starts like an earlier
    one (a system prompt, a document) restores that part of the KV cache instead of computing
    it; greedy output is unchanged. RAM tier of ``ram_bytes`` and, with ``dir``, a disk tier
    (``disk_bytes``, files unused for ``ttl_seconds`` expire). None keeps the engine's default
    (256 MiB RAM, 1 GiB disk, 7 days). Use it with ``model.prefix_cache = cache`` or
    ``model.session(prefix_cache=cache)``."""

    def __init__(self, model: "Model", *, ram_bytes: Optional[int] = None,
                 dir: Optional[Union[str, os.PathLike]] = None, disk_bytes: Optional[int] = None,
                 ttl_seconds: Optional[int] = None):
        p = lib.pllm_prefix_cache_default_params()
        if ram_bytes is not None:
            p.ram_bytes = ram_bytes
        if dir is not None:
            p.dir = os.fsencode(dir)
        if disk_bytes is not None:
            p.disk_bytes = disk_bytes
        if ttl_seconds is not None:
            p.ttl_seconds = ttl_seconds
        out = C.c_void_p()
        check(lib.pllm_prefix_cache_create(model._ptr(), C.byref(p), C.byref(out)))
        # Sessions that use the cache keep the engine's side alive; this is the handle only.
        self._h = Owned(out.value, lib.pllm_prefix_cache_free)

    def counters(self) -> CacheCounters:
        c = PrefixCacheCounters()
        check(lib.pllm_prefix_cache_stats(self._ptr(), C.byref(c)))
        return CacheCounters(*(getattr(c, name) for name in CACHE_COUNTERS))

    def flush(self) -> None:
        """Wait until the disk tier has written everything queued so far."""
        lib.pllm_prefix_cache_flush(self._ptr())

    def close(self) -> None:
        self._h.close()

    def _ptr(self) -> int:
        if not self._h.ptr:
            raise InvalidArgument("the prefix cache is closed")
        return self._h.ptr

    def __enter__(self) -> "PrefixCache":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
