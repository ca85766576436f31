#!/usr/bin/env python3
"""Llama 3's tokenizer as a GGUF vocabulary (tokenizer.* keys only, no tensors), the way
llama.cpp's converter writes it: model "gpt2", pre-tokenizer "llama-bpe", tokens as byte-level
BPE strings, merges reconstructed from the ranks, the 256 special tokens after the 128,000
ranked ones.

The source is `llama3/tokenizer.model` of the PyPI wheel llama-models (a tiktoken rank file:
base64 token, rank). It is downloaded (never installed) into bench/.cache/ the first time.

    bench/llama3_vocab.py                 # -> bench/.cache/llama3-vocab.gguf

Merges: tiktoken has none, only ranks. Every split of a token of rank r into two tokens is a
merge of rank r (pairs of one token ordered by their parts' ranks): the list Hugging Face's
converter writes into Llama 3's tokenizer.json, which llama.cpp's GGUF files carry.
"""
import argparse
import base64
import glob
import os
import subprocess
import sys
import zipfile

BENCH = os.path.dirname(os.path.abspath(__file__))
CACHE = os.path.join(BENCH, ".cache")

SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
            "<|finetune_right_pad_id|>", "<|step_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>",
            "<|eot_id|>", "<|python_tag|>", "<|image|>"]
N_SPECIAL = 256


def fetch_wheel():
    """Path of the llama-models wheel in bench/.cache/, downloading it (pip download, no install) if
    needed; a failed download raises subprocess.CalledProcessError."""
    wheels = sorted(glob.glob(os.path.join(CACHE, "llama_models-*.whl")))
    if not wheels:
        os.makedirs(CACHE, exist_ok=True)
        subprocess.check_call([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
                               "llama-models", "-d", CACHE])
        wheels = sorted(glob.glob(os.path.join(CACHE, "llama_models-*.whl")))
    return wheels[0]


def fetch_rank_file():
    """Path of llama3/tokenizer.model, taken from the llama-models wheel if needed."""
    path = os.path.join(CACHE, "llama3-tokenizer.model")
    if os.path.exists(path):
        return path
    with zipfile.ZipFile(fetch_wheel()) as z:
        with open(path + ".part", "wb") as f:
            f.write(z.read("llama_models/llama3/tokenizer.model"))
    os.replace(path + ".part", path)
    return path


def load_ranks():
    """token bytes -> rank, read from the rank file as llama-models' load_bpe_file does (tiktoken's
    mergeable_ranks)."""
    ranks = {}
    with open(fetch_rank_file(), "rb") as f:
        for line in f:
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    return ranks


def special_tokens():
    """The 256 special tokens in id order (they follow the ranked tokens), as llama-models lists them."""
    return SPECIALS + [f"<|reserved_special_token_{2 + i}|>" for i in range(N_SPECIAL - len(SPECIALS))]


def tiktoken_pattern():
    """The pre-tokenizer regex (Tokenizer.pat_str) of llama-models' llama3/tokenizer.py, read from the
    wheel's source rather than copied here."""
    import ast
    with zipfile.ZipFile(fetch_wheel()) as z:
        tree = ast.parse(z.read("llama_models/llama3/tokenizer.py").decode("utf-8"))
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef) and cls.name == "Tokenizer":
            for node in cls.body:
                if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pat_str" for t in node.targets):
                    return ast.literal_eval(node.value)
    raise ValueError("llama3/tokenizer.py has no Tokenizer.pat_str")


def bytes_to_unicode():
    """GPT-2's byte <-> printable character table (byte-level BPE token spelling)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def merges_of(ranks, by_rank):
    """The merges, in rank order: every split of a token into two tokens."""
    out = []
    for t in by_rank:
        pairs = [(t[:i], t[i:]) for i in range(1, len(t)) if t[:i] in ranks and t[i:] in ranks]
        out += sorted(pairs, key=lambda p: (ranks[p[0]], ranks[p[1]]))
    return out


def build(out):
    import gguf
    ranks = load_ranks()
    by_rank = sorted(ranks, key=ranks.get)
    assert [ranks[t] for t in by_rank] == list(range(len(by_rank))), "ranks are not 0..n-1"
    table = bytes_to_unicode()
    spell = lambda b: "".join(table[x] for x in b)
    tokens = [spell(t) for t in by_rank]
    merges = [f"{spell(a)} {spell(b)}" for a, b in merges_of(ranks, by_rank)]
    specials = special_tokens()
    n_base = len(tokens)
    tokens += specials
    types = [gguf.TokenType.NORMAL] * n_base + [gguf.TokenType.CONTROL] * N_SPECIAL
    w = gguf.GGUFWriter(out, "llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("llama-bpe")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(n_base + specials.index("<|begin_of_text|>"))
    w.add_eos_token_id(n_base + specials.index("<|eot_id|>"))
    w.add_add_bos_token(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {out}: {len(tokens)} tokens, {len(merges)} merges")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(CACHE, "llama3-vocab.gguf"))
    args = ap.parse_args()
    build(args.out)


if __name__ == "__main__":
    main()
