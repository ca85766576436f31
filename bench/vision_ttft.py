#!/usr/bin/env python3
"""Time to first token with an image, ours against llama.cpp's mtmd, on random-weight pairs of
real VLMs' shapes: an mmproj (tests/py/vision_models.py) and a text model of the decoder's
shape with the projector's image tokens in its vocabulary (tests/py/tiny_models.py; a small
byte-level vocabulary instead of the real one, so the output head is smaller than the real
model's).

    bench/setup_llamacpp.sh      # pllm-clip-oracle
    bench/vision_ttft.py -t 2 --rounds 3 --pairs vittiny-smollm2,smolvlm

Each round runs ours (`pocketllm run --json -n 1`: prompt_ms, the image decoded, preprocessed
and laid out, + ttft_ms, the encoder and the prefill to the first token) and llama.cpp
(`pllm-clip-oracle --logits`: mtmd_tokenize + mtmd_helper_eval_chunks to the last logits), the
order flipping every round, separate processes, the same threads. Median ms over the rounds.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "py"))
sys.path.insert(0, str(ROOT / "bench"))

import tiny_models as tm  # noqa: E402
from vision_compare import SHAPES  # noqa: E402
from vision_images import write_png  # noqa: E402
from vision_models import VisionSpec, write_mmproj  # noqa: E402

# SmolLM2-135M's decoder (SmolVLM-256M's text half): 576 wide, 30 layers, 9 heads, 3 KV heads.
SMOLLM2 = tm.Dims(n_embd=576, n_ff=1536, n_layer=30, n_head=9, n_head_kv=3, head_dim=64, n_ctx=2048)
PAIRS = {
    "vittiny-smollm2": ("vittiny", SMOLLM2),
    "smolvlm": ("smolvlm", SMOLLM2),
}
PROMPT = "<|im_start|>user\n<__media__>Describe this picture.<|im_end|>\n<|im_start|>assistant\n"


def run(cmd, env) -> str:
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"{cmd[0]} failed: {r.stderr[-1500:]}")
    return r.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", type=Path, default=ROOT / "build" / "pocketllm")
    ap.add_argument("--oracle", type=Path, default=ROOT / "bench" / ".cache" / "bin" / "pllm-clip-oracle")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pairs", default="vittiny-smollm2")
    ap.add_argument("--wtype", default="q8_0", choices=["f16", "q8_0"], help="both halves' matrices")
    ap.add_argument("--layers", type=int, default=0, help="encoder depth (0: the real one)")
    ap.add_argument("--act", default="int16", choices=["int16", "int8"],
                    help="our encoder's activations: int16 (the default a user gets) or int8 (--image-int8)")
    a = ap.parse_args()
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    text_type = {"f16": "F16", "q8_0": "Q8_0"}[a.wtype]
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        img = write_png(d / "img.png", 640, 480, 3)
        print("| pair | weights | prompt rows | ours ms (prepare + TTFT) | llama.cpp ms | ours / llama.cpp |")
        print("|---|---|---|---|---|---|")
        for name in a.pairs.split(","):
            shape, dims = PAIRS[name]
            kw = dict(SHAPES[shape])
            if a.layers:
                kw["n_layer"] = a.layers
            mm = write_mmproj(d / f"{name}-mmproj.gguf", VisionSpec(wtype=a.wtype, **kw))
            cfg = tm.ModelConfig(name=f"{name}-text", arch="llama", wtype=text_type, dims=dims, vision="idefics3")
            text = tm.write_with_gguf_writer(tm.build_spec(cfg), d / f"{name}-text.gguf")
            ours, ref, rows = [], [], 0
            act = ["--image-int8"] if a.act == "int8" else []
            for r in range(a.rounds):
                cmds = [("ours", [a.bin, "run", "-m", text, "--mmproj", mm, "--image", img, "-p", PROMPT, "--raw",
                                  "-n", "1", "--json", "-t", a.threads, "-c", "2048", *act]),
                        ("ref", [a.oracle, "--logits", text, mm, PROMPT, d / "r.bin", a.threads, img])]
                for who, cmd in (cmds if r % 2 == 0 else cmds[::-1]):
                    out = run(cmd, env)
                    if who == "ours":
                        j = json.loads(out)
                        ours.append(j["prompt_ms"] + j["ttft_ms"])
                        rows = j["prompt_tokens"]
                    else:
                        ref.append(next(float(l.split()[1]) for l in out.splitlines() if l.startswith("ttft_ms ")))
            mo, mr = statistics.median(ours), statistics.median(ref)
            print(f"| {name} ({kw['n_layer']} encoder layers) | {a.wtype}, encoder {a.act} | {rows} | {mo:.0f} | {mr:.0f} "
                  f"| {mo / mr:.2f} |")


if __name__ == "__main__":
    main()
