"""The C API's statuses as exceptions: one class per pllm_status, all under pocketllm.Error.

Where a built-in exception means the same thing the class derives from it too, so code that
catches ValueError, OSError or MemoryError keeps working.
"""
from __future__ import annotations

from ._lib import lib


class Error(Exception):
    """A failed call into the engine. ``status`` is the pllm_status code, ``message`` the
    engine's message (pllm_last_error)."""

    status: int = 8

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class InvalidArgument(Error, ValueError):
    status = 1


class IoError(Error, OSError):
    status = 2


class BadFormat(Error):
    status = 3


class Unsupported(Error):
    status = 4


class OutOfRange(Error):
    status = 5


class OutOfMemory(Error, MemoryError):
    status = 6


class Cancelled(Error):
    status = 7


class InternalError(Error):
    status = 8


_BY_STATUS = {cls.status: cls for cls in
              (InvalidArgument, IoError, BadFormat, Unsupported, OutOfRange, OutOfMemory, Cancelled,
               InternalError)}


def error_for(status: int, message: str) -> Error:
    cls = _BY_STATUS.get(status, Error)
    return cls(message or lib.pllm_status_string(status).decode(), status)


def check(status: int) -> None:
    """Raise the exception for a failed call. The message is thread-local in the engine and
    read on the thread that made the call, right after it."""
    if status != 0:
        raise error_for(status, lib.pllm_last_error().decode("utf-8", errors="replace"))
