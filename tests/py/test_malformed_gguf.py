"""Malformed GGUF corpus (malformed_corpus.py) through `pocketllm info`: every file
must be rejected with one clean "error: " line, non-zero exit, no signal, no hang;
the valid variants it is derived from must be accepted."""
from __future__ import annotations

import pytest

import malformed_corpus as mc
import pllm_cli

VALID = mc.valid_variants()
MALFORMED = mc.malformed_cases()


@pytest.mark.parametrize("name", list(VALID))
def test_valid_variant_accepted(pllm_bin, work_dir, name):
    path = work_dir / f"{name}.gguf"
    path.write_bytes(VALID[name])
    pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["info", "-m", path], timeout=20))


def test_valid_base_runs(pllm_bin, work_dir):
    """The base model is not only parseable but runnable (so a corruption is the
    only reason the others fail)."""
    path = work_dir / "base.gguf"
    path.write_bytes(VALID["base_v3"])
    pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["logits", "-m", path, "--ids", "5 6 7",
                                                  "--out", work_dir / "o.f32"], timeout=20))


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_rejected(pllm_bin, work_dir, name):
    path = work_dir / f"{name}.gguf"
    path.write_bytes(MALFORMED[name])
    proc = pllm_cli.run_cli(pllm_bin, ["info", "-m", path], timeout=20)
    msg = pllm_cli.assert_clean_error(proc)
    print(f"{name}: {msg}")


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_rejected_by_loader(pllm_bin, work_dir, name):
    """The same corpus through the full model load (`logits`)."""
    path = work_dir / f"{name}.gguf"
    path.write_bytes(MALFORMED[name])
    proc = pllm_cli.run_cli(pllm_bin, ["logits", "-m", path, "--ids", "5 6",
                                       "--out", work_dir / "o.f32"], timeout=20)
    pllm_cli.assert_clean_error(proc)
