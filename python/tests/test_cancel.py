"""Cancellation: a stream stops promptly however it is abandoned, and the model stays usable."""
from __future__ import annotations

import _thread
import gc
import signal
import threading
import time
import weakref

from conftest import CAPITAL

LONG = [{"role": "user", "content": "Write a very long story about a dragon and a knight."}]
N = 400  # far more tokens than a cancelled generation gets to


def test_cancel_mid_stream_is_prompt_and_the_model_still_answers(model):
    stream = model.chat(LONG, max_tokens=N, stream=True)
    got = [next(stream) for _ in range(3)]
    t0 = time.monotonic()
    stream.cancel()
    assert time.monotonic() - t0 < 2.0
    assert list(stream) == []  # nothing more after cancel()
    assert stream.stats.stop_reason == "cancelled"
    assert stream.stats.n_generated < 40 and stream.text.startswith("".join(got))
    stream.cancel()  # again: no-op
    assert "Paris" in model.chat(CAPITAL)


def test_breaking_out_of_the_loop_cancels(model):
    stream = model.chat(LONG, max_tokens=N, stream=True)
    ref = weakref.ref(stream)
    for i, _ in enumerate(stream):
        if i == 2:
            break
    del stream  # what leaving a `for piece in model.chat(...)` loop does
    gc.collect()
    assert ref() is None
    t0 = time.monotonic()
    reply = model.chat(CAPITAL)
    # Waiting for the abandoned generation would cost ~N tokens first.
    assert "Paris" in reply and time.monotonic() - t0 < reply.stats.ttft_ms / 1000 + 10


def test_cancel_a_blocking_chat_from_another_thread(model):
    timer = threading.Timer(0.5, model.cancel)
    timer.start()
    reply = model.chat(LONG, max_tokens=N)
    timer.join()
    assert reply.stats.stop_reason == "cancelled" and reply.stats.n_generated < N


def test_cancel_while_idle_does_not_stop_the_next_call(model):
    model.cancel()
    assert model.chat(CAPITAL).stats.stop_reason == "eog"


def test_cancel_from_another_thread_while_iterating(model):
    stream = model.chat(LONG, max_tokens=N, stream=True)
    first = next(stream)
    threading.Thread(target=stream.cancel).start()
    rest = list(stream)  # ends soon after the other thread's cancel
    assert stream.stats.stop_reason == "cancelled"
    assert stream.text.startswith(first + "".join(rest))


def test_ctrl_c_stops_a_blocking_chat(model):
    # The generation runs on a worker, so the interrupt reaches this thread in its wait (not
    # inside a ctypes callback, where Python would only print it) and cancels the generation.
    # With Python's own Ctrl-C handler, as in a terminal: a process started in the background
    # by a non-interactive shell inherits SIGINT ignored, and interrupt_main() then does nothing.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    returned = False
    timer = threading.Timer(0.5, _thread.interrupt_main)
    t0 = time.monotonic()
    try:
        timer.start()
        model.chat(LONG, max_tokens=N)
        returned = True
        time.sleep(5)  # the interrupt lands here if the chat was over before it
    except KeyboardInterrupt:
        pass
    finally:
        timer.join()
        signal.signal(signal.SIGINT, previous)
    assert not returned and time.monotonic() - t0 < 5
    assert "Paris" in model.chat(CAPITAL)
