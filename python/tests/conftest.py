"""Fixtures for the package's tests: the installed `pocketllm` and the real model.

POCKETLLM_MODELS is the directory holding SmolLM2-135M-Instruct.Q4_1.gguf (default: the
repository's models/, where scripts/fetch_model.sh puts it); the tests that need the model
skip with a message when it is missing. POCKETLLM_TEST_THREADS (default 1) is each session's
thread count: CI machines have two cores and the thread tests run two sessions at once.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

import pocketllm

MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
THREADS = int(os.environ.get("POCKETLLM_TEST_THREADS", "1"))
CAPITAL = [{"role": "user", "content": "What is the capital of France?"}]


def model_path() -> Path:
    env = os.environ.get("POCKETLLM_MODELS")
    base = Path(env) if env else Path(__file__).resolve().parents[2] / "models"
    return base / MODEL_NAME


@pytest.fixture(scope="session")
def smollm2() -> Path:
    p = model_path()
    if not p.is_file():
        pytest.skip(f"real model not found at {p} (scripts/fetch_model.sh downloads it; "
                    f"or set POCKETLLM_MODELS to the directory holding {MODEL_NAME})")
    return p


@pytest.fixture(scope="module")
def model(smollm2):
    """One loaded model per test file (loading takes a fraction of a second)."""
    with pocketllm.Model(smollm2, threads=THREADS) as m:
        yield m


def pytest_report_header(config):
    # Which build the suite runs against: the installed package, or POCKETLLM_LIBRARY's.
    lib = os.environ.get("POCKETLLM_LIBRARY", "its own library")
    return f"pocketllm {pocketllm.__version__} from {Path(pocketllm.__file__).parent}, {lib} ({pocketllm.isa()})"
