#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/ (committed).

    .venv/bin/python fuzz/make_corpus.py [--kv-fuzzer build-fuzz/fuzz/fuzz_kv_snapshot]

Seeds are small valid inputs the fuzzers mutate from: libFuzzer runs faster and reaches
deeper on a few KB than on a real model. fuzz_gguf: tiny models of every architecture the
engine loads (the tests' generator with shrunk dimensions), a byte-level BPE and a SentencePiece
vocabulary, and a file holding every metadata value type and tensor type. fuzz_tokenizer: byte 0 picks the
tokenizer, byte 1 the flags (fuzz_tokenizer.cpp), then UTF-8 edge cases. fuzz_chat_template:
each family's template as text. fuzz_jinja: the real chat templates and a few language pieces.
fuzz_kv_snapshot: written by the fuzzer binary itself from a
real KV cache (make_kv_snapshot), so only with --kv-fuzzer. fuzz_image: small PNGs of every
colour type the decoder meets (grey, grey + alpha, RGB, RGBA) and a BMP. fuzz_mmproj: tiny
random-weight mmproj files of both projectors (tests/py/vision_models.py), F32 and Q8_0.

Files found by fuzzing (crash-*, regressions) live next to the seeds and are kept: this
script only overwrites the files it writes.
"""
from __future__ import annotations

import argparse
import os
import struct
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "py"))

import gguf_bytes as gb  # noqa: E402
import tiny_models as tm  # noqa: E402

CORPUS = ROOT / "fuzz" / "corpus"
# Smallest dimensions the loader accepts with 32-element quant blocks on every row.
SEED_DIMS = tm.Dims(n_embd=32, n_ff=64, n_layer=1, n_head=2, n_head_kv=1, head_dim=16, n_ctx=32)


def write(target: str, name: str, data: bytes) -> None:
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def model_seed(cfg: tm.ModelConfig, extra: list[gb.KV] = ()) -> bytes:
    spec = tm.build_spec(cfg)
    return gb.build_gguf(spec.kvs + list(extra), spec.tensors).data


def gguf_seeds() -> None:
    t = "fuzz_gguf"
    # llama with the optional readers' keys: sampling defaults, a static activation scale,
    # linear rope scaling.
    write(t, "llama_q4_0.gguf", model_seed(
        tm.ModelConfig(name="seed-llama", wtype="Q4_0", dims=SEED_DIMS),
        [gb.KV("general.sampling.temp", gb.F32, 0.7), gb.KV("general.sampling.top_k", gb.I32, 40),
         gb.KV("general.sampling.top_p", gb.F32, 0.9), gb.KV("pocketllm.act_scale.blk.0.attn_q.weight", gb.F32, 0.05),
         gb.KV("llama.rope.scaling.type", gb.STRING, "linear"), gb.KV("llama.rope.scaling.factor", gb.F32, 2.0)]))
    write(t, "qwen2_q4_0.gguf", model_seed(tm.ModelConfig(
        name="seed-qwen2", arch="qwen2", wtype="Q4_0", tied=False, rope_base=1e6, rms_eps=1e-6, bias=True,
        specials_first=False, pre="qwen2", dims=SEED_DIMS)))
    write(t, "gemma3_q4_0.gguf", model_seed(tm.ModelConfig(
        name="seed-gemma3", arch="gemma3", wtype="Q4_0", rope_base=1e6, rms_eps=1e-6, sliding_window=8,
        swa_pattern=2, dims=tm.Dims(n_embd=32, n_ff=64, n_layer=2, n_head=2, n_head_kv=1, head_dim=32, n_ctx=32))))
    write(t, "deci_ffnvar.gguf", model_seed(tm.ModelConfig(
        name="seed-deci", arch="deci", wtype="Q4_0",
        dims=tm.Dims(n_embd=32, n_ff=96, n_layer=2, n_head=2, n_head_kv=1, head_dim=16, n_ctx=32,
                     n_ff_layers=(64, 96)))))
    # The llama block's variants and gemma2, each with the keys and tensors it adds.
    four = tm.Dims(n_embd=32, n_ff=64, n_layer=4, n_head=2, n_head_kv=1, head_dim=16, n_ctx=32)
    variants = {
        "qwen3": dict(tied=False, specials_first=False, pre="qwen2",
                      dims=tm.Dims(n_embd=32, n_ff=64, n_layer=2, n_head=2, n_head_kv=1, head_dim=32, n_ctx=32)),
        "smollm3": dict(dims=four),
        "granite": dict(dims=four, extra_kvs=tm.GRANITE_KVS),
        "minicpm": dict(dims=four),
        "phi3": dict(tied=False, dims=four, n_rot=12, extra_kvs=(
            ("rope.scaling.attn_factor", gb.F32, 1.19), ("rope.scaling.original_context_length", gb.U32, 256))),
        "gemma2": dict(sliding_window=8, dims=tm.Dims(n_embd=32, n_ff=64, n_layer=2, n_head=2, n_head_kv=1,
                                                      head_dim=32, n_ctx=32)),
    }
    for arch, kw in variants.items():
        write(t, f"{arch}_q4_0.gguf", model_seed(tm.ModelConfig(name=f"seed-{arch}", arch=arch, wtype="Q4_0", **kw)))
    # gemma4: per-layer head sizes (32 sliding, 64 full), per-layer inputs, two KV-sharing layers,
    # the gemma4 tokenizer.
    import tiny_gemma4 as tg4
    g4 = tg4.build_spec(tg4.Gemma4Config("seed-gemma4", wtype="Q8_0", n_embd=32, n_ff=64, n_head=2, n_head_kv=1,
                                         head_swa=32, head_full=64, rot_full=16, pattern=(1, 0, 1, 0), n_shared=2,
                                         window=8, n_pl=32, n_ctx=32))
    write(t, "gemma4_q8_0.gguf", gb.build_gguf(g4.kvs, g4.tensors).data)
    write(t, "spm_vocab.gguf", gb.build_gguf(spm_vocab_kvs(), []).data)
    # The tests' byte-level BPE vocabulary alone (a vocab-only load): mutations reach the
    # tokenizer's set-up without the weight bytes in the way.
    bpe = tm.build_spec(tm.ModelConfig(name="seed-bpe-vocab", pre="llama-bpe", dims=SEED_DIMS))
    write(t, "bpe_vocab.gguf", gb.build_gguf([kv for kv in bpe.kvs if kv.key.startswith(("tokenizer.", "general."))],
                                             []).data)
    write(t, "all_types.gguf", all_types_file(3))
    write(t, "all_types_v2_align64.gguf", all_types_file(2, alignment=64))


def spm_vocab_kvs() -> list[gb.KV]:
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + \
        ["\u2581", "\u2581h", "he", "llo", "\u2581hello", "\u00e9", "<|user|>"]
    types = [2, 3, 3] + [6] * 256 + [1] * 6 + [4]
    scores = [0.0] * 259 + [-1.0, -2.0, -3.0, -4.0, -5.0, -6.0, 0.0]
    return [
        gb.KV("general.architecture", gb.STRING, "llama"),
        gb.KV("general.name", gb.STRING, "Phi-3 seed vocabulary"),  # the phi-3 rstrip quirk
        gb.KV("tokenizer.ggml.model", gb.STRING, "llama"),
        gb.KV("tokenizer.ggml.tokens", gb.ARRAY, tokens, elem_type=gb.STRING),
        gb.KV("tokenizer.ggml.token_type", gb.ARRAY, types, elem_type=gb.I32),
        gb.KV("tokenizer.ggml.scores", gb.ARRAY, scores, elem_type=gb.F32),
        gb.KV("tokenizer.ggml.bos_token_id", gb.U32, 1),
        gb.KV("tokenizer.ggml.eos_token_id", gb.U32, 2),
        gb.KV("tokenizer.ggml.unknown_token_id", gb.U32, 0),
        gb.KV("tokenizer.ggml.add_bos_token", gb.BOOL, True),
        gb.KV("tokenizer.ggml.add_eos_token", gb.BOOL, False),
        gb.KV("tokenizer.ggml.add_space_prefix", gb.BOOL, True),
        gb.KV("tokenizer.chat_template", gb.STRING, "{{'<|user|>\\n' + message['content'] + '<|end|>'}}"),
    ]


def all_types_file(version: int, alignment: int | None = None) -> bytes:
    """Every metadata value type (scalars and arrays) and one small tensor of every type."""
    kvs = [gb.KV("general.architecture", gb.STRING, "none")]
    if alignment:
        kvs.append(gb.KV("general.alignment", gb.U32, alignment))
    scalars = {gb.U8: 200, gb.I8: -100, gb.U16: 60000, gb.I16: -30000, gb.U32: 4000000000, gb.I32: -2000000000,
               gb.F32: 1.5, gb.BOOL: True, gb.STRING: "caf\u00e9", gb.U64: 2**63, gb.I64: -2**62, gb.F64: -0.25}
    for vt, v in scalars.items():
        kvs.append(gb.KV(f"t.scalar.{vt}", vt, v))
        kvs.append(gb.KV(f"t.array.{vt}", gb.ARRAY, [v, v], elem_type=vt))
    kvs.append(gb.KV("t.array.empty", gb.ARRAY, [], elem_type=gb.U8))
    tensors = []
    for name, (_, blk, _) in gb.GGML_TYPES.items():
        dims = [blk if blk > 1 else 8, 1]
        tensors.append(gb.Tensor(f"t.{name}", name, dims, bytes(gb.tensor_nbytes(name, dims))))
    tensors.append(gb.Tensor("t.4d", "F32", [2, 1, 2, 1], bytes(16)))
    return gb.build_gguf(kvs, tensors, version=version, alignment=alignment).data


def tokenizer_seeds() -> None:
    texts = {
        "ascii": b"Hello world, the quick brown fox; 123456 and 7.",
        "specials": b"<|im_start|>user\nhi<|im_end|>\n<tool_call>{}<|eot_id|>",
        "whitespace": b"  \t\n\n   \r\n\xe3\x80\x80 a \xc2\xa0b\n",
        "contractions": b"WE'RE here, it's they'll I'd",
        "accents": "caf\u00e9 na\u00efve \u00c5ngstr\u00f6m \u1e9e".encode(),
        "cjk_emoji": "\u4f60\u597d\u4e16\u754c \ud55c\uad6d\uc5b4 \u3053\u3093\u306b\u3061\u306f \U0001f600\U0001f469\u200d\U0001f4bb".encode(),
        "combining": "e\u0301 \u0928\u092e\u0938\u094d\u0924\u0947 \u0645\u0631\u062d\u0628\u0627".encode(),
        "spm_marker": "\u2581hello \u2581\u2581x".encode(),
        "invalid_utf8": b"ok \xff\xfe \xc3 \xe2\x82 \xf0\x9f\x98 \xed\xa0\x80 \xc0\xaf end",
        "truncated_tail": b"abc \xe2\x96",
        "nul_and_controls": b"a\x00b\x01\x7f\x1b[0m",
        "long_digits": b"3.14159265358979323846264338327950288419716939937510",
    }
    n_vocabs = 15  # the in-code ones (fuzz_vocabs.h): 14 byte-level BPE + 1 SentencePiece
    for i, (name, text) in enumerate(texts.items()):
        for flags in (0, 3):
            write("fuzz_tokenizer", f"{name}_{flags}", bytes([i % n_vocabs, flags]) + text)
    write("fuzz_tokenizer", "spm_plain", bytes([14, 0]) + b"hello hello  world \xc3\xa9")
    # Bytes 15.. pick the shared llama.cpp vocabularies (in file-name order) when they are
    # present, and wrap around to the in-code ones when not.
    for k in range(5):
        for name in ("ascii", "cjk_emoji", "whitespace", "specials"):
            write("fuzz_tokenizer", f"shared{k}_{name}", bytes([n_vocabs + k, 0]) + texts[name])


CHAT_TEMPLATES = {
    "chatml": tm.CHATML_TEMPLATE,
    "chatml_default_system": (
        "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
        "{{ '<|im_start|>system\nYou are a helpful AI assistant<|im_end|>\n' }}{% endif %}"
        "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"),
    "llama3": (
        "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
        "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
        "'<|eot_id|>' %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
        "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"),
    "llama3_default_system": "<|start_header_id|>system<|end_header_id|>\\n\\nCutting Knowledge Date: 2023<|eot_id|>",
    "llama2": "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{{ ' ' + content.strip() + ' ' + eos_token }}",
    "deepseek_r1": (
        "{{bos_token}}{%- for message in messages %}{{'<\uff5cUser\uff5c>' + message['content']}}"
        "{{'<\uff5cAssistant\uff5c>' + content + '<\uff5cend\u2581of\u2581sentence\uff5c>'}}{%- endfor -%}"
        "{% if add_generation_prompt %}{{'<\uff5cAssistant\uff5c><think>\\n'}}{% endif %}"),
    "gemma": ("{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + role + '\n' + "
              "message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}"),
    "zephyr": "{{ '<|system|>\\nBe nice.</s>' }}{{ '<|user|>\n' + message['content'] + eos_token }}",
    "phi3": "{{'<|user|>' + '\n' + message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}}",
    "unknown": "{{ messages | tojson }}",
}


def chat_seeds() -> None:
    for name, tmpl in CHAT_TEMPLATES.items():
        write("fuzz_chat_template", name, tmpl.encode())
    # With messages: the template, then NUL-separated role / content pairs.
    msgs = [b"system", b"Sys.", b"user", b"  hi \xc3\xa9 ", b"assistant", b"<think>a</think>b", b"tool", b"x"]
    write("fuzz_chat_template", "chatml_with_messages", b"\0".join([CHAT_TEMPLATES["chatml"].encode()] + msgs))
    write("fuzz_chat_template", "gemma_with_messages", b"\0".join([CHAT_TEMPLATES["gemma"].encode()] + msgs[:6]))


# fuzz_jinja: the real chat templates of shared/testdata/templates (when the checkout has them
# beside it) and a few language pieces they do not use.
JINJA_SNIPPETS = {
    "raw_and_comments": "{# c -#}\n{%- raw %}{{ x }}{% endraw %}{{ 'a' ~ 1 }}",
    "macro_call_block": "{% macro m(a, b=2) %}{{ caller(a) }}{% endmacro %}{% call(x) m(1) %}{{ x }}{% endcall %}",
    "filters": "{{ [3, 1]|sort|map('string')|join(',') }}{{ {'b': 1}|dictsort|tojson(indent=2) }}{{ '%s'|format(1) }}",
    "loops": "{% for k, v in {'a': 1}.items() if v %}{{ loop.index }}{% break %}{% else %}e{% endfor %}",
}


def jinja_seeds() -> None:
    for name, tmpl in JINJA_SNIPPETS.items():
        write("fuzz_jinja", name, tmpl.encode())
    templates = ROOT.parent / "shared" / "testdata" / "templates"
    for path in sorted(templates.glob("*.jinja")) if templates.is_dir() else []:
        write("fuzz_jinja", path.stem, path.read_bytes())


def kv_seeds(fuzzer: Path) -> None:
    d = CORPUS / "fuzz_kv_snapshot"
    d.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(fuzzer)], env={**os.environ, "PLLM_FUZZ_WRITE_SEEDS": str(d)}, check=True)


def image_seeds() -> None:
    import numpy as np
    from vision_images import pattern, png_bytes
    for name, (w, h, c) in {"grey": (9, 7, 1), "grey_alpha": (5, 11, 2), "rgb": (13, 6, 3), "rgba": (8, 8, 4)}.items():
        write("fuzz_image", f"{name}.png", png_bytes(pattern(w, h, c, seed=w * h)))
    # 24-bit BMP, 3 x 2, bottom-up rows padded to 4 bytes.
    w, h = 3, 2
    rows = b"".join(np.arange(w * 3, dtype=np.uint8).tobytes() + b"\0" * ((4 - w * 3 % 4) % 4) for _ in range(h))
    header = b"BM" + struct.pack("<IHHI", 54 + len(rows), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, w, h, 1, 24, 0, len(rows), 2835, 2835, 0, 0)
    write("fuzz_image", "tiny.bmp", header + info + rows)


def mmproj_seeds() -> None:
    import tempfile
    from vision_models import VisionSpec, write_mmproj
    tiny = dict(image_size=32, patch_size=8, n_embd=32, n_ff=64, n_head=2, n_layer=1, proj_out=32)
    with tempfile.TemporaryDirectory() as d:
        for projector, extra in (("idefics3", dict(scale_factor=2, longest_edge=64)), ("gemma3", dict(scale_factor=2))):
            for wtype in ("f32", "q8_0"):
                path = write_mmproj(Path(d) / "m.gguf", VisionSpec(projector=projector, wtype=wtype, **tiny, **extra))
                write("fuzz_mmproj", f"{projector}_{wtype}.gguf", Path(path).read_bytes())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kv-fuzzer", type=Path, help="the built fuzz_kv_snapshot (writes its seeds)")
    a = ap.parse_args()
    gguf_seeds()
    tokenizer_seeds()
    chat_seeds()
    jinja_seeds()
    image_seeds()
    mmproj_seeds()
    if a.kv_fuzzer:
        kv_seeds(a.kv_fuzzer)


if __name__ == "__main__":
    main()
