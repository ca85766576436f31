"""Independent numpy forward pass for llama-family GGUF models (arch llama, qwen2).

Numerics: weights are dequantised once with gguf.quants.dequantize and kept as
float32 (that is exactly the value the file encodes; float32 holds every F16,
BF16 and block-quantised value exactly). All activations and every reduction are
computed in float64, so the reference's own rounding error (~1e-15 relative) is
negligible next to any tolerance used in the tests.

Shapes: a GGUF tensor has dims [ne0, ne1] where ne0 is the contiguous row length.
gguf.GGUFReader / quants.dequantize hand back a numpy array of shape [ne1, ne0]
(row-major, rows of length ne0). For a projection weight stored as
[ne0 = n_in, ne1 = n_out], the array is W[n_out, n_in] and the layer computes
y = x @ W.T, i.e. y[j] = sum_i W[j, i] * x[i] -- each output is the dot product
of one contiguous row with the input, like ggml_mul_mat.

The model (what llama.cpp computes for these archs):
    x = token_embd[ids]
    per layer:
        h = rmsnorm(x) * attn_norm
        q, k, v = h @ Wq.T (+ bq), h @ Wk.T (+ bk), h @ Wv.T (+ bv)     (qwen2 biases)
        RoPE on q and k: llama = GGML "normal" mode (rotate adjacent pairs 2i, 2i+1),
                         qwen2 = NEOX mode (rotate pairs i, i + n_rot/2);
                         theta_i = pos * base^(-2i/n_rot) / rope_freqs[i] (if present)
        causal softmax attention, scale 1/sqrt(head_dim), GQA: kv head = q head // (n_head/n_head_kv)
        x += attn @ Wo.T
        h = rmsnorm(x) * ffn_norm
        x += (silu(h @ Wg.T) * (h @ Wu.T)) @ Wd.T
    logits = (rmsnorm(x) * output_norm) @ Wout.T      (Wout = token_embd when output.weight is absent)
    rmsnorm(x) = x / sqrt(mean(x^2) + eps)

`act_quant=True` additionally simulates the engine's activation quantisation
(int8 blocks before every matmul whose weight is block-quantised: Q8_0-style
blocks of 32 for Q4_0/Q4_1/Q8_0 weights, Q8_K-style blocks of 256 for K-quants).
It exists only to check that the tolerances used for W8A8/W4A8 types give
headroom over the pure effect of that rounding; it is never what the engine is
compared with.

`f32_matmul=True` likewise runs every matmul in float32 (inputs rounded to f32,
products accumulated in f32 by numpy's sgemm), the dominant rounding of the
engine's default (exact) mode; it is used to check the exact-mode tolerances'
headroom the same way.

`act_f16=True` rounds the input of every matmul whose weight is Q4_0, Q4_1 or Q8_0
to IEEE half (round to nearest even) -- exactly the activation format of the
engine's W4A16 mode (`--f16-act`); matmuls with other weight types keep float64
inputs, as the engine keeps f32 for them. Unlike act_quant this *is* what the
engine computes (up to its f32 / fp16 accumulation), so f16-act logits are compared
with forward(act_f16=True) under a tight bound, and forward(act_f16=True) with the
plain forward checks the bound derived from the rounding (tolerances.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SUPPORTED_ARCHS = {"llama": "normal", "qwen2": "neox"}
FLOAT_TYPES = {"F32", "F16", "BF16"}
K_TYPES = {"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"}
# Weight types with W4A16 kernels (fp16 activations); the rest keep f32 activations.
F16_ACT_TYPES = {"Q4_0", "Q4_1", "Q8_0"}


@dataclass
class HParams:
    arch: str
    n_vocab: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_rot: int
    n_ff: int
    rope_base: float
    rms_eps: float
    n_ctx: int


def _field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


class Reference:
    """Loads a GGUF once (dequantising every tensor) and runs forward passes."""

    def __init__(self, path: str | Path):
        from gguf import GGUFReader
        from gguf import quants
        reader = GGUFReader(str(path))
        arch = _field(reader, "general.architecture")
        if arch not in SUPPORTED_ARCHS:
            raise ValueError(f"reference: unsupported architecture {arch!r}")
        self.w: dict[str, np.ndarray] = {}
        self.wtype: dict[str, str] = {}
        for t in reader.tensors:
            arr = quants.dequantize(t.data, t.tensor_type)
            shape = tuple(int(x) for x in reversed(list(t.shape)))  # [ne1, ne0]
            self.w[t.name] = np.ascontiguousarray(arr, dtype=np.float32).reshape(shape)
            self.wtype[t.name] = t.tensor_type.name
        tokens = _field(reader, "tokenizer.ggml.tokens")
        self.tokens: list[str] = list(tokens) if tokens is not None else []
        tt = _field(reader, "tokenizer.ggml.token_type")
        self.token_types: list[int] = list(tt) if tt is not None else []
        merges = _field(reader, "tokenizer.ggml.merges")
        self.merges: list[str] = list(merges) if merges is not None else []
        self.chat_template = _field(reader, "tokenizer.chat_template", "")
        self.eos_id = _field(reader, "tokenizer.ggml.eos_token_id")

        a = arch
        n_embd = int(_field(reader, f"{a}.embedding_length"))
        n_head = int(_field(reader, f"{a}.attention.head_count"))
        head_dim = n_embd // n_head
        embd = self.w["token_embd.weight"]
        self.hp = HParams(
            arch=a,
            n_vocab=embd.shape[0],
            n_embd=n_embd,
            n_layer=int(_field(reader, f"{a}.block_count")),
            n_head=n_head,
            n_head_kv=int(_field(reader, f"{a}.attention.head_count_kv", n_head)),
            head_dim=head_dim,
            n_rot=int(_field(reader, f"{a}.rope.dimension_count", head_dim)),
            n_ff=int(_field(reader, f"{a}.feed_forward_length")),
            rope_base=float(_field(reader, f"{a}.rope.freq_base", 10000.0)),
            rms_eps=float(_field(reader, f"{a}.attention.layer_norm_rms_epsilon", 1e-5)),
            n_ctx=int(_field(reader, f"{a}.context_length", 2048)),
        )
        assert embd.shape[1] == n_embd

    # -- pieces -------------------------------------------------------------

    def _mm(self, x: np.ndarray, name: str, act_quant: bool,
            f32_matmul: bool = False, act_f16: bool = False) -> np.ndarray:
        w = self.w[name]
        if act_quant:
            x = simulate_act_quant(x, self.wtype[name])
        if act_f16 and self.wtype[name] in F16_ACT_TYPES:
            x = x.astype(np.float16).astype(np.float64)  # IEEE round to nearest even
        if f32_matmul:
            return (x.astype(np.float32) @ w.T).astype(np.float64)
        return x @ w.T.astype(np.float64)

    @staticmethod
    def _rmsnorm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight

    def _rope(self, x: np.ndarray, pos: np.ndarray, mode: str, base: float,
              factors: np.ndarray | None) -> np.ndarray:
        # x: [n_tok, n_heads, head_dim]
        n_rot = self.hp.n_rot
        half = n_rot // 2
        inv = base ** (-2.0 * np.arange(half, dtype=np.float64) / n_rot)
        if factors is not None:
            inv = inv / factors.astype(np.float64)
        theta = pos[:, None].astype(np.float64) * inv[None, :]          # [n_tok, half]
        cos = np.cos(theta)[:, None, :]
        sin = np.sin(theta)[:, None, :]
        out = x.copy()
        if mode == "normal":
            x0 = x[..., 0:n_rot:2]
            x1 = x[..., 1:n_rot:2]
            out[..., 0:n_rot:2] = x0 * cos - x1 * sin
            out[..., 1:n_rot:2] = x0 * sin + x1 * cos
        elif mode == "neox":
            x0 = x[..., :half]
            x1 = x[..., half:n_rot]
            out[..., :half] = x0 * cos - x1 * sin
            out[..., half:n_rot] = x0 * sin + x1 * cos
        else:
            raise ValueError(mode)
        return out

    # -- forward ------------------------------------------------------------

    def forward(self, ids, *, last_only: bool = False, act_quant: bool = False,
                f32_matmul: bool = False, act_f16: bool = False, rms_eps: float | None = None,
                rope_base: float | None = None, rope_mode: str | None = None, use_rope_freqs: bool = True,
                use_bias: bool = True, output_name: str | None = None) -> np.ndarray:
        """Logits (float64) for every position of `ids` (from position 0), or only
        the last one. The keyword overrides exist for sensitivity checks."""
        hp = self.hp
        ids = np.asarray(ids, dtype=np.int64)
        n = len(ids)
        eps = hp.rms_eps if rms_eps is None else rms_eps
        base = hp.rope_base if rope_base is None else rope_base
        mode = SUPPORTED_ARCHS[hp.arch] if rope_mode is None else rope_mode
        factors = self.w.get("rope_freqs.weight") if use_rope_freqs else None
        pos = np.arange(n)
        hd = hp.head_dim
        group = hp.n_head // hp.n_head_kv
        mask = np.triu(np.full((n, n), -np.inf), k=1)
        scale = 1.0 / math.sqrt(hd)

        x = self.w["token_embd.weight"][ids].astype(np.float64)
        for il in range(hp.n_layer):
            p = f"blk.{il}."
            h = self._rmsnorm(x, self.w[p + "attn_norm.weight"], eps)
            q = self._mm(h, p + "attn_q.weight", act_quant, f32_matmul, act_f16)
            k = self._mm(h, p + "attn_k.weight", act_quant, f32_matmul, act_f16)
            v = self._mm(h, p + "attn_v.weight", act_quant, f32_matmul, act_f16)
            if use_bias:
                if p + "attn_q.bias" in self.w:
                    q = q + self.w[p + "attn_q.bias"]
                if p + "attn_k.bias" in self.w:
                    k = k + self.w[p + "attn_k.bias"]
                if p + "attn_v.bias" in self.w:
                    v = v + self.w[p + "attn_v.bias"]
            q = self._rope(q.reshape(n, hp.n_head, hd), pos, mode, base, factors)
            k = self._rope(k.reshape(n, hp.n_head_kv, hd), pos, mode, base, factors)
            v = v.reshape(n, hp.n_head_kv, hd)
            att = np.empty((n, hp.n_head, hd))
            for hq in range(hp.n_head):
                kvh = hq // group
                s = (q[:, hq, :] @ k[:, kvh, :].T) * scale + mask
                s = s - s.max(axis=1, keepdims=True)
                pr = np.exp(s)
                pr /= pr.sum(axis=1, keepdims=True)
                att[:, hq, :] = pr @ v[:, kvh, :]
            x = x + self._mm(att.reshape(n, hp.n_head * hd), p + "attn_output.weight",
                             act_quant, f32_matmul, act_f16)
            h = self._rmsnorm(x, self.w[p + "ffn_norm.weight"], eps)
            g = self._mm(h, p + "ffn_gate.weight", act_quant, f32_matmul, act_f16)
            u = self._mm(h, p + "ffn_up.weight", act_quant, f32_matmul, act_f16)
            x = x + self._mm(g / (1.0 + np.exp(-g)) * u, p + "ffn_down.weight",
                             act_quant, f32_matmul, act_f16)
        if last_only:
            x = x[-1:]
        x = self._rmsnorm(x, self.w["output_norm.weight"], eps)
        out_name = "output.weight" if "output.weight" in self.w else "token_embd.weight"
        if output_name is not None:
            out_name = output_name
        return self._mm(x, out_name, act_quant, f32_matmul, act_f16)

    def greedy(self, ids, n_new: int, stop_ids=()) -> list[int]:
        """Greedy continuation (recomputes the whole sequence each step)."""
        seq = list(ids)
        out = []
        for _ in range(n_new):
            nxt = int(np.argmax(self.forward(seq, last_only=True)[0]))
            out.append(nxt)
            seq.append(nxt)
            if nxt in stop_ids:
                break
        return out


def simulate_act_quant(x: np.ndarray, wtype: str) -> np.ndarray:
    """Round activation rows the way an int8 activation format would (see module doc)."""
    if wtype in FLOAT_TYPES:
        return x
    blk = 256 if wtype in K_TYPES else 32
    n_tok, n = x.shape
    xb = x.reshape(n_tok, n // blk, blk)
    amax = np.abs(xb).max(axis=-1, keepdims=True)
    d = amax / 127.0
    if blk == 32:  # Q8_0 / Q8_1 store d as fp16
        d = d.astype(np.float16).astype(np.float64)
    safe = np.where(d == 0, 1.0, d)
    q = np.clip(np.rint(xb / safe), -127, 127)
    return (q * d).reshape(n_tok, n)


def compare(got: np.ndarray, ref: np.ndarray) -> dict:
    """Error statistics of engine logits vs reference logits (both [n_pos, n_vocab])."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    diff = got - ref
    rms = float(np.sqrt(np.mean(ref * ref)))
    agree = np.argmax(got, axis=1) == np.argmax(ref, axis=1)
    return {
        "ref_rms": rms,
        "max_abs": float(np.max(np.abs(diff))),
        "max_rel": float(np.max(np.abs(diff)) / rms),
        "rms_rel": float(np.sqrt(np.mean(diff * diff)) / rms),
        "argmax_agree": float(np.mean(agree)),
        "n_pos": int(ref.shape[0]),
    }


def format_stats(s: dict) -> str:
    return (f"max|d|/rms={s['max_rel']:.3e} rms(d)/rms={s['rms_rel']:.3e} "
            f"max|d|={s['max_abs']:.3e} rms(ref)={s['ref_rms']:.3f} "
            f"argmax agree={s['argmax_agree']*100:.0f}% of {s['n_pos']}")
