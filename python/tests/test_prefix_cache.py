"""The prefix cache: a repeated system prompt is restored, not recomputed, in RAM and on disk."""
from __future__ import annotations

import pocketllm
from conftest import THREADS

# Long enough for several 64-token blocks (the cache's unit).
SYSTEM = ("You are a helpful assistant for a travel agency. Answer in one short sentence. " * 6).strip()


def ask(question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]


def test_repeated_system_prompt_hits_the_ram_tier(model):
    cache = pocketllm.PrefixCache(model, ram_bytes=64 << 20)
    with model.session(prefix_cache=cache) as a, model.session(prefix_cache=cache) as b:
        assert a.prefix_cache is cache
        first = a.chat(ask("What is the capital of France?"), max_tokens=16)
        before = cache.counters()
        assert before.inserts > 0 and before.ram_entries > 0 and first.stats.n_cached == 0
        # Another session (another conversation) with the same system prompt.
        second = b.chat(ask("What is the capital of Spain?"), max_tokens=16)
        after = cache.counters()
        assert after.ram_hits > before.ram_hits
        assert after.restored_tokens >= 64 and second.stats.n_cached >= 64
    with model.session() as plain:  # greedy output is the same without the cache
        assert plain.chat(ask("What is the capital of Spain?"), max_tokens=16) == second


def test_disk_tier_survives_the_cache(smollm2, tmp_path):
    with pocketllm.Model(smollm2, threads=THREADS, n_ctx=512) as m:
        with pocketllm.PrefixCache(m, ram_bytes=0, dir=tmp_path) as cache:
            m.prefix_cache = cache
            m.chat(ask("Where is Rome?"), max_tokens=4)
            cache.flush()
            assert cache.counters().disk_writes > 0
        fresh = pocketllm.PrefixCache(m, ram_bytes=0, dir=tmp_path)  # e.g. the app's next start
        with m.session(prefix_cache=fresh) as s:
            assert s.chat(ask("Where is Paris?"), max_tokens=4).stats.n_cached >= 64
        assert fresh.counters().disk_hits > 0
