"""A hybrid model's second kind of sequence state (lfm2's convolution rows, qwen35's DeltaNet
conv rows and state matrices, kept in the sequence's cache beside the attention layers' keys and
values) survives what the runtime does to a sequence: the server's prefix cache restores it (RAM tier: the same requests, several sessions) and a
greedy reply's every top-5 log-probability is what a server without the cache computes, bit for
bit, whether the request matches the entry's prompt or only its prefix. The KvCache rules themselves
(rollback within kConvRollback positions, snapshots) are tests/cpp/test_kv_cache.cpp's."""
from __future__ import annotations

import json
import re

import pytest

import tiny_models as tm
from server_util import Server

# 64+ tokens in the tiny byte-level vocabulary: the prefix cache keeps whole blocks of 64.
PROMPT = "the quick brown fox jumps over the lazy dog and then runs far away from the river bank"


def complete(server: Server, prompt: str, n: int = 8) -> list:
    """A greedy chat reply's tokens, each with its top-5 log-probabilities."""
    status, data = server.post("/v1/chat/completions", {
        "messages": [{"role": "user", "content": prompt}], "max_tokens": n, "temperature": 0,
        "logprobs": True, "top_logprobs": 5})
    assert status == 200, data
    content = json.loads(data)["choices"][0]["logprobs"]["content"]
    assert len(content) == n
    return [(t["token"], [(a["token"], a["logprob"]) for a in t["top_logprobs"]]) for t in content]


def metric(server: Server, name: str) -> float:
    status, data = server.get("/metrics")
    assert status == 200
    m = re.search(rf"^{name} (\S+)$", data.decode(), re.M)
    assert m, f"no {name} in /metrics"
    return float(m.group(1))


# qwen35: the DeltaNet layers' conv rows and delta-rule matrices, snapshotted at the 64-position
# checkpoint (KvCache::kDeltaCheckpoint) the prompt crossed and restored there.
def check_prefix_cache_round_trip(pllm_bin, model):
    """A server with the prefix cache answers PROMPT, PROMPT again (restored from the RAM tier
    into a session) and another continuation of its prefix with every top-5 log-probability of
    a server without the cache."""
    plain = Server(pllm_bin, model, "--cache-ram", "0")
    try:
        want = complete(plain, PROMPT)
        other = complete(plain, PROMPT + " again")
    finally:
        plain.close()
    cached = Server(pllm_bin, model)
    try:
        first = complete(cached, PROMPT)
        second = complete(cached, PROMPT)
        third = complete(cached, PROMPT + " again")
        hits = metric(cached, "pocketllm_prefix_cache_hits_total")
    finally:
        cached.close()
    assert hits >= 2
    assert first == want and second == want and third == other


@pytest.mark.parametrize("name", ["lfm2-F32", "lfm2-Q8_0", "qwen35-F32"])
def test_prefix_cache_restores_the_convolution_state(pllm_bin, tiny_models_paths, name):
    check_prefix_cache_round_trip(pllm_bin, tiny_models_paths[name])
