"""Numpy float64 reference forward pass of `gemma4` (Gemma 4 dense, E2B/E4B shape), written from
llama.cpp's src/models/gemma4.cpp, its hyper-parameter loading (llama-model.cpp, llama-hparams.cpp:
per-layer head sizes and RoPE widths, the KV reuse map) and the converter (conversion/gemma.py),
in the style of reference_qwen35.py (its own loader and forward: nothing of reference.py's llama
block carries over unchanged).

  x = token_embd[ids] * sqrt(n_embd)
  per-layer inputs: pl = (rmsnorm((x @ per_layer_model_proj^T) / sqrt(n_embd) per block of P)
                          * per_layer_proj_norm + per_layer_token_embd[ids] * sqrt(P)) / sqrt(2)
  per layer l (sliding when sliding_window_pattern[l]; the last shared_kv_layers layers take the
  keys and values of layer first - 2 (sliding) or first - 1 (full), first the first shared layer):
    h = rmsnorm(x) * attn_norm
    q = rope(rmsnorm_head(h Wq) * q_norm); k = rope(rmsnorm_head(h Wk) * k_norm);
    v = rmsnorm_head(h Wv) (no weight; Wv = Wk when the file has no attn_v)
    NEOX RoPE: sliding layers over rope.dimension_count_swa dims, base freq_base_swa; full layers
    over rope.dimension_count dims, base freq_base, frequencies divided by rope_freqs
    att = softmax(q k^T) v (scale 1), causal; sliding layers see pos_q - pos_k < sliding_window
    x += rmsnorm(att Wo) * post_attention_norm
    x += rmsnorm(gelu_tanh(h2 Wg) * (h2 Wu) Wd) * post_ffw_norm, h2 = rmsnorm(x) * ffn_norm
    x += rmsnorm((gelu_tanh(x W_inp_gate) * pl[l]) W_proj) * post_norm
    x *= layer_output_scale
  logits = cap * tanh((rmsnorm(x) * output_norm) token_embd^T / cap)
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from reference import gelu_tanh, load_arch_gguf



def _rmsnorm(x, w, eps):
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if w is None else y * w


class Gemma4Reference:
    def __init__(self, path: str | Path):
        self.w, g = load_arch_gguf(path, "gemma4")
        self.n_embd = int(g("embedding_length"))
        self.n_layer = int(g("block_count"))
        self.n_head = int(g("attention.head_count"))
        self.n_head_kv = int(g("attention.head_count_kv"))
        self.head_full = int(g("attention.key_length"))
        self.head_swa = int(g("attention.key_length_swa", self.head_full))
        self.rot_full = int(g("rope.dimension_count", self.head_full))
        self.rot_swa = int(g("rope.dimension_count_swa", self.rot_full))
        self.base = float(g("rope.freq_base", 10000.0))
        self.base_swa = float(g("rope.freq_base_swa", 10000.0))
        self.eps = float(g("attention.layer_norm_rms_epsilon", 1e-6))
        self.window = int(g("attention.sliding_window"))
        self.swa = [bool(v) for v in g("attention.sliding_window_pattern")]
        self.n_shared = int(g("attention.shared_kv_layers", 0))
        self.n_pl = int(g("embedding_length_per_layer_input", 0))
        self.softcap = float(g("final_logit_softcapping", 0.0))
        self.n_vocab = self.w["token_embd.weight"].shape[0]
        first = self.n_layer - self.n_shared
        self.kv_src = [l if l < first else first - (2 if self.swa[l] else 1) for l in range(self.n_layer)]

    def _inv_freq(self, il: int) -> tuple[np.ndarray, int]:
        if self.swa[il]:
            n = self.rot_swa
            return self.base_swa ** (-2.0 * np.arange(n // 2) / n), n
        n = self.rot_full
        inv = self.base ** (-2.0 * np.arange(n // 2) / n)
        return inv / self.w["rope_freqs.weight"], n

    def _rope(self, x, pos, il):
        inv, n = self._inv_freq(il)
        half = n // 2
        th = pos[:, None].astype(np.float64) * inv[None, :]
        cos, sin = np.cos(th)[:, None, :], np.sin(th)[:, None, :]
        out = x.copy()
        x0, x1 = x[..., :half], x[..., half:n]
        out[..., :half] = x0 * cos - x1 * sin
        out[..., half:n] = x0 * sin + x1 * cos
        return out

    def _kv(self, h, il, pos, v_norm=True):
        p = f"blk.{il}."
        n, hd = h.shape[0], self.head_swa if self.swa[il] else self.head_full
        kp = h @ self.w[p + "attn_k.weight"].T
        vp = h @ self.w.get(p + "attn_v.weight", self.w[p + "attn_k.weight"]).T
        k = self._rope(_rmsnorm(kp.reshape(n, self.n_head_kv, hd), self.w[p + "attn_k_norm.weight"], self.eps), pos, il)
        v = vp.reshape(n, self.n_head_kv, hd)
        return k, (_rmsnorm(v, None, self.eps) if v_norm else v)

    def forward(self, ids, *, last_only=False, per_layer=True, kv_sharing=True, v_norm=True,
                window=True, out_scale=True) -> np.ndarray:
        """Logits [n, n_vocab] (or [1, n_vocab]) of `ids` from position 0. The keyword switches
        turn one feature off (tests: each must move the logits); kv_sharing=False gives each
        shared layer the keys and values its own source layer's weights compute from its input."""
        ids = np.asarray(ids, dtype=np.int64)
        n, E, P, L = len(ids), self.n_embd, self.n_pl, self.n_layer
        pos = np.arange(n)
        x = self.w["token_embd.weight"][ids] * math.sqrt(E)
        pl = None
        if self.n_pl and per_layer:
            proj = (x @ self.w["per_layer_model_proj.weight"].T / math.sqrt(E)).reshape(n, L, P)
            proj = _rmsnorm(proj, self.w["per_layer_proj_norm.weight"], self.eps)
            tok = self.w["per_layer_token_embd.weight"][ids].reshape(n, L, P) * math.sqrt(P)
            pl = (proj + tok) / math.sqrt(2.0)
        cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        mask_causal = np.triu(np.full((n, n), -np.inf), 1)
        d = pos[:, None] - pos[None, :]
        mask_swa = np.where(d >= self.window, -np.inf, 0.0) + mask_causal
        for il in range(L):
            p = f"blk.{il}."
            hd = self.head_swa if self.swa[il] else self.head_full
            h = _rmsnorm(x, self.w[p + "attn_norm.weight"], self.eps)
            q = (h @ self.w[p + "attn_q.weight"].T).reshape(n, self.n_head, hd)
            q = self._rope(_rmsnorm(q, self.w[p + "attn_q_norm.weight"], self.eps), pos, il)
            src = self.kv_src[il]
            if src == il:
                cache[il] = self._kv(h, il, pos, v_norm)
                k, v = cache[il]
            elif kv_sharing:
                k, v = cache[src]
            else:  # the source layer's projections on this layer's input
                k, v = self._kv(h, src, pos, v_norm)
            mask = mask_swa if (self.swa[il] and window) else mask_causal
            att = np.zeros((n, self.n_head, hd))
            for hh in range(self.n_head):
                kv = hh // (self.n_head // self.n_head_kv)
                s = q[:, hh] @ k[:, kv].T + mask
                s = np.exp(s - s.max(axis=1, keepdims=True))
                att[:, hh] = (s / s.sum(axis=1, keepdims=True)) @ v[:, kv]
            o = att.reshape(n, self.n_head * hd) @ self.w[p + "attn_output.weight"].T
            x = x + _rmsnorm(o, self.w[p + "post_attention_norm.weight"], self.eps)
            h = _rmsnorm(x, self.w[p + "ffn_norm.weight"], self.eps)
            gu = gelu_tanh(h @ self.w[p + "ffn_gate.weight"].T) * (h @ self.w[p + "ffn_up.weight"].T)
            x = x + _rmsnorm(gu @ self.w[p + "ffn_down.weight"].T, self.w[p + "post_ffw_norm.weight"], self.eps)
            if pl is not None:
                t = gelu_tanh(x @ self.w[p + "inp_gate.weight"].T) * pl[:, il]
                x = x + _rmsnorm(t @ self.w[p + "proj.weight"].T, self.w[p + "post_norm.weight"], self.eps)
            if out_scale and p + "layer_output_scale.weight" in self.w:
                x = x * self.w[p + "layer_output_scale.weight"][0]
        if last_only:
            x = x[-1:]
        x = _rmsnorm(x, self.w["output_norm.weight"], self.eps)
        z = x @ self.w.get("output.weight", self.w["token_embd.weight"]).T
        if self.softcap > 0:
            z = self.softcap * np.tanh(z / self.softcap)
        return z
