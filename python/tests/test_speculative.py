"""Speculative decoding from Python: chat(..., draft=...) with prompt lookup, a draft model, skip
layers and a calibrated skip file writes plain decoding's reply (greedy and seeded sampling) and
reports its guesses in stats; a bad draft argument is an InvalidArgument."""
from __future__ import annotations

import json

import pytest

import pocketllm

from conftest import THREADS

REWRITE = [{"role": "user", "content": "Repeat exactly: the cat sat on the mat, and the dog sat on the log."}]


@pytest.mark.parametrize("sampling", [{}, {"temperature": 0.8, "top_k": 40, "seed": 3}], ids=["greedy", "sampled"])
def test_every_drafter_gives_the_plain_reply(model, smollm2, tmp_path, sampling):
    plain = model.chat(REWRITE, max_tokens=40, **sampling)
    with pocketllm.Model(smollm2, threads=THREADS) as draft_model:
        for draft in ("lookup", draft_model, {"skip_layers": [12, 16, 20]}):
            with model.session() as s:
                reply = s.chat(REWRITE, max_tokens=40, draft=draft, draft_max=6, **sampling)
            assert reply == plain, draft
            assert reply.stats.n_drafted >= reply.stats.n_draft_accepted >= 0
            if draft is draft_model and not sampling:
                assert reply.stats.n_draft_accepted > 0


def test_calibrated_skip_file(model, tmp_path):
    path = tmp_path / "skip.json"
    with model.session() as s:
        speedup = s.calibrate_draft("The cat sat on the mat. The dog sat on the log. " * 8, path, draft_max=4)
        saved = json.loads(path.read_text())
        assert speedup == pytest.approx(saved["speedup"])
        if not saved["skip_layers"]:  # no layer worth skipping here: using the file says so
            with pytest.raises(pocketllm.InvalidArgument, match="no layers whose skipping pays"):
                s.chat(REWRITE, max_tokens=24, draft={"skip_file": str(path)})
            return
        reply = s.chat(REWRITE, max_tokens=24, draft={"skip_file": str(path)})
    assert reply == model.chat(REWRITE, max_tokens=24)


@pytest.mark.parametrize("draft,error", [("guess", pocketllm.InvalidArgument),
                                         ({"skip_layers": []}, pocketllm.InvalidArgument),
                                         ({"skip_layers": [99]}, pocketllm.InvalidArgument),
                                         ({"skip_file": "/nonexistent"}, pocketllm.IoError),
                                         ({"skip": 1}, pocketllm.InvalidArgument),
                                         (3, pocketllm.InvalidArgument)])
def test_bad_draft_is_one_clear_error(model, draft, error):
    with pytest.raises(error):
        model.chat(REWRITE, max_tokens=4, draft=draft)


def test_bad_draft_max(model):
    with pytest.raises(pocketllm.InvalidArgument):
        model.chat(REWRITE, max_tokens=4, draft="lookup", draft_max=0)
