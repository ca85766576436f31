"""Every logit bit for bit as saved from the tree before a refactor (golden_logits.py says how
the cases are chosen and how to save them).

The default suite runs the best level this CPU has; scripts/test.sh --long (PLLM_TEST_LONG=1)
every level, the scalar twins included: each level's kernels are checked against the scalar
twins by the kernel suites on every run, and the whole matrix is ~400 processes (the scalar
twins on the real models most of its time)."""
from __future__ import annotations

import json
import os

import pytest

import golden_logits
import pllm_cli


def test_logits_are_the_saved_ones_bit_for_bit(pllm_bin):
    if not golden_logits.GOLDEN.is_file():
        pytest.skip(f"{golden_logits.GOLDEN} absent: nothing saved to compare with")
    isas = [i for i in pllm_cli.available_isas() if i != "default"]
    if os.environ.get("PLLM_TEST_LONG") != "1":
        isas = isas[-1:]
    got = golden_logits.run_all(pllm_bin, isas)
    saved = json.loads(golden_logits.GOLDEN.read_text())
    ran = sum(1 for k in got if k in saved)
    assert ran > 0, f"none of the {len(got)} cases run here is saved (levels {isas})"
    problems = golden_logits.compare(saved, got)
    assert not problems, f"{len(problems)} of {len(got)} cases changed:\n" + "\n".join(problems)
