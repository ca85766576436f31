"""Speculative decoding through the CLI: `run --draft lookup|model|skip` writes plain decoding's
tokens (greedy and seeded sampling) and says how many guesses it kept; `draft-calibrate` writes a
skip-layer file that `--draft skip --draft-skip-file` reads; flags that do not fit together, a
file calibrated for another model and a draft model with another vocabulary are one clear error."""
from __future__ import annotations

import json

import pytest

from pllm_cli import assert_clean_error, check_ok, run_cli

REWRITE = ("Repeat this text exactly: The committee met on Tuesday to discuss the budget, the new "
           "library hours and the repairs to the bridge over the river.")
CALIBRATION = ("The committee met on Tuesday. It discussed the budget for next year, the opening hours "
               "of the new library and the repairs to the old bridge. Everyone agreed that the bridge "
               "came first, and that the library could wait until the spring. " * 4)


def run_json(pllm_bin, model, *args):
    proc = check_ok(run_cli(pllm_bin, ["run", "-m", model, "-t", "2", "-n", "48", "--json", "--seed", "7", *args]))
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def skip_file(pllm_bin, smollm2_path, tmp_path_factory):
    d = tmp_path_factory.mktemp("draft")
    text = d / "calib.txt"
    text.write_text(CALIBRATION)
    out = d / "skip.json"
    proc = check_ok(run_cli(pllm_bin, ["draft-calibrate", "-m", smollm2_path, "-f", text, "-o", out, "-n", "96",
                                       "-t", "2"], timeout=600))
    saved = json.loads(out.read_text())
    assert json.loads(proc.stdout) == saved
    return out


@pytest.mark.parametrize("draft", ["lookup", "model", "skip"])
@pytest.mark.parametrize("sampling", [[], ["--temp", "0.8", "--top-k", "40"]], ids=["greedy", "sampled"])
def test_run_with_a_draft_writes_plain_decodings_tokens(pllm_bin, smollm2_path, draft, sampling):
    plain = run_json(pllm_bin, smollm2_path, "-p", REWRITE, *sampling)
    extra = {"lookup": [], "model": ["--draft-model", smollm2_path],
             "skip": ["--draft-skip-layers", "14,16,18,20,22,24"]}[draft]
    spec = run_json(pllm_bin, smollm2_path, "-p", REWRITE, *sampling, "--draft", draft, *extra)
    assert spec["tokens"] == plain["tokens"]
    assert spec["text"] == plain["text"]
    assert spec["drafted"] >= spec["draft_accepted"] >= 0
    if draft == "model":  # the model drafting for itself: every greedy guess is right
        assert spec["draft_passes"] > 0 and spec["draft_accepted"] > 0


def test_a_calibration_file_drafts_or_says_skipping_does_not_pay(pllm_bin, smollm2_path, skip_file):
    """The file's layers draft with plain decoding's output; a file whose calibration found no
    layer worth skipping is one clear error."""
    plain = run_json(pllm_bin, smollm2_path, "-p", REWRITE)
    proc = run_cli(pllm_bin, ["run", "-m", smollm2_path, "-t", "2", "-n", "48", "--json", "--seed", "7", "-p", REWRITE,
                              "--draft", "skip", "--draft-skip-file", str(skip_file)])
    if json.loads(skip_file.read_text())["skip_layers"]:
        assert json.loads(check_ok(proc).stdout)["tokens"] == plain["tokens"]
    else:
        assert "no layers whose skipping pays" in assert_clean_error(proc)


def test_calibration_file_says_what_it_measured(skip_file):
    saved = json.loads(skip_file.read_text())
    assert saved["skip_layers"] == sorted(set(saved["skip_layers"]))
    assert all(0 <= layer < 30 for layer in saved["skip_layers"])
    assert 0.0 <= saved["agreement"] <= 1.0 and saved["speedup"] >= 1.0
    assert saved["n_tokens"] == 96


@pytest.mark.parametrize("args,needle", [
    (["--draft", "model"], "--draft-model"),
    (["--draft", "skip"], "--draft-skip"),
    (["--draft", "lookup", "--draft-skip-layers", "3"], "--draft skip"),
    (["--draft", "skip", "--draft-skip-layers", "99"], "layer 99"),
    (["--draft", "skip", "--draft-skip-layers", "x"], "draft-skip-layers"),
    (["--draft", "guess"], "--draft"),
    (["--draft", "lookup", "--draft-max", "0"], "--draft-max"),
])
def test_bad_draft_flags_are_one_error(pllm_bin, smollm2_path, args, needle):
    msg = assert_clean_error(run_cli(pllm_bin, ["run", "-m", smollm2_path, "-p", "hi", "-n", "4", *args]))
    assert needle in msg


def test_skip_file_of_another_model_is_refused(pllm_bin, gemma3_path, skip_file):
    msg = assert_clean_error(run_cli(pllm_bin, ["run", "-m", gemma3_path, "-p", "hi", "-n", "4", "--draft", "skip",
                                                "--draft-skip-file", skip_file]))
    assert "another model" in msg


def test_corrupt_skip_file_is_refused(pllm_bin, smollm2_path, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"skip_layers": "all"}')
    msg = assert_clean_error(run_cli(pllm_bin, ["run", "-m", smollm2_path, "-p", "hi", "-n", "4", "--draft", "skip",
                                                "--draft-skip-file", bad]))
    assert "skip-layer file" in msg


def test_draft_model_with_another_vocabulary_is_refused(pllm_bin, smollm2_path, gemma3_path):
    msg = assert_clean_error(run_cli(pllm_bin, ["run", "-m", smollm2_path, "-p", "hi", "-n", "4", "--draft", "model",
                                                "--draft-model", gemma3_path]))
    assert "vocabulary" in msg


@pytest.fixture(scope="module")
def draft_server(pllm_bin, smollm2_path):
    from server_util import Server
    s = Server(pllm_bin, smollm2_path, "--parallel", "4", "--draft", "lookup", "--draft-max", "6")
    yield s
    s.close()
    assert s.proc.returncode == 0, s.proc.stderr.read()


def server_chat(server, **extra):
    body = {"messages": [{"role": "user", "content": REWRITE}], "max_tokens": 48, "temperature": 0, **extra}
    status, data = server.post("/v1/chat/completions", body)
    assert status == 200, data
    return json.loads(data)


def test_server_drafts_with_the_plain_reply(draft_server):
    """serve --draft lookup: the reply is plain decoding's (speculative.n_max 0 turns it off for a
    request), and usage counts the guesses kept and missed under OpenAI's names."""
    spec = server_chat(draft_server)
    plain = server_chat(draft_server, speculative={"n_max": 0})
    assert spec["choices"][0]["message"]["content"] == plain["choices"][0]["message"]["content"]
    details = spec["usage"]["completion_tokens_details"]
    assert details["accepted_prediction_tokens"] > 0 and details["rejected_prediction_tokens"] >= 0
    assert "completion_tokens_details" not in plain["usage"]


def test_server_streams_the_same_reply(draft_server):
    body = {"messages": [{"role": "user", "content": REWRITE}], "max_tokens": 48, "temperature": 0, "stream": True}
    status, data = draft_server.post("/v1/chat/completions", body)
    assert status == 200
    text = ""
    for line in data.decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            for choice in json.loads(line[6:])["choices"]:
                text += choice.get("delta", {}).get("content") or ""
    assert text == server_chat(draft_server, speculative={"n_max": 0})["choices"][0]["message"]["content"]


@pytest.mark.parametrize("spec", [{"n_max": 33}, {"n_max": -1}, {"k": 3}, 5])
def test_server_bad_speculative_field_is_400(draft_server, spec):
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "speculative": spec}
    status, data = draft_server.post("/v1/chat/completions", body)
    assert status == 400, data
    message = json.loads(data)["error"]["message"]
    assert "speculative" in message or "n_max" in message, message
