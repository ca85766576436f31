"""Images in chat messages (P20): a Model loaded with mmproj= (the repository's tiny random-weight
idefics3 pair, tests/py/vision_models.py and tiny_models.py) answers a message with an image
part exactly as the CLI's `run --image` does; image parts without mmproj, remote URLs and bad
base64 raise InvalidArgument; an unreadable image raises BadFormat."""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import pocketllm

TESTS_PY = Path(__file__).resolve().parents[2] / "tests" / "py"


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    if not TESTS_PY.is_dir():
        pytest.skip(f"the repository's test models ({TESTS_PY}) are not here")
    sys.path.insert(0, str(TESTS_PY))
    import tiny_models as tm
    from test_vision_text import SPECS, TEXT
    from vision_images import write_png
    from vision_models import write_mmproj
    d = tmp_path_factory.mktemp("pyvlm")
    text = tm.write_with_gguf_writer(tm.build_spec(TEXT["idefics3"]), d / "text.gguf")
    mm = write_mmproj(d / "mmproj.gguf", SPECS["idefics3"])
    img = write_png(d / "photo.png", 150, 97, 3, seed=11)
    return text, mm, img


def user(parts):
    return [{"role": "user", "content": parts}]


def test_image_part_answers_like_the_cli(pair):
    text, mm, img = pair
    with pocketllm.Model(text, mmproj=mm, threads=1) as m:
        url = "data:image/png;base64," + base64.b64encode(img.read_bytes()).decode()
        a = m.chat(user([{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "what is it"}]),
                   max_tokens=6, temperature=0)
        b = m.chat(user([{"type": "image", "image": str(img)}, {"type": "text", "text": "what is it"}]),
                   max_tokens=6, temperature=0)
        assert str(a) == str(b)
        # The same picture the second time: its rows have the same ids, so the session's cache
        # already holds them (20 image rows, then the text).
        assert b.stats.n_reused >= 20, b.stats
    binary = os.environ.get("POCKETLLM_BIN", str(Path(__file__).resolve().parents[2] / "build" / "pocketllm"))
    if not Path(binary).is_file():
        pytest.skip(f"the CLI ({binary}) is not built: the reply is not compared with it")
    out = subprocess.run([binary, "run", "-m", str(text), "--mmproj", str(mm), "--image", str(img), "-p",
                          "<__media__>what is it", "-n", "6", "--temp", "0", "--json", "-t", "1"],
                         capture_output=True, text=True, check=True)
    assert str(a) == json.loads(out.stdout)["text"]


def test_images_need_mmproj_and_inline_data(pair):
    text, mm, img = pair
    with pocketllm.Model(text, threads=1) as m:
        with pytest.raises(pocketllm.InvalidArgument, match="mmproj"):
            m.chat(user([{"type": "image", "image": str(img)}]), max_tokens=1)
    with pocketllm.Model(text, mmproj=mm, threads=1) as m:
        with pytest.raises(pocketllm.InvalidArgument, match="data: URIs"):
            m.chat(user([{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]), max_tokens=1)
        with pytest.raises(pocketllm.InvalidArgument, match="base64"):
            m.chat(user([{"type": "image_url", "image_url": {"url": "data:image/png;base64,@@"}}]), max_tokens=1)
        with pytest.raises(pocketllm.BadFormat, match="image 0"):
            m.chat(user([{"type": "image", "image": b"\x89PNG\r\n\x1a\n" + bytes(40)}]), max_tokens=1)
    with pytest.raises(pocketllm.Error, match="mmproj|mmproj.gguf|wide|no such|cannot"):
        pocketllm.Model(text, mmproj=str(mm) + ".missing", threads=1)
