"""A corpus of malformed GGUF files derived from one small valid model
(tiny_models "mini-llama-F32", written with gguf_bytes).

`valid_variants()` are files a correct reader must accept; `malformed_cases()` are
files it must reject with a clean error. Run as a script to dump the corpus:

    python tests/py/malformed_corpus.py OUT_DIR
"""
from __future__ import annotations

import copy
import struct
from pathlib import Path

import gguf_bytes as gb
import tiny_models as tm

U64_MAX = 2**64 - 1


def base_spec() -> tm.ModelSpec:
    return tm.build_spec(tm.extra_configs()["mini-llama-F32"])


def _build(spec: tm.ModelSpec, kvs=None, tensors=None, **kw) -> bytes:
    return gb.build_gguf(spec.kvs if kvs is None else kvs,
                         spec.tensors if tensors is None else tensors, **kw).data


def _kv_index(kvs: list[gb.KV], key: str) -> int:
    return next(i for i, kv in enumerate(kvs) if kv.key == key)


def _tensor_index(tensors: list[gb.Tensor], name: str) -> int:
    return next(i for i, t in enumerate(tensors) if t.name == name)


def valid_variants() -> dict[str, bytes]:
    spec = base_spec()
    out = {"base_v3": _build(spec), "base_v2": _build(spec, version=2)}
    kvs = copy.deepcopy(spec.kvs)
    kvs.append(gb.KV("general.alignment", gb.U32, 64))
    out["alignment_64"] = _build(spec, kvs=kvs)
    # unknown but well-formed extra keys (incl. arrays of every scalar type) are fine
    kvs = copy.deepcopy(spec.kvs)
    kvs.append(gb.KV("test.extra.u64", gb.U64, 2**40))
    kvs.append(gb.KV("test.extra.f64", gb.F64, 1.5))
    kvs.append(gb.KV("test.extra.i8_array", gb.ARRAY, [-1, 2, -3], elem_type=gb.I8))
    kvs.append(gb.KV("test.extra.str_array", gb.ARRAY, ["a", "", "c"], elem_type=gb.STRING))
    out["extra_keys"] = _build(spec, kvs=kvs)
    # feed_forward_length as an array of one value per layer (pruned models), as U32 or I32
    for et, tag in ((gb.U32, "u32"), (gb.I32, "i32")):
        kvs = copy.deepcopy(spec.kvs)
        kvs[_kv_index(kvs, "llama.feed_forward_length")] = gb.KV(
            "llama.feed_forward_length", gb.ARRAY, [tm.MINI.n_ff] * tm.MINI.n_layer, elem_type=et)
        out[f"ffn_length_{tag}_array"] = _build(spec, kvs=kvs)
    return out


def malformed_cases() -> dict[str, bytes]:
    spec = base_spec()
    built = gb.build_gguf(spec.kvs, spec.tensors)
    base = built.data
    marks = built.marks
    cases: dict[str, bytes] = {}

    # --- header -------------------------------------------------------------
    cases["bad_magic"] = b"GGUX" + base[4:]
    cases["bad_magic_lowercase"] = b"gguf" + base[4:]
    for v in (0, 1, 4, 0xFFFFFFFF):
        cases[f"version_{v}"] = _build(spec, version=v)
    cases["tensor_count_2^63"] = _build(spec, tensor_count=2**63)
    cases["tensor_count_u64max"] = _build(spec, tensor_count=U64_MAX)
    cases["tensor_count_plus_1"] = _build(spec, tensor_count=len(spec.tensors) + 1)
    cases["kv_count_2^63"] = _build(spec, kv_count=2**63)
    cases["kv_count_plus_1"] = _build(spec, kv_count=len(spec.kvs) + 1)

    # --- truncation -----------------------------------------------------------
    kv_tokens = marks[f"kv{_kv_index(spec.kvs, 'tokenizer.ggml.tokens')}:tokenizer.ggml.tokens"]
    ti_first = marks["tensor_infos"]
    ti_second = marks[f"ti1:{spec.tensors[1].name}"]
    cut_points = {
        "empty": 0,
        "in_magic": 2,
        "after_magic": 4,
        "in_version": 6,
        "in_tensor_count": 12,
        "in_kv_count": 20,
        "after_header": marks["header_end"],
        "in_first_key_len": marks["header_end"] + 3,
        "in_first_key": marks["header_end"] + 10,
        "in_first_value": marks["kv1:general.name"] - 2,
        "in_tokens_array_header": kv_tokens + 8 + len("tokenizer.ggml.tokens") + 4 + 6,
        "in_tokens_array_items": kv_tokens + 600,
        "in_last_kv_value": ti_first - 40,
        "at_tensor_infos": ti_first,
        "in_tensor_name": ti_first + 12,
        "in_tensor_dims": ti_first + 8 + len(spec.tensors[0].name) + 4 + 5,
        "in_tensor_offset": ti_second - 3,
        "at_tensor_infos_end": marks["tensor_infos_end"],
        "at_data_start": marks["data"],
        "in_data_first_tensor": marks["data"] + 100,
        "in_data_middle": (marks["data"] + marks["end"]) // 2,
        "one_byte_short": marks["data_end"] - 1,
    }
    for name, cut in cut_points.items():
        assert 0 <= cut < len(base), name
        cases[f"truncated_{name}"] = base[:cut]

    # --- metadata values ----------------------------------------------------
    def with_kv_change(key: str, **changes) -> bytes:
        kvs = copy.deepcopy(spec.kvs)
        kv = kvs[_kv_index(kvs, key)]
        for k, v in changes.items():
            setattr(kv, k, v)
        return _build(spec, kvs=kvs)

    cases["string_len_2^63"] = with_kv_change(
        "general.name", raw_value=struct.pack("<Q", 2**63) + b"mini")
    cases["string_len_past_eof"] = with_kv_change(
        "general.name", raw_value=struct.pack("<Q", len(base)) + b"mini")
    cases["string_len_u64max"] = with_kv_change(
        "tokenizer.ggml.pre", raw_value=struct.pack("<Q", U64_MAX) + b"smollm")
    # key length itself absurd: patch the first key's length prefix
    p = marks["header_end"]
    cases["key_len_2^62"] = base[:p] + struct.pack("<Q", 2**62) + base[p + 8:]
    # tensor name length absurd
    p = marks["tensor_infos"]
    cases["tensor_name_len_2^62"] = base[:p] + struct.pack("<Q", 2**62) + base[p + 8:]

    tokens = [kv for kv in spec.kvs if kv.key == "tokenizer.ggml.tokens"][0].value
    cases["array_count_2^62"] = with_kv_change("tokenizer.ggml.tokens", count_override=2**62)
    cases["array_count_u64max"] = with_kv_change("tokenizer.ggml.merges", count_override=U64_MAX)
    cases["array_count_past_eof"] = with_kv_change(
        "tokenizer.ggml.token_type", count_override=len(tokens) + 10**6)
    cases["u8_array_count_2^62"] = _build(spec, kvs=copy.deepcopy(spec.kvs) + [
        gb.KV("test.bytes", gb.ARRAY, [1, 2, 3], elem_type=gb.U8, count_override=2**62)])
    cases["tokens_as_u32_array"] = with_kv_change(
        "tokenizer.ggml.tokens", elem_type=gb.U32, value=list(range(len(tokens))))
    cases["token_type_as_string_array"] = with_kv_change(
        "tokenizer.ggml.token_type", elem_type=gb.STRING, value=["1"] * len(tokens))
    cases["block_count_as_string"] = with_kv_change("llama.block_count", vtype=gb.STRING, value="1")
    cases["embedding_length_as_f32"] = with_kv_change("llama.embedding_length", vtype=gb.F32,
                                                      value=64.0)
    cases["architecture_as_u32"] = with_kv_change("general.architecture", vtype=gb.U32, value=7)
    cases["value_type_99"] = _build(spec, kvs=copy.deepcopy(spec.kvs) + [
        gb.KV("test.bogus", 99, 0, raw_value=struct.pack("<I", 0))])
    cases["value_type_13"] = _build(spec, kvs=copy.deepcopy(spec.kvs) + [
        gb.KV("test.bogus", 13, 0, raw_value=struct.pack("<I", 0))])
    cases["array_elem_type_99"] = _build(spec, kvs=copy.deepcopy(spec.kvs) + [
        gb.KV("test.bogus", gb.ARRAY, [], raw_value=struct.pack("<IQ", 99, 4) + b"\0" * 16)])
    cases["alignment_0"] = _build(spec, kvs=copy.deepcopy(spec.kvs) + [
        gb.KV("general.alignment", gb.U32, 0)])
    cases["alignment_3"] = _build(spec, kvs=copy.deepcopy(spec.kvs) + [
        gb.KV("general.alignment", gb.U32, 3)])
    # per-layer feed_forward_length: one value per layer, each in range (that the
    # tensors agree with it is the loader's check: test_malformed_gguf.py)
    n_layer, n_ff = tm.MINI.n_layer, tm.MINI.n_ff
    for tag, values, et in (("too_long", [n_ff] * (n_layer + 1), gb.U32),
                            ("empty", [], gb.U32),
                            ("zero", [0] * n_layer, gb.U32),
                            ("negative", [-n_ff] * n_layer, gb.I32),
                            ("huge", [2**31 - 1] * n_layer, gb.I32),
                            ("floats", [float(n_ff)] * n_layer, gb.F32),
                            ("strings", [str(n_ff)] * n_layer, gb.STRING)):
        cases[f"ffn_length_array_{tag}"] = with_kv_change(
            "llama.feed_forward_length", vtype=gb.ARRAY, value=values, elem_type=et)
    kvs = copy.deepcopy(spec.kvs)
    kvs.append(copy.deepcopy(kvs[_kv_index(kvs, "llama.block_count")]))
    cases["duplicate_key"] = _build(spec, kvs=kvs)
    kvs = copy.deepcopy(spec.kvs)
    kvs.append(gb.KV("general.name", gb.STRING, "another name"))
    cases["duplicate_key_other_value"] = _build(spec, kvs=kvs)

    # --- tensor infos ---------------------------------------------------------
    def with_tensor_change(name: str, **changes) -> bytes:
        ts = copy.deepcopy(spec.tensors)
        t = ts[_tensor_index(ts, name)]
        for k, v in changes.items():
            setattr(t, k, v)
        return _build(spec, tensors=ts)

    emb = "token_embd.weight"
    n_embd = tm.MINI.n_embd
    n_vocab = len(tokens)
    cases["n_dims_0"] = with_tensor_change(emb, n_dims_override=0, dims=[])
    cases["n_dims_5"] = with_tensor_change(emb, dims=[n_embd, n_vocab, 1, 1, 1])
    cases["n_dims_2^31"] = with_tensor_change(emb, n_dims_override=2**31)
    cases["dim_zero"] = with_tensor_change(emb, dims=[n_embd, 0])
    cases["dims_product_overflow"] = with_tensor_change(emb, dims=[2**32, 2**32, 2**8])
    cases["dim_u64max"] = with_tensor_change(emb, dims=[n_embd, U64_MAX])
    cases["tensor_type_99"] = with_tensor_change(emb, type_id=99)
    cases["tensor_type_4_removed"] = with_tensor_change(emb, type_id=4)
    cases["tensor_type_2^31"] = with_tensor_change(emb, type_id=2**31)
    # Q8_0 rows must be a multiple of 32 elements
    cases["row_not_multiple_of_block"] = with_tensor_change(emb, type_id=gb.TYPE_ID["Q8_0"],
                                                            dims=[48, n_vocab])
    last = spec.tensors[-1].name
    cases["offset_past_eof"] = with_tensor_change(last, offset=2**40)
    cases["offset_overflows_with_size"] = with_tensor_change(last, offset=2**64 - 32)
    data_len = marks["end"] - marks["data"]  # includes the final padding
    last_size = len(spec.tensors[-1].data)
    over = (data_len - last_size + 32 + 31) // 32 * 32  # aligned; ends >= 32 bytes past EOF
    cases["data_overlaps_end"] = with_tensor_change(last, offset=over)
    cases["offset_unaligned"] = with_tensor_change(spec.tensors[1].name, offset=4)
    ts = copy.deepcopy(spec.tensors)
    dup = copy.deepcopy(ts[_tensor_index(ts, "blk.0.attn_norm.weight")])
    ts.append(dup)
    cases["duplicate_tensor_name"] = _build(spec, tensors=ts)
    return cases


if __name__ == "__main__":
    import sys
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "malformed-gguf")
    out.mkdir(parents=True, exist_ok=True)
    for group, cases in (("valid", valid_variants()), ("bad", malformed_cases())):
        for name, data in cases.items():
            (out / f"{group}_{name}.gguf").write_bytes(data)
            print(f"{group}_{name}.gguf {len(data)}")
