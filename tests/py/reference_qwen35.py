"""Numpy float64 reference forward pass of `qwen35` (Qwen3.5, Gated DeltaNet hybrid), written
from llama.cpp's src/models/qwen35.cpp, its delta-net ops (ggml's gated_delta_net, ssm_conv) and
the converter, in the style of reference.py (which it does not extend: its own loader and
forward, since no piece of the llama block's forward carries over unchanged).

Per layer, x += mixer(rmsnorm(x) * attn_norm), then x += ffn(rmsnorm(x) * post_attention_norm):
  * Gated DeltaNet (a recurrent layer): qkv = Wqkv h, z = Wgate h, beta = sigmoid(Wbeta h),
    g = softplus(Walpha h + ssm_dt) * ssm_a (ssm_a < 0: a per-head decay exp(g) in (0, 1)).
    c = silu(causal depthwise conv1d over qkv, kernel ssm_conv1d [conv_dim][K], the K-1
    positions before the first being zeros); q, k, v = its column blocks; q and k L2-normed per
    head (x / sqrt(sum x^2 + eps)). Value head j reads key head j % n_k_heads. Per value head,
    the state S [head_k][head_v] starts at zeros and each position does
        S *= exp(g);  d = (v - S^T k) * beta;  S += k d^T;  o = S^T q / sqrt(head_v),
    then out = Wout (rmsnorm(o per head) * ssm_norm * silu(z)).
  * gated attention: Wq h gives per head the query then its gate; q, k RMS-normed per head,
    RoPE (NEOX pairs over the first n_rot dims; llama.cpp's interleaved MRoPE with a text
    token's positions (p, p, p, 0): a pair whose section is the fourth does not rotate),
    causal GQA softmax(q k / sqrt(head_dim)) v, times sigmoid(gate), then Wo.
The final norm and the output (or tied token_embd) give the logits. The MTP block
(nextn_predict_layers) is not part of the main pass: its layers are skipped.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from reference import load_arch_gguf



def _rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _silu(x):
    return x / (1.0 + np.exp(-x))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softplus(x):
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


def imrope_inv_freq(n_rot: int, base: float, sections) -> np.ndarray:
    """Per rotated pair, theta per position (0 where the pair's section is the fourth, whose
    position is 0 for text tokens): ggml's interleaved MRoPE cache at positions (p, p, p, 0)."""
    half = n_rot // 2
    inv = base ** (-2.0 * np.arange(half, dtype=np.float64) / n_rot)
    s = [int(v) for v in sections]
    total = sum(s)
    for i in range(half):
        sector = i % total if total else 0
        in_text = ((sector % 3 == 0 and sector < 3 * s[0]) or (sector % 3 == 1 and sector < 3 * s[1])
                   or (sector % 3 == 2 and sector < 3 * s[2]))
        if not in_text:
            inv[i] = 0.0
    return inv


class Qwen35Reference:
    def __init__(self, path: str | Path):
        self.w, g = load_arch_gguf(path, "qwen35")
        self.n_embd = int(g("embedding_length"))
        self.n_layer = int(g("block_count")) - int(g("nextn_predict_layers", 0))
        self.n_head = int(g("attention.head_count"))
        self.n_head_kv = int(g("attention.head_count_kv"))
        self.head_dim = int(g("attention.key_length"))
        self.n_rot = int(g("rope.dimension_count"))
        self.rope_base = float(g("rope.freq_base"))
        self.sections = list(g("rope.dimension_sections"))
        self.eps = float(g("attention.layer_norm_rms_epsilon"))
        self.conv_kernel = int(g("ssm.conv_kernel"))
        self.head_k = int(g("ssm.state_size"))
        self.n_k_heads = int(g("ssm.group_count"))
        self.n_v_heads = int(g("ssm.time_step_rank"))
        self.head_v = int(g("ssm.inner_size")) // self.n_v_heads
        rec = g("attention.recurrent_layers")
        interval = int(g("full_attention_interval", 4))
        self.recurrent = ([bool(v) for v in rec][: self.n_layer] if rec is not None
                          else [(il + 1) % interval != 0 for il in range(self.n_layer)])
        self.n_vocab = self.w["token_embd.weight"].shape[0]

    # -- the two mixers -------------------------------------------------------

    def _delta_net(self, h, p, conv_history=True, state_history=True, out_gate=True):
        n = h.shape[0]
        kd, hk, hv, nk, nv = self.head_k * self.n_k_heads, self.head_k, self.head_v, self.n_k_heads, self.n_v_heads
        qkv = h @ self.w[p + "attn_qkv.weight"].T
        z = h @ self.w[p + "attn_gate.weight"].T
        beta = _sigmoid(h @ self.w[p + "ssm_beta.weight"].T)
        gate = _softplus(h @ self.w[p + "ssm_alpha.weight"].T + self.w[p + "ssm_dt.bias"]) * self.w[p + "ssm_a"]
        kern = self.w[p + "ssm_conv1d.weight"]  # [conv_dim][K]; tap K-1 on the position itself
        K = self.conv_kernel
        c = np.zeros_like(qkv)
        for t in range(K if conv_history else 1):
            back = t  # tap K-1-back weighs the input `back` positions earlier
            c[back:] += kern[:, K - 1 - back] * qkv[:n - back]
        c = _silu(c)
        q = c[:, :kd].reshape(n, nk, hk)
        k = c[:, kd:2 * kd].reshape(n, nk, hk)
        v = c[:, 2 * kd:].reshape(n, nv, hv)
        q = q / np.sqrt(np.sum(q * q, axis=-1, keepdims=True) + self.eps)
        k = k / np.sqrt(np.sum(k * k, axis=-1, keepdims=True) + self.eps)
        o = np.zeros((n, nv, hv))
        S = np.zeros((nv, hk, hv))
        for t in range(n):
            if not state_history:
                S[:] = 0.0
            for j in range(nv):
                kj, qj = k[t, j % nk], q[t, j % nk]
                S[j] *= np.exp(gate[t, j])
                d = (v[t, j] - S[j].T @ kj) * beta[t, j]
                S[j] += np.outer(kj, d)
                o[t, j] = S[j].T @ qj / np.sqrt(hv)
        o = _rmsnorm(o, self.w[p + "ssm_norm.weight"], self.eps)
        if out_gate:
            o = o * _silu(z.reshape(n, nv, hv))
        return o.reshape(n, nv * hv) @ self.w[p + "ssm_out.weight"].T

    def _rope(self, x, pos):
        inv = imrope_inv_freq(self.n_rot, self.rope_base, self.sections)
        half = self.n_rot // 2
        th = pos[:, None].astype(np.float64) * inv[None, :]
        cos, sin = np.cos(th)[:, None, :], np.sin(th)[:, None, :]
        out = x.copy()
        x0, x1 = x[..., :half], x[..., half:self.n_rot]
        out[..., :half] = x0 * cos - x1 * sin
        out[..., half:self.n_rot] = x0 * sin + x1 * cos
        return out

    def _attention(self, h, p, pos, out_gate=True):
        n, H, Hkv, hd = h.shape[0], self.n_head, self.n_head_kv, self.head_dim
        qg = (h @ self.w[p + "attn_q.weight"].T).reshape(n, H, 2 * hd)
        q, gate = qg[..., :hd], qg[..., hd:]
        k = (h @ self.w[p + "attn_k.weight"].T).reshape(n, Hkv, hd)
        v = (h @ self.w[p + "attn_v.weight"].T).reshape(n, Hkv, hd)
        q = self._rope(_rmsnorm(q, self.w[p + "attn_q_norm.weight"], self.eps), pos)
        k = self._rope(_rmsnorm(k, self.w[p + "attn_k_norm.weight"], self.eps), pos)
        out = np.zeros((n, H, hd))
        mask = np.triu(np.full((n, n), -np.inf), 1)
        for hh in range(H):
            kv = hh // (H // Hkv)
            s = q[:, hh] @ k[:, kv].T / np.sqrt(hd) + mask
            s = np.exp(s - s.max(axis=1, keepdims=True))
            out[:, hh] = (s / s.sum(axis=1, keepdims=True)) @ v[:, kv]
        if out_gate:
            out = out * _sigmoid(gate)
        return out.reshape(n, H * hd) @ self.w[p + "attn_output.weight"].T

    # -- forward ----------------------------------------------------------------

    def forward(self, ids, *, last_only=False, conv_history=True, state_history=True, out_gate=True,
                rope=True) -> np.ndarray:
        """Logits [n, n_vocab] (or [1, n_vocab]) of the prompt `ids` from position 0. The
        keyword switches turn one feature off (tests: each must move the logits)."""
        ids = np.asarray(ids, dtype=np.int64)
        x = self.w["token_embd.weight"][ids].copy()
        pos = np.arange(len(ids)) if rope else np.zeros(len(ids), dtype=np.int64)
        for il in range(self.n_layer):
            p = f"blk.{il}."
            h = _rmsnorm(x, self.w[p + "attn_norm.weight"], self.eps)
            if self.recurrent[il]:
                x = x + self._delta_net(h, p, conv_history, state_history, out_gate)
            else:
                x = x + self._attention(h, p, pos, out_gate)
            h = _rmsnorm(x, self.w[p + "post_attention_norm.weight"], self.eps)
            gu = _silu(h @ self.w[p + "ffn_gate.weight"].T) * (h @ self.w[p + "ffn_up.weight"].T)
            x = x + gu @ self.w[p + "ffn_down.weight"].T
        if last_only:
            x = x[-1:]
        x = _rmsnorm(x, self.w["output_norm.weight"], self.eps)
        out = self.w.get("output.weight", self.w["token_embd.weight"])
        return x @ out.T
