"""Shared fixtures for the PocketLLM python tests.

Environment:
  POCKETLLM_BIN     the CLI (default <repo>/build/pocketllm)
  POCKETLLM_MODELS  directory holding SmolLM2-135M-Instruct.Q4_1.gguf and
                    gemma-3-270m-Q4_K_M.gguf (default <repo>/models)

Tests that need the binary or the real model skip with a message saying what is
missing; the generator / reference self-tests run everywhere.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

import pllm_cli
import tiny_models


@pytest.fixture(scope="session")
def pllm_bin() -> Path:
    p = pllm_cli.binary_path()
    if not p.is_file() or not os.access(p, os.X_OK):
        pytest.skip(f"pocketllm binary not found at {p} (build it with "
                    f"`cmake -S . -B build -G Ninja && ninja -C build`, or set POCKETLLM_BIN)")
    return p


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    p = pllm_cli.smollm2_path()
    if not p.is_file():
        pytest.skip(f"real model not found at {p} (put {pllm_cli.SMOLLM2_NAME} there "
                    f"or set POCKETLLM_MODELS to its directory)")
    return p


@pytest.fixture(scope="session")
def smollm2_ref(smollm2_path):
    """The numpy reference of SmolLM2 (dequantised once per session, ~4 s)."""
    from reference import Reference
    return Reference(smollm2_path)


@pytest.fixture(scope="session")
def gemma3_path() -> Path:
    p = pllm_cli.gemma3_path()
    if not p.is_file():
        pytest.skip(f"Gemma 3 model not found at {p} (put {pllm_cli.GEMMA3_NAME} there "
                    f"or set POCKETLLM_MODELS to its directory)")
    return p


@pytest.fixture(scope="session")
def gemma3_ref(gemma3_path):
    """The numpy reference of Gemma 3 270M (dequantised once per session, ~20 s)."""
    from reference import Reference
    return Reference(gemma3_path)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("tiny-models")


@pytest.fixture(scope="session")
def tiny_models_paths(tiny_dir) -> dict[str, Path]:
    """Every tiny model (main matrix + error-test models), written once per session."""
    return tiny_models.generate_all(tiny_dir)


@pytest.fixture(scope="session")
def tiny_ref_cache():
    """name -> Reference, loaded lazily and shared by all tests."""
    return {}


@pytest.fixture(scope="module")
def server(pllm_bin, smollm2_path):
    """`pocketllm serve` on SmolLM2 (4 requests stepped together), one per test module."""
    from server_util import Server
    s = Server(pllm_bin, smollm2_path, "--parallel", "4")
    yield s
    s.close()
    assert s.proc.returncode == 0, s.proc.stderr.read()


@pytest.fixture
def work_dir(tmp_path) -> Path:
    return tmp_path
