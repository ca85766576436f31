"""The reference dequantisers of the types the engine reads from llama.cpp's files but does
not write (Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS: src/quant/reference_lowbit.cpp) against gguf-py's
gguf.quants.dequantize, bit for bit, on random blocks: every byte random (codes, fifth bits,
hmask, packed scales and mins) except the fp16 super-block scales, which are any finite half
(subnormals, zero and both signs included). `pocketllm quantize IN OUT --type f32` writes every
tensor of IN as our dequantiser decodes it, so the engine's own path is what is compared.

The kernels are checked against these dequantisers (tests/cpp/test_kernels.cpp and the other
kernel tests), and the model-level logits against the numpy reference (which dequantises with
gguf.quants) in tests/py/test_lowbit_models.py."""
from __future__ import annotations

import numpy as np
import pytest

import pllm_cli

# name -> (elements per block, bytes per block, byte offsets of the block's fp16 scales)
TYPES = {
    "Q2_K": (256, 84, (80, 82)),
    "Q3_K": (256, 110, (108,)),
    "Q5_K": (256, 176, (0, 2)),
    "IQ4_NL": (32, 18, (0,)),
    "IQ4_XS": (256, 136, (0,)),
}


def random_blocks(rng: np.random.Generator, name: str, n_blocks: int) -> np.ndarray:
    _, nbytes, halves = TYPES[name]
    b = rng.integers(0, 256, size=(n_blocks, nbytes), dtype=np.uint8)
    for off in halves:
        bits = rng.integers(0, 1 << 16, size=n_blocks, dtype=np.uint32)
        finite = (bits & 0x7C00) != 0x7C00
        bits = np.where(finite, bits, bits & 0x83FF)  # an inf / NaN exponent becomes 0 (subnormal)
        bits[:4] = [0x0000, 0x8000, 0x0001, 0x7BFF]  # +0, -0, the smallest subnormal, the largest half
        b[:, off:off + 2] = bits.astype(np.uint16).reshape(-1, 1).view(np.uint8)
    return b


def test_dequantisers_match_gguf_py_bit_for_bit(pllm_bin, work_dir):
    import gguf
    from gguf import quants

    rng = np.random.default_rng(20261205)
    rows, blocks_per_row = 8, 12
    src = work_dir / "lowbit.gguf"
    w = gguf.GGUFWriter(str(src), "llama")
    want = {}
    for name, (blk, nbytes, _) in TYPES.items():
        raw = random_blocks(rng, name, rows * blocks_per_row).reshape(rows, -1)
        qt = gguf.GGMLQuantizationType[name]
        w.add_tensor(f"t.{name}", raw, raw_dtype=qt)
        want[name] = quants.dequantize(raw, qt).astype(np.float32)
        assert want[name].shape == (rows, blocks_per_row * blk)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    out = work_dir / "lowbit-f32.gguf"
    pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["quantize", src, out, "--type", "f32"]))
    got = {t.name: t for t in gguf.GGUFReader(str(out)).tensors}
    for name in TYPES:
        t = got[f"t.{name}"]
        assert t.tensor_type == gguf.GGMLQuantizationType.F32, name
        g = np.asarray(t.data, dtype=np.float32).reshape(want[name].shape)
        diff = g.view(np.uint32) != want[name].view(np.uint32)
        assert not diff.any(), (f"{name}: {int(diff.sum())} of {diff.size} values differ, first at "
                                f"{np.argwhere(diff)[0]}: {g[diff][0]!r} vs {want[name][diff][0]!r}")
