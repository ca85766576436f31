#!/usr/bin/env python3
"""Vision encoder speed, ours against llama.cpp's clip, on random-weight mmproj files of real
encoders' shapes (tests/py/vision_models.py), one image each.

    bench/setup_llamacpp.sh                      # builds pllm-clip-oracle
    bench/vision_compare.py --probe build/tests/cpp/vision_probe -t 2 --rounds 3 [--layers 4]

Each round runs ours then llama.cpp (the order flips on odd rounds), separate processes, the same
thread count; both print the time of their encodes alone (load, decode and preprocessing left
out): the first encode of each image, and with --repeat N the median of N more encodes of each
(an app that keeps the encoder loaded). The table: per image (a 640 x 480 photo is a tile and an
overview for idefics3, two encodes), median ms over the rounds, ours / llama.cpp, and the NMSE
between the two.
--layers shrinks the encoders' depth (time scales with it) to keep the files small.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "py"))

from test_vision import nmse, read_result  # noqa: E402
from vision_images import write_png  # noqa: E402
from vision_models import VisionSpec, write_mmproj  # noqa: E402

SHAPES = {
    # SmolVLM-256M's SigLIP: 512 px tiles of 16 px patches, 768 wide, pixel shuffle 4.
    "smolvlm": dict(projector="idefics3", image_size=512, patch_size=16, n_embd=768, n_ff=3072, n_head=12,
                    n_layer=12, scale_factor=4, longest_edge=512, proj_out=576),
    # ViT-Tiny's shape (~5.5 M encoder parameters + the projector: ~12 M in all): 224 px, 196
    # patches of 16 px, 192 wide, 3 heads, 12 layers; pixel shuffle 2 into a 576-wide text model.
    "vittiny": dict(projector="idefics3", image_size=224, patch_size=16, n_embd=192, n_ff=768, n_head=3,
                    n_layer=12, scale_factor=2, longest_edge=224, proj_out=576),
    # Gemma 3's SigLIP: 896 px, 14 px patches (4096 of them), 1152 wide, pooled 4 x 4.
    "gemma3": dict(projector="gemma3", image_size=896, patch_size=14, n_embd=1152, n_ff=4304, n_head=16,
                   n_layer=27, scale_factor=4, proj_out=2560),
}


def timed(cmd: list, env: dict) -> dict:
    """The encode_ms / encode_warm_ms lines a run prints."""
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"{cmd[0]} failed: {r.stderr[-1000:]}")
    out = {k: float(v) for k, v in (line.split()[:2] for line in r.stdout.splitlines() if line.startswith("encode_"))}
    if "encode_ms" not in out:
        sys.exit(f"{cmd[0]}: no encode_ms line")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probe", type=Path, default=ROOT / "build" / "tests" / "cpp" / "vision_probe")
    ap.add_argument("--oracle", type=Path, default=ROOT / "bench" / ".cache" / "bin" / "pllm-clip-oracle")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--layers", type=int, default=0, help="encoder depth (0: the real one)")
    ap.add_argument("--wtype", default="f16", choices=["f32", "f16", "q8_0", "q4_0"])
    ap.add_argument("--shapes", default="vittiny,smolvlm,gemma3")
    ap.add_argument("--act", default="int16", choices=["int16", "exact", "int8"],
                    help="our activations (int16: the default; llama.cpp's Q8_0 products round them to int8: "
                         "int8 is its like)")
    ap.add_argument("--repeat", type=int, default=10, help="encodes of each image after the first (0: none)")
    a = ap.parse_args()
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        img = write_png(d / "img.png", 640, 480, 3)
        print("| encoder | weights | ours | layers | ours first ms | llama.cpp first ms | ratio | ours warm ms "
              "| llama.cpp warm ms | ratio | NMSE |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for name in a.shapes.split(","):
            kw = dict(SHAPES[name])
            if a.layers:
                kw["n_layer"] = a.layers
            model = write_mmproj(d / f"{name}.gguf", VisionSpec(wtype=a.wtype, **kw))
            t = {"ours": [], "ref": []}
            for r in range(a.rounds):
                runs = [("ours", [a.probe, "encode", model, img, d / "o.bin", a.threads, a.act, a.repeat]),
                        ("ref", [a.oracle, model, img, d / "r.bin", a.threads, a.repeat])]
                for who, cmd in (runs if r % 2 == 0 else runs[::-1]):
                    t[who].append(timed(cmd, env))
            ours, ref = read_result(d / "o.bin"), read_result(d / "r.bin")
            e = max(nmse(x[1], y[1]) for x, y in zip(ours, ref))
            n_img = len(ours)

            def med(who: str, key: str) -> float:
                v = [x[key] for x in t[who] if key in x]
                return statistics.median(v) / (n_img if key == "encode_ms" else 1) if v else float("nan")
            fo, fr, wo, wr = med("ours", "encode_ms"), med("ref", "encode_ms"), med("ours", "encode_warm_ms"), med("ref", "encode_warm_ms")
            print(f"| {name} | {a.wtype} | {a.act} | {kw['n_layer']} | {fo:.1f} | {fr:.1f} | {fo / fr:.2f} | {wo:.1f} | {wr:.1f} "
                  f"| {wo / wr:.2f} | {e:.1e} |", flush=True)


if __name__ == "__main__":
    main()
