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


def test_ffn_length_array_disagreeing_with_tensors(pllm_bin, work_dir):
    """A per-layer feed_forward_length that the ffn tensors do not have: `info` only
    reads metadata, the loader checks every layer's shapes against it."""
    import copy
    import gguf_bytes as gb
    import tiny_models as tm
    spec = mc.base_spec()
    kvs = copy.deepcopy(spec.kvs)
    i = next(i for i, kv in enumerate(kvs) if kv.key == "llama.feed_forward_length")
    kvs[i] = gb.KV("llama.feed_forward_length", gb.ARRAY, [tm.MINI.n_ff // 2] * tm.MINI.n_layer,
                   elem_type=gb.U32)
    path = work_dir / "ffn_disagrees.gguf"
    path.write_bytes(gb.build_gguf(kvs, spec.tensors).data)
    proc = pllm_cli.run_cli(pllm_bin, ["logits", "-m", path, "--ids", "5 6",
                                       "--out", work_dir / "o.f32"], timeout=20)
    msg = pllm_cli.assert_clean_error(proc)
    assert "ffn_gate.weight" in msg and "expected" in msg, msg
