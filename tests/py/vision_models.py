"""Random-weight mmproj (llama.cpp `clip`) GGUF files for the vision tests.

The layout is the one llama.cpp's clip loader reads (tools/mtmd/clip.cpp, clip-impl.h) for
the SigLIP projectors `idefics3` (SmolVLM: ViT, pixel shuffle, one linear) and `gemma3` (ViT,
average pool, soft-embedding RMS norm, one linear stored transposed). Shapes are tiny so that
llama.cpp and PocketLLM encode an image in milliseconds.

Weights are scaled so attention is far from uniform (Q and K larger than the rest) and the
residual stream stays of order one through the layers.

Run as a script to write one file:  python vision_models.py idefics3 f16 out.gguf
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT

WEIGHT_TYPES = {"f32": QT.F32, "f16": QT.F16, "q8_0": QT.Q8_0, "q4_0": QT.Q4_0}


@dataclass
class VisionSpec:
    projector: str               # "idefics3" or "gemma3"
    wtype: str = "f16"           # matmul weights: f32, f16, q8_0, q4_0
    image_size: int = 64
    patch_size: int = 16
    n_embd: int = 64
    n_ff: int = 128
    n_head: int = 4
    n_layer: int = 2
    proj_out: int = 96           # the text model's width
    scale_factor: int = 2        # idefics3: pixel shuffle; gemma3: pooling kernel
    longest_edge: int = 128      # idefics3's preproc_image_size (0: key absent)
    eps: float = 1e-6
    mean: tuple = (0.48, 0.45, 0.40)
    std: tuple = (0.26, 0.25, 0.28)
    seed: int = 1
    # Quantised weights written back as F32 after a round trip through their type: the same
    # model without llama.cpp's activation quantisation, the reference for Q8_0 products.
    dequantized: bool = False
    # Test hooks: tensors to drop, or to write with a wrong shape; metadata overrides.
    drop: set = field(default_factory=set)
    bad_shape: set = field(default_factory=set)
    kv_override: dict = field(default_factory=dict)


def _weight(w: gguf.GGUFWriter, name: str, arr: np.ndarray, wtype: str, dequantized: bool = False) -> None:
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    qt = WEIGHT_TYPES[wtype]
    if dequantized and qt not in (QT.F32, QT.F16):
        arr = gguf.quants.dequantize(gguf.quants.quantize(arr, qt), qt).astype(np.float32)
        qt = QT.F32
    if qt == QT.F32:
        w.add_tensor(name, arr)
    elif qt == QT.F16:
        w.add_tensor(name, arr.astype(np.float16))
    else:
        q = gguf.quants.quantize(arr, qt)
        w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=qt)


def write_mmproj(path: Path, spec: VisionSpec) -> Path:
    rng = np.random.default_rng(spec.seed)
    E, F, P = spec.n_embd, spec.n_ff, spec.patch_size
    n_side = spec.image_size // P
    n_pos = n_side * n_side
    w = gguf.GGUFWriter(str(path), "clip")
    kv = {
        "clip.projector_type": spec.projector,
        "clip.has_vision_encoder": True,
        "clip.use_gelu": True,
        "clip.vision.image_size": spec.image_size,
        "clip.vision.patch_size": P,
        "clip.vision.embedding_length": E,
        "clip.vision.feed_forward_length": F,
        "clip.vision.block_count": spec.n_layer,
        "clip.vision.projection_dim": spec.proj_out,
        "clip.vision.attention.head_count": spec.n_head,
        "clip.vision.attention.layer_norm_epsilon": spec.eps,
        "clip.vision.image_mean": list(spec.mean),
        "clip.vision.image_std": list(spec.std),
        "clip.vision.projector.scale_factor": spec.scale_factor,
    }
    if spec.projector == "idefics3" and spec.longest_edge:
        kv["clip.vision.preproc_image_size"] = spec.longest_edge
    kv.update(spec.kv_override)
    for k, v in kv.items():
        if v is None:
            continue
        if isinstance(v, bool):
            w.add_bool(k, v)
        elif isinstance(v, str):
            w.add_string(k, v)
        elif isinstance(v, float):
            w.add_float32(k, v)
        elif isinstance(v, int):
            w.add_uint32(k, v)
        else:
            w.add_array(k, [float(x) for x in v])

    tensors: list[tuple[str, np.ndarray, str]] = []  # name, numpy array (ggml dims reversed), type

    def add(name, arr, wtype="f32"):
        if name in spec.drop:
            return
        if name in spec.bad_shape:
            arr = arr[..., :-1] if arr.ndim > 1 else arr[:-1]
        tensors.append((name, arr, wtype))

    def norm_w(n):
        return 1.0 + 0.1 * rng.standard_normal(n)

    def bias(n, s=0.05):
        return s * rng.standard_normal(n)

    # Patch embedding: a conv with kernel = stride = patch; ggml ne = [P, P, 3, E].
    # The conv stays f16 (llama.cpp's im2col takes no quantised kernel).
    add("v.patch_embd.weight", rng.standard_normal((E, 3, P, P)) / np.sqrt(3 * P * P),
        "f32" if spec.wtype == "f32" else "f16")
    add("v.patch_embd.bias", bias(E))
    add("v.position_embd.weight", 0.5 * rng.standard_normal((n_pos, E)))
    sq = 1.0 / np.sqrt(E)
    for il in range(spec.n_layer):
        p = f"v.blk.{il}"
        add(f"{p}.ln1.weight", norm_w(E)); add(f"{p}.ln1.bias", bias(E))
        # Q and K 2.5x larger than the rest: attention logits of std ~ 6, far from uniform.
        add(f"{p}.attn_q.weight", 2.5 * sq * rng.standard_normal((E, E)), spec.wtype)
        add(f"{p}.attn_q.bias", bias(E))
        add(f"{p}.attn_k.weight", 2.5 * sq * rng.standard_normal((E, E)), spec.wtype)
        add(f"{p}.attn_k.bias", bias(E))
        add(f"{p}.attn_v.weight", sq * rng.standard_normal((E, E)), spec.wtype)
        add(f"{p}.attn_v.bias", bias(E))
        add(f"{p}.attn_out.weight", sq * rng.standard_normal((E, E)), spec.wtype)
        add(f"{p}.attn_out.bias", bias(E))
        add(f"{p}.ln2.weight", norm_w(E)); add(f"{p}.ln2.bias", bias(E))
        add(f"{p}.ffn_up.weight", sq * rng.standard_normal((F, E)), spec.wtype)
        add(f"{p}.ffn_up.bias", bias(F))
        add(f"{p}.ffn_down.weight", rng.standard_normal((E, F)) / np.sqrt(F), spec.wtype)
        add(f"{p}.ffn_down.bias", bias(E))
    add("v.post_ln.weight", norm_w(E)); add("v.post_ln.bias", bias(E))
    if spec.projector == "idefics3":
        s = spec.scale_factor
        add("mm.model.fc.weight", rng.standard_normal((spec.proj_out, E * s * s)) / np.sqrt(E * s * s),
            spec.wtype)
    elif spec.projector == "gemma3":
        add("mm.soft_emb_norm.weight", norm_w(E))
        # Stored transposed (ggml ne = [proj_out, E]); llama.cpp transposes it in the graph, so
        # it cannot be quantised.
        add("mm.input_projection.weight", rng.standard_normal((E, spec.proj_out)) / np.sqrt(E),
            "f32" if spec.wtype == "f32" else "f16")
    for name, arr, wt in tensors:
        _weight(w, name, arr, wt, spec.dequantized)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


if __name__ == "__main__":
    proj, wtype, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    write_mmproj(out, VisionSpec(projector=proj, wtype=wtype))
    print(out)
