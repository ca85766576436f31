"""A tiny, dependency-free GGUF byte builder used to produce valid and deliberately
malformed GGUF files.

GGUF v2/v3 layout (all little-endian):

    magic  "GGUF"          4 bytes
    version                u32
    tensor_count           u64
    kv_count               u64
    kv pairs               key: string, value type: u32, value
    tensor infos           name: string, n_dims: u32, dims: u64[n_dims] (ne0 first),
                           ggml type: u32, offset: u64 (relative to the data section)
    padding                zeros up to a multiple of general.alignment (default 32)
    data section           tensor data, each tensor starting at an aligned offset

strings are u64 length + bytes (no NUL); arrays are u32 element type + u64 count +
elements.

Every field can be overridden so the malformed-file tests can write exactly the
broken value they want; `Built.marks` records byte offsets of interesting places
(start of each kv, each tensor info, data start...) so truncation points can be
chosen meaningfully.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

# GGUF metadata value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)

_SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i",
               F32: "<f", BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}

# ggml tensor types: id -> (elements per block, bytes per block)
GGML_TYPES = {
    "F32": (0, 1, 4),
    "F16": (1, 1, 2),
    "Q4_0": (2, 32, 18),
    "Q4_1": (3, 32, 20),
    "Q5_0": (6, 32, 22),
    "Q5_1": (7, 32, 24),
    "Q8_0": (8, 32, 34),
    "Q4_K": (12, 256, 144),
    "Q5_K": (13, 256, 176),
    "Q6_K": (14, 256, 210),
    "Q8_K": (15, 256, 292),
    "BF16": (30, 1, 2),
}
TYPE_ID = {name: v[0] for name, v in GGML_TYPES.items()}


def tensor_nbytes(type_name: str, dims: list[int]) -> int:
    _, blk, blk_bytes = GGML_TYPES[type_name]
    n = 1
    for d in dims:
        n *= d
    assert dims[0] % blk == 0, (type_name, dims)
    return n // blk * blk_bytes


def gguf_string(s: str | bytes, length: int | None = None) -> bytes:
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b) if length is None else length) + b


def encode_scalar(vtype: int, value: Any) -> bytes:
    if vtype == STRING:
        return gguf_string(value)
    return struct.pack(_SCALAR_FMT[vtype], value)


@dataclass
class KV:
    key: str
    vtype: int
    value: Any
    elem_type: int | None = None       # for arrays
    # Overrides for malformed files:
    raw_value: bytes | None = None     # replaces the encoded value entirely
    count_override: int | None = None  # array count written instead of len(value)

    def encode(self) -> bytes:
        out = gguf_string(self.key) + struct.pack("<I", self.vtype)
        if self.raw_value is not None:
            return out + self.raw_value
        if self.vtype == ARRAY:
            assert self.elem_type is not None
            n = len(self.value) if self.count_override is None else self.count_override
            out += struct.pack("<IQ", self.elem_type, n)
            out += b"".join(encode_scalar(self.elem_type, v) for v in self.value)
            return out
        return out + encode_scalar(self.vtype, self.value)


@dataclass
class Tensor:
    name: str
    type_name: str
    dims: list[int]                     # GGUF order: ne0 (row length) first
    data: bytes = b""
    # Overrides for malformed files:
    type_id: int | None = None          # raw ggml type id written instead of the name's
    offset: int | None = None           # raw offset written instead of the computed one
    n_dims_override: int | None = None  # n_dims written (dims list written as given)


@dataclass
class Built:
    data: bytes
    marks: dict[str, int] = field(default_factory=dict)


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def build_gguf(kvs: list[KV], tensors: list[Tensor], *, version: int = 3,
               magic: bytes = b"GGUF", alignment: int | None = None,
               tensor_count: int | None = None, kv_count: int | None = None,
               pad_end: bool = True) -> Built:
    """Serialise a GGUF file. `alignment` is the alignment actually used for the
    layout; by default it is taken from a general.alignment kv (if a valid u32) or 32.
    pad_end pads the last tensor to the alignment like GGUFWriter does, which makes
    the output byte-identical to GGUFWriter's for the same kvs and tensors."""
    if alignment is None:
        alignment = 32
        for kv in kvs:
            if kv.key == "general.alignment" and kv.vtype == U32 and kv.raw_value is None \
                    and kv.value > 0 and (kv.value & (kv.value - 1)) == 0:
                alignment = kv.value
    marks: dict[str, int] = {}
    out = bytearray()
    out += magic
    out += struct.pack("<I", version)
    out += struct.pack("<Q", len(tensors) if tensor_count is None else tensor_count)
    out += struct.pack("<Q", len(kvs) if kv_count is None else kv_count)
    marks["header_end"] = len(out)
    for i, kv in enumerate(kvs):
        marks[f"kv{i}:{kv.key}"] = len(out)
        out += kv.encode()
    marks["tensor_infos"] = len(out)
    # data layout
    offsets = []
    cur = 0
    for t in tensors:
        cur = _align(cur, alignment)
        offsets.append(cur)
        cur += len(t.data)
    for i, t in enumerate(tensors):
        marks[f"ti{i}:{t.name}"] = len(out)
        out += gguf_string(t.name)
        n_dims = len(t.dims) if t.n_dims_override is None else t.n_dims_override
        out += struct.pack("<I", n_dims)
        for d in t.dims:
            out += struct.pack("<Q", d)
        out += struct.pack("<I", TYPE_ID[t.type_name] if t.type_id is None else t.type_id)
        out += struct.pack("<Q", offsets[i] if t.offset is None else t.offset)
    marks["tensor_infos_end"] = len(out)
    out += b"\0" * (_align(len(out), alignment) - len(out))
    data_start = len(out)
    marks["data"] = data_start
    for i, t in enumerate(tensors):
        pos = data_start + offsets[i]
        out += b"\0" * (pos - len(out))
        marks[f"td{i}:{t.name}"] = len(out)
        out += t.data
    marks["data_end"] = len(out)
    if pad_end:
        out += b"\0" * (_align(len(out), alignment) - len(out))
    marks["end"] = len(out)
    return Built(bytes(out), marks)
