"""Images in chat messages (a Model loaded with ``mmproj=``): OpenAI's content parts
``{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}`` and, for files at
hand, ``{"type": "image", "image": path or bytes}``. Each image becomes the engine's marker in
the message text and its bytes go to pllm_vision_tokenize, which lays the prompt out with the
projector's tokens (image rows as negative ids the session encodes when they first run)."""
from __future__ import annotations

import base64
import binascii
import ctypes as C
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ._errors import InvalidArgument
from ._lib import Image, lib
from ._text import grow_tokens

MARKER = "<__media__>"  # PLLM_IMAGE_MARKER


def _image_bytes(part: Mapping, where: str) -> bytes:
    if part.get("type") == "image":
        img = part.get("image")
        if isinstance(img, (bytes, bytearray)):
            return bytes(img)
        if isinstance(img, (str, os.PathLike)):
            with open(img, "rb") as f:
                return f.read()
        raise InvalidArgument(f"{where}: an image part's 'image' is a path or bytes")
    url = part.get("image_url")
    if isinstance(url, Mapping):
        url = url.get("url")
    if not isinstance(url, str):
        raise InvalidArgument(f"{where}: an image_url part needs {{'url': 'data:...'}}")
    if not url.startswith("data:"):
        raise InvalidArgument(f"{where}: only data: URIs are read (the engine fetches nothing)")
    meta, _, data = url[5:].partition(",")
    if not meta.endswith(";base64"):
        raise InvalidArgument(f"{where}: an image data: URI must be base64")
    try:
        return base64.b64decode(data, validate=True)
    except binascii.Error as e:
        raise InvalidArgument(f"{where}: the image's base64 does not decode ({e})") from None


def split_images(messages: Sequence[Any]) -> tuple[list[Any], list[bytes]]:
    """The messages with list contents turned into text (each image part a MARKER), and the
    images' bytes in order. Messages without image parts come back as they were."""
    out, images = [], []
    for i, m in enumerate(messages):
        content = m.get("content") if isinstance(m, Mapping) else None
        if not isinstance(content, list):
            out.append(m)
            continue
        text = []
        for j, part in enumerate(content):
            where = f"message {i} part {j}"
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind == "text" and isinstance(part.get("text"), str):
                text.append(part["text"])
            elif kind in ("image_url", "image"):
                images.append(_image_bytes(part, where))
                text.append(MARKER)
            else:
                raise InvalidArgument(f"{where}: parts are text, image_url or image dicts")
        out.append({**m, "content": "".join(text)})
    return out, images


def prompt_ids(vision: int, session: int, text: str, images: Sequence[bytes]) -> list[int]:
    """pllm_vision_tokenize: the prompt's tokens for this session, image rows negative."""
    keep = [bytes(b) for b in images]
    arr = (Image * max(len(keep), 1))()
    for i, b in enumerate(keep):
        arr[i].data = C.cast(C.c_char_p(b), C.c_void_p)
        arr[i].size = len(b)
    # Room for the image rows up front: a second call would preprocess the images again.
    extra = 64 + 4096 * len(keep)
    return grow_tokens(text, lambda data, out, cap, n: lib.pllm_vision_tokenize(
        vision, session, data, len(data), arr, len(keep), out, cap, n), extra)
