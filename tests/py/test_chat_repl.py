"""`pocketllm chat`: a multi-turn conversation over stdin, as a person would type it."""
from __future__ import annotations

import subprocess


def run_chat(pllm_bin, model, lines: list[str], n_predict: int = 24):
    return subprocess.run(
        [str(pllm_bin), "chat", "-m", str(model), "--temp", "0", "-n", str(n_predict)],
        input="".join(l + "\n" for l in lines).encode(), capture_output=True, timeout=300)


def test_two_turns_answer_and_exit(pllm_bin, smollm2_path):
    p = run_chat(pllm_bin, smollm2_path, ["What is the capital of France?", "Say it again.", "/exit"])
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    out = p.stdout.decode(errors="replace")
    # Three prompts were shown ("> " before each turn and before /exit).
    assert out.count("> ") >= 3, out
    first, _, rest = out.partition("> ")[2].partition("> ")
    assert "Paris" in first, out
    assert rest.strip(), "second turn produced no reply: " + out


def test_history_is_used(pllm_bin, smollm2_path):
    """The second turn only makes sense with the first in the context."""
    p = run_chat(pllm_bin, smollm2_path, ["My name is Zorblax. Remember it.", "What is my name?", "/exit"], 32)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    replies = p.stdout.decode(errors="replace").split("> ")
    assert "Zorblax" in replies[2], replies


def test_reset_and_eof(pllm_bin, smollm2_path):
    p = run_chat(pllm_bin, smollm2_path, ["Hello", "/reset", "What is the capital of France?"])  # EOF ends
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    assert "Paris" in p.stdout.decode(errors="replace").split("> ")[3]
