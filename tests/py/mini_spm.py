"""A small test-only SentencePiece-BPE encoder (tokenizer.ggml.model "llama") driven by a
GGUF's tokens / scores / token types, following llama.cpp's rules:

  * special tokens are split out first, longest text first, one token at a time over the
    remaining text fragments; user-defined tokens (type 4) always, control tokens (type 3)
    only with parse_special;
  * in every other fragment spaces become U+2581 ("▁"), with one prepended to the first
    fragment (and any after a special token) when add_space_prefix is set;
  * starting from single characters, the adjacent pair whose concatenation is a token with
    the highest score is merged (the leftmost on ties) until no pair is a token;
  * a piece that is still not a token (a single character) falls back to its UTF-8 bytes
    as <0xXX> tokens.

Quadratic and slow, meant for a few short strings.
"""
from __future__ import annotations


class MiniSPM:
    def __init__(self, tokens: list[str], scores: list[float], types: list[int], *,
                 add_space_prefix: bool):
        self.tokens = tokens
        self.vocab: dict[str, int] = {}
        for i, t in enumerate(tokens):
            self.vocab.setdefault(t, i)
        self.scores = scores
        self.types = types
        self.add_space_prefix = add_space_prefix
        specials = [i for i, ty in enumerate(types) if ty in (3, 4)]
        # stable sort by length, longest first (ties keep id order, as llama.cpp's cache)
        self.specials = sorted(specials, key=lambda i: -len(tokens[i].encode("utf-8")))

    def _partition(self, text: str, parse_special: bool) -> list[tuple[bool, object]]:
        frags: list[tuple[bool, object]] = [(False, text)] if text else []
        for tid in self.specials:
            if self.types[tid] == 3 and not parse_special:
                continue
            tok = self.tokens[tid]
            out: list[tuple[bool, object]] = []
            for is_tok, val in frags:
                if is_tok:
                    out.append((is_tok, val))
                    continue
                parts = val.split(tok)
                for k, part in enumerate(parts):
                    if part:
                        out.append((False, part))
                    if k + 1 < len(parts):
                        out.append((True, tid))
            frags = out
        return frags

    def _spm(self, text: str) -> list[int]:
        syms = list(text)
        while True:
            best = None
            for k in range(len(syms) - 1):
                tid = self.vocab.get(syms[k] + syms[k + 1])
                if tid is not None and (best is None or self.scores[tid] > best[0]):
                    best = (self.scores[tid], k)
            if best is None:
                break
            k = best[1]
            syms[k:k + 2] = [syms[k] + syms[k + 1]]
        ids = []
        for s in syms:
            if s in self.vocab:
                ids.append(self.vocab[s])
            else:
                ids.extend(self.vocab[f"<0x{b:02X}>"] for b in s.encode("utf-8"))
        return ids

    def encode(self, text: str, *, bos: int | None = None, parse_special: bool = False) -> list[int]:
        ids = [bos] if bos is not None else []
        prev_special = True
        for is_tok, val in self._partition(text, parse_special):
            if is_tok:
                ids.append(val)
                prev_special = True
                continue
            s = val.replace(" ", "\u2581")
            if self.add_space_prefix and prev_special:
                s = "\u2581" + s
            ids.extend(self._spm(s))
            prev_special = False
        return ids
