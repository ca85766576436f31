"""CLI error contract: exactly one stderr line starting with "error: ", a non-zero
exit code, no signal, no hang (pllm_cli.run_cli fails the test after a timeout)."""
from __future__ import annotations

import pytest

import pllm_cli

LONG_PROMPT = " ".join(["the cat sat on the mat and looked at the hello world"] * 20)


def _cases(m_ok, m_gptj, m_q5k, missing, work):
    """name -> argv (model paths filled in by the test)."""
    return {
        # missing / unreadable model
        "info_missing_model": ["info", "-m", missing],
        "run_missing_model": ["run", "-m", missing, "-p", "hi", "-n", "1"],
        "logits_missing_model": ["logits", "-m", missing, "--ids", "1 2", "--out",
                                 work / "o.f32"],
        "tokenize_missing_model": ["tokenize", "-m", missing, "-p", "hi"],
        "model_is_a_directory": ["run", "-m", work, "-p", "hi", "-n", "1"],
        # unsupported architecture / tensor type
        "run_unsupported_arch": ["run", "-m", m_gptj, "-p", "hi", "-n", "1", "--temp", "0"],
        "logits_unsupported_arch": ["logits", "-m", m_gptj, "--ids", "1 2", "--out",
                                    work / "o.f32"],
        "run_unsupported_type": ["run", "-m", m_q5k, "-p", "hi", "-n", "1", "--temp", "0"],
        "logits_unsupported_type": ["logits", "-m", m_q5k, "--ids", "1 2", "--out",
                                    work / "o.f32"],
        # prompt longer than the context
        "prompt_longer_than_context": ["run", "-m", m_ok, "-c", "16", "-p", LONG_PROMPT,
                                       "-n", "4", "--temp", "0"],
        # token ids out of range
        "logits_id_past_vocab": ["logits", "-m", m_ok, "--ids", "1 999999", "--out",
                                 work / "o.f32"],
        "logits_negative_id": ["logits", "-m", m_ok, "--ids", "-1", "--out", work / "o.f32"],
        "logits_ids_not_numbers": ["logits", "-m", m_ok, "--ids", "1 two 3", "--out",
                                   work / "o.f32"],
        "logits_no_ids": ["logits", "-m", m_ok, "--ids", "", "--out", work / "o.f32"],
        "logits_out_unwritable": ["logits", "-m", m_ok, "--ids", "1 2", "--out",
                                  work / "no-such-dir" / "o.f32"],
        # argument errors
        "unknown_flag": ["run", "-m", m_ok, "-p", "hi", "--bogus-flag"],
        "unknown_command": ["frobnicate", "-m", m_ok],
        "temp_not_a_number": ["run", "-m", m_ok, "-p", "hi", "--temp", "abc"],
        "n_negative": ["run", "-m", m_ok, "-p", "hi", "-n", "-5"],
        "n_not_a_number": ["run", "-m", m_ok, "-p", "hi", "-n", "abc"],
        "n_trailing_garbage": ["run", "-m", m_ok, "-p", "hi", "-n", "5x"],
        "ctx_not_a_number": ["run", "-m", m_ok, "-p", "hi", "-c", "abc"],
        "threads_not_a_number": ["run", "-m", m_ok, "-p", "hi", "-t", "abc"],
        "flag_missing_value": ["run", "-m", m_ok, "-p"],
        "no_prompt_run": ["run", "-m", m_ok, "-n", "1"],
        "no_prompt_tokenize": ["tokenize", "-m", m_ok],
        "prompt_and_file_both": ["run", "-m", m_ok, "-p", "hi", "-f", work / "p.txt", "-n", "1"],
        "prompt_file_missing": ["run", "-m", m_ok, "-f", work / "no-such-prompt.txt", "-n", "1"],
        # chat template variables: a JSON object of names the engine does not set itself
        "template_vars_not_json": ["run", "-m", m_ok, "-p", "hi", "-n", "1", "--chat-template-kwargs", "{nope"],
        "template_vars_engine_name": ["run", "-m", m_ok, "-p", "hi", "-n", "1", "--chat-template-kwargs",
                                      '{"messages": []}'],
        "template_vars_with_native": ["run", "-m", m_ok, "-p", "hi", "-n", "1", "--chat-template", "native",
                                      "--chat-template-kwargs", '{"enable_thinking": false}'],
        # activation modes are exclusive
        "int8_and_f16_act": ["run", "-m", m_ok, "-p", "hi", "-n", "1", "--int8-act", "--f16-act"],
        "logits_int8_and_f16_act": ["logits", "-m", m_ok, "--ids", "1 2", "--out", work / "o.f32",
                                    "--f16-act", "--int8-act"],
    }


CASE_NAMES = list(_cases("m", "g", "q", "x", pllm_cli.REPO))


@pytest.mark.parametrize("case", CASE_NAMES)
def test_clean_error(pllm_bin, tiny_models_paths, work_dir, case):
    argv = _cases(tiny_models_paths["llama-F32"], tiny_models_paths["unsupported-arch-gptj"],
                  tiny_models_paths["unsupported-type-Q8_K"],
                  work_dir / "does-not-exist.gguf", work_dir)[case]
    (work_dir / "p.txt").write_text("hi")  # exists, so only the -p/-f conflict is wrong
    proc = pllm_cli.run_cli(pllm_bin, argv, timeout=30)
    msg = pllm_cli.assert_clean_error(proc)
    print(f"{case}: {msg}")


def test_error_tests_use_working_inputs(pllm_bin, tiny_models_paths, work_dir):
    """The model behind the argument-error cases works when the arguments are right,
    so those cases fail because of the arguments."""
    m = tiny_models_paths["llama-F32"]
    pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["run", "-m", m, "-p", "hi", "-n", "2",
                                                  "--temp", "0"]))
    pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["run", "-m", m, "-c", "64", "-p", "hi",
                                                  "-n", "2", "--temp", "0.5", "-t", "2"]))
    pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["logits", "-m", m, "--ids", "1 2",
                                                  "--out", work_dir / "o.f32"]))
    for act in ("--int8-act", "--f16-act"):
        pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["run", "-m", m, "-p", "hi", "-n", "1",
                                                      "--temp", "0", act]))
