"""Tiny random-weight GGUF models for end-to-end logits tests.

Every model is fully determined by its name (the RNG seed is derived from it), so
two runs of the generator produce byte-identical files.

Models (see `model_configs()`):
  * "<arch>-<TYPE>" for arch in {llama, qwen2} and TYPE in
    {F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K}: every 2-D weight matrix
    (token_embd included) is stored in TYPE, norms (and qwen2's q/k/v biases) F32.
    llama uses tied output (no output.weight, like SmolLM2), default-ish rope base
    10000 and rms eps 1e-5; qwen2 has a separate output.weight, q/k/v biases,
    rope base 1e6, rms eps 1e-6 and NEOX rope (implied by the arch).
  * variants, each in F32 and Q8_0:
      llama-untied-*    separate output.weight
      llama-ropefreqs-* Llama-3 style rope scaling written the way llama.cpp's
                        converter does it: a `rope_freqs.weight` F32 tensor of
                        head_dim/2 factors; theta_i is divided by factor_i.
      llama-custom-*    rope.freq_base 50000 and rms eps 1e-3 (non-default values;
                        eps is big enough relative to the activations' mean square
                        that ignoring it changes the logits measurably).
      llama-ffnvar-*    per-layer feed_forward_length (an array, as pruned models
                        store it): n_ff 288 and 448 (FFNVAR).
  * gemma3-ffnvar-F32: Gemma 3 with six different per-layer n_ff (GEMMA_FFNVAR).

  * "gemma3-<TYPE>" for TYPE in GEMMA_TYPES: Gemma 3 (GEMMA dims: 6 layers so that
    layers 0-4 are local and layer 5 global with the default sliding-window pattern 6,
    sliding_window 8 so that 16-token tests exercise the window, head_dim 64 with
    2 heads != n_embd / n_head, 1 kv head), rms eps 1e-6, rope base 1e6 (global
    layers; local layers use 10000), per-head q/k norms, post-attention and
    post-ffw norms, tied output, the gemma turn markers in the vocabulary and no chat
    template (the engine must pick the gemma chat layout from the architecture).
    Variants: gemma3-swa2-F32 (sliding_window_pattern 2 written to the file and
    linear rope scaling 4 that applies to global layers only) and gemma3-mix-Q5_0
    (per-tensor types like the real Q4_K_M file, restricted to 32-element blocks:
    token_embd/attn_v Q8_0, attn_output Q5_1, ffn_down Q4_0, the rest Q5_0).

Dims: n_embd 256, n_ff 512 (row lengths multiples of 256 so K-quants work),
2 layers, 4 heads, 2 kv heads (GQA), head_dim 64, context 128.

The vocabulary is a small byte-level BPE vocab: the 256 GPT-2 byte tokens, a few
dozen merges and the ChatML specials (token_type CONTROL = 3).

Weight scales were chosen so activations stay O(1) after each rmsnorm, attention
scores have std ~1 (so attention is neither uniform nor one-hot and RoPE matters),
each layer's residual update is comparable to the embedding (so every layer
matters) and logits have std ~3.

Quantised data: F32/F16/BF16/Q8_0/Q4_0/Q4_1 go through gguf.quants.quantize;
Q4_K/Q5_K/Q6_K (not implemented there) are built from random but valid blocks
with scales chosen to hit the target standard deviation. The numpy reference
dequantises whatever bytes are in the file, so any valid block is fine.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import gguf_bytes as gb

WEIGHT_TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q6_K"]
# Gemma's attn_output rows are q_dim = 128 long: 32-element block types only.
GEMMA_TYPES = ["F32", "F16", "Q8_0", "Q5_0", "Q5_1", "Q4_0"]
QUANTIZED_TYPES = {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q6_K", "Q5_K", "Q8_K"}

CHATML_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@dataclass(frozen=True)
class Dims:
    n_embd: int = 256
    n_ff: int = 512
    n_layer: int = 2
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 64
    n_ctx: int = 128
    # Per-layer feed-forward sizes (written as an array of feed_forward_length, the
    # way pruned models store them); empty: every layer has n_ff.
    n_ff_layers: tuple = ()

    def ff(self, layer: int) -> int:
        return self.n_ff_layers[layer] if self.n_ff_layers else self.n_ff


TINY = Dims()
GEMMA = Dims(n_embd=256, n_ff=512, n_layer=6, n_head=2, n_head_kv=1, head_dim=64, n_ctx=128)
# Per-layer n_ff (pruned-model layout): the widest layer is not layer 0, and both are
# multiples of 32 but not of 256 (32-element block types only).
FFNVAR = Dims(n_ff=448, n_ff_layers=(288, 448))
GEMMA_FFNVAR = Dims(n_embd=256, n_ff=512, n_layer=6, n_head=2, n_head_kv=1, head_dim=64, n_ctx=128,
                    n_ff_layers=(512, 224, 384, 160, 480, 320))
# The llama block's variants (qwen3, smollm3, minicpm: 4 layers, so that smollm3's layer 3 has
# no RoPE; granite and phi3 the tiny 2); qwen3's head size is its own key (128 != 256 / 4).
VARIANT = Dims(n_layer=4)
QWEN3 = Dims(n_layer=4, head_dim=128)
LFM2 = Dims(n_layer=5)
LFM2_TAPS = 3  # shortconv.l_cache of every LFM2
# Even smaller, F32 only: the base file of the malformed-GGUF corpus.
MINI = Dims(n_embd=64, n_ff=128, n_layer=1, n_head=2, n_head_kv=1, head_dim=32, n_ctx=64)


@dataclass(frozen=True)
class ModelConfig:
    name: str
    arch: str = "llama"           # general.architecture written to the file
    wtype: str = "F32"            # type of every 2-D weight
    tied: bool = True             # no output.weight
    rope_base: float = 10000.0
    rms_eps: float = 1e-5
    rope_freqs: bool = False      # write rope_freqs.weight
    bias: bool = False            # q/k/v biases
    dims: Dims = TINY
    specials_first: bool = True   # special tokens at ids 0..2 (SmolLM2) or at the end (Qwen)
    pre: str = "smollm"
    # gemma3
    sliding_window: int = 0       # attention.sliding_window
    swa_pattern: int = 0          # attention.sliding_window_pattern written when > 0
    rope_linear: float = 0.0      # rope.scaling (linear) factor written when > 0
    type_overrides: tuple = ()    # (tensor name suffix, type) pairs overriding wtype
    n_rot: int = 0                # rope.dimension_count (0: the head size)
    extra_kvs: tuple = ()         # ("{arch}." key suffix, gb type, value) written as they are
    conv_layers: tuple = ()       # lfm2: layers with a short convolution instead of attention
    vision: str = ""              # the text half of a VLM: the projector's image tokens in the vocab

    @property
    def extra_specials(self) -> tuple:
        if self.vision:
            return VISION_SPECIALS[self.vision]
        return PHI3_SPECIALS if self.arch == "phi3" else ()

    @property
    def extra_merges(self) -> tuple:
        # idefics3 looks "\n\n" up as one token (llama.cpp's mtmd: lookup_token).
        return (("Ċ", "Ċ"),) if self.vision == "idefics3" else ()

    @property
    def gemma(self) -> bool:
        return self.arch in ("gemma2", "gemma3")

    @property
    def seed(self) -> int:
        return zlib.crc32(self.name.encode())


def model_configs() -> dict[str, ModelConfig]:
    cfgs: list[ModelConfig] = []
    for t in WEIGHT_TYPES:
        cfgs.append(ModelConfig(name=f"llama-{t}", arch="llama", wtype=t))
        cfgs.append(ModelConfig(name=f"qwen2-{t}", arch="qwen2", wtype=t, tied=False,
                                rope_base=1000000.0, rms_eps=1e-6, bias=True,
                                specials_first=False, pre="qwen2"))
    gemma = dict(arch="gemma3", rope_base=1000000.0, rms_eps=1e-6, dims=GEMMA, sliding_window=8)
    for t in GEMMA_TYPES:
        cfgs.append(ModelConfig(name=f"gemma3-{t}", wtype=t, **gemma))
    cfgs.append(ModelConfig(name="gemma3-swa2-F32", wtype="F32", swa_pattern=2, rope_linear=4.0, **gemma))
    cfgs.append(ModelConfig(name="gemma3-mix-Q5_0", wtype="Q5_0", **gemma, type_overrides=(
        ("token_embd.weight", "Q8_0"), ("attn_v.weight", "Q8_0"), ("attn_output.weight", "Q5_1"),
        ("ffn_down.weight", "Q4_0"))))
    for t in ["F32", "Q8_0"]:
        cfgs.append(ModelConfig(name=f"llama-untied-{t}", wtype=t, tied=False))
        cfgs.append(ModelConfig(name=f"llama-ropefreqs-{t}", wtype=t, rope_freqs=True))
        cfgs.append(ModelConfig(name=f"llama-custom-{t}", wtype=t, rope_base=50000.0,
                                rms_eps=1e-3))
        cfgs.append(ModelConfig(name=f"llama-ffnvar-{t}", wtype=t, dims=FFNVAR))
    cfgs.append(ModelConfig(name="gemma3-ffnvar-F32", wtype="F32", **{**gemma, "dims": GEMMA_FFNVAR}))
    cfgs += variant_configs()
    return {c.name: c for c in cfgs}


# What each variant arch writes besides the llama block's keys (llama.cpp's key names).
GRANITE_KVS = (("embedding_scale", gb.F32, 0.5), ("residual_scale", gb.F32, 0.7),
               ("attention.scale", gb.F32, 0.08), ("logit_scale", gb.F32, 4.0))
PHI3_KVS = (("rope.scaling.attn_factor", gb.F32, 1.19), ("rope.scaling.original_context_length", gb.U32, 256))
VARIANT_TYPES = ["F32", "F16", "Q8_0", "Q4_K"]


def variant_configs() -> list[ModelConfig]:
    """qwen3, smollm3, granite, minicpm and phi3 in VARIANT_TYPES (minicpm: F32, its defaults)."""
    out = []
    for t in VARIANT_TYPES:
        out += [
            ModelConfig(name=f"qwen3-{t}", arch="qwen3", wtype=t, tied=False, rope_base=1000000.0, rms_eps=1e-6,
                        dims=QWEN3, specials_first=False, pre="qwen2"),
            ModelConfig(name=f"granite-{t}", arch="granite", wtype=t, extra_kvs=GRANITE_KVS),
            ModelConfig(name=f"phi3-{t}", arch="phi3", wtype=t, tied=False, n_rot=48,
                        extra_kvs=PHI3_KVS),
        ]
    # smollm3 without Q4_K: 4 layers of 256-blocks round more than the int8 bound's derivation
    # (tolerances.py, 2 layers) allows; its Q4_K_M file is checked against llama.cpp instead.
    out += [ModelConfig(name=f"smollm3-{t}", arch="smollm3", wtype=t, dims=VARIANT) for t in VARIANT_TYPES[:3]]
    out.append(ModelConfig(name="minicpm-F32", arch="minicpm", wtype="F32", dims=VARIANT))
    # Gemma 2: caps small enough to bend the tiny model's scores (std ~1) and logits (std ~3);
    # the window and pattern 2 from the defaults, window 8 written so 16-token tests cross it.
    gemma2 = dict(arch="gemma2", rope_base=10000.0, rms_eps=1e-6, dims=GEMMA, sliding_window=8,
                  extra_kvs=(("attn_logit_softcapping", gb.F32, 2.0), ("final_logit_softcapping", gb.F32, 5.0)))
    for t in ["F32", "F16", "Q8_0"]:
        out.append(ModelConfig(name=f"gemma2-{t}", wtype=t, **gemma2))
        # LFM2: two convolution layers in a row, attention between and after them (LFM2-1.2B:
        # conv, conv, attn, conv, conv, attn, ...); tied output as in the real files. Q8_0 in 3
        # layers (conv, attn, conv): c * conv(b * x) multiplies three rounded activations, and
        # 5 such layers round more than the int8 bound's 2-layer derivation (tolerances.py)
        # allows (simulated int8 effect 0.12 max_rel against 0.09 at 3 layers, bound 0.2 / 2).
        small = t == "Q8_0"
        out.append(ModelConfig(name=f"lfm2-{t}", arch="lfm2", wtype=t, rope_base=1000000.0,
                               dims=Dims(n_layer=3) if small else LFM2, conv_layers=(0, 2) if small else (0, 1, 3),
                               specials_first=False, pre="qwen2"))
    return out


def extra_configs() -> dict[str, ModelConfig]:
    """Models used by the CLI error tests and the malformed-file corpus."""
    cfgs = [
        # An architecture the engine does not implement (llama-shaped tensors).
        ModelConfig(name="unsupported-arch-gptj", arch="gptj"),
        # A tensor type the engine does not compute with (ggml's activation format: no weights).
        ModelConfig(name="unsupported-type-Q8_K", wtype="Q8_K"),
        # The base of the malformed corpus.
        ModelConfig(name="mini-llama-F32", dims=MINI),
        # The server soak under the sanitizers (tests/cpp/test_server_soak.cpp): a context
        # long enough for chat prompts in the byte-level vocabulary plus 200 tokens.
        ModelConfig(name="soak-llama-Q4_0", wtype="Q4_0", dims=Dims(n_ctx=1024)),
    ]
    return {c.name: c for c in cfgs}


# ----------------------------------------------------------------------------
# Tokenizer


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable unicode character mapping."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + \
        list(range(0xAE, 0xFF + 1))
    mapping = {}
    extra = 0
    for b in range(256):
        if b in keep:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
GEMMA_SPECIALS = ["<start_of_turn>", "<end_of_turn>"]
PHI3_SPECIALS = ("<s>", "</s>", "<unk>", "<|end|>", "<|user|>", "<|assistant|>")
# The image tokens of the vision projectors' text models (SmolVLM's and Gemma 3's vocabularies).
VISION_SPECIALS = {
    "idefics3": ("<fake_token_around_image>", "<global-img>", "<image>")
    + tuple(f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)),
    "gemma3": ("<start_of_image>", "<end_of_image>", "<image_soft_token>"),
}

# (left, right) pairs in priority order; each merged token is left+right.
_MERGE_PAIRS = [
    ("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("e", "r"), ("o", "n"),
    ("Ġ", "a"), ("r", "e"), ("a", "t"), ("e", "n"), ("Ġ", "s"), ("Ġ", "w"),
    ("i", "s"), ("Ġ", "o"), ("a", "n"), ("Ġ", "c"), ("i", "t"), ("o", "r"),
    ("e", "d"), ("in", "g"), ("Ġ", "b"), ("Ġ", "f"), ("o", "u"), ("Ġ", "m"),
    ("a", "r"), ("a", "l"), ("Ġ", "p"), ("l", "e"), ("Ġ", "i"), ("Ġi", "s"),
    ("Ġo", "f"), ("Ġi", "n"), ("an", "d"), ("Ġ", "and"), ("Ġt", "o"), ("l", "l"),
    ("he", "ll"), ("hell", "o"), ("Ġ", "hello"), ("Ġw", "or"), ("Ġwor", "l"),
    ("Ġworl", "d"), ("Ċ", "Ċ"), ("Ġ", "Ġ"),
]


def tiny_vocab(specials_first: bool, gemma: bool = False, extra_specials: tuple = (),
               extra_merges: tuple = ()) -> tuple[list[str], list[int], list[str]]:
    """Returns (tokens, token_types, merges); gemma adds the turn markers as specials, and
    extra_specials more (phi3's, which llama.cpp's vocabulary loader looks up by name);
    extra_merges go after the others (lowest priority)."""
    b2u = bytes_to_unicode()
    normal = [b2u[b] for b in range(256)]
    merges = []
    for left, right in list(_MERGE_PAIRS) + list(extra_merges):
        assert left in normal and right in normal, (left, right)
        merges.append(f"{left} {right}")
        if left + right not in normal:
            normal.append(left + right)
    specials = SPECIALS + (GEMMA_SPECIALS if gemma else []) + list(extra_specials)
    if specials_first:
        tokens = specials + normal
        types = [3] * len(specials) + [1] * len(normal)
    else:
        tokens = normal + specials
        types = [1] * len(normal) + [3] * len(specials)
    return tokens, types, merges


# ----------------------------------------------------------------------------
# Weight encoding


def _f16_bytes(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float16).reshape(-1, 1).view(np.uint8)


def random_q4_k(rng: np.random.Generator, rows: int, cols: int, std: float) -> np.ndarray:
    """Valid random Q4_K blocks (uint8 [rows, cols/256*144]) with ~zero mean and ~std."""
    nb = rows * cols // 256
    sc = rng.integers(16, 64, size=(nb, 8))
    # value = d*sc*q - dmin*m with q uniform in 0..15 (mean 7.5): with dmin = 8d,
    # m ~ 7.5*sc/8 centres every sub-block near zero.
    m = np.clip(np.rint(sc * 7.5 / 8.0), 0, 63).astype(np.int64)
    q_std = np.sqrt((16 ** 2 - 1) / 12.0)
    d = std / (q_std * np.sqrt(np.mean(sc.astype(np.float64) ** 2)))
    d = d * np.exp(rng.normal(0.0, 0.2, size=nb))
    scales = np.zeros((nb, 12), dtype=np.uint8)
    # Packing (inverse of ggml's get_scale_min_k4):
    #   bytes 0..3:  sc[0..3] low 6 bits, top 2 bits = sc[4..7] >> 4
    #   bytes 4..7:  m[0..3]  low 6 bits, top 2 bits = m[4..7] >> 4
    #   bytes 8..11: low nibble sc[4..7] & 15, high nibble m[4..7] & 15
    scales[:, 0:4] = (sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)).astype(np.uint8)
    scales[:, 4:8] = (m[:, 0:4] | ((m[:, 4:8] >> 4) << 6)).astype(np.uint8)
    scales[:, 8:12] = ((sc[:, 4:8] & 15) | ((m[:, 4:8] & 15) << 4)).astype(np.uint8)
    qs = rng.integers(0, 256, size=(nb, 128), dtype=np.uint8)
    blocks = np.concatenate([_f16_bytes(d), _f16_bytes(8.0 * d), scales, qs], axis=1)
    return blocks.reshape(rows, -1)


def random_q5_k(rng: np.random.Generator, rows: int, cols: int, std: float) -> np.ndarray:
    """Valid random Q5_K blocks (176 bytes per 256 values)."""
    nb = rows * cols // 256
    sc = rng.integers(16, 64, size=(nb, 8))
    m = np.clip(np.rint(sc * 15.5 / 16.0), 0, 63).astype(np.int64)
    q_std = np.sqrt((32 ** 2 - 1) / 12.0)
    d = std / (q_std * np.sqrt(np.mean(sc.astype(np.float64) ** 2)))
    scales = np.zeros((nb, 12), dtype=np.uint8)
    scales[:, 0:4] = (sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)).astype(np.uint8)
    scales[:, 4:8] = (m[:, 0:4] | ((m[:, 4:8] >> 4) << 6)).astype(np.uint8)
    scales[:, 8:12] = ((sc[:, 4:8] & 15) | ((m[:, 4:8] & 15) << 4)).astype(np.uint8)
    qh = rng.integers(0, 256, size=(nb, 32), dtype=np.uint8)
    qs = rng.integers(0, 256, size=(nb, 128), dtype=np.uint8)
    dd = np.full(nb, d)
    blocks = np.concatenate([_f16_bytes(dd), _f16_bytes(16.0 * dd), scales, qh, qs], axis=1)
    return blocks.reshape(rows, -1)


def random_q6_k(rng: np.random.Generator, rows: int, cols: int, std: float) -> np.ndarray:
    """Valid random Q6_K blocks (ql[128], qh[64], int8 scales[16], fp16 d)."""
    nb = rows * cols // 256
    mag = rng.integers(16, 128, size=(nb, 16))
    sign = np.where(rng.random((nb, 16)) < 0.5, -1, 1)
    scales = (mag * sign).astype(np.int8)
    q_std = np.sqrt((64 ** 2 - 1) / 12.0)  # q - 32 with q uniform in 0..63
    d = std / (q_std * np.sqrt(np.mean(mag.astype(np.float64) ** 2)))
    d = d * np.exp(rng.normal(0.0, 0.2, size=nb))
    ql = rng.integers(0, 256, size=(nb, 128), dtype=np.uint8)
    qh = rng.integers(0, 256, size=(nb, 64), dtype=np.uint8)
    blocks = np.concatenate([ql, qh, scales.view(np.uint8), _f16_bytes(d)], axis=1)
    return blocks.reshape(rows, -1)


def encode_matrix(rng: np.random.Generator, wtype: str, rows: int, cols: int,
                  std: float) -> np.ndarray:
    """A random [rows, cols] matrix (cols = ne0, contiguous) encoded as `wtype`,
    returned as raw bytes shaped uint8 [rows, row_bytes]."""
    from gguf import quants, GGMLQuantizationType as QT
    if wtype == "Q4_K":
        return random_q4_k(rng, rows, cols, std)
    if wtype == "Q5_K":
        return random_q5_k(rng, rows, cols, std)
    if wtype == "Q6_K":
        return random_q6_k(rng, rows, cols, std)
    if wtype == "Q8_K":  # only ever loaded to be refused: any bytes
        return rng.integers(0, 256, size=(rows, cols // 256 * 292), dtype=np.uint8)
    w = (rng.standard_normal((rows, cols)) * std).astype(np.float32)
    if wtype == "F32":
        return w.view(np.uint8)
    if wtype == "F16":
        return w.astype(np.float16).view(np.uint8)
    q = quants.quantize(w, QT[wtype])
    return np.ascontiguousarray(q).view(np.uint8).reshape(rows, -1)


# ----------------------------------------------------------------------------
# Model spec


@dataclass
class ModelSpec:
    cfg: ModelConfig
    kvs: list[gb.KV] = field(default_factory=list)
    tensors: list[gb.Tensor] = field(default_factory=list)


def build_spec(cfg: ModelConfig) -> ModelSpec:
    rng = np.random.default_rng(cfg.seed)
    d = cfg.dims
    a = cfg.arch
    tokens, types, merges = tiny_vocab(cfg.specials_first, cfg.gemma, cfg.extra_specials, cfg.extra_merges)
    ids = {t: i for i, t in enumerate(tokens)}
    n_vocab = len(tokens)

    kvs = [
        gb.KV("general.architecture", gb.STRING, a),
        gb.KV("general.name", gb.STRING, cfg.name),
        gb.KV(f"{a}.context_length", gb.U32, d.n_ctx),
        gb.KV(f"{a}.embedding_length", gb.U32, d.n_embd),
        gb.KV(f"{a}.block_count", gb.U32, d.n_layer),
        gb.KV(f"{a}.feed_forward_length", gb.ARRAY, list(d.n_ff_layers), elem_type=gb.I32)
        if d.n_ff_layers else gb.KV(f"{a}.feed_forward_length", gb.U32, d.n_ff),
        gb.KV(f"{a}.attention.head_count", gb.U32, d.n_head),
        gb.KV(f"{a}.attention.head_count_kv", gb.ARRAY,
              [0 if i in cfg.conv_layers else d.n_head_kv for i in range(d.n_layer)], elem_type=gb.I32)
        if cfg.conv_layers else gb.KV(f"{a}.attention.head_count_kv", gb.U32, d.n_head_kv),
        gb.KV(f"{a}.rope.freq_base", gb.F32, cfg.rope_base),
        gb.KV(f"{a}.attention.layer_norm_rms_epsilon", gb.F32, cfg.rms_eps),
        gb.KV(f"{a}.rope.dimension_count", gb.U32, cfg.n_rot or d.head_dim),
        gb.KV(f"{a}.vocab_size", gb.U32, n_vocab),
        gb.KV("tokenizer.ggml.model", gb.STRING, "gpt2"),
        gb.KV("tokenizer.ggml.pre", gb.STRING, cfg.pre),
        gb.KV("tokenizer.ggml.tokens", gb.ARRAY, tokens, elem_type=gb.STRING),
        gb.KV("tokenizer.ggml.token_type", gb.ARRAY, types, elem_type=gb.I32),
        gb.KV("tokenizer.ggml.merges", gb.ARRAY, merges, elem_type=gb.STRING),
        gb.KV("tokenizer.ggml.bos_token_id", gb.U32,
              ids["<|im_start|>"] if cfg.specials_first else ids["<|endoftext|>"]),
        gb.KV("tokenizer.ggml.eos_token_id", gb.U32, ids["<|im_end|>"]),
        gb.KV("tokenizer.ggml.padding_token_id", gb.U32, ids["<|endoftext|>"]),
        gb.KV("tokenizer.ggml.add_bos_token", gb.BOOL, False),
    ]
    if cfg.gemma:  # no chat template: the engine picks the gemma layout from the arch
        kvs += [gb.KV(f"{a}.attention.key_length", gb.U32, d.head_dim),
                gb.KV(f"{a}.attention.value_length", gb.U32, d.head_dim),
                gb.KV(f"{a}.attention.sliding_window", gb.U32, cfg.sliding_window)]
        if cfg.swa_pattern:
            kvs.append(gb.KV(f"{a}.attention.sliding_window_pattern", gb.U32, cfg.swa_pattern))
        if cfg.rope_linear:
            kvs += [gb.KV(f"{a}.rope.scaling.type", gb.STRING, "linear"),
                    gb.KV(f"{a}.rope.scaling.factor", gb.F32, cfg.rope_linear)]
    else:
        kvs.append(gb.KV("tokenizer.chat_template", gb.STRING, CHATML_TEMPLATE))
    if d.head_dim * d.n_head != d.n_embd and not cfg.gemma:
        kvs += [gb.KV(f"{a}.attention.key_length", gb.U32, d.head_dim),
                gb.KV(f"{a}.attention.value_length", gb.U32, d.head_dim)]
    kvs += [gb.KV(f"{a}.{key}", vt, v) for key, vt, v in cfg.extra_kvs]
    if cfg.conv_layers:
        kvs.append(gb.KV(f"{a}.shortconv.l_cache", gb.U32, LFM2_TAPS))

    tensors: list[gb.Tensor] = []

    fused: dict[str, list] = {}  # phi3: parts of a fused tensor, in row order

    def mat(name: str, ne0: int, ne1: int, std: float, wtype: str | None = None):
        wt = wtype or next((t for sfx, t in cfg.type_overrides if name.endswith(sfx)), cfg.wtype)
        raw = encode_matrix(rng, wt, ne1, ne0, std)
        into = fuse_into(name)
        if into:  # rows are encoded on their own, so the parts' rows simply follow each other
            fused.setdefault(into, []).append(raw)
            if len(fused[into]) == (3 if into.endswith("attn_qkv.weight") else 2):
                parts = np.concatenate(fused.pop(into), axis=0)
                tensors.append(gb.Tensor(into, wt, [ne0, parts.shape[0]], parts.tobytes()))
            return
        tensors.append(gb.Tensor(name, wt, [ne0, ne1], raw.tobytes()))

    def fuse_into(name: str) -> str | None:
        if a != "phi3" or not name.startswith("blk."):
            return None
        for part, whole in (("attn_q.", "attn_qkv."), ("attn_k.", "attn_qkv."), ("attn_v.", "attn_qkv."),
                            ("ffn_gate.", "ffn_up."), ("ffn_up.", "ffn_up.")):
            if name.split(".")[2] + "." == part:
                return name.replace(part, whole)
        return None

    def vec(name: str, values: np.ndarray):
        tensors.append(gb.Tensor(name, "F32", [len(values)],
                                 np.asarray(values, dtype=np.float32).tobytes()))

    def norm(name: str, centre: float, n: int = d.n_embd):
        vec(name, centre * (1.0 + 0.1 * rng.standard_normal(n)))

    def ffn(p: str, i: int):
        norm(p + "ffn_norm.weight", 1.0)
        mat(p + "ffn_gate.weight", d.n_embd, d.ff(i), 0.06)
        mat(p + "ffn_up.weight", d.n_embd, d.ff(i), 0.06)
        mat(p + "ffn_down.weight", d.ff(i), d.n_embd, 0.004)

    q_dim = d.n_head * d.head_dim
    kv_dim = d.n_head_kv * d.head_dim
    mat("token_embd.weight", d.n_embd, n_vocab, 0.05)
    if cfg.gemma:
        # embeddings * sqrt(256) -> rms 0.8; q/k normed per head (scores std ~1); each
        # post-norm adds an update of rms ~0.5 to the residual; logits std ~3.
        for i in range(d.n_layer):
            p = f"blk.{i}."
            norm(p + "attn_norm.weight", 1.0)
            mat(p + "attn_q.weight", d.n_embd, q_dim, 0.07)
            mat(p + "attn_k.weight", d.n_embd, kv_dim, 0.07)
            mat(p + "attn_v.weight", d.n_embd, kv_dim, 0.06)
            if a == "gemma3":
                norm(p + "attn_q_norm.weight", 1.0, d.head_dim)
                norm(p + "attn_k_norm.weight", 1.0, d.head_dim)
            mat(p + "attn_output.weight", q_dim, d.n_embd, 0.06)
            norm(p + "post_attention_norm.weight", 0.5)
            norm(p + "ffn_norm.weight", 1.0)
            mat(p + "ffn_gate.weight", d.n_embd, d.ff(i), 0.06)
            mat(p + "ffn_up.weight", d.n_embd, d.ff(i), 0.06)
            mat(p + "ffn_down.weight", d.ff(i), d.n_embd, 0.06)
            norm(p + "post_ffw_norm.weight", 0.5)
        norm("output_norm.weight", 4.0)
        return ModelSpec(cfg, kvs, tensors)
    if cfg.rope_freqs:
        vec("rope_freqs.weight", llama3_rope_factors(cfg.rope_base, d.head_dim))
    if a == "phi3":  # LongRoPE: the two tables differ enough to move the logits
        n_half = (cfg.n_rot or d.head_dim) // 2
        vec("rope_factors_short.weight", 1.0 + 0.5 * rng.random(n_half))
        vec("rope_factors_long.weight", 1.0 + 8.0 * rng.random(n_half))
    for i in range(d.n_layer):
        p = f"blk.{i}."
        norm(p + "attn_norm.weight", 1.0)
        if i in cfg.conv_layers:  # lfm2: b, c, x ~ 1; a kernel that weighs each tap differently
            mat(p + "shortconv.in_proj.weight", d.n_embd, 3 * d.n_embd, 0.07)
            tensors.append(gb.Tensor(p + "shortconv.conv.weight", "F32", [LFM2_TAPS, d.n_embd],
                                     (0.5 * rng.standard_normal((d.n_embd, LFM2_TAPS))).astype(np.float32).tobytes()))
            mat(p + "shortconv.out_proj.weight", d.n_embd, d.n_embd, 0.004)
            ffn(p, i)
            continue
        mat(p + "attn_q.weight", d.n_embd, q_dim, 0.07)
        mat(p + "attn_k.weight", d.n_embd, kv_dim, 0.07)
        mat(p + "attn_v.weight", d.n_embd, kv_dim, 0.06)
        if a in ("qwen3", "lfm2"):  # per-head norms; scores std ~1 after them
            norm(p + "attn_q_norm.weight", 1.0, d.head_dim)
            norm(p + "attn_k_norm.weight", 1.0, d.head_dim)
        if cfg.bias:
            vec(p + "attn_q.bias", 0.3 * rng.standard_normal(q_dim))
            vec(p + "attn_k.bias", 0.3 * rng.standard_normal(kv_dim))
            vec(p + "attn_v.bias", 0.3 * rng.standard_normal(kv_dim))
        mat(p + "attn_output.weight", q_dim, d.n_embd, 0.004)
        ffn(p, i)
    norm("token_embd_norm.weight" if a == "lfm2" else "output_norm.weight", 4.0)
    if not cfg.tied:
        mat("output.weight", d.n_embd, n_vocab, 0.05)
    return ModelSpec(cfg, kvs, tensors)


def llama3_rope_factors(base: float, head_dim: int, factor: float = 8.0,
                        low_freq_factor: float = 1.0, high_freq_factor: float = 4.0,
                        original_ctx: int = 64) -> np.ndarray:
    """Per-frequency divisors computed with Llama-3.1's rope-scaling rule (as
    llama.cpp's converter does). original_ctx is shrunk from 8192 to 64 so the
    scaled band covers frequencies that actually rotate within a 16-token test."""
    freqs = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    low_wavelen = original_ctx / low_freq_factor
    high_wavelen = original_ctx / high_freq_factor
    out = []
    for f in freqs:
        wavelen = 2 * np.pi / f
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (original_ctx / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


# ----------------------------------------------------------------------------
# Writers


def write_with_gguf_writer(spec: ModelSpec, path: Path) -> Path:
    """Write the spec through the gguf package's GGUFWriter (the normal path)."""
    import gguf
    from gguf import GGUFValueType as VT
    arch = next(kv.value for kv in spec.kvs if kv.key == "general.architecture")
    w = gguf.GGUFWriter(str(path), arch)
    for kv in spec.kvs:
        if kv.key == "general.architecture":
            continue
        if kv.vtype == gb.ARRAY:
            w.add_key_value(kv.key, list(kv.value), VT.ARRAY, sub_type=VT(kv.elem_type))
        else:
            w.add_key_value(kv.key, kv.value, VT(kv.vtype))
    for t in spec.tensors:
        qt = gguf.GGMLQuantizationType[t.type_name]
        rows = 1
        for dd in t.dims[1:]:
            rows *= dd
        raw = np.frombuffer(t.data, dtype=np.uint8).reshape(rows, -1)
        if len(t.dims) == 1:
            raw = raw.reshape(-1)
        w.add_tensor(t.name, raw, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def write_with_bytes(spec: ModelSpec, path: Path, **kw) -> Path:
    """Write the spec through gguf_bytes (lets tests corrupt any field)."""
    path.write_bytes(gb.build_gguf(spec.kvs, spec.tensors, **kw).data)
    return path


def write_configs(out_dir: Path, cfgs: dict, build, names: list[str] | None = None) -> dict[str, Path]:
    """Write cfgs' models (all, or just `names`) with build(cfg) -> ModelSpec into out_dir, each
    once (through a temporary name, so a half-written file is never taken); name -> path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, cfg in cfgs.items():
        if names is not None and name not in names:
            continue
        p = out_dir / f"{name}.gguf"
        if not p.exists():
            tmp = out_dir / f".{name}.gguf.tmp"
            write_with_gguf_writer(build(cfg), tmp)
            tmp.rename(p)
        paths[name] = p
    return paths


def without(spec: ModelSpec, *, kv: str | None = None, tensor: str | None = None) -> ModelSpec:
    """The spec with a key and / or a tensor left out (the missing-key / missing-tensor tests)."""
    spec.kvs = [x for x in spec.kvs if not (kv and x.key == kv)]
    spec.tensors = [t for t in spec.tensors if not (tensor and t.name == tensor)]
    return spec


def generate_all(out_dir: Path, names: list[str] | None = None) -> dict[str, Path]:
    """Write every tiny model (tiny_qwen35.py's and tiny_gemma4.py's too), or just `names`, into out_dir; returns name -> path."""
    paths = write_configs(out_dir, {**model_configs(), **extra_configs()}, build_spec, names)
    import tiny_qwen35  # their own generators (they import this module)
    import tiny_gemma4
    paths.update(tiny_qwen35.generate(out_dir, names))
    paths.update(tiny_gemma4.generate(out_dir, names))
    return paths


def sample_ids(cfg: ModelConfig, n: int, seed: int = 0) -> list[int]:
    """Deterministic token ids for a logits test: random normal/merge tokens, no specials."""
    _, types, _ = tiny_vocab(cfg.specials_first, cfg.gemma, cfg.extra_specials, cfg.extra_merges)
    return sample_normal_ids(types, cfg.seed, n, seed)


def sample_normal_ids(types: list[int], cfg_seed: int, n: int, seed: int = 0) -> list[int]:
    """n random ids among a vocabulary's normal tokens (type 1: no specials, no bytes)."""
    normal = [i for i, t in enumerate(types) if t == 1]
    rng = np.random.default_rng(cfg_seed + 7919 * seed)
    return [int(x) for x in rng.choice(normal, size=n, replace=True)]


if __name__ == "__main__":
    import sys
    # tiny_models.py [OUT_DIR [NAME...]]: every model, or the ones named
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "tiny-models")
    for name, p in generate_all(out, sys.argv[2:] or None).items():
        print(f"{name:28s} {p.stat().st_size:9d} bytes  {p}")
