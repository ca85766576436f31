"""Tiny random-weight Qwen3.5 (`qwen35`, Gated DeltaNet hybrid) GGUF fixtures, written the way
llama.cpp's converter writes the real files (conversion/qwen.py, Qwen3_5TextModel) and loaded as
llama.cpp's src/models/qwen35.cpp reads them.

Layout (QWEN35 dims): 4 layers, full_attention_interval 4, so layers 0-2 are Gated DeltaNet and
layer 3 is gated attention, like every group of four in Qwen3.5-0.8B/2B/4B.
  * DeltaNet layer: attn_qkv [n_embd -> 2 * key_dim + value_dim] (q, k, v rows), attn_gate
    (z) [n_embd -> value_dim], ssm_conv1d [conv_dim][conv_kernel] F32, ssm_dt.bias and ssm_a
    [n_v_heads] (ssm_a = -exp(A_log), negative, as the converter writes it), ssm_beta and
    ssm_alpha [n_embd -> n_v_heads], ssm_norm [head_v_dim], ssm_out [value_dim -> n_embd].
    Two key heads and four value heads (value head j reads key head j % 2, ggml's tiling),
    as Qwen3.5-4B has twice the value heads.
  * attention layer: attn_q [n_embd -> 2 * n_head * head_dim] (per head: the query, then its
    output gate), attn_k, attn_v, per-head q/k norms, attn_output; partial rotary (n_rot 16 of
    head_dim 64) with rope.dimension_sections, the interleaved MRoPE llama.cpp applies.
  * every layer: attn_norm, post_attention_norm (the FFN's input norm), SwiGLU FFN.
  * qwen35-mtp-F32: the same model plus one multi-token-prediction block (block_count 5,
    nextn_predict_layers 1, its nextn.* tensors): the main pass ignores it.
  * qwen35-layers-F32: attention.recurrent_layers (attention at layer 1) and RoPE sections
    (1, 1, 1, 1), whose fourth section leaves pairs 3 and 7 unrotated.

Scales: as tiny_models.py's (activations O(1) after each norm, attention scores std ~1,
logits std ~3); in the DeltaNet layers the decay exp(softplus(alpha + dt) * ssm_a) spreads over
~0.6-0.95 and beta = sigmoid(.) over ~0.2-0.8, so the state carries many positions back and
every step's update matters.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import gguf_bytes as gb
import tiny_models as tm


@dataclass(frozen=True)
class Qwen35Config:
    name: str
    wtype: str = "F32"
    n_embd: int = 256
    n_ff: int = 512
    n_layer: int = 4
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 64
    n_rot: int = 16
    sections: tuple = (3, 3, 2, 0)   # rope.dimension_sections (sum n_rot / 2, like [11, 11, 10, 0])
    n_ctx: int = 256
    conv_kernel: int = 4             # ssm.conv_kernel
    head_k_dim: int = 32             # ssm.state_size (key and value head size)
    n_k_heads: int = 2               # ssm.group_count
    n_v_heads: int = 4               # ssm.time_step_rank
    attn_interval: int = 4           # full_attention_interval
    rope_base: float = 10000000.0
    rms_eps: float = 1e-6
    mtp: bool = False                # one nextn block after the main layers
    recurrent: tuple = ()            # attention.recurrent_layers written (bools) when set

    @property
    def seed(self) -> int:
        return zlib.crc32(self.name.encode())

    def is_recurrent(self, il: int) -> bool:
        return bool(self.recurrent[il]) if self.recurrent else (il + 1) % self.attn_interval != 0


def configs() -> dict[str, Qwen35Config]:
    cfgs = [Qwen35Config("qwen35-F32"), Qwen35Config("qwen35-Q8_0", wtype="Q8_0"),
            Qwen35Config("qwen35-mtp-F32", mtp=True),
            # the layer kinds listed (attention at layer 1, as the converter writes layer_types) and
            # sections whose fourth one is used: pairs 3 and 7 of the 8 do not rotate for text
            Qwen35Config("qwen35-layers-F32", recurrent=(1, 0, 1, 1), sections=(1, 1, 1, 1))]
    return {c.name: c for c in cfgs}


def build_spec(cfg: Qwen35Config) -> tm.ModelSpec:
    rng = np.random.default_rng(cfg.seed)
    a = "qwen35"
    tokens, types, merges = tm.tiny_vocab(False)
    ids = {t: i for i, t in enumerate(tokens)}
    n_vocab = len(tokens)
    n_blocks = cfg.n_layer + (1 if cfg.mtp else 0)
    key_dim = cfg.head_k_dim * cfg.n_k_heads
    value_dim = cfg.head_k_dim * cfg.n_v_heads
    conv_dim = 2 * key_dim + value_dim
    kvs = [
        gb.KV("general.architecture", gb.STRING, a),
        gb.KV("general.name", gb.STRING, cfg.name),
        gb.KV(f"{a}.context_length", gb.U32, cfg.n_ctx),
        gb.KV(f"{a}.embedding_length", gb.U32, cfg.n_embd),
        gb.KV(f"{a}.block_count", gb.U32, n_blocks),
        gb.KV(f"{a}.feed_forward_length", gb.U32, cfg.n_ff),
        gb.KV(f"{a}.attention.head_count", gb.U32, cfg.n_head),
        gb.KV(f"{a}.attention.head_count_kv", gb.U32, cfg.n_head_kv),
        gb.KV(f"{a}.attention.key_length", gb.U32, cfg.head_dim),
        gb.KV(f"{a}.attention.value_length", gb.U32, cfg.head_dim),
        gb.KV(f"{a}.rope.freq_base", gb.F32, cfg.rope_base),
        gb.KV(f"{a}.rope.dimension_count", gb.U32, cfg.n_rot),
        gb.KV(f"{a}.rope.dimension_sections", gb.ARRAY, list(cfg.sections), elem_type=gb.I32),
        gb.KV(f"{a}.attention.layer_norm_rms_epsilon", gb.F32, cfg.rms_eps),
        gb.KV(f"{a}.ssm.conv_kernel", gb.U32, cfg.conv_kernel),
        gb.KV(f"{a}.ssm.state_size", gb.U32, cfg.head_k_dim),
        gb.KV(f"{a}.ssm.group_count", gb.U32, cfg.n_k_heads),
        gb.KV(f"{a}.ssm.time_step_rank", gb.U32, cfg.n_v_heads),
        gb.KV(f"{a}.ssm.inner_size", gb.U32, value_dim),
        gb.KV(f"{a}.full_attention_interval", gb.U32, cfg.attn_interval),
        gb.KV(f"{a}.vocab_size", gb.U32, n_vocab),
        gb.KV("tokenizer.ggml.model", gb.STRING, "gpt2"),
        gb.KV("tokenizer.ggml.pre", gb.STRING, "qwen2"),
        gb.KV("tokenizer.ggml.tokens", gb.ARRAY, tokens, elem_type=gb.STRING),
        gb.KV("tokenizer.ggml.token_type", gb.ARRAY, types, elem_type=gb.I32),
        gb.KV("tokenizer.ggml.merges", gb.ARRAY, merges, elem_type=gb.STRING),
        gb.KV("tokenizer.ggml.bos_token_id", gb.U32, ids["<|endoftext|>"]),
        gb.KV("tokenizer.ggml.eos_token_id", gb.U32, ids["<|im_end|>"]),
        gb.KV("tokenizer.ggml.padding_token_id", gb.U32, ids["<|endoftext|>"]),
        gb.KV("tokenizer.ggml.add_bos_token", gb.BOOL, False),
        gb.KV("tokenizer.chat_template", gb.STRING, tm.CHATML_TEMPLATE),
    ]
    if cfg.mtp:
        kvs.append(gb.KV(f"{a}.nextn_predict_layers", gb.U32, 1))
    if cfg.recurrent:
        kvs.append(gb.KV(f"{a}.attention.recurrent_layers", gb.ARRAY, [bool(r) for r in cfg.recurrent],
                         elem_type=gb.BOOL))
    tensors: list[gb.Tensor] = []

    def mat(name: str, ne0: int, ne1: int, std: float):
        raw = tm.encode_matrix(rng, cfg.wtype, ne1, ne0, std)
        tensors.append(gb.Tensor(name, cfg.wtype, [ne0, ne1], raw.tobytes()))

    def vec(name: str, values):
        tensors.append(gb.Tensor(name, "F32", [len(values)], np.asarray(values, dtype=np.float32).tobytes()))

    def norm(name: str, centre: float, n: int = cfg.n_embd):
        vec(name, centre * (1.0 + 0.1 * rng.standard_normal(n)))

    def attention(p: str):
        q_dim, kv_dim = cfg.n_head * cfg.head_dim, cfg.n_head_kv * cfg.head_dim
        mat(p + "attn_q.weight", cfg.n_embd, 2 * q_dim, 0.07)  # per head: query rows, then gate rows
        mat(p + "attn_k.weight", cfg.n_embd, kv_dim, 0.07)
        mat(p + "attn_v.weight", cfg.n_embd, kv_dim, 0.06)
        norm(p + "attn_q_norm.weight", 1.0, cfg.head_dim)
        norm(p + "attn_k_norm.weight", 1.0, cfg.head_dim)
        mat(p + "attn_output.weight", q_dim, cfg.n_embd, 0.004)

    def ffn(p: str):
        norm(p + "post_attention_norm.weight", 1.0)
        mat(p + "ffn_gate.weight", cfg.n_embd, cfg.n_ff, 0.06)
        mat(p + "ffn_up.weight", cfg.n_embd, cfg.n_ff, 0.06)
        mat(p + "ffn_down.weight", cfg.n_ff, cfg.n_embd, 0.004)

    mat("token_embd.weight", cfg.n_embd, n_vocab, 0.05)
    for il in range(cfg.n_layer):
        p = f"blk.{il}."
        norm(p + "attn_norm.weight", 1.0)
        if cfg.is_recurrent(il):
            mat(p + "attn_qkv.weight", cfg.n_embd, conv_dim, 0.07)
            mat(p + "attn_gate.weight", cfg.n_embd, value_dim, 0.07)
            # taps of similar size: every one of the kernel's positions matters
            conv = 0.5 * rng.standard_normal((conv_dim, cfg.conv_kernel))
            tensors.append(gb.Tensor(p + "ssm_conv1d.weight", "F32", [cfg.conv_kernel, conv_dim],
                                     conv.astype(np.float32).tobytes()))
            vec(p + "ssm_dt.bias", 0.5 * rng.standard_normal(cfg.n_v_heads))
            vec(p + "ssm_a", -np.exp(rng.uniform(np.log(0.05), np.log(0.4), cfg.n_v_heads)))
            mat(p + "ssm_beta.weight", cfg.n_embd, cfg.n_v_heads, 0.07)
            mat(p + "ssm_alpha.weight", cfg.n_embd, cfg.n_v_heads, 0.07)
            norm(p + "ssm_norm.weight", 1.0, cfg.head_k_dim)
            mat(p + "ssm_out.weight", value_dim, cfg.n_embd, 0.006)
        else:
            attention(p)
        ffn(p)
    if cfg.mtp:  # a full-attention block with the nextn projections (never run by the main pass)
        p = f"blk.{cfg.n_layer}."
        norm(p + "attn_norm.weight", 1.0)
        attention(p)
        ffn(p)
        mat(p + "nextn.eh_proj.weight", 2 * cfg.n_embd, cfg.n_embd, 0.05)
        norm(p + "nextn.enorm.weight", 1.0)
        norm(p + "nextn.hnorm.weight", 1.0)
        norm(p + "nextn.shared_head_norm.weight", 1.0)
    norm("output_norm.weight", 4.0)
    return tm.ModelSpec(tm.ModelConfig(name=cfg.name, arch=a, wtype=cfg.wtype, specials_first=False, pre="qwen2"),
                        kvs, tensors)


def generate(out_dir: Path, names: list[str] | None = None) -> dict[str, Path]:
    return tm.write_configs(out_dir, configs(), build_spec, names)


def sample_ids(cfg: Qwen35Config, n: int, seed: int = 0) -> list[int]:
    """Random normal/merge tokens of the tiny vocabulary (no specials)."""
    _, types, _ = tm.tiny_vocab(False)
    return tm.sample_normal_ids(types, cfg.seed, n, seed)


if __name__ == "__main__":
    import sys
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "tiny-models")
    for name, p in generate(out, sys.argv[2:] or None).items():
        print(f"{name:20s} {p.stat().st_size:9d} bytes  {p}")
