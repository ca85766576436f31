"""The C API's statuses arrive as pocketllm exceptions with the engine's message; bad input
never crashes, and the model keeps working after an error."""
from __future__ import annotations

import pytest

import pocketllm
from conftest import CAPITAL


def test_missing_file(tmp_path):
    path = tmp_path / "absent.gguf"
    with pytest.raises(pocketllm.IoError, match="absent.gguf") as e:
        pocketllm.Model(path)
    assert isinstance(e.value, OSError) and e.value.status == 2 and e.value.message


def test_directory_is_not_a_model(tmp_path):
    with pytest.raises(pocketllm.IoError):
        pocketllm.Model(tmp_path)


@pytest.mark.parametrize("content", [b"", b"not a gguf file at all", b"GGUF\x03\x00\x00\x00trunc"])
def test_corrupt_file(tmp_path, content):
    path = tmp_path / "bad.gguf"
    path.write_bytes(content)
    with pytest.raises(pocketllm.BadFormat):
        pocketllm.Model(path)


def test_truncated_model(tmp_path, smollm2):
    path = tmp_path / "cut.gguf"
    path.write_bytes(smollm2.read_bytes()[:1_000_000])
    with pytest.raises(pocketllm.BadFormat, match="past the end"):
        pocketllm.Model(path)


def test_bad_model_settings(smollm2):
    with pytest.raises(pocketllm.InvalidArgument, match="kv_type"):
        pocketllm.Model(smollm2, kv_type="q3")
    with pytest.raises(ValueError, match="activations"):  # InvalidArgument is a ValueError
        pocketllm.Model(smollm2, activations="int4")
    with pytest.raises(pocketllm.InvalidArgument, match="context size"):  # the engine's check
        pocketllm.Model(smollm2, n_ctx=-5)
    with pytest.raises(pocketllm.InvalidArgument, match="backend"):
        pocketllm.Model(smollm2, backend="cuda")


@pytest.mark.parametrize("kwargs", [dict(temperature=-1.0), dict(top_p=0.0), dict(max_tokens=-1),
                                    dict(stop=[""]), dict(seed=-1), dict(max_tokens=2**40)])
def test_bad_sampling(model, kwargs):
    with pytest.raises(pocketllm.InvalidArgument):
        model.chat(CAPITAL, **kwargs)


@pytest.mark.parametrize("messages", ["hello", [{"role": "user"}], [{"role": "user", "content": 3}],
                                      [{"role": "user", "content": "a\0b"}], [("user", "hi")]])
def test_bad_messages(model, messages):
    with pytest.raises(pocketllm.InvalidArgument):
        model.chat(messages)


def test_bad_token_ids(model):
    with pytest.raises(pocketllm.InvalidArgument, match="out of range"):
        model.detokenize([model.n_vocab])
    with pytest.raises(pocketllm.InvalidArgument):
        model.complete([])  # empty prompt


def test_prompt_longer_than_the_context(model):
    with model.session(n_ctx=64) as s:
        with pytest.raises(pocketllm.OutOfRange, match="does not fit the context"):
            s.chat([{"role": "user", "content": "hello " * 100}])
        assert "Paris" in s.chat(CAPITAL)  # the session is still usable


def test_progress_can_cancel_the_load(smollm2):
    seen = []
    with pytest.raises(pocketllm.Cancelled):
        pocketllm.Model(smollm2, progress=lambda f: seen.append(f) or False)
    assert seen == [0.0]


def test_progress_exception_propagates(smollm2):
    def boom(_):
        raise KeyError("from the callback")
    with pytest.raises(KeyError, match="from the callback"):
        pocketllm.Model(smollm2, progress=boom)


def test_closed_objects_raise(smollm2):
    m = pocketllm.Model(smollm2, vocab_only=True)
    m.close()
    m.close()  # idempotent
    with pytest.raises(pocketllm.InvalidArgument, match="closed"):
        m.tokenize("hi")
    with pocketllm.Model(smollm2, n_ctx=128) as m2:
        s = m2.session()
        s.close()
        with pytest.raises(pocketllm.InvalidArgument, match="closed"):
            s.chat(CAPITAL)


def test_every_status_has_its_class():
    classes = [pocketllm.InvalidArgument, pocketllm.IoError, pocketllm.BadFormat, pocketllm.Unsupported,
               pocketllm.OutOfRange, pocketllm.OutOfMemory, pocketllm.Cancelled, pocketllm.InternalError]
    assert [c.status for c in classes] == list(range(1, 9))
    assert all(issubclass(c, pocketllm.Error) for c in classes)
