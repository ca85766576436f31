"""Tiny random-weight Gemma 4 (`gemma4`, dense E2B/E4B shape) GGUF fixtures, written the way
llama.cpp's converter writes the real files (conversion/gemma.py, Gemma4Model) and loaded as
llama.cpp's src/models/gemma4.cpp reads them.

Layout (7 layers; sliding_window_pattern S S F S F S F, as E2B's four sliding layers per full one,
shortened): the last two layers share KV (attention.shared_kv_layers 2): layer 5 (sliding) reads
layer 3's keys and values, layer 6 (full) layer 4's, llama.cpp's reuse map.
  * sliding layers: head size 64 (key_length_swa), RoPE over all 64 dims, base 10000;
  * full layers: head size 512 (key_length: past the old 256 bound, like E2B's global heads),
    rope.dimension_count 512 with rope_freqs.weight leaving all but the first 64 pairs unrotated
    (factors 1e30: "proportional" RoPE, partial_rotary_factor 0.25), base 1e6;
  * per layer: attn_q / attn_k / attn_v (attn_v absent in gemma4-kv-F32: v = the k projection),
    per-head q/k norms, the unweighted v norm, attn_output, post_attention_norm, GeGLU FFN with
    post_ffw_norm (feed_forward_length per layer: the shared layers twice as wide, as
    use_double_wide_mlp writes it), per-layer input gate inp_gate / proj / post_norm,
    layer_output_scale;
  * per_layer_token_embd [n_vocab x n_layer * 32], per_layer_model_proj, per_layer_proj_norm;
  * final_logit_softcapping 30, tied output.
Tokenizer: tokenizer.ggml.model "gemma4" (SentencePiece-style BPE over raw UTF-8, spaces as
U+2581, <0xXX> byte fallback), with Gemma 4's turn and channel markers.

Scales: the q/k norm weights keep the scores (scale 1: llama.cpp's f_attention_scale) at std ~1-2,
so attention is neither uniform nor one-hot; activations are O(1) after each norm, logits std ~3
before the soft-cap.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import gguf_bytes as gb
import tiny_models as tm

SPECIALS = [("<pad>", 3), ("<eos>", 3), ("<bos>", 3), ("<unk>", 2), ("<mask>", 3), ("<|turn>", 3), ("<turn|>", 3),
            ("<|channel>", 4), ("<channel|>", 4)]
SP = "\u2581"
# (left, right) merges in priority order, as tiny_models' but over SentencePiece text.
MERGES = [(SP, "t"), ("h", "e"), (SP + "t", "he"), ("i", "n"), ("e", "r"), ("o", "n"), (SP, "a"), ("r", "e"),
          ("a", "t"), ("e", "n"), (SP, "s"), (SP, "w"), ("i", "s"), (SP, "o"), ("a", "n"), (SP, "c"), ("i", "t"),
          ("o", "r"), ("e", "d"), ("in", "g"), (SP, "b"), (SP, "f"), ("o", "u"), (SP, "m"), ("a", "r"), ("a", "l"),
          (SP, "p"), ("l", "e"), (SP, "i"), (SP + "i", "s"), (SP + "o", "f"), (SP + "i", "n"), ("an", "d"),
          (SP, "and"), (SP + "t", "o"), ("l", "l"), ("he", "ll"), ("hell", "o"), (SP, "hello"), (SP + "w", "or"),
          (SP + "wor", "l"), (SP + "worl", "d"), ("\n", "\n"), (SP, SP), ("u", "s"), ("us", "er"),
          ("m", "o"), ("mo", "d"), ("mod", "e"), ("mode", "l")]

CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|turn>{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n"
                 "{{ m['content'] | trim }}<turn|>\n{% endfor %}{% if add_generation_prompt %}<|turn>model\n{% endif %}")


def gemma4_vocab() -> tuple[list[str], list[int], list[str]]:
    tokens = [t for t, _ in SPECIALS] + [f"<0x{b:02X}>" for b in range(256)] + [SP, "\n"]
    types = [k for _, k in SPECIALS] + [6] * 256 + [1, 1]
    tokens += [chr(c) for c in range(0x21, 0x7F)]
    types += [1] * (0x7F - 0x21)
    merges = []
    for left, right in MERGES:
        merges.append(f"{left} {right}")
        if left + right not in tokens:
            tokens.append(left + right)
            types.append(1)
    return tokens, types, merges


@dataclass(frozen=True)
class Gemma4Config:
    name: str
    wtype: str = "F32"
    n_embd: int = 128
    n_ff: int = 256
    n_head: int = 4
    n_head_kv: int = 2
    head_swa: int = 64
    head_full: int = 512
    rot_full: int = 128          # rotated dims of a full layer (0.25 of 512): rope_freqs' 1.0 factors
    pattern: tuple = (1, 1, 0, 1, 0, 1, 0)   # 1: sliding window
    n_shared: int = 2            # attention.shared_kv_layers
    window: int = 48
    n_pl: int = 32               # embedding_length_per_layer_input
    softcap: float = 30.0
    has_v: bool = True           # attn_v written (else v is the k projection)
    n_ctx: int = 512
    rope_base: float = 1000000.0
    rope_base_swa: float = 10000.0
    rms_eps: float = 1e-6

    @property
    def n_layer(self) -> int:
        return len(self.pattern)

    @property
    def seed(self) -> int:
        return zlib.crc32(self.name.encode())

    def head_dim(self, il: int) -> int:
        return self.head_swa if self.pattern[il] else self.head_full

    def n_ff_at(self, il: int) -> int:
        return self.n_ff * (2 if il >= self.n_layer - self.n_shared else 1)

    def shared(self, il: int) -> bool:
        return il >= self.n_layer - self.n_shared


def configs() -> dict[str, Gemma4Config]:
    cfgs = [Gemma4Config("gemma4-F32"), Gemma4Config("gemma4-Q8_0", wtype="Q8_0"),
            Gemma4Config("gemma4-kv-F32", has_v=False)]
    return {c.name: c for c in cfgs}


def build_spec(cfg: Gemma4Config) -> tm.ModelSpec:
    rng = np.random.default_rng(cfg.seed)
    a = "gemma4"
    tokens, types, merges = gemma4_vocab()
    ids = {t: i for i, t in enumerate(tokens)}
    kvs = [
        gb.KV("general.architecture", gb.STRING, a),
        gb.KV("general.name", gb.STRING, cfg.name),
        gb.KV(f"{a}.context_length", gb.U32, cfg.n_ctx),
        gb.KV(f"{a}.embedding_length", gb.U32, cfg.n_embd),
        gb.KV(f"{a}.block_count", gb.U32, cfg.n_layer),
        gb.KV(f"{a}.feed_forward_length", gb.ARRAY, [cfg.n_ff_at(l) for l in range(cfg.n_layer)], elem_type=gb.I32),
        gb.KV(f"{a}.attention.head_count", gb.U32, cfg.n_head),
        gb.KV(f"{a}.attention.head_count_kv", gb.U32, cfg.n_head_kv),
        gb.KV(f"{a}.attention.key_length", gb.U32, cfg.head_full),
        gb.KV(f"{a}.attention.value_length", gb.U32, cfg.head_full),
        gb.KV(f"{a}.attention.key_length_swa", gb.U32, cfg.head_swa),
        gb.KV(f"{a}.attention.value_length_swa", gb.U32, cfg.head_swa),
        gb.KV(f"{a}.rope.freq_base", gb.F32, cfg.rope_base),
        gb.KV(f"{a}.rope.freq_base_swa", gb.F32, cfg.rope_base_swa),
        gb.KV(f"{a}.rope.dimension_count", gb.U32, cfg.head_full),
        gb.KV(f"{a}.rope.dimension_count_swa", gb.U32, cfg.head_swa),
        gb.KV(f"{a}.attention.layer_norm_rms_epsilon", gb.F32, cfg.rms_eps),
        gb.KV(f"{a}.attention.sliding_window", gb.U32, cfg.window),
        gb.KV(f"{a}.attention.sliding_window_pattern", gb.ARRAY, [bool(p) for p in cfg.pattern], elem_type=gb.BOOL),
        gb.KV(f"{a}.attention.shared_kv_layers", gb.U32, cfg.n_shared),
        gb.KV(f"{a}.embedding_length_per_layer_input", gb.U32, cfg.n_pl),
        gb.KV(f"{a}.final_logit_softcapping", gb.F32, cfg.softcap),
        gb.KV("tokenizer.ggml.model", gb.STRING, "gemma4"),
        gb.KV("tokenizer.ggml.pre", gb.STRING, "gemma4"),
        gb.KV("tokenizer.ggml.tokens", gb.ARRAY, tokens, elem_type=gb.STRING),
        gb.KV("tokenizer.ggml.scores", gb.ARRAY, [0.0] * len(tokens), elem_type=gb.F32),
        gb.KV("tokenizer.ggml.token_type", gb.ARRAY, types, elem_type=gb.I32),
        gb.KV("tokenizer.ggml.merges", gb.ARRAY, merges, elem_type=gb.STRING),
        gb.KV("tokenizer.ggml.bos_token_id", gb.U32, ids["<bos>"]),
        gb.KV("tokenizer.ggml.eos_token_id", gb.U32, ids["<eos>"]),
        gb.KV("tokenizer.ggml.unknown_token_id", gb.U32, ids["<unk>"]),
        gb.KV("tokenizer.ggml.padding_token_id", gb.U32, ids["<pad>"]),
        gb.KV("tokenizer.ggml.add_bos_token", gb.BOOL, True),
        gb.KV("tokenizer.ggml.add_space_prefix", gb.BOOL, False),
        gb.KV("tokenizer.chat_template", gb.STRING, CHAT_TEMPLATE),
    ]
    tensors: list[gb.Tensor] = []
    E, P, L = cfg.n_embd, cfg.n_pl, cfg.n_layer

    def mat(name: str, ne0: int, ne1: int, std: float, wtype: str | None = None):
        t = wtype or cfg.wtype
        raw = tm.encode_matrix(rng, t, ne1, ne0, std)
        tensors.append(gb.Tensor(name, t, [ne0, ne1], raw.tobytes()))

    def vec(name: str, values):
        tensors.append(gb.Tensor(name, "F32", [len(values)], np.asarray(values, dtype=np.float32).tobytes()))

    def norm(name: str, centre: float, n: int = E):
        vec(name, centre * (1.0 + 0.1 * rng.standard_normal(n)))

    n_vocab = len(tokens)
    mat("token_embd.weight", E, n_vocab, 0.09)
    mat("per_layer_token_embd.weight", L * P, n_vocab, 0.1)
    mat("per_layer_model_proj.weight", E, L * P, 0.08)
    norm("per_layer_proj_norm.weight", 1.0, P)
    half = cfg.head_full // 2
    vec("rope_freqs.weight", [1.0] * (cfg.rot_full // 2) + [1e30] * (half - cfg.rot_full // 2))
    for il in range(L):
        p = f"blk.{il}."
        hd = cfg.head_dim(il)
        q_dim, kv_dim = cfg.n_head * hd, cfg.n_head_kv * hd
        # scores q.k over hd dims of unit-RMS heads: norm weights ~ (1.5 / sqrt(hd))^0.5 each
        qk = (1.0 / np.sqrt(hd)) ** 0.5
        norm(p + "attn_norm.weight", 1.0)
        mat(p + "attn_q.weight", E, q_dim, 0.07)
        norm(p + "attn_q_norm.weight", qk, hd)
        if not cfg.shared(il):
            mat(p + "attn_k.weight", E, kv_dim, 0.07)
            if cfg.has_v:
                mat(p + "attn_v.weight", E, kv_dim, 0.07)
            norm(p + "attn_k_norm.weight", qk, hd)
        mat(p + "attn_output.weight", q_dim, E, 0.05)
        norm(p + "post_attention_norm.weight", 0.5)
        norm(p + "ffn_norm.weight", 1.0)
        F = cfg.n_ff_at(il)
        mat(p + "ffn_gate.weight", E, F, 0.06)
        mat(p + "ffn_up.weight", E, F, 0.09)
        mat(p + "ffn_down.weight", F, E, 0.05)
        norm(p + "post_ffw_norm.weight", 0.5)
        mat(p + "inp_gate.weight", E, P, 0.06)
        mat(p + "proj.weight", P, E, 0.1)
        norm(p + "post_norm.weight", 0.5)
        vec(p + "layer_output_scale.weight", [float(rng.uniform(0.6, 1.0))])
    norm("output_norm.weight", 3.0)
    return tm.ModelSpec(tm.ModelConfig(name=cfg.name, arch=a, wtype=cfg.wtype), kvs, tensors)


def generate(out_dir: Path, names: list[str] | None = None) -> dict[str, Path]:
    return tm.write_configs(out_dir, configs(), build_spec, names)


def sample_ids(cfg: Gemma4Config, n: int, seed: int = 0) -> list[int]:
    """Random normal tokens of the vocabulary (characters and merges: no specials, no bytes)."""
    _, types, _ = gemma4_vocab()
    return tm.sample_normal_ids(types, cfg.seed, n, seed)


if __name__ == "__main__":
    import sys
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "tiny-models")
    for name, p in generate(out, sys.argv[2:] or None).items():
        print(f"{name:20s} {p.stat().st_size:9d} bytes  {p}")
