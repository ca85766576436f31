"""The Vulkan backend (`--backend vulkan`) on whatever Vulkan device the machine has: Mesa's
lavapipe here (a conformant Vulkan 1.3 device on the CPU, Debian mesa-vulkan-drivers).

Every run parses the CLI's backend line ("N steps on the device, M on the CPU") so a test
of the device path fails if the steps quietly ran on the CPU, and a fallback test fails if
they did not. Logits are held to the numpy reference with the exact-mode bound of
tolerances.py, and to the CPU path's own logits up to f32 summation order (both compute
f32 products of the same decoded weights; the device mirror of the KV cache holds the same
bytes as the CPU cache). Skipped with a message where no Vulkan device exists."""
from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest

import pllm_cli
import tiny_models as tm
import tolerances as tol
from reference import Reference

CONFIGS = tm.model_configs()
REPORT = re.compile(r"backend (\w+): (.*?); (\d+) steps on the device, (\d+) on the CPU"
                    r"(?:, (\d+) fell back)?(?: \(last CPU step: (.*?)\))?(?:; validation layer: (\d+) messages)?$",
                    re.M)
# The device computes the CPU's f32 products in another order: with an f32 KV cache that is a
# few ulp of the logits' scale. With f16 or q8 KV a reordered sum may round a stored key or
# value to the neighbouring f16 value or int8 code (2^-11 or 1/127 of it), so those runs are
# held to the exact-mode bound of tolerances.py against the CPU instead.
VS_CPU_REL = 1e-5


def _probe(binary) -> dict:
    proc = pllm_cli.run_cli(binary, ["info", "--backends", "--json"], env=_device_env(None))
    pllm_cli.check_ok(proc)
    return json.loads(proc.stdout)["vulkan"]


@pytest.fixture(scope="module")
def vk(pllm_bin) -> dict:
    p = _probe(pllm_bin)
    if not p["built"]:
        pytest.skip("this build has no Vulkan backend (no Vulkan headers or glslc at build time)")
    if not p["available"]:
        pytest.skip("no Vulkan device: " + p.get("error", "") + " (lavapipe: Debian mesa-vulkan-drivers)")
    return p


def _report(stderr: bytes) -> dict:
    m = REPORT.search(stderr.decode())
    assert m, "no backend line on stderr:\n" + stderr.decode()
    return {"asked": m[1], "device": m[2], "device_steps": int(m[3]), "cpu_steps": int(m[4]),
            "fallbacks": int(m[5] or 0), "reason": m[6] or "", "validation": None if m[7] is None else int(m[7])}


def _logits(binary, model, seqs, out, n_vocab, *, backend="vulkan", env=None, extra=(), chunk=0):
    spec = "; ".join(" ".join(map(str, s)) for s in seqs)
    mode = pllm_cli.exact_unless_chosen(extra)
    proc = pllm_cli.run_cli(binary, ["logits", "-m", model, "--ids", spec, "--out", out, "-t", "2",
                                     "--backend", backend, *(["--chunk", str(chunk)] if chunk else []),
                                     *mode, *map(str, extra)], env=env if backend == "cpu" else _device_env(env))
    pllm_cli.check_ok(proc)
    raw = np.fromfile(out, dtype="<f4").astype(np.float64)
    assert raw.size == sum(map(len, seqs)) * n_vocab
    got, at = [], 0
    for s in seqs:
        got.append(raw[at * n_vocab:(at + len(s)) * n_vocab].reshape(len(s), n_vocab))
        at += len(s)
    return got, (_report(proc.stderr) if backend != "cpu" else None)


def _env(**kw) -> dict:
    e = dict(os.environ)
    e.update({k: str(v) for k, v in kw.items()})
    return e


def _device_env(env: dict | None) -> dict | None:
    """Under ASan (scripts/test.sh --long) lavapipe's JIT-compiled code leaks one 128-byte block
    that LeakSanitizer cannot attribute to any module, so leak checking is off for runs that
    start a device; every other ASan run (the CPU paths, the fallbacks) still checks ours."""
    if not os.environ.get("POCKETLLM_SANITIZED"):
        return env
    e = dict(env if env is not None else os.environ)
    e["ASAN_OPTIONS"] = ":".join(filter(None, [e.get("ASAN_OPTIONS", ""), "detect_leaks=0"]))
    return e


def _assert_vs_cpu(got, cpu, what, wtype=None, mode=tol.EXACT):
    """wtype None: the f32-KV bound; else the tiny-model bound of that weight type and mode
    (int8: a rounded KV value feeds activations that are rounded to int8 again)."""
    if wtype is not None:
        max_rel, rms_rel = tol.tol_for(wtype, mode)
        for k, (g, c) in enumerate(zip(got, cpu)):
            tol.assert_logits_close(g, c, max_rel, rms_rel, tol.argmax_min_fraction(wtype, mode),
                                    what=f"{what} sequence {k} vs CPU")
        return
    for k, (g, c) in enumerate(zip(got, cpu)):
        rms = np.sqrt(np.mean(c ** 2))
        err = np.max(np.abs(g - c))
        print(f"{what} sequence {k}: max |device - cpu| = {err / rms:.2e} x rms")
        assert err <= VS_CPU_REL * rms, f"{what} sequence {k}: device and CPU differ by {err / rms:.2e} x rms"


def _assert_on_device(rep, what):
    assert rep["device_steps"] > 0 and rep["cpu_steps"] == 0 and rep["fallbacks"] == 0, f"{what}: {rep}"


def test_probe_reports_the_device(pllm_bin, vk):
    d = vk["devices"][0]
    for key in ("name", "type", "api_version", "fp16", "int_dot", "subgroup_size", "shared_memory", "heaps"):
        assert key in d, key
    assert d["subgroup_size"] > 0 and d["shared_memory"] > 0 and d["heaps"]
    text = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["info", "--backends"], env=_device_env(None))).stdout.decode()
    assert d["name"] in text and "subgroup" in text


def test_probe_without_a_loader_says_so_and_exits_0(pllm_bin):
    proc = pllm_cli.run_cli(pllm_bin, ["info", "--backends"], env=_env(PLLM_VK_LOADER="/nonexistent/libvulkan.so.1"))
    pllm_cli.check_ok(proc)
    assert "no device" in proc.stdout.decode() and "no Vulkan loader" in proc.stdout.decode()
    j = json.loads(pllm_cli.check_ok(pllm_cli.run_cli(
        pllm_bin, ["info", "--backends", "--json"], env=_env(PLLM_VK_LOADER="/nonexistent"))).stdout)["vulkan"]
    assert j["available"] is False and j["devices"] == [] and "loader" in j["error"]


# Every weight type the device multiplies, each architecture, prefill in one step; decode
# one token per step (the 1-row pipelines) on one model of each kind.
# The archs whose additions the device does not compute yet run on the CPU (test below).
CPU_ONLY_ARCHS = {"smollm3", "granite", "minicpm", "phi3", "gemma2", "lfm2"}
DEVICE_MODELS = [n for n, c in CONFIGS.items() if c.wtype != "BF16" and c.arch not in CPU_ONLY_ARCHS]
DECODE_MODELS = ["llama-Q4_0", "qwen2-Q4_K", "llama-Q6_K", "gemma3-Q5_1", "gemma3-swa2-F32", "llama-ffnvar-F32",
                 "llama-F16"]
CASES = [(n, 0) for n in DEVICE_MODELS] + [(n, 1) for n in DECODE_MODELS]


@pytest.mark.parametrize("name,chunk", CASES, ids=[f"{n}-{'decode' if c else 'prefill'}" for n, c in CASES])
def test_tiny_model_on_device_matches_reference_and_cpu(pllm_bin, vk, tiny_models_paths, tiny_ref_cache, work_dir,
                                                        name, chunk):
    cfg = CONFIGS[name]
    if name not in tiny_ref_cache:
        tiny_ref_cache[name] = Reference(tiny_models_paths[name])
    ref = tiny_ref_cache[name]
    ids = tm.sample_ids(cfg, 16)
    n_vocab = ref.hp.n_vocab
    kv = ("--kv-type", "f32")
    got, rep = _logits(pllm_bin, tiny_models_paths[name], [ids], work_dir / "vk.f32", n_vocab, chunk=chunk, extra=kv)
    _assert_on_device(rep, name)
    max_rel, rms_rel = tol.tol_for(cfg.wtype, tol.EXACT)
    tol.assert_logits_close(got[0], ref.forward(ids), max_rel, rms_rel, tol.argmax_min_fraction(cfg.wtype, tol.EXACT),
                            what=f"{name} on the device")
    cpu, _ = _logits(pllm_bin, tiny_models_paths[name], [ids], work_dir / "cpu.f32", n_vocab, backend="cpu",
                     chunk=chunk, extra=kv)
    _assert_vs_cpu(got, cpu, name)


def _assert_int8_vs_cpu(got, cpu, what, wtype):
    """int8 activations with an f32 KV cache. The device rounds activations to int8 as the CPU
    does, but its inputs carry f32 noise from another summation order (so do the CPU's on
    another ISA level), and an activation within that noise of a rounding tie takes the
    neighbouring code: measured once in 16 tokens on llama-Q4_K (AVX-512 CPU table vs the
    device and the AVX2 table: one row off by 2.2e-2 of the logits' RMS, the rest within 2e-6).
    So most rows must still agree to the f32 bound (a device that skipped or changed the int8
    rounding would be off on every row by ~1e-2), and all within the int8-mode bound of the
    weight type (tolerances.py) against the CPU."""
    max_rel, rms_rel = tol.tol_for(wtype, tol.INT8)
    for k, (g, c) in enumerate(zip(got, cpu)):
        tol.assert_logits_close(g, c, max_rel, rms_rel, tol.argmax_min_fraction(wtype, tol.INT8),
                                what=f"{what} sequence {k} vs CPU")
        rms = np.sqrt(np.mean(c ** 2))
        err = np.max(np.abs(g - c), axis=1) / rms
        close = int(np.sum(err <= VS_CPU_REL))
        print(f"{what} sequence {k}: rows within {VS_CPU_REL:g} x rms: {close}/{len(err)}, worst {err.max():.2e}")
        assert close >= len(err) - max(1, len(err) // 8), \
            f"{what} sequence {k}: only {close}/{len(err)} rows agree with the CPU to {VS_CPU_REL:g} x rms"


@pytest.mark.parametrize("env", [{}, {"PLLM_VK_DISABLE_F16": 1}, {"PLLM_VK_DISABLE_INT_DOT": 1},
                                 {"PLLM_VK_GPU_LAYOUT": 1}],
                         ids=["default", "no-fp16", "no-int-dot", "gpu-layout"])
@pytest.mark.parametrize("name,extra", [
    ("llama-Q4_0", ("--kv-type", "q8")),
    ("qwen2-Q4_1", ("--kv-type", "f32")),
    ("gemma3-Q8_0", ("--kv-type", "q8")),
    ("llama-Q4_K", ("--int8-act", "--kv-type", "f32")),
    ("qwen2-Q6_K", ("--int8-act", "--kv-type", "q8")),
    ("gemma3-Q4_0", ("--int8-act", "--kv-type", "f32")),
])
def test_kv_types_int8_and_forced_variants_match_cpu(pllm_bin, vk, tiny_models_paths, work_dir, name, extra, env):
    """q8 and f32 KV mirrors, int8 activations (the device rounds them as the CPU does), and
    the fp32 / plain-int shader variants a device without fp16 or int dot gets."""
    cfg = CONFIGS[name]
    n_vocab = Reference(tiny_models_paths[name]).hp.n_vocab
    ids = tm.sample_ids(cfg, 16, seed=3)
    for chunk in (4, 1):
        got, rep = _logits(pllm_bin, tiny_models_paths[name], [ids], work_dir / "vk.f32", n_vocab, extra=extra,
                           chunk=chunk, env=_env(**env))
        _assert_on_device(rep, name)
        cpu, _ = _logits(pllm_bin, tiny_models_paths[name], [ids], work_dir / "cpu.f32", n_vocab, backend="cpu",
                         extra=extra, chunk=chunk)
        f32_kv = "q8" not in extra
        mode = tol.INT8 if "--int8-act" in extra else tol.EXACT
        what = f"{name} {' '.join(extra)} chunk {chunk} {env}"
        if f32_kv and mode == tol.INT8:
            _assert_int8_vs_cpu(got, cpu, what, cfg.wtype)
        else:
            _assert_vs_cpu(got, cpu, what, None if f32_kv else cfg.wtype, mode)


@pytest.mark.parametrize("name", ["llama-Q4_1", "gemma3-Q5_0"])
def test_int16_activations_run_the_float_path_on_device(pllm_bin, vk, tiny_models_paths, work_dir, name):
    """--int16-act on the device: every step runs there, on its float (exact-mode) products,
    so it equals the CPU's --exact within the device bound."""
    cfg = CONFIGS[name]
    n_vocab = Reference(tiny_models_paths[name]).hp.n_vocab
    ids = tm.sample_ids(cfg, 12, seed=4)
    kv = ("--kv-type", "f32")
    got, rep = _logits(pllm_bin, tiny_models_paths[name], [ids], work_dir / "vk.f32", n_vocab, chunk=4,
                       extra=kv + ("--int16-act",))
    _assert_on_device(rep, name)
    cpu, _ = _logits(pllm_bin, tiny_models_paths[name], [ids], work_dir / "cpu.f32", n_vocab, backend="cpu",
                     chunk=4, extra=kv + ("--exact",))
    _assert_vs_cpu(got, cpu, f"{name} --int16-act on the device")


@pytest.mark.parametrize("name", ["llama-Q4_0", "qwen2-Q8_0", "gemma3-swa2-F32", "llama-ffnvar-F32"])
def test_several_sequences_in_one_device_step(pllm_bin, vk, tiny_models_paths, work_dir, name):
    """Ragged sequences stepped together (rows of up to 5 sequences per step, each against its
    own KV mirror) equal their solo CPU runs."""
    cfg = CONFIGS[name]
    n_vocab = Reference(tiny_models_paths[name]).hp.n_vocab
    seqs = [tm.sample_ids(cfg, n, seed=k + 1) for k, n in enumerate((16, 5, 11, 1, 9))]
    kv = ("--kv-type", "f32")
    got, rep = _logits(pllm_bin, tiny_models_paths[name], seqs, work_dir / "vk.f32", n_vocab, chunk=4, extra=kv)
    _assert_on_device(rep, name)
    solo = [_logits(pllm_bin, tiny_models_paths[name], [s], work_dir / "cpu.f32", n_vocab, backend="cpu",
                    chunk=4, extra=kv)[0][0] for s in seqs]
    _assert_vs_cpu(got, solo, name)


def test_validation_layer_reports_nothing(pllm_bin, vk, tiny_models_paths, work_dir):
    if not vk.get("validation_layer"):
        pytest.skip("VK_LAYER_KHRONOS_validation is not installed (Debian vulkan-validationlayers)")
    for name, extra in [("llama-Q4_K", ("--kv-type", "q8")), ("gemma3-Q5_1", ("--int8-act",)),
                        ("qwen2-Q6_K", ())]:
        n_vocab = Reference(tiny_models_paths[name]).hp.n_vocab
        ids = tm.sample_ids(CONFIGS[name], 8)
        _, rep = _logits(pllm_bin, tiny_models_paths[name], [ids, ids[:3]], work_dir / "vk.f32", n_vocab, extra=extra,
                         chunk=2, env=_env(PLLM_VK_VALIDATION=1))
        _assert_on_device(rep, name)
        assert rep["validation"] == 0, f"{name}: {rep}"


# ---- fallback: the CPU takes over with the same output ----

def _cpu_equal(pllm_bin, tiny_models_paths, work_dir, name, env, chunk=1, extra=(), backend="vulkan"):
    n_vocab = Reference(tiny_models_paths[name]).hp.n_vocab
    ids = tm.sample_ids(CONFIGS[name], 12, seed=5)
    got, rep = _logits(pllm_bin, tiny_models_paths[name], [ids], work_dir / "vk.f32", n_vocab, env=env, chunk=chunk,
                       extra=extra, backend=backend)
    cpu, _ = _logits(pllm_bin, tiny_models_paths[name], [ids], work_dir / "cpu.f32", n_vocab, backend="cpu",
                     chunk=chunk, extra=extra)
    return got, cpu, rep


@pytest.mark.parametrize("env,why", [
    ({"PLLM_VK_LOADER": "/nonexistent/libvulkan.so.1"}, "no Vulkan loader"),
    ({"PLLM_VK_DEVICE": 9}, "does not exist"),
])
def test_no_device_or_failed_init_runs_on_cpu(pllm_bin, tiny_models_paths, work_dir, env, why):
    got, cpu, rep = _cpu_equal(pllm_bin, tiny_models_paths, work_dir, "llama-Q4_0", _env(**env))
    assert rep["device"].startswith("no device") and why in rep["device"], rep
    assert rep["device_steps"] == 0 and rep["cpu_steps"] == 12, rep
    assert np.array_equal(got[0], cpu[0]), "the CPU fallback must be the CPU path itself"


def test_device_lost_mid_generation_continues_on_cpu(pllm_bin, vk, tiny_models_paths, work_dir):
    """The 5th device submit reports VK_ERROR_DEVICE_LOST: that step and every later one run on
    the CPU from the KV cache the device kept writing back, with the CPU path's logits."""
    got, cpu, rep = _cpu_equal(pllm_bin, tiny_models_paths, work_dir, "qwen2-Q8_0", _env(PLLM_VK_INJECT_LOST=5),
                               extra=("--kv-type", "f32"))
    assert rep["device_steps"] == 4 and rep["cpu_steps"] == 8 and rep["fallbacks"] == 1, rep
    assert "lost" in rep["reason"], rep
    _assert_vs_cpu(got, cpu, "device lost at step 5")


@pytest.mark.parametrize("name,extra,why", [
    ("llama-BF16", (), "BF16"),
    ("llama-Q4_0", ("--kv-type", "q4"), "q4 KV"),
    ("llama-Q4_0", ("--kv-window", "8"), "window"),
    ("llama-Q4_0", ("--f16-act",), "int8 activations only"),
    ("smollm3-Q8_0", (), "layers without RoPE"),
    ("granite-F32", (), "residual and logit scales"),
    ("minicpm-F32", (), "residual and logit scales"),
    ("phi3-Q8_0", (), "partial RoPE"),
    ("gemma2-F32", (), "soft-capping"),
    ("lfm2-Q8_0", (), "convolution layers"),
])
def test_unsupported_steps_run_on_cpu(pllm_bin, vk, tiny_models_paths, work_dir, name, extra, why):
    got, cpu, rep = _cpu_equal(pllm_bin, tiny_models_paths, work_dir, name, None, extra=extra)
    assert rep["device_steps"] == 0 and rep["cpu_steps"] == 12 and rep["fallbacks"] == 0, rep
    assert why in rep["reason"], rep
    assert np.array_equal(got[0], cpu[0])


def test_gemma4_runs_on_cpu_with_the_reason(pllm_bin, vk, tiny_models_paths, work_dir):
    """gemma4's additions (per-layer head sizes up to 512, KV-sharing layers, per-layer inputs) are
    not in the shaders: every step runs on the CPU, the reason is named, the logits are the CPU's."""
    import tiny_gemma4 as tg
    name = "gemma4-Q8_0"
    n_vocab = len(tg.gemma4_vocab()[0])
    ids = tg.sample_ids(tg.configs()[name], 12, seed=5)
    got, rep = _logits(pllm_bin, tiny_models_paths[name], [ids], work_dir / "vk.f32", n_vocab, chunk=1)
    cpu, _ = _logits(pllm_bin, tiny_models_paths[name], [ids], work_dir / "cpu.f32", n_vocab, backend="cpu", chunk=1)
    assert rep["device_steps"] == 0 and rep["cpu_steps"] == 12 and rep["fallbacks"] == 0, rep
    assert "per-layer head sizes" in rep["reason"], rep
    assert np.array_equal(got[0], cpu[0])


def test_auto_skips_a_cpu_vulkan_device(pllm_bin, vk, tiny_models_paths, work_dir):
    if any(d["type"] != "cpu" for d in vk["devices"]):
        pytest.skip("this machine has a GPU: auto would use it")
    got, cpu, rep = _cpu_equal(pllm_bin, tiny_models_paths, work_dir, "llama-Q4_0", None, backend="auto")
    assert rep["asked"] == "auto" and "CPU device" in rep["device"] and rep["device_steps"] == 0, rep
    assert np.array_equal(got[0], cpu[0])


def test_auto_measures_both_then_keeps_the_faster(pllm_bin, vk, tiny_models_paths, work_dir):
    """auto (allowed onto lavapipe here) runs the first step of a phase on the device and the
    next on the CPU, then the offload policy takes the one it measured faster for every later
    step of that phase: on this machine the CPU (lavapipe is a software device), so of four
    prefill steps exactly one ran on the device; the output stays the CPU path's."""
    name = "llama-Q4_0"
    n_vocab = Reference(tiny_models_paths[name]).hp.n_vocab
    ids = tm.sample_ids(CONFIGS[name], 16, seed=9)
    kv = ("--kv-type", "f32")
    env = _env(PLLM_VK_ALLOW_CPU_DEVICE=1)
    out = work_dir / "auto.f32"
    proc = pllm_cli.run_cli(pllm_bin, ["logits", "-m", tiny_models_paths[name], "--ids", " ".join(map(str, ids)),
                                       "--out", out, "-t", "2", "--backend", "auto", "--chunk", "4", "--exact", *kv],
                            env=_device_env(env))
    pllm_cli.check_ok(proc)
    rep = _report(proc.stderr)
    assert rep["device_steps"] == 1 and rep["cpu_steps"] == 3, rep  # prefill: device, CPU, then the faster
    got = np.fromfile(out, dtype="<f4").astype(np.float64).reshape(16, n_vocab)
    cpu, _ = _logits(pllm_bin, tiny_models_paths[name], [ids], work_dir / "cpu.f32", n_vocab, backend="cpu",
                     chunk=4, extra=kv)
    _assert_vs_cpu([got], cpu, "auto")


def test_bad_backend_flag_is_a_clean_error(pllm_bin, tiny_models_paths, work_dir):
    proc = pllm_cli.run_cli(pllm_bin, ["logits", "-m", tiny_models_paths["llama-F32"], "--ids", "1 2",
                                       "--out", work_dir / "x.f32", "--backend", "cuda"])
    assert "backend" in pllm_cli.assert_clean_error(proc)


# ---- the real model ----

PROMPT = "What is the capital of France?"


def _run_text(pllm_bin, model, backend, env=None, n=32):
    proc = pllm_cli.run_cli(pllm_bin, ["run", "-m", model, "-p", PROMPT, "-n", str(n), "--temp", "0", "-t", "2",
                                       "--ignore-eos", "--exact", "--backend", backend],
                            env=env if backend == "cpu" else _device_env(env))
    pllm_cli.check_ok(proc)
    return proc.stdout.decode(), (_report(proc.stderr) if backend != "cpu" else None)


def test_smollm2_greedy_tokens_equal_cpu(pllm_bin, vk, smollm2_path):
    text, rep = _run_text(pllm_bin, smollm2_path, "vulkan")
    _assert_on_device(rep, "SmolLM2")
    cpu, _ = _run_text(pllm_bin, smollm2_path, "cpu")
    assert text == cpu, f"device:\n{text}\ncpu:\n{cpu}"


def test_smollm2_device_lost_mid_generation_same_text(pllm_bin, vk, smollm2_path):
    text, rep = _run_text(pllm_bin, smollm2_path, "vulkan", env=_env(PLLM_VK_INJECT_LOST=6), n=16)
    assert rep["device_steps"] == 5 and rep["fallbacks"] == 1 and rep["cpu_steps"] > 0, rep
    cpu, _ = _run_text(pllm_bin, smollm2_path, "cpu", n=16)
    assert text == cpu


def test_gemma3_greedy_tokens_equal_cpu(pllm_bin, vk, gemma3_path):
    """The real Gemma 3 Q4_K_M file: K-quant and mixed types, local sliding-window layers, and
    a tied 262144 x 640 embedding larger than one storage binding on lavapipe (split by rows)."""
    text, rep = _run_text(pllm_bin, gemma3_path, "vulkan", n=8)
    _assert_on_device(rep, "Gemma 3")
    cpu, _ = _run_text(pllm_bin, gemma3_path, "cpu", n=8)
    assert text == cpu, f"device:\n{text}\ncpu:\n{cpu}"


def test_constrained_reply_on_device(pllm_bin, vk, smollm2_path, tmp_path):
    """A JSON-schema-constrained reply with every step on the device: the sampler's grammar
    works on the device's logits as on the CPU's, and the reply validates."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                               "age": {"type": "integer", "minimum": 0, "maximum": 99}},
              "required": ["name", "age"], "additionalProperties": False}
    (tmp_path / "s.json").write_text(json.dumps(schema))
    proc = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, [
        "run", "-m", str(smollm2_path), "--backend", "vulkan", "--json-schema", str(tmp_path / "s.json"),
        "-p", "Describe a person as JSON.", "-n", "60", "--temp", "1", "--seed", "3"], env=_device_env(None)))
    _assert_on_device(_report(proc.stderr), "constrained SmolLM2")
    jsonschema.validate(json.loads(proc.stdout.decode()), schema)


def test_image_rows_on_the_device(pllm_bin, vk, tmp_path):
    """Image rows (vision: embeddings instead of a lookup) go up with the step: the idefics3 pair's
    prompt runs wholly on the device, within the exact bound of the CPU's logits; gemma3's image
    rows, which see each other both ways, run on the CPU (the shaders' mask is causal) with the
    same result."""
    from test_vision_text import PROMPTS, SPECS, TEXT
    from vision_images import write_png
    from vision_models import write_mmproj
    img = write_png(tmp_path / "a.png", 150, 97, 3, seed=11)
    for proj in TEXT:
        text = tm.write_with_gguf_writer(tm.build_spec(TEXT[proj]), tmp_path / f"{proj}.gguf")
        mm = write_mmproj(tmp_path / f"{proj}-mmproj.gguf", SPECS[proj])
        got = {}
        for backend in ("cpu", "vulkan"):
            out = tmp_path / f"{proj}-{backend}.f32"
            proc = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, [
                "logits", "-m", text, "--mmproj", mm, "--image", img, "-p", PROMPTS[proj], "--out", out, "--exact",
                "-t", "2", "--backend", backend], env=_device_env(None)))
            n = len(json.loads(proc.stdout)["tokens"])
            got[backend] = np.fromfile(out, dtype=np.float32).reshape(n, -1).astype(np.float64)
            if backend == "vulkan":
                rep = _report(proc.stderr)
                if proj == "idefics3":
                    assert rep["cpu_steps"] == 0 and rep["device_steps"] > 0, rep
                else:
                    assert rep["cpu_steps"] > 0, rep
        max_rel, rms_rel = tol.tol_for("F32", tol.EXACT, False)
        tol.assert_logits_close(got["vulkan"], got["cpu"], max_rel, rms_rel, tol.argmax_min_fraction("F32", tol.EXACT),
                                what=f"{proj} image prompt: device vs CPU")
