"""Sampling that suits the model: `run` and `chat` take unset sampling flags from the file's
general.sampling.* keys (temp, top_k, top_p, min_p, penalty_repeat, penalty_last_n) and fall
back to greedy; a flag the user gives wins; a key of the wrong type or out of range is one clean
load error. The quick start's question gets the right answer whatever the seed."""
from __future__ import annotations

import pytest

import gguf_bytes as gb
import pllm_cli
import tiny_models as tm

PROMPT = "hello world the cat"


def _model_with(work_dir, name, extra_kvs):
    spec = tm.build_spec(tm.model_configs()["llama-F32"])
    spec.kvs.extend(extra_kvs)
    return tm.write_with_gguf_writer(spec, work_dir / f"{name}.gguf")


def _tokens(pllm_bin, model, *flags):
    proc = pllm_cli.run_cli(pllm_bin, ["run", "-m", model, "--raw", "-p", PROMPT, "-n", "24", "--ignore-eos",
                                       "--json", "-t", "1", "--no-cache", *flags])
    pllm_cli.check_ok(proc)
    import json
    return json.loads(proc.stdout)["tokens"]


HOT = [gb.KV("general.sampling.temp", gb.F32, 5.0), gb.KV("general.sampling.top_k", gb.I32, 0),
       gb.KV("general.sampling.top_p", gb.F32, 1.0), gb.KV("general.sampling.min_p", gb.F32, 0.0)]


def test_file_values_are_used(pllm_bin, work_dir):
    plain = _model_with(work_dir, "plain", [])
    hot = _model_with(work_dir, "hot", HOT)
    greedy_file = _model_with(work_dir, "greedy", [gb.KV("general.sampling.temp", gb.F32, 0.0)])
    # Without keys the model's sampling is greedy (whatever the seed); the file's hot values
    # sample: seeds differ.
    greedy = _tokens(pllm_bin, plain, "--temp", "0")
    assert _tokens(pllm_bin, plain, "--seed", "1") == greedy
    seeded = {tuple(_tokens(pllm_bin, hot, "--seed", str(s))) for s in (1, 2, 3)}
    assert len(seeded) == 3, "temp 5 without cuts from the file should sample"
    for s in (1, 2, 3):
        assert _tokens(pllm_bin, greedy_file, "--seed", str(s)) == greedy


def test_flags_override_the_file(pllm_bin, work_dir):
    hot = _model_with(work_dir, "hot2", HOT)
    plain = _model_with(work_dir, "plain2", [])
    assert _tokens(pllm_bin, hot, "--temp", "0", "--seed", "4") == _tokens(pllm_bin, plain, "--temp", "0")
    # top_k = 1 from the file: greedy whatever the temperature
    top1 = _model_with(work_dir, "top1", HOT[:1] + [gb.KV("general.sampling.top_k", gb.I32, 1)])
    assert _tokens(pllm_bin, top1, "--seed", "9") == _tokens(pllm_bin, plain, "--temp", "0")


@pytest.mark.parametrize("kv,what", [
    (gb.KV("general.sampling.temp", gb.STRING, "hot"), "general.sampling.temp"),
    (gb.KV("general.sampling.temp", gb.F32, -1.0), "general.sampling.temp"),
    (gb.KV("general.sampling.top_p", gb.F32, 1.5), "general.sampling.top_p"),
    (gb.KV("general.sampling.top_k", gb.F32, 2.5), "general.sampling.top_k"),
    (gb.KV("general.sampling.penalty_last_n", gb.I32, -7), "general.sampling.penalty_last_n"),
])
def test_bad_keys_are_one_clean_error(pllm_bin, work_dir, kv, what):
    bad = _model_with(work_dir, "bad", [kv])
    proc = pllm_cli.run_cli(pllm_bin, ["run", "-m", bad, "--raw", "-p", PROMPT, "-n", "2", "--no-cache"])
    assert what in pllm_cli.assert_clean_error(proc)


def test_quick_start_answers_right_for_every_seed(pllm_bin, smollm2_path):
    """scripts/run.sh's question with default flags on the default model (SmolLM2-135M Q4_1):
    its first token is a near-tie (docs/PERFORMANCE.md), so this fails under any sampling
    temperature in about half the seeds."""
    for seed in (1, 2, 3, 4, 5):
        proc = pllm_cli.run_cli(pllm_bin, ["run", "-m", smollm2_path, "-p", "What is the capital of France?",
                                           "-n", "12", "--seed", str(seed), "--no-cache"])
        pllm_cli.check_ok(proc)
        out = proc.stdout.decode("utf-8", "replace") if isinstance(proc.stdout, bytes) else proc.stdout
        assert "Paris" in out, f"seed {seed}: {out!r}"
