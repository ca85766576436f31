"""Independent numpy forward pass for llama-family GGUF models (arch llama, qwen2; deci,
llama.cpp's name for the llama block with per-layer sizes) and Gemma 3 (arch gemma3).

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

Variants of that block (llama.cpp's src/models/<arch>.cpp):
    qwen3:   NEOX RoPE, per-head rmsnorm of q and k (attn_q_norm / attn_k_norm) before RoPE
    smollm3: no RoPE on layers with (il + 1) % 4 == 0; no rope_freqs
    granite, minicpm: x = embed * embedding_scale; each block's output (attention after Wo,
             FFN after Wd) times residual_scale before it is added; q.k times attention.scale;
             logits / logit_scale (minicpm defaults: 12, 1.4 / sqrt(n_layer), n_embd / 256)
    phi3:    attn_qkv holds the q, k, v rows; ffn_up holds the gate rows then the up rows;
             NEOX RoPE over the first rope.dimension_count dims, frequencies divided by
             rope_factors_long when the context exceeds rope.scaling.original_context_length,
             else by rope_factors_short; cos and sin times rope.scaling.attn_factor

Gemma 2 is the Gemma 3 below without q/k norms, with the local layers' RoPE base equal to
the global one (unless rope.freq_base_swa), the linear scaling on both, scores soft-capped
after scaling (s -> 50 tanh(s / 50), attn_logit_softcapping) and logits too (30,
final_logit_softcapping), window 4096 and pattern 2 by default.

Gemma 3 (what llama.cpp's gemma3 graph and HF Gemma3 compute; the GGUF norm weights
already hold Gemma's 1 + w):
    x = token_embd[ids] * sqrt(n_embd)
    per layer il; local (sliding-window) unless (il + 1) % pattern == 0 (pattern 6):
        h = rmsnorm(x) * attn_norm;  q, k, v = h @ Wq.T, h @ Wk.T, h @ Wv.T
        q, k: rmsnorm over each head * attn_q_norm / attn_k_norm, then NEOX RoPE with
              base 10000 (local) or rope.freq_base / linear factor (global)
        softmax(q.k * head_dim^-0.5) v over keys with pos_k <= pos_q and, on local
              layers, pos_q - pos_k < sliding_window; GQA
        x += rmsnorm(attn @ Wo.T) * post_attention_norm
        h = rmsnorm(x) * ffn_norm
        x += rmsnorm((gelu_tanh(h @ Wg.T) * (h @ Wu.T)) @ Wd.T) * post_ffw_norm
    logits = (rmsnorm(x) * output_norm) @ token_embd.T

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

`act_static={tensor name: d}` simulates `--static-act`: the input of every matmul
whose weight is block-quantised and named in the dict is rounded with that fixed step,
q = clip(rint(x / d), -127, 127) (d rounded to fp16 first where the activation blocks
are Q8_0-style: Q4_0/Q5_0/Q8_0 weights; f32 for Q4_1/Q5_1 and the K-quants); block-
quantised weights not in the dict get the dynamic act_quant rounding, float weights
none. The dict must already hold the step the engine uses for each product (products
sharing an input share one step; the caller applies that rule). Like act_f16 this is
what the engine computes, up to f32 arithmetic and the rare rounding ties it moves.

`act_i16=True` rounds the input of every matmul whose weight is block-quantised to
the engine's int16 format (`--int16-act`, block_q16): per 32 values d = amax / 32767
and q = rint(x / d) in float32. Like act_f16 this is what the engine computes, up to f32
accumulation and the rounding steps its f32 inputs cross (see tolerances.py).

`observe=callable(name, x)` is called with every matmul input (float64 [n_tok, cols])
before any rounding: the tests calibrate static scales from it.

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

SUPPORTED_ARCHS = {"llama": "normal", "deci": "normal", "qwen2": "neox", "gemma3": "neox",
                   "qwen3": "neox", "smollm3": "normal", "granite": "normal", "minicpm": "normal",
                   "phi3": "neox", "gemma2": "neox", "lfm2": "neox"}
FLOAT_TYPES = {"F32", "F16", "BF16"}
K_TYPES = {"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS"}  # 256-element blocks (Q8_K activations)
# Weight types with W4A16 kernels (fp16 activations); the rest keep f32 activations.
F16_ACT_TYPES = {"Q4_0", "Q4_1", "Q8_0"}
# Weight types whose int8 activation blocks store the step as fp16 (Q8_0-style blocks).
Q8_0_ACT_TYPES = {"Q4_0", "Q5_0", "Q8_0"}


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
    n_ff: int                     # the widest layer's feed-forward size
    rope_base: float
    rms_eps: float
    n_ctx: int
    # gemma3 only
    sliding_window: int = 0
    swa_pattern: int = 0
    rope_base_local: float = 10000.0
    rope_linear: float = 1.0
    n_ff_layers: list = None      # per layer ({arch}.feed_forward_length may be an array)
    # the llama block's variants (module doc)
    no_rope_step: int = 0         # smollm3: no RoPE where (il + 1) % step == 0
    embed_scale: float = 1.0      # granite / minicpm
    residual_scale: float = 1.0
    logit_mul: float = 1.0
    attn_scale: float = 0.0       # 0: 1 / sqrt(head_dim)
    attn_factor: float = 1.0      # phi3 LongRoPE: rotated dims times this
    orig_ctx: int = 0             # phi3 LongRoPE: long factors for a context above this
    attn_softcap: float = 0.0     # gemma2: scores -> cap * tanh(s / cap)
    final_softcap: float = 0.0    # gemma2: logits -> cap * tanh(z / cap)
    conv_layers: tuple = ()       # lfm2: layers whose head_count_kv is 0 (short convolutions)
    conv_taps: int = 0            # lfm2: shortconv.l_cache


def _field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


def load_arch_gguf(path: str | Path, arch: str):
    """An architecture's file for the per-architecture references (reference_qwen35.py,
    reference_gemma4.py): every tensor dequantised to float64 in its numpy shape, and
    hp(key, default) reading "<arch>.<key>". A file of another architecture is a ValueError."""
    from gguf import GGUFReader, quants
    reader = GGUFReader(str(path))
    a = _field(reader, "general.architecture")
    if a != arch:
        raise ValueError(f"reference_{arch}: architecture {a!r}")
    w: dict[str, np.ndarray] = {}
    for t in reader.tensors:
        arr = quants.dequantize(t.data, t.tensor_type)
        shape = tuple(int(x) for x in reversed(list(t.shape)))
        w[t.name] = np.ascontiguousarray(arr, dtype=np.float64).reshape(shape)
    return w, lambda k, d=None: _field(reader, f"{a}.{k}", d)


def gelu_tanh(g):
    """GELU, tanh form (gemma's GeGLU)."""
    return 0.5 * g * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (g + 0.044715 * g ** 3)))


def _per_layer(value, n_layer: int) -> list[int]:
    """A hyper-parameter stored as one value or as an array of one per layer (what
    llama.cpp's get_key_or_arr accepts)."""
    if isinstance(value, (list, tuple, np.ndarray)):
        vals = [int(v) for v in value]
        if len(vals) != n_layer:
            raise ValueError(f"reference: per-layer array has {len(vals)} values for {n_layer} layers")
        return vals
    return [int(value)] * n_layer


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
        sc = _field(reader, "tokenizer.ggml.scores")
        self.scores: list[float] = [float(x) for x in sc] if sc is not None else []
        self.add_space_prefix = bool(_field(reader, "tokenizer.ggml.add_space_prefix", True))
        self.bos_id = _field(reader, "tokenizer.ggml.bos_token_id")
        merges = _field(reader, "tokenizer.ggml.merges")
        self.merges: list[str] = list(merges) if merges is not None else []
        self.chat_template = _field(reader, "tokenizer.chat_template", "")
        self.eos_id = _field(reader, "tokenizer.ggml.eos_token_id")

        a = arch
        n_embd = int(_field(reader, f"{a}.embedding_length"))
        n_head = int(_field(reader, f"{a}.attention.head_count"))
        head_dim = int(_field(reader, f"{a}.attention.key_length", n_embd // n_head))
        embd = self.w["token_embd.weight"]
        n_layer = int(_field(reader, f"{a}.block_count"))
        n_ff_layers = _per_layer(_field(reader, f"{a}.feed_forward_length"), n_layer)
        self.hp = HParams(
            arch=a,
            n_vocab=embd.shape[0],
            n_embd=n_embd,
            n_layer=n_layer,
            n_head=n_head,
            n_head_kv=max(_per_layer(_field(reader, f"{a}.attention.head_count_kv", n_head), n_layer)),
            head_dim=head_dim,
            n_rot=int(_field(reader, f"{a}.rope.dimension_count", head_dim)),
            n_ff=max(n_ff_layers),
            rope_base=float(_field(reader, f"{a}.rope.freq_base", 10000.0)),
            rms_eps=float(_field(reader, f"{a}.attention.layer_norm_rms_epsilon", 1e-5)),
            n_ctx=int(_field(reader, f"{a}.context_length", 2048)),
        )
        if arch == "gemma3":
            self.hp.sliding_window = int(_field(reader, f"{a}.attention.sliding_window"))
            self.hp.swa_pattern = int(_field(reader, f"{a}.attention.sliding_window_pattern", 6))
            self.hp.rope_base_local = float(_field(reader, f"{a}.rope.freq_base_swa", 10000.0))
        if arch == "gemma2":  # llama.cpp's defaults: window 4096, pattern 2, one RoPE base, caps 50 / 30
            self.hp.sliding_window = int(_field(reader, f"{a}.attention.sliding_window", 4096))
            self.hp.swa_pattern = int(_field(reader, f"{a}.attention.sliding_window_pattern", 2))
            self.hp.rope_base_local = float(_field(reader, f"{a}.rope.freq_base_swa", self.hp.rope_base))
            self.hp.attn_softcap = float(_field(reader, f"{a}.attn_logit_softcapping", 50.0))
            self.hp.final_softcap = float(_field(reader, f"{a}.final_logit_softcapping", 30.0))
        if arch in ("gemma2", "gemma3"):
            if _field(reader, f"{a}.rope.scaling.type", "none") == "linear":
                self.hp.rope_linear = float(_field(reader, f"{a}.rope.scaling.factor"))
        self.hp.n_ff_layers = n_ff_layers
        self._read_variants(reader, a)
        assert embd.shape[1] == n_embd
        for il, ff in enumerate(n_ff_layers):
            p = f"blk.{il}."
            assert self.w[p + "ffn_gate.weight"].shape == (ff, n_embd), p
            assert self.w[p + "ffn_up.weight"].shape == (ff, n_embd), p
            assert self.w[p + "ffn_down.weight"].shape == (n_embd, ff), p

    def _read_variants(self, reader, a: str) -> None:
        """What qwen3, smollm3, granite, minicpm and phi3 add to the llama block, as llama.cpp's
        src/models/<arch>.cpp reads it; fused tensors are split into the separate ones."""
        hp = self.hp
        for il in range(hp.n_layer):
            p = f"blk.{il}."
            if p + "attn_qkv.weight" in self.w:  # rows: q, then k, then v
                qd, kd = hp.n_head * hp.head_dim, hp.n_head_kv * hp.head_dim
                fused, t = self.w.pop(p + "attn_qkv.weight"), self.wtype.pop(p + "attn_qkv.weight")
                for name, lo, hi in (("attn_q", 0, qd), ("attn_k", qd, qd + kd), ("attn_v", qd + kd, qd + 2 * kd)):
                    self.w[p + name + ".weight"], self.wtype[p + name + ".weight"] = fused[lo:hi], t
            if a == "phi3":  # ffn_up holds the gate's rows, then the up rows
                gu, t = self.w[p + "ffn_up.weight"], self.wtype[p + "ffn_up.weight"]
                ff = gu.shape[0] // 2
                self.w[p + "ffn_gate.weight"], self.w[p + "ffn_up.weight"] = gu[:ff], gu[ff:]
                self.wtype[p + "ffn_gate.weight"] = t
        if a == "smollm3":
            hp.no_rope_step = 4
        if a == "lfm2":  # head_count_kv 0 marks a convolution layer; the final norm's own name
            kv = _per_layer(_field(reader, f"{a}.attention.head_count_kv"), hp.n_layer)
            hp.conv_layers = tuple(il for il, h in enumerate(kv) if h == 0)
            hp.conv_taps = int(_field(reader, f"{a}.shortconv.l_cache"))
            self.w["output_norm.weight"] = self.w["token_embd_norm.weight"]
        if a in ("granite", "minicpm"):
            mini = a == "minicpm"
            hp.embed_scale = float(_field(reader, f"{a}.embedding_scale", 12.0 if mini else 1.0))
            hp.residual_scale = float(_field(reader, f"{a}.residual_scale",
                                             1.4 / math.sqrt(hp.n_layer) if mini else 1.0))
            logit_scale = _field(reader, f"{a}.logit_scale", hp.n_embd / 256.0 if mini else None)
            if logit_scale is None:
                raise ValueError("reference: granite needs logit_scale")
            hp.logit_mul = 1.0 / float(logit_scale)
            hp.attn_scale = float(_field(reader, f"{a}.attention.scale", 0.0))
        if a == "phi3":
            hp.attn_factor = float(_field(reader, f"{a}.rope.scaling.attn_factor", 1.0))
            hp.orig_ctx = int(_field(reader, f"{a}.rope.scaling.original_context_length", 0))

    # -- pieces -------------------------------------------------------------

    _act_static: dict | None = None
    _observe = None
    _q4_codes = None  # hook over the q4 KV rounding decisions (see Q4Rounding)
    _act_i16 = False  # round block-quantised matmul inputs to int16 (forward(act_i16=True))

    def _mm(self, x: np.ndarray, name: str, act_quant: bool,
            f32_matmul: bool = False, act_f16: bool = False) -> np.ndarray:
        w = self.w[name]
        if self._observe is not None:
            self._observe(name, x)
        if self._act_static is not None:
            d = self._act_static.get(name)
            x = (simulate_static_act_quant(x, self.wtype[name], d) if d is not None
                 else simulate_act_quant(x, self.wtype[name]))
        if act_quant:
            x = simulate_act_quant(x, self.wtype[name])
        if self._act_i16 and self.wtype[name] not in FLOAT_TYPES:
            x = simulate_act_i16(x)
        if act_f16 and self.wtype[name] in F16_ACT_TYPES:
            x = x.astype(np.float16).astype(np.float64)  # IEEE round to nearest even
        if f32_matmul:
            return (x.astype(np.float32) @ w.T).astype(np.float64)
        return x @ w.T.astype(np.float64)

    @staticmethod
    def _rmsnorm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight

    def _rope(self, x: np.ndarray, pos: np.ndarray, mode: str, base: float,
              factors: np.ndarray | None, linear: float = 1.0, mscale: float = 1.0) -> np.ndarray:
        # x: [n_tok, n_heads, head_dim]
        n_rot = self.hp.n_rot
        half = n_rot // 2
        inv = base ** (-2.0 * np.arange(half, dtype=np.float64) / n_rot)
        if factors is not None:
            inv = inv / factors.astype(np.float64)
        inv = inv / linear
        theta = pos[:, None].astype(np.float64) * inv[None, :]          # [n_tok, half]
        cos = np.cos(theta)[:, None, :] * mscale
        sin = np.sin(theta)[:, None, :] * mscale
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
                use_bias: bool = True, output_name: str | None = None,
                kv_dtype: str = "f16", window: int = 0, sinks: int = 0,
                act_static: dict | None = None, observe=None,
                q4_codes=None, act_i16: bool = False, n_ctx: int | None = None,
                conv_history: bool = True, image_rows=None) -> np.ndarray:
        """Logits (float64) for every position of `ids` (from position 0), or only
        the last one. The keyword overrides exist for sensitivity checks.

        n_ctx: the session's context (default: len(ids), the context `pocketllm logits` gives
        a run without -c); phi3 takes rope_factors_long when it exceeds
        rope.scaling.original_context_length.

        kv_dtype: "f16" rounds the cached keys (after RoPE) and values to half precision
        as the engine's default cache does; "f32" rounds them to single precision.
        window/sinks: StreamingLLM attention. A query at p sees positions < sinks and the
        most recent window - sinks positions; the sinks are placed right before the oldest
        visible window position (their keys are rotated at lo - sinks + j, computed here
        from the un-rotated keys, independently of how the engine does it).
        q4_codes: a Q4Rounding that sees (and may redirect) every q4 KV rounding decision.
        conv_history: False keeps only each position's own tap in lfm2's convolutions.
        image_rows: an ImageRows (below): embeddings in place of the negative ids' rows, unscaled
        (gemma3: and each image's rows see each other both ways)."""
        if act_static is not None or observe is not None or q4_codes is not None or act_i16:
            self._act_static, self._observe, self._q4_codes = act_static, observe, q4_codes
            self._act_i16 = act_i16
            try:
                return self.forward(ids, last_only=last_only, act_quant=act_quant,
                                    f32_matmul=f32_matmul, act_f16=act_f16, rms_eps=rms_eps,
                                    rope_base=rope_base, rope_mode=rope_mode,
                                    use_rope_freqs=use_rope_freqs, use_bias=use_bias,
                                    output_name=output_name, kv_dtype=kv_dtype, window=window,
                                    sinks=sinks, n_ctx=n_ctx, conv_history=conv_history)
            finally:
                self._act_static, self._observe, self._q4_codes = None, None, None
                self._act_i16 = False

        if self.hp.arch in ("gemma2", "gemma3"):
            return self._forward_gemma3(ids, last_only=last_only, act_quant=act_quant,
                                        f32_matmul=f32_matmul, rms_eps=rms_eps,
                                        rope_base=rope_base, rope_mode=rope_mode,
                                        kv_dtype=kv_dtype, act_f16=act_f16, image_rows=image_rows)
        if image_rows is not None and image_rows.bidirectional:
            raise ValueError("bidirectional image rows: gemma3 only")
        hp = self.hp
        ids = np.asarray(ids, dtype=np.int64)
        n = len(ids)
        eps = hp.rms_eps if rms_eps is None else rms_eps
        base = hp.rope_base if rope_base is None else rope_base
        mode = SUPPORTED_ARCHS[hp.arch] if rope_mode is None else rope_mode
        factors = self.w.get("rope_freqs.weight") if use_rope_freqs and hp.arch != "smollm3" else None
        if "rope_factors_short.weight" in self.w:  # LongRoPE
            ctx = n if n_ctx is None else n_ctx
            factors = self.w["rope_factors_long.weight" if ctx > hp.orig_ctx else "rope_factors_short.weight"]
        pos = np.arange(n)
        hd = hp.head_dim
        group = hp.n_head // hp.n_head_kv
        mask = np.triu(np.full((n, n), -np.inf), k=1)
        scale = hp.attn_scale if hp.attn_scale > 0 else 1.0 / math.sqrt(hd)
        rs = hp.residual_scale

        x = self.w["token_embd.weight"][np.maximum(ids, 0)].astype(np.float64) * hp.embed_scale
        if image_rows is not None:
            x[ids < 0] = image_rows.embd
        for il in range(hp.n_layer):
            p = f"blk.{il}."
            nope = hp.no_rope_step and (il + 1) % hp.no_rope_step == 0

            def rope(t, positions, nope=nope):
                return t if nope else self._rope(t, positions, mode, base, factors, mscale=hp.attn_factor)
            h = self._rmsnorm(x, self.w[p + "attn_norm.weight"], eps)
            if il in hp.conv_layers:
                x = x + self._short_conv(h, p, act_quant, f32_matmul, act_f16, conv_history) * rs
                x = self._ffn(x, p, eps, act_quant, f32_matmul, act_f16, use_bias, rs)
                continue
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
            q = q.reshape(n, hp.n_head, hd)
            k_raw = k.reshape(n, hp.n_head_kv, hd)
            if p + "attn_q_norm.weight" in self.w:  # qwen3: per-head RMSNorm before RoPE
                q = self._rmsnorm(q, self.w[p + "attn_q_norm.weight"], eps)
                k_raw = self._rmsnorm(k_raw, self.w[p + "attn_k_norm.weight"], eps)
            q = rope(q, pos)
            quantised = kv_dtype in ("q8", "q4")
            if quantised:
                if window:
                    raise ValueError("the q8/q4 emulation has no window")
                att = _quantised_attention(q, rope(k_raw, pos),
                                           v.reshape(n, hp.n_head_kv, hd), kv_dtype, scale, group,
                                           self._q4_codes, il)
            k = _kv_round(rope(k_raw, pos), kv_dtype)
            v = _kv_round(v.reshape(n, hp.n_head_kv, hd), kv_dtype)
            if window == 0 and not quantised:
                att = np.empty((n, hp.n_head, hd))
            elif window > 0:
                att = self._windowed_attention(q, k, v, k_raw, window, sinks, scale, mode, base,
                                               factors, kv_dtype)
            for hq in range(hp.n_head if window == 0 and not quantised else 0):
                kvh = hq // group
                s = (q[:, hq, :] @ k[:, kvh, :].T) * scale + mask
                s = s - s.max(axis=1, keepdims=True)
                pr = np.exp(s)
                pr /= pr.sum(axis=1, keepdims=True)
                att[:, hq, :] = pr @ v[:, kvh, :]
            o = self._mm(att.reshape(n, hp.n_head * hd), p + "attn_output.weight",
                         act_quant, f32_matmul, act_f16)
            if use_bias and p + "attn_output.bias" in self.w:  # compensated pruning (llama/deci)
                o = o + self.w[p + "attn_output.bias"]
            x = x + o * rs
            x = self._ffn(x, p, eps, act_quant, f32_matmul, act_f16, use_bias, rs)
        if last_only:
            x = x[-1:]
        x = self._rmsnorm(x, self.w["output_norm.weight"], eps)
        out_name = "output.weight" if "output.weight" in self.w else "token_embd.weight"
        if output_name is not None:
            out_name = output_name
        return self._mm(x, out_name, act_quant, f32_matmul, act_f16) * hp.logit_mul

    def _ffn(self, x, p, eps, act_quant, f32_matmul, act_f16, use_bias, rs):
        """x + rs * Wdown · (silu(Wgate·h) * (Wup·h)), h = rmsnorm(x) * ffn_norm."""
        h = self._rmsnorm(x, self.w[p + "ffn_norm.weight"], eps)
        g = self._mm(h, p + "ffn_gate.weight", act_quant, f32_matmul, act_f16)
        u = self._mm(h, p + "ffn_up.weight", act_quant, f32_matmul, act_f16)
        y = self._mm(g / (1.0 + np.exp(-g)) * u, p + "ffn_down.weight", act_quant, f32_matmul, act_f16)
        if use_bias and p + "ffn_down.bias" in self.w:
            y = y + self.w[p + "ffn_down.bias"]
        return x + y * rs

    def _short_conv(self, h, p, act_quant, f32_matmul, act_f16, history=True):
        """lfm2's convolution block: [b, c, x] = Win·h (row thirds), y = c * conv(b * x) with
        the depthwise causal kernel shortconv.conv [n_embd][taps] (tap taps-1 on the position
        itself, tap t on taps-1-t positions back, zeros before position 0), then Wout·y."""
        n, E = h.shape[0], self.hp.n_embd
        bcx = self._mm(h, p + "shortconv.in_proj.weight", act_quant, f32_matmul, act_f16)
        bx = bcx[:, :E] * bcx[:, 2 * E:]
        kern = self.w[p + "shortconv.conv.weight"].astype(np.float64)  # [E, taps]
        taps = kern.shape[1]
        conv = np.zeros_like(bx)
        for t in range(taps) if history else [taps - 1]:
            back = taps - 1 - t
            conv[back:] += kern[:, t] * bx[:n - back]
        return self._mm(bcx[:, E:2 * E] * conv, p + "shortconv.out_proj.weight", act_quant, f32_matmul, act_f16)

    def _windowed_attention(self, q, k, v, k_raw, window, sinks, scale, mode, base, factors,
                            kv_dtype):
        hp = self.hp
        n, hd = q.shape[0], hp.head_dim
        group = hp.n_head // hp.n_head_kv
        att = np.empty((n, hp.n_head, hd))
        for p_ in range(n):
            lo = max(sinks, p_ - (window - sinks) + 1)
            n_sink = min(sinks, p_ + 1)
            sink_pos = np.arange(n_sink) + (lo - sinks)
            ks = _kv_round(self._rope(k_raw[:n_sink], sink_pos, mode, base, factors), kv_dtype)
            kk = np.concatenate([ks, k[lo:p_ + 1]], axis=0)
            vv = np.concatenate([v[:n_sink], v[lo:p_ + 1]], axis=0)
            for hq in range(hp.n_head):
                s = kk[:, hq // group, :] @ q[p_, hq, :] * scale
                pr = np.exp(s - s.max())
                att[p_, hq, :] = (pr / pr.sum()) @ vv[:, hq // group, :]
        return att

    def _forward_gemma3(self, ids, *, last_only: bool, act_quant: bool, f32_matmul: bool,
                        rms_eps: float | None, rope_base: float | None, rope_mode: str | None,
                        window: int | None = None, qk_norm: bool = True, post_norms: bool = True,
                        local_base: float | None = None, embed_scale: bool = True,
                        linear: float | None = None, linear_local: bool = False,
                        kv_dtype: str = "f16", act_f16: bool = False, image_rows=None) -> np.ndarray:
        """Gemma 3 forward (module doc). The extra keywords switch single features off
        for the sensitivity checks (call it directly)."""
        hp = self.hp
        ids = np.asarray(ids, dtype=np.int64)
        n = len(ids)
        eps = hp.rms_eps if rms_eps is None else rms_eps
        base = hp.rope_base if rope_base is None else rope_base
        base_local = hp.rope_base_local if local_base is None else local_base
        mode = "neox" if rope_mode is None else rope_mode
        win = hp.sliding_window if window is None else window
        lin = hp.rope_linear if linear is None else linear
        gemma2 = hp.arch == "gemma2"
        linear_local = linear_local or gemma2  # gemma2 scales both kinds of layer
        qk_norm = qk_norm and not gemma2

        def cap(s, c):
            return c * np.tanh(s / c) if c > 0 else s
        pos = np.arange(n)
        hd = hp.head_dim
        group = hp.n_head // hp.n_head_kv
        scale = 1.0 / math.sqrt(hd)
        diff = pos[:, None] - pos[None, :]                      # pos_q - pos_k
        seen = diff >= 0
        if image_rows is not None and image_rows.bidirectional:
            for a, b in image_rows.spans:  # an image's rows see each other both ways
                seen[a:b, a:b] = True
        causal = np.where(seen, 0.0, -np.inf)
        windowed = np.where(seen & (diff < win), 0.0, -np.inf) if win > 0 else causal

        def norm(v, name):
            return self._rmsnorm(v, self.w[name], eps)

        def mm(v, name):
            return self._mm(v, name, act_quant, f32_matmul, act_f16)

        x = self.w["token_embd.weight"][np.maximum(ids, 0)].astype(np.float64)
        if embed_scale:
            x = x * math.sqrt(hp.n_embd)
        if image_rows is not None:
            x[ids < 0] = image_rows.embd  # as they are: llama.cpp scales looked-up tokens only
        for il in range(hp.n_layer):
            p = f"blk.{il}."
            local = win > 0 and (il + 1) % hp.swa_pattern != 0
            h = norm(x, p + "attn_norm.weight")
            q = mm(h, p + "attn_q.weight").reshape(n, hp.n_head, hd)
            k = mm(h, p + "attn_k.weight").reshape(n, hp.n_head_kv, hd)
            v = mm(h, p + "attn_v.weight").reshape(n, hp.n_head_kv, hd)
            if qk_norm:
                q = norm(q, p + "attn_q_norm.weight")
                k = norm(k, p + "attn_k_norm.weight")
            if local:
                q = self._rope(q, pos, mode, base_local, None, lin if linear_local else 1.0)
                k = self._rope(k, pos, mode, base_local, None, lin if linear_local else 1.0)
            else:
                q = self._rope(q, pos, mode, base, None, lin)
                k = self._rope(k, pos, mode, base, None, lin)
            mask = windowed if local else causal
            k, v = _kv_round(k, kv_dtype), _kv_round(v, kv_dtype)
            att = np.empty((n, hp.n_head, hd))
            for hq in range(hp.n_head):
                kvh = hq // group
                s = cap((q[:, hq, :] @ k[:, kvh, :].T) * scale, hp.attn_softcap) + mask
                s = s - s.max(axis=1, keepdims=True)
                pr = np.exp(s)
                pr /= pr.sum(axis=1, keepdims=True)
                att[:, hq, :] = pr @ v[:, kvh, :]
            o = mm(att.reshape(n, hp.n_head * hd), p + "attn_output.weight")
            x = x + (norm(o, p + "post_attention_norm.weight") if post_norms else o)
            h = norm(x, p + "ffn_norm.weight")
            g = mm(h, p + "ffn_gate.weight")
            u = mm(h, p + "ffn_up.weight")
            y = mm(gelu_tanh(g) * u, p + "ffn_down.weight")
            x = x + (norm(y, p + "post_ffw_norm.weight") if post_norms else y)
        if last_only:
            x = x[-1:]
        x = norm(x, "output_norm.weight")
        out_name = "output.weight" if "output.weight" in self.w else "token_embd.weight"
        return cap(mm(x, out_name), hp.final_softcap)

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


@dataclass
class ImageRows:
    """Image rows of a prompt: embd [n rows < 0 in ids, n_embd] in order, spans [(first,
    end)] of each image tile's positions, bidirectional: whether a tile's rows see each other."""
    embd: np.ndarray
    spans: list
    bidirectional: bool = False


def _q8_round(x: np.ndarray) -> np.ndarray:
    """int8 per 64 values along the last axis, scale amax/127 (f32), round half to even:
    the engine's q8 KV format (kernels/kv_format.h); its kernels quantise q the same way."""
    x = x.astype(np.float32)
    g = x.reshape(x.shape[:-1] + (-1, 64))
    s = (np.abs(g).max(axis=-1, keepdims=True) / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        c = np.where(s > 0, np.clip(np.rint(g / s), -127, 127), 0).astype(np.float32)
    return (c * s).reshape(x.shape).astype(np.float64)


def _q4_round(x: np.ndarray, axis: int, codes=None, tag=None) -> np.ndarray:
    """Asymmetric 4-bit over `axis` (fp16 scale = (max-min)/15 and min, codes against
    the rounded values, round half to even): the engine's q4 KV format. `codes` (a
    Q4Rounding) sees each decision as the unrounded code t and may redirect some."""
    x = x.astype(np.float32)
    mn = x.min(axis=axis, keepdims=True)
    mx = x.max(axis=axis, keepdims=True)
    mn_h = mn.astype(np.float16).astype(np.float32)
    sc_h = ((mx - mn) / np.float32(15)).astype(np.float16).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(sc_h > 0, (x - mn_h) / sc_h, 0)
    c = np.clip(np.rint(t), 0, 15).astype(np.float32)
    if codes is not None:
        c = codes.decide(tag, t, c)
    return (mn_h + sc_h * c).astype(np.float64)


class Q4Rounding:
    """The q4 KV rounding decisions of one forward pass. A code whose unrounded value t
    lies near a half step can go either way when the keys and values carry f32 rounding
    noise (the engine computes them in another order; one fp16 step of a key moves t by up
    to ~0.01), and one flipped code moves a value by a whole step. `near` collects the
    decisions within `margin` of a half step (exact ties excluded: those come from the
    fp16 grid itself and must round to even), and `flip` names decisions to round the
    other way."""

    def __init__(self, flip=(), margin: float = 0.01):
        self.flip = set(flip)
        self.margin = margin
        self.near = []  # (distance from the half step, (tag, flat index))

    def decide(self, tag, t, c):
        dist = np.abs(t - np.floor(t) - 0.5).ravel()
        for i in np.flatnonzero((dist > 0) & (dist < self.margin)):
            self.near.append((float(dist[i]), (tag, int(i))))
        if self.flip:
            c = c.copy()
            flat, tf = c.reshape(-1), t.reshape(-1)
            for ftag, i in self.flip:
                if ftag == tag:
                    lo = np.floor(tf[i])
                    flat[i] = np.clip(lo if flat[i] > tf[i] else lo + 1, 0, 15)
        return c


def _quantised_attention(q, k, v, kv_dtype, scale, group, codes=None, layer=0):
    """Attention over a q8 or q4 cache as the engine stores it, for token-by-token
    evaluation (batch 1). q4 (KIVI): keys per channel over complete groups of 32 tokens,
    values per token in blocks of 32 channels; the newest incomplete group stays f16."""
    n, n_head, hd = q.shape
    att = np.empty_like(q)
    if kv_dtype == "q8":
        kq, vq = _q8_round(k), _q8_round(v)
        qq = _q8_round(q)
        for p_ in range(n):
            for hq in range(n_head):
                s = kq[:p_ + 1, hq // group, :] @ qq[p_, hq, :] * scale
                pr = np.exp(s - s.max())
                att[p_, hq, :] = (pr / pr.sum()) @ vq[:p_ + 1, hq // group, :]
        return att
    G = 32
    kh = k.astype(np.float16).astype(np.float32)
    vh = v.astype(np.float16).astype(np.float32)
    kg, vg = kh.astype(np.float64), vh.astype(np.float64)
    full = n // G * G
    if full:
        kg[:full] = np.concatenate([_q4_round(kh[i:i + G], 0, codes, (layer, "k", i))
                                    for i in range(0, full, G)])
        blocks = vh[:full].reshape(full, v.shape[1], hd // 32, 32)
        vg[:full] = _q4_round(blocks, -1, codes, (layer, "v")).reshape(full, v.shape[1], hd)
    for p_ in range(n):
        tail = (p_ + 1) // G * G  # positions below are in quantised groups
        kk = np.concatenate([kg[:tail], kh[tail:p_ + 1].astype(np.float64)])
        vv = np.concatenate([vg[:tail], vh[tail:p_ + 1].astype(np.float64)])
        for hq in range(n_head):
            s = kk[:, hq // group, :] @ q[p_, hq, :] * scale
            pr = np.exp(s - s.max())
            att[p_, hq, :] = (pr / pr.sum()) @ vv[:, hq // group, :]
    return att


def _kv_round(x: np.ndarray, kv_dtype: str) -> np.ndarray:
    """What the engine's KV cache keeps of x (f16 or f32 storage)."""
    if kv_dtype in ("q8", "q4"):
        return x
    if kv_dtype == "f16":
        return x.astype(np.float16).astype(np.float64)
    if kv_dtype == "f32":
        return x.astype(np.float32).astype(np.float64)
    raise ValueError(kv_dtype)


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


def simulate_act_i16(x: np.ndarray) -> np.ndarray:
    """The engine's int16 activation format (block_q16, see module doc: act_i16), computed in
    float32 as the engine does: per 32 values d = amax / 32767, q = rint(x * (1 / d))."""
    g = x.astype(np.float32).reshape(x.shape[:-1] + (-1, 32))
    amax = np.abs(g).max(axis=-1, keepdims=True)
    d = amax / np.float32(32767)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    q = np.clip(np.rint(g * inv), -32767, 32767)
    return (q.astype(np.float64) * d.astype(np.float64)).reshape(x.shape)


def simulate_static_act_quant(x: np.ndarray, wtype: str, d: float) -> np.ndarray:
    """Round activation rows with one fixed step d (see module doc: act_static)."""
    if wtype in FLOAT_TYPES:
        return x
    step = np.float64(np.float32(d))
    if wtype in Q8_0_ACT_TYPES:
        step = np.float64(np.float16(step))
    return np.clip(np.rint(x / step), -127, 127) * step


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
