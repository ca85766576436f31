"""Several Python threads: sessions of one model and separate models generate at once (ctypes
releases the GIL in the engine), with the same greedy answers as one at a time."""
from __future__ import annotations

import threading

import pocketllm
from conftest import THREADS

QUESTIONS = ["What is the capital of France?", "What is the capital of Germany?"]


def chat(target, question: str, out: dict, key) -> None:
    try:
        out[key] = str(target.chat([{"role": "user", "content": question}], max_tokens=24))
    except BaseException as e:  # noqa: BLE001 - reported by the main thread
        out[key] = e


def run_pair(targets) -> dict:
    out: dict = {}
    threads = [threading.Thread(target=chat, args=(t, q, out, i)) for i, (t, q) in enumerate(zip(targets, QUESTIONS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return out


def test_two_sessions_of_one_model(model):
    alone = [str(model.chat([{"role": "user", "content": q}], max_tokens=24)) for q in QUESTIONS]
    with model.session() as a, model.session() as b:
        out = run_pair([a, b])
    assert [out[0], out[1]] == alone
    assert "Paris" in alone[0] and "Berlin" in alone[1]


def test_two_models(smollm2, model):
    alone = [str(model.chat([{"role": "user", "content": q}], max_tokens=24)) for q in QUESTIONS]
    with pocketllm.Model(smollm2, threads=THREADS) as m1, pocketllm.Model(smollm2, threads=THREADS) as m2:
        out = run_pair([m1, m2])
    assert [out[0], out[1]] == alone


def test_one_session_from_two_threads_takes_turns(model):
    out = run_pair([model, model])  # the default session: the calls wait for each other
    assert "Paris" in out[0] and "Berlin" in out[1]
