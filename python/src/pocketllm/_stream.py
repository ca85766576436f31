"""Generation on a worker thread that hands its text pieces over a queue (streams, and the
blocking calls, which read a stream to its end).

pllm_generate reports tokens through a callback and only returns at the end, so a Python
iterator cannot yield from inside it; a worker thread can, and ctypes releases the GIL while
the engine computes, so the consumer runs meanwhile. The queue is unbounded: the worker never
waits for the consumer, so an abandoned stream cannot hold the session forever (it ends at
max_tokens), and cancelling is always prompt.
"""
from __future__ import annotations

import atexit
import queue
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Optional

from ._generate import Stats

_PIECE, _DONE, _ERROR = 0, 1, 2

# Streams still running, cancelled at exit so that no worker is inside the engine while the
# interpreter shuts down.
_live: "weakref.WeakSet[Stream]" = weakref.WeakSet()


@atexit.register
def _cancel_live() -> None:
    for s in list(_live):
        s.cancel()


def _work(start: Callable[[Callable[[str], None], threading.Event], Stats], q: queue.SimpleQueue,
          stop: threading.Event, release: Callable[[], None]) -> None:
    # Holds no reference to the Stream, so dropping the stream (a `break` out of the loop)
    # really drops it, and its __del__ cancels the generation.
    try:
        q.put((_DONE, start(lambda piece: q.put((_PIECE, piece)), stop)))
    except BaseException as e:  # noqa: BLE001 - handed to the consumer
        q.put((_ERROR, e))
    finally:
        release()


class Stream(Iterator[str]):
    """The pieces of a reply, as the engine produces them (``model.chat(..., stream=True)``).

    Iterate it for the text pieces; ``text`` is what came so far, ``stats`` the generation's
    Stats once it ended. ``cancel()`` (from any thread), leaving a ``with`` block, or dropping
    the stream (a ``break`` out of the ``for`` loop) stops the generation at the next token and
    waits for the engine to let go of the session, which is then ready for the next call.
    """

    #: With tools: the reply's calls (OpenAI's dicts), filled as they stream; complete at the end.
    tool_calls: list = []

    def __init__(self, start: Callable[[Callable[[str], None], threading.Event], Stats],
                 stop: threading.Event, cancel_engine: Callable[[], None], release: Callable[[], None]):
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._stop = stop
        self._cancel_engine = cancel_engine
        self._pieces: list[str] = []
        self._finished = False
        self._error: Optional[BaseException] = None
        self._consume = threading.Lock()  # one consumer of the queue at a time
        self.stats: Optional[Stats] = None
        self._thread = threading.Thread(target=_work, args=(start, self._q, stop, release),
                                        name="pocketllm-generate", daemon=True)
        self._thread.start()
        _live.add(self)

    @property
    def text(self) -> str:
        """The text produced so far (all of it once the stream has ended)."""
        return "".join(self._pieces)

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> str:
        with self._consume:
            while not self._finished:
                kind, value = self._q.get()
                if kind == _PIECE:
                    self._pieces.append(value)
                    if not self._stop.is_set():  # after cancel() nothing more is yielded
                        return value
                    continue
                self._end(kind, value)
            if self._error is not None:
                err, self._error = self._error, None
                raise err
            raise StopIteration

    def _end(self, kind: int, value) -> None:
        # The worker put its last item; joining it means it has released the session.
        self._thread.join()
        self._finished = True
        _live.discard(self)
        if kind == _DONE:
            self.stats = value
        else:
            self._error = value

    def cancel(self) -> None:
        """Stop the generation and wait until the engine has stopped (milliseconds). Safe to
        call from any thread and more than once; the pieces produced so far stay in ``text``."""
        if self._finished:
            return
        self._stop.set()
        self._cancel_engine()  # also stops a prefill in progress
        if threading.current_thread() is self._thread:
            return  # collected on its own worker: the flags above are enough
        self._thread.join()
        with self._consume:
            while not self._finished:
                kind, value = self._q.get()
                if kind == _PIECE:
                    self._pieces.append(value)
                else:
                    self._end(kind, value)

    close = cancel

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc) -> None:
        self.cancel()

    def __del__(self):
        try:
            self.cancel()
        except Exception:  # interpreter shutdown
            pass
