"""The vision encoder against llama.cpp (P20): mmproj files with random weights
(vision_models.py), images made here (vision_images.py; JPEGs through vision_probe), and two
programs that write the same file format: our tests/cpp/vision_probe and llama.cpp's answer,
pllm-clip-oracle (tests/oracle/clip_oracle.cpp, built by bench/setup_llamacpp.sh).

  - preprocessing: the normalised float images are bit-identical (sizes, tiles, every float);
  - embeddings: NMSE <= 1e-5 against llama.cpp for each projector and weight type, and
    <= 1e-9 against a float64 numpy reference (vision_reference.py; runs without llama.cpp);
  - malformed mmproj files and hostile images: one clear error, exit status 2, no crash.

Environment: VISION_PROBE (default <build dir of POCKETLLM_BIN>/tests/cpp/vision_probe),
PLLM_CLIP_ORACLE (default bench/.cache/bin/pllm-clip-oracle). Missing programs skip the tests
that need them, saying which and how to build it.
"""
from __future__ import annotations

import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

import pllm_cli
from vision_images import pattern, png_bytes, write_png
from vision_models import VisionSpec, write_mmproj

REPO = Path(__file__).resolve().parents[2]
NMSE_MAX = 1e-5
# Against the float64 numpy reference: f32 arithmetic alone, each operation's relative error
# ~6e-8 compounding over a few dozen dependent steps (products, norms, softmax): NMSE of order
# (30 * 6e-8)^2 ~ 3e-12; 1e-9 leaves room for longer sums yet catches any real difference
# (a wrong rounding of the input or an f16 step anywhere shows as 1e-7 or more).
REF_NMSE_MAX = 1e-9
# int16 activations (the default mode), against the same reference: each product's input rounded
# per 32 values to a step of 2^-16 of the block's largest, a relative error of order 1e-5 per
# element, NMSE ~1e-10 per product compounding over the layers (measured 2.6e-9 .. 9.9e-9 on
# these files); 1e-7 is 10x above that and 100x below the llama.cpp bound.
INT16_REF_NMSE_MAX = 1e-7
QUANTIZED = ("q8_0", "q4_0")  # block types: llama.cpp is run on their weights decoded to F32


def probe_path() -> Path:
    env = os.environ.get("VISION_PROBE")
    return Path(env) if env else pllm_cli.binary_path().parent / "tests" / "cpp" / "vision_probe"


def oracle_path() -> Path:
    env = os.environ.get("PLLM_CLIP_ORACLE")
    return Path(env) if env else REPO / "bench" / ".cache" / "bin" / "pllm-clip-oracle"


@pytest.fixture(scope="module")
def probe() -> Path:
    p = probe_path()
    if not (p.is_file() and os.access(p, os.X_OK)):
        pytest.skip(f"vision_probe not found at {p} (build the target vision_probe, or set VISION_PROBE)")
    return p


@pytest.fixture(scope="module")
def oracle() -> Path:
    p = oracle_path()
    if not (p.is_file() and os.access(p, os.X_OK)):
        pytest.skip(f"llama.cpp's clip oracle not found at {p} (run bench/setup_llamacpp.sh, "
                    f"or set PLLM_CLIP_ORACLE)")
    return p


def read_result(path: Path) -> list[tuple[np.ndarray, np.ndarray]]:
    """[(image [h, w, 3], embeddings [n_tok, n_out])] as both programs write them."""
    b = path.read_bytes()
    assert b[:8] == b"PLLMCLIP", "bad magic"
    version, n, n_out = struct.unpack_from("<III", b, 8)
    assert version == 1
    off, out = 20, []
    for _ in range(n):
        w, h = struct.unpack_from("<II", b, off); off += 8
        img = np.frombuffer(b, np.float32, w * h * 3, off).reshape(h, w, 3); off += w * h * 3 * 4
        (n_tok,) = struct.unpack_from("<I", b, off); off += 4
        emb = np.frombuffer(b, np.float32, n_tok * n_out, off).reshape(n_tok, n_out); off += n_tok * n_out * 4
        out.append((img, emb))
    assert off == len(b), "trailing bytes"
    return out


def run(cmd: list, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120, env=env)
    if check and r.returncode != 0:
        raise AssertionError(f"{cmd[0]} failed ({r.returncode}): {r.stderr[-2000:]}")
    return r


def run_oracle(oracle: Path, model: Path, image: Path, out: Path) -> None:
    """One thread, and OpenMP threads that sleep instead of spinning: these encodes take
    milliseconds, and spinning threads on a busy CI machine made them take seconds."""
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS="1")
    run([oracle, model, image, out, 1], env=env)


def nmse(a: np.ndarray, ref: np.ndarray) -> float:
    return float(np.sum((a.astype(np.float64) - ref) ** 2) / max(np.sum(ref.astype(np.float64) ** 2), 1e-30))


# Image size, longest edge and grid vary between the two projectors so odd sizes exercise
# upscaling and downscaling, tiling (idefics3: 1x1 up to 2x2 tiles) and letterboxing (gemma3).
SPECS = {
    "idefics3": dict(image_size=64, patch_size=16, n_embd=64, n_ff=128, n_head=4, scale_factor=2,
                     longest_edge=128, proj_out=96),
    "gemma3": dict(image_size=96, patch_size=16, n_embd=64, n_ff=160, n_head=4, scale_factor=2, proj_out=80),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory, probe):
    d = tmp_path_factory.mktemp("vision")
    models = {}
    for proj, kw in SPECS.items():
        for wt in ("f32", "f16", "q8_0", "q4_0"):
            models[proj, wt] = write_mmproj(d / f"{proj}-{wt}.gguf", VisionSpec(projector=proj, wtype=wt, **kw))
    images = {
        "rgb-77x45": write_png(d / "rgb.png", 77, 45, 3, seed=1),
        "rgba-33x91": write_png(d / "rgba.png", 33, 91, 4, seed=2),
        "grey-50x50": write_png(d / "grey.png", 50, 50, 1, seed=3),
        "greyalpha-131x17": write_png(d / "ga.png", 131, 17, 2, seed=4),
        "big-203x150": write_png(d / "big.png", 203, 150, 3, seed=5),
    }
    src = write_png(d / "jsrc.png", 61, 39, 3, seed=6)
    run([probe, "jpeg", src, d / "photo.jpg", 85])
    images["jpeg-61x39"] = d / "photo.jpg"
    return d, models, images


@pytest.mark.parametrize("proj", list(SPECS))
def test_preprocessing_bit_identical(files, probe, oracle, proj):
    d, models, images = files
    for name, img in images.items():
        ours, ref = d / f"p-{proj}-{name}.ours", d / f"p-{proj}-{name}.ref"
        run([probe, "encode", models[proj, "f32"], img, ours])
        run_oracle(oracle, models[proj, "f32"], img, ref)
        a, b = read_result(ours), read_result(ref)
        assert len(a) == len(b), f"{name}: {len(a)} images, llama.cpp {len(b)}"
        for i, ((ia, _), (ib, _)) in enumerate(zip(a, b)):
            assert ia.shape == ib.shape, f"{name} image {i}: {ia.shape} vs {ib.shape}"
            bad = np.argwhere(ia.view(np.uint32) != ib.view(np.uint32))
            assert bad.size == 0, f"{name} image {i}: {len(bad)} floats differ, first at {bad[0].tolist()}"


@pytest.mark.parametrize("wt", ["f32", "f16", "q8_0", "q4_0"])
@pytest.mark.parametrize("proj", list(SPECS))
def test_embeddings_match_llamacpp(files, probe, oracle, proj, wt):
    """F32 / F16: llama.cpp on the same file. Q8_0 / Q4_0: llama.cpp on the same weights decoded
    to F32 (the file written again with dequantized=True). llama.cpp's own quantised run rounds
    every activation to 8 bits, noise of order 1e-4 NMSE that no other implementation reproduces
    without its exact rounding history; that figure is printed for the record, not asserted."""
    d, models, images = files
    ref_model = models[proj, wt]
    if wt in QUANTIZED:
        ref_model = write_mmproj(d / f"{proj}-{wt}-as-f32.gguf",
                                 VisionSpec(projector=proj, wtype=wt, dequantized=True, **SPECS[proj]))
    for name in ("rgb-77x45", "jpeg-61x39"):
        ours, ref = d / f"e-{proj}-{wt}-{name}.ours", d / f"e-{proj}-{wt}-{name}.ref"
        run([probe, "encode", models[proj, wt], images[name], ours, 2, "exact"])
        run_oracle(oracle, ref_model, images[name], ref)
        a, b = read_result(ours), read_result(ref)
        assert len(a) == len(b)
        for i, ((_, ea), (_, eb)) in enumerate(zip(a, b)):
            assert ea.shape == eb.shape, f"{name} image {i}: {ea.shape} vs {eb.shape}"
            e = nmse(ea, eb)
            print(f"{proj} {wt} {name} image {i}: NMSE {e:.3e}")
            assert e <= NMSE_MAX, f"{proj} {wt} {name} image {i}: NMSE {e:.3e} > {NMSE_MAX}"
        if wt in QUANTIZED:
            q8, ours8 = d / f"e-{proj}-{wt}-{name}.llama", d / f"e-{proj}-{wt}-{name}.int8"
            run_oracle(oracle, models[proj, wt], images[name], q8)
            run([probe, "encode", models[proj, wt], images[name], ours8, 2, "int8"])
            for i, ((_, ea), (_, eb), (_, et)) in enumerate(zip(read_result(ours8), read_result(q8), b)):
                print(f"{proj} {wt} {name} image {i}: llama.cpp {wt} vs F32 NMSE {nmse(eb, et):.3e}, "
                      f"ours int8 vs F32 {nmse(ea, et):.3e}, ours int8 vs llama.cpp {wt} {nmse(ea, eb):.3e}")


@pytest.mark.parametrize("isa", [i for i in pllm_cli.available_isas() if i != "default"])
def test_every_isa_matches_llamacpp(files, probe, oracle, isa):
    """The encoder's products on the kernel table of each ISA level (PLLM_ISA), the scalar twins
    included: an F16 file against llama.cpp on it, a Q8_0 file against llama.cpp on its weights
    decoded to F32 (as test_embeddings_match_llamacpp)."""
    d, models, images = files
    for proj, wt in (("idefics3", "f16"), ("gemma3", "q8_0"), ("idefics3", "q4_0")):
        ref_model = models[proj, wt]
        if wt in QUANTIZED:
            ref_model = write_mmproj(d / f"isa-{proj}-{wt}-as-f32.gguf",
                                     VisionSpec(projector=proj, wtype=wt, dequantized=True, **SPECS[proj]))
        ours, ref = d / f"isa-{isa}-{proj}.ours", d / f"isa-{proj}-{wt}.ref"
        run([probe, "encode", models[proj, wt], images["rgb-77x45"], ours, 2, "exact"], env=pllm_cli.isa_env(isa))
        if not ref.exists():
            run_oracle(oracle, ref_model, images["rgb-77x45"], ref)
        for i, ((_, ea), (_, eb)) in enumerate(zip(read_result(ours), read_result(ref))):
            e = nmse(ea, eb)
            assert e <= NMSE_MAX, f"{isa} {proj} {wt} image {i}: NMSE {e:.3e} > {NMSE_MAX}"


@pytest.mark.parametrize("wt", ["f32", "f16", "q8_0", "q4_0"])
@pytest.mark.parametrize("proj", list(SPECS))
def test_embeddings_match_numpy_reference(files, probe, proj, wt):
    """No llama.cpp needed: our embeddings (exact mode) against vision_reference.py, float64 on
    the file's own weights, fed with the preprocessed images our probe writes."""
    from vision_reference import VisionReference
    d, models, images = files
    ref = VisionReference(models[proj, wt])
    for name in ("rgb-77x45", "greyalpha-131x17"):
        ours = d / f"r-{proj}-{wt}-{name}.ours"
        run([probe, "encode", models[proj, wt], images[name], ours, 2, "exact"])
        for i, (img, emb) in enumerate(read_result(ours)):
            want = ref.encode(img.astype(np.float64))
            assert emb.shape == want.shape, f"{name} image {i}: {emb.shape} vs {want.shape}"
            e = nmse(emb, want)
            print(f"{proj} {wt} {name} image {i}: NMSE vs numpy {e:.3e}")
            assert e <= REF_NMSE_MAX, f"{proj} {wt} {name} image {i}: NMSE {e:.3e} > {REF_NMSE_MAX}"


@pytest.mark.parametrize("wt", ["f16", "q8_0", "q4_0"])
@pytest.mark.parametrize("proj", list(SPECS))
def test_int16_default_matches_numpy_reference(files, probe, proj, wt):
    """The default mode (int16 activations on the repacked panels the loader makes for it)
    against the float64 reference; F16 weights have no integer kernel and run exact: the same
    bits as exact mode."""
    from vision_reference import VisionReference
    d, models, images = files
    ref = VisionReference(models[proj, wt])
    img = images["rgb-77x45"]
    ours, exact = d / f"i16-{proj}-{wt}.ours", d / f"i16-{proj}-{wt}.exact"
    run([probe, "encode", models[proj, wt], img, ours, 2, "int16"])
    if wt not in QUANTIZED:
        run([probe, "encode", models[proj, wt], img, exact, 2, "exact"])
        assert ours.read_bytes() == exact.read_bytes(), f"{proj} {wt}: int16 mode on float weights is not exact mode"
    for i, (x, emb) in enumerate(read_result(ours)):
        e = nmse(emb, ref.encode(x.astype(np.float64)))
        print(f"{proj} {wt} int16 image {i}: NMSE vs numpy {e:.3e}")
        assert e <= INT16_REF_NMSE_MAX, f"{proj} {wt} image {i}: NMSE {e:.3e} > {INT16_REF_NMSE_MAX}"


@pytest.mark.parametrize("act", ["int16", "int8"])
@pytest.mark.parametrize("wt", QUANTIZED)
@pytest.mark.parametrize("proj", list(SPECS))
def test_panels_equal_file_layout(files, probe, proj, wt, act):
    """Loaded for an integer mode, the encoder holds its quantised matrices as 16-row panels
    (model/repack.h, as a text model): int16's embeddings are the file layout's bit for bit (the
    int16 contract: exact integer sums, one order of the scaled ones); int8's panel kernels add
    the blocks' scaled sums in another order, so theirs differ by f32 rounding alone."""
    d, models, images = files
    panels, file = d / f"pan-{proj}-{wt}-{act}.panels", d / f"pan-{proj}-{wt}-{act}.file"
    held = run([probe, "encode", models[proj, wt], images["big-203x150"], panels, 2, act, 0, "panels"]).stdout
    n_layer = VisionSpec(projector=proj).n_layer
    assert f"repacked_tensors {6 * n_layer + (proj == 'idefics3')}" in held, held  # every layer's 6 + the projector's
    held = run([probe, "encode", models[proj, wt], images["big-203x150"], file, 2, act, 0, "file"]).stdout
    assert "repacked_tensors 0" in held, held
    if act == "int16":
        assert panels.read_bytes() == file.read_bytes(), f"{proj} {wt} {act}: panels and file layout differ"
    for i, ((_, ea), (_, eb)) in enumerate(zip(read_result(panels), read_result(file))):
        e = nmse(ea, eb)
        assert e <= 1e-12, f"{proj} {wt} {act} image {i}: panels vs file layout NMSE {e:.3e}"


def test_odd_head_size_matches_numpy_reference(tmp_path, probe):
    """Heads whose size is not a multiple of 16 (SigLIP's 72 in Gemma 3) take the attention
    through matmul products instead of the KV attention kernel: the same reference bound."""
    from vision_reference import VisionReference
    kw = dict(SPECS["gemma3"], n_embd=72, n_head=3)  # heads of 24
    model = write_mmproj(tmp_path / "odd.gguf", VisionSpec(projector="gemma3", wtype="f32", **kw))
    img = write_png(tmp_path / "odd.png", 77, 45, 3, seed=7)
    ours = tmp_path / "odd.ours"
    run([probe, "encode", model, img, ours, 2, "exact"])
    ref = VisionReference(model)
    for i, (x, emb) in enumerate(read_result(ours)):
        e = nmse(emb, ref.encode(x.astype(np.float64)))
        print(f"gemma3 f32 heads of 24, image {i}: NMSE vs numpy {e:.3e}")
        assert e <= REF_NMSE_MAX, f"image {i}: NMSE {e:.3e} > {REF_NMSE_MAX}"


def test_attention_is_not_uniform(files):
    """The random weights must make attention selective, or the test would not see errors in it."""
    d, models, _ = files
    from gguf import GGUFReader
    r = GGUFReader(str(models["idefics3", "f32"]))
    t = {x.name: np.array(x.data) for x in r.tensors}
    E, rng = 64, np.random.default_rng(0)
    x = rng.standard_normal((16, E))
    x = (x - x.mean(1, keepdims=True)) / x.std(1, keepdims=True)
    q = x @ t["v.blk.0.attn_q.weight"].T
    k = x @ t["v.blk.0.attn_k.weight"].T
    s = (q[:, :16] @ k[:, :16].T) / 4.0
    p = np.exp(s - s.max(1, keepdims=True)); p /= p.sum(1, keepdims=True)
    assert p.max(1).mean() > 0.3, "attention is close to uniform"


MALFORMED = [
    ("unsupported projector", dict(kv_override={"clip.projector_type": "llava_next"}), "'llava_next' is not supported"),
    ("missing tensor", dict(drop={"v.blk.1.attn_k.weight"}), "missing tensor 'v.blk.1.attn_k.weight'"),
    ("bad shape", dict(bad_shape={"v.blk.0.ffn_up.weight"}), "v.blk.0.ffn_up.weight"),
    ("missing key", dict(kv_override={"clip.vision.patch_size": None}), "clip.vision.patch_size"),
    ("bad patch", dict(kv_override={"clip.vision.patch_size": 7}), "not a multiple of the patch size"),
    ("missing position embd", dict(drop={"v.position_embd.weight"}), "v.position_embd.weight"),
    ("zero std", dict(std=(0.2, 0.0, 0.2)), "clip.vision.image_std"),
    ("grid not divisible", dict(kv_override={"clip.vision.image_size": 80}), "not a multiple of the projector's merge"),
    ("huge grid", dict(kv_override={"clip.vision.image_size": 4096, "clip.vision.patch_size": 1}),
     "more than the limit of 16384"),
    ("wrong key type", dict(kv_override={"clip.vision.image_mean": "grey"}), "clip.vision.image_mean"),
    ("quick gelu", dict(kv_override={"clip.use_gelu": False}), "quick-GELU"),
]


@pytest.mark.parametrize("what,hooks,message", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_mmproj_is_one_clear_error(files, probe, what, hooks, message):
    d, _, images = files
    path = write_mmproj(d / f"bad-{what.replace(' ', '_')}.gguf", VisionSpec(projector="idefics3", **hooks))
    r = run([probe, "encode", path, images["rgb-77x45"], d / "bad.out"], check=False)
    assert r.returncode == 2, f"{what}: exit {r.returncode}, stderr {r.stderr[-500:]}"
    assert message in r.stderr, f"{what}: {r.stderr!r}"
    assert r.stderr.count("error:") == 1


def test_hostile_images_are_one_clear_error(files, probe):
    d, models, images = files
    good = images["rgb-77x45"].read_bytes()
    jpg = images["jpeg-61x39"].read_bytes()
    bomb = bytearray(png_bytes(pattern(8, 8, 3)))
    struct.pack_into(">II", bomb, 16, 15000, 15000)  # IHDR width, height
    cases = {
        "empty": b"",
        "text": b"hello, not an image\n" * 10,
        "truncated png": good[: len(good) // 2],
        "truncated jpeg": jpg[:200],
        "huge dimensions": bytes(bomb),
    }
    for name, data in cases.items():
        p = d / f"hostile-{name.replace(' ', '_')}.img"
        p.write_bytes(data)
        r = run([probe, "encode", models["gemma3", "f16"], p, d / "h.out"], check=False)
        assert r.returncode == 2, f"{name}: exit {r.returncode}, stderr {r.stderr[-500:]}"
        assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1, f"{name}: {r.stderr!r}"
