"""A float64 numpy forward pass of the mmproj vision encoders (SigLIP + idefics3 / gemma3), its
own code, for test_vision.py: it checks PocketLLM's encoder on the preprocessed images PocketLLM
itself writes, so the embeddings are checked where llama.cpp's oracle is not built.

Weights come from the gguf package's dequantisation (what the file holds, exactly); every
activation is float64, GELU is the tanh form, LayerNorm and RMS norm as llama.cpp computes them.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


class VisionReference:
    def __init__(self, path: Path):
        r = GGUFReader(str(path))
        self.kv = {}
        for f in r.fields.values():
            if f.name.startswith("clip."):
                v = f.contents()
                self.kv[f.name] = v
        self.t = {}
        for t in r.tensors:
            a = dequantize(t.data, t.tensor_type).astype(np.float64)
            self.t[t.name] = a.reshape([int(x) for x in reversed(t.shape)])
        self.proj = self.kv["clip.projector_type"]
        self.E = int(self.kv["clip.vision.embedding_length"])
        self.P = int(self.kv["clip.vision.patch_size"])
        self.n_head = int(self.kv["clip.vision.attention.head_count"])
        self.n_layer = int(self.kv["clip.vision.block_count"])
        self.eps = float(self.kv["clip.vision.attention.layer_norm_epsilon"])
        self.s = int(self.kv.get("clip.vision.projector.scale_factor", 4 if self.proj == "gemma3" else 1))

    def _ln(self, x, w, b):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + self.eps) * w + b

    def encode(self, img: np.ndarray) -> np.ndarray:
        """img: [h, w, 3] normalised floats (h = w = image_size). Returns [tokens, n_out]."""
        t, E, P = self.t, self.E, self.P
        side = img.shape[0] // P
        # Patches in the conv kernel's order (channel, y, x); the kernel is [E, 3, P, P].
        patches = img.reshape(side, P, side, P, 3).transpose(0, 2, 4, 1, 3).reshape(side * side, 3 * P * P)
        x = patches @ t["v.patch_embd.weight"].reshape(E, -1).T + t["v.patch_embd.bias"]
        x = x + t["v.position_embd.weight"]
        d = E // self.n_head
        for il in range(self.n_layer):
            p = f"v.blk.{il}."
            h = self._ln(x, t[p + "ln1.weight"], t[p + "ln1.bias"])
            q = h @ t[p + "attn_q.weight"].T + t[p + "attn_q.bias"]
            k = h @ t[p + "attn_k.weight"].T + t[p + "attn_k.bias"]
            v = h @ t[p + "attn_v.weight"].T + t[p + "attn_v.bias"]
            q, k, v = (a.reshape(-1, self.n_head, d).transpose(1, 0, 2) for a in (q, k, v))
            s = q @ k.transpose(0, 2, 1) / np.sqrt(d)
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            a = (s @ v).transpose(1, 0, 2).reshape(-1, E)
            x = x + a @ t[p + "attn_out.weight"].T + t[p + "attn_out.bias"]
            h = self._ln(x, t[p + "ln2.weight"], t[p + "ln2.bias"])
            u = h @ t[p + "ffn_up.weight"].T + t[p + "ffn_up.bias"]
            u = 0.5 * u * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (u + 0.044715 * u ** 3)))
            x = x + u @ t[p + "ffn_down.weight"].T + t[p + "ffn_down.bias"]
        x = self._ln(x, t["v.post_ln.weight"], t["v.post_ln.bias"])
        s = self.s
        grid = x.reshape(side, side, E)
        if self.proj == "idefics3":
            g = -(-side // s) * s
            padded = np.zeros((g, g, E))
            padded[:side, :side] = grid
            # token (by, bx) holds the block's patches row by row, each E wide
            tok = padded.reshape(g // s, s, g // s, s, E).transpose(0, 2, 1, 3, 4).reshape(-1, s * s * E)
            return tok @ t["mm.model.fc.weight"].T
        g = side // s
        pooled = grid[: g * s, : g * s].reshape(g, s, g, s, E).mean(axis=(1, 3)).reshape(-1, E)
        pooled = pooled / np.sqrt((pooled ** 2).mean(-1, keepdims=True) + self.eps) * t["mm.soft_emb_norm.weight"]
        return pooled @ t["mm.input_projection.weight"]
