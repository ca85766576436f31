"""A small test-only byte-level BPE encoder (GPT-2 style) driven by a GGUF's
tokenizer.ggml.tokens / merges.

Only meant for plain ASCII prompts: the pre-tokenizer is an ASCII approximation of
the GPT-2 split regex (letters, single digits, punctuation runs, whitespace), which
agrees with the real "smollm"/"qwen2" pre-tokenizers on ASCII text without digit
runs. Special tokens written literally in the text (e.g. "<|im_start|>") are
matched first and become their own ids.
"""
from __future__ import annotations

import re

_PRE = re.compile(
    r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+")


def _bytes_to_unicode() -> dict[int, str]:
    keep = set(range(ord("!"), ord("~") + 1)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


class MiniBPE:
    def __init__(self, tokens: list[str], merges: list[str], token_types: list[int] | None = None):
        self.vocab = {t: i for i, t in enumerate(tokens)}
        self.tokens = tokens
        self.ranks = {}
        for r, m in enumerate(merges):
            a, b = m.split(" ", 1)
            self.ranks[(a, b)] = r
        types = token_types or [1] * len(tokens)
        # control / user-defined tokens are matched literally
        self.specials = sorted((t for t, ty in zip(tokens, types) if ty in (3, 4)),
                               key=len, reverse=True)
        self.b2u = _bytes_to_unicode()
        self.u2b = {v: k for k, v in self.b2u.items()}

    def _bpe(self, word: str) -> list[str]:
        syms = list(word)
        while len(syms) > 1:
            best, best_rank = None, None
            for i in range(len(syms) - 1):
                r = self.ranks.get((syms[i], syms[i + 1]))
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = i, r
            if best is None:
                break
            pair = (syms[best], syms[best + 1])
            merged, i = [], 0
            while i < len(syms):
                if i < len(syms) - 1 and (syms[i], syms[i + 1]) == pair:
                    merged.append(syms[i] + syms[i + 1])
                    i += 2
                else:
                    merged.append(syms[i])
                    i += 1
            syms = merged
        return syms

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        if self.specials:
            pattern = "(" + "|".join(re.escape(s) for s in self.specials) + ")"
            parts = re.split(pattern, text)
        else:
            parts = [text]
        for part in parts:
            if not part:
                continue
            if part in self.vocab and part in self.specials:
                ids.append(self.vocab[part])
                continue
            for word in _PRE.findall(part):
                mapped = "".join(self.b2u[b] for b in word.encode("utf-8"))
                ids.extend(self.vocab[s] for s in self._bpe(mapped))
        return ids

    def decode(self, ids: list[int]) -> str:
        out = bytearray()
        for i in ids:
            t = self.tokens[i]
            if t in self.specials:
                continue
            out += bytes(self.u2b[c] for c in t)
        return out.decode("utf-8", errors="replace")
