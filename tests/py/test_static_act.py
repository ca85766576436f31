"""`--static-act`: int8 activations with calibrated per-tensor steps stored in the model
(pocketllm.act_scale.<tensor> f32 metadata), on tiny models with scales written by the
python gguf writer, against the numpy reference simulating the same static rounding
(reference.simulate_static_act_quant). Also: products sharing an input share the
largest step given for any of them; products without a step stay dynamic and are
counted on stderr; bad scales are load errors.

Bounds (see also tolerances.py): the engine and Reference.forward(act_static=...) apply
the same rounding to the same inputs, so what separates them is f32 arithmetic (~1e-6)
plus the rare element whose x / d the engine's f32 activations put on the other side of
a rounding tie than the reference's float64 ones; each such flip moves one input by a
whole step d and the network spreads it (like the f16 flips described in
tolerances.py). Those flips are much rarer than in f16 mode (a step is ~1/100 of an
input's range, not 2^-11 of its value) but bigger, so the static bound is set relative
to the static rounding's own effect: the engine must be within STATIC_FRACTION of the
distance between the static simulation and the float reference, which an engine that
ignored the scales (dynamic rounding: a different rounding of every input) or applied
them to the wrong products cannot meet. Measured (x86, every ISA level): engine vs
simulation max_rel ~1e-6 / rms_rel ~1e-7 when no tie flips (f32 rounding only), and at
most 0.09 / 0.08 of the simulation's distance from the float reference when one does;
the nearest wrong engine simulated (each step 0.9x, or the group rule left out, or
dynamic rounding) is >= 0.32 (max_rel) / 0.48 (rms_rel) of it.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import gguf_bytes as gb
import pllm_cli
import tiny_models as tm
import tolerances as tol
from reference import Reference, compare, format_stats

ISAS = pllm_cli.available_isas()
N_IDS = 16
# Models covering every activation format: Q8_0-style (fp16 step), Q8_1 (Q4_1/Q5_1, f32
# step and a sum), Q8_K (K-quants, bsums), a mixed-type gemma3 file, a separate output.
MODELS = ["llama-Q4_0", "llama-Q4_1", "qwen2-Q4_K", "qwen2-Q6_K", "gemma3-mix-Q5_0", "llama-untied-Q8_0"]
STATIC_FRACTION = 0.25
COUNT_RE = re.compile(rb"static activations: (\d+) matrix products with a calibrated scale, (\d+) dynamic")


def product_groups(ref: Reference) -> list[list[str]]:
    """The model's matrix products grouped by shared input (written from the forward pass)."""
    groups = []
    for il in range(ref.hp.n_layer):
        p = f"blk.{il}."
        groups += [[p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"],
                   [p + "attn_output.weight"],
                   [p + "ffn_gate.weight", p + "ffn_up.weight"],
                   [p + "ffn_down.weight"]]
    groups.append(["output.weight" if "output.weight" in ref.w else "token_embd.weight"])
    return groups


def observed_max(ref: Reference, ids) -> dict[str, float]:
    """max |x| of every matmul input over a forward pass (plain float reference)."""
    m: dict[str, float] = {}

    def obs(name, x):
        m[name] = max(m.get(name, 0.0), float(np.abs(x).max()))

    ref.forward(ids, observe=obs)
    return m


def file_scales(ref: Reference, ids, *, layers=None) -> dict[str, float]:
    """Steps to write: per group only some members get a key (Q and K of q/k/v, gate
    of gate/up) and with different clip fractions, so the group rule matters. The
    threshold is 0.55..0.9 of the observed max: some inputs clip."""
    mx = observed_max(ref, ids)
    out = {}
    for gi, g in enumerate(product_groups(ref)):
        if layers is not None and not any(g[0].startswith(f"blk.{il}.") for il in layers):
            continue
        for j, name in enumerate(g[:2] if len(g) == 3 else g[:1]):
            frac = 0.55 + 0.35 * ((gi * 3 + j) % 5) / 4
            out[name] = float(np.float32(frac * mx[name] / 127.0))
    return out


def effective_scales(ref: Reference, given: dict[str, float]) -> dict[str, float]:
    """The step each product uses: the largest given for any product of its group."""
    out = {}
    for g in product_groups(ref):
        vals = [given[n] for n in g if n in given]
        if vals:
            out.update({n: max(vals) for n in g})
    return out


def write_model(cfg: tm.ModelConfig, path, kvs: list[gb.KV]):
    spec = tm.build_spec(cfg)
    spec.kvs += kvs
    return tm.write_with_gguf_writer(spec, path)


def scale_kvs(scales: dict[str, float]) -> list[gb.KV]:
    return [gb.KV(f"pocketllm.act_scale.{n}", gb.F32, v) for n, v in scales.items()]


def int8_products(ref: Reference, names) -> int:
    return sum(1 for n in names if ref.wtype[n] not in tol.FLOAT_TYPES)


def static_logits(pllm_bin, path, ids, out, n_vocab, isa, extra=()):
    """Logits with --static-act and the counts it reports on stderr."""
    proc = pllm_cli.run_cli(pllm_bin, ["logits", "-m", path, "--ids", " ".join(map(str, ids)),
                                       "--out", out, "-t", "2", "--static-act", *extra],
                            env=pllm_cli.isa_env(isa))
    pllm_cli.check_ok(proc)
    m = COUNT_RE.search(proc.stderr)
    assert m, "no static activation counts on stderr\n" + pllm_cli.describe(proc)
    got = np.fromfile(out, dtype="<f4").reshape(len(ids), n_vocab).astype(np.float64)
    assert np.all(np.isfinite(got))
    return got, (int(m.group(1)), int(m.group(2)))


@pytest.fixture(scope="module")
def refs(tiny_models_paths):
    return {name: Reference(tiny_models_paths[name]) for name in MODELS}


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", MODELS)
def test_static_logits_match_static_reference(pllm_bin, refs, work_dir, name, isa):
    cfg = tm.model_configs()[name]
    ref = refs[name]
    ids = tm.sample_ids(cfg, N_IDS)
    calib_ids = tm.sample_ids(cfg, N_IDS, seed=1)  # scales from other text
    given = file_scales(ref, calib_ids)
    path = write_model(cfg, work_dir / f"{name}-static.gguf", scale_kvs(given))
    got, counts = static_logits(pllm_bin, path, ids, work_dir / "s.f32", ref.hp.n_vocab, isa)

    eff = effective_scales(ref, given)
    assert counts == (int8_products(ref, eff), 0)  # every group has a step
    sim = ref.forward(ids, act_static=eff)
    exact = ref.forward(ids)
    s_eng, s_sim = compare(got, sim), compare(sim, exact)
    print(f"{name} {isa}: engine vs static sim {format_stats(s_eng)}; "
          f"static sim vs float {format_stats(s_sim)}")
    assert s_eng["max_rel"] <= STATIC_FRACTION * s_sim["max_rel"], format_stats(s_eng)
    assert s_eng["rms_rel"] <= STATIC_FRACTION * s_sim["rms_rel"], format_stats(s_eng)


@pytest.mark.parametrize("name", ["llama-Q4_0", "qwen2-Q4_K"])
def test_products_without_a_scale_stay_dynamic(pllm_bin, refs, tiny_models_paths, work_dir, name):
    """Scales for layer 0 only: the rest quantise dynamically (counted on stderr), and
    --int8-act ignores the scales (bit-identical to the file without them)."""
    cfg = tm.model_configs()[name]
    ref = refs[name]
    ids = tm.sample_ids(cfg, N_IDS)
    given = file_scales(ref, tm.sample_ids(cfg, N_IDS, seed=1), layers=[0])
    path = write_model(cfg, work_dir / "partial.gguf", scale_kvs(given))
    got, counts = static_logits(pllm_bin, path, ids, work_dir / "s.f32", ref.hp.n_vocab, "default")
    eff = effective_scales(ref, given)
    all_products = [n for g in product_groups(ref) for n in g]
    n_static = int8_products(ref, eff)
    assert counts == (n_static, int8_products(ref, all_products) - n_static)
    assert 0 < counts[0] and 0 < counts[1]

    n_vocab = ref.hp.n_vocab
    dyn = pllm_cli.run_logits(pllm_bin, tiny_models_paths[name], ids, work_dir / "d.f32", n_vocab,
                              int8_act=True)
    dyn_scaled = pllm_cli.run_logits(pllm_bin, path, ids, work_dir / "d2.f32", n_vocab, int8_act=True)
    assert np.array_equal(dyn, dyn_scaled), "--int8-act must ignore the stored scales"
    assert not np.array_equal(got, dyn), "--static-act gave the dynamic logits"
    sim = ref.forward(ids, act_static=eff)  # with dynamic rounding where there is no step
    s_eng, s_sim = compare(got, sim), compare(sim, ref.forward(ids))
    print(f"{name} partial: engine vs sim {format_stats(s_eng)}; sim vs float {format_stats(s_sim)}")
    # the dynamic products add the int8-mode difference (block steps stored as f32 vs the
    # simulation's fp16, rounding rules) on top of the flips: int8 bound
    max_rel, rms_rel = tol.tol_for(cfg.wtype, tol.INT8, False)
    tol.assert_logits_close(got, sim, max_rel, rms_rel, 0.0, what=f"{name} partial static vs simulation")


def test_static_act_without_scales_is_an_error(pllm_bin, tiny_models_paths):
    m = tiny_models_paths["llama-Q4_0"]
    for args in (["logits", "-m", m, "--ids", "1 2", "--out", "/dev/null", "--static-act"],
                 ["run", "-m", m, "-p", "hi", "-n", "1", "--static-act"]):
        msg = pllm_cli.assert_clean_error(pllm_cli.run_cli(pllm_bin, args))
        assert "pocketllm.act_scale" in msg, msg
    msg = pllm_cli.assert_clean_error(pllm_cli.run_cli(
        pllm_bin, ["run", "-m", m, "-p", "hi", "-n", "1", "--static-act", "--f16-act"]))
    assert "--static-act" in msg and "--f16-act" in msg, msg


BAD_SCALES = {
    "negative": gb.KV("pocketllm.act_scale.blk.0.attn_q.weight", gb.F32, -0.01),
    "zero": gb.KV("pocketllm.act_scale.blk.0.attn_q.weight", gb.F32, 0.0),
    "nan": gb.KV("pocketllm.act_scale.blk.0.attn_q.weight", gb.F32, float("nan")),
    "inf": gb.KV("pocketllm.act_scale.blk.0.attn_q.weight", gb.F32, float("inf")),
    "below_fp16": gb.KV("pocketllm.act_scale.blk.0.attn_q.weight", gb.F32, 1e-9),
    "above_fp16": gb.KV("pocketllm.act_scale.blk.0.attn_q.weight", gb.F32, 1e6),
    "string": gb.KV("pocketllm.act_scale.blk.0.attn_q.weight", gb.STRING, "0.01"),
    "u32": gb.KV("pocketllm.act_scale.blk.0.attn_q.weight", gb.U32, 1),
    "unknown_tensor": gb.KV("pocketllm.act_scale.blk.7.attn_q.weight", gb.F32, 0.01),
    "not_a_product": gb.KV("pocketllm.act_scale.blk.0.attn_norm.weight", gb.F32, 0.01),
    "untied_embedding": gb.KV("pocketllm.act_scale.token_embd.weight", gb.F32, 0.01),
    "no_tensor_name": gb.KV("pocketllm.act_scale.", gb.F32, 0.01),
}


@pytest.mark.parametrize("case", list(BAD_SCALES))
def test_bad_scale_is_a_load_error(pllm_bin, work_dir, case):
    """Malformed scale metadata: one clear error at load, with or without --static-act."""
    name = "llama-untied-Q8_0" if case == "untied_embedding" else "llama-Q4_0"
    path = write_model(tm.model_configs()[name], work_dir / "bad.gguf", [BAD_SCALES[case]])
    for extra in ([], ["--static-act"]):
        msg = pllm_cli.assert_clean_error(pllm_cli.run_cli(
            pllm_bin, ["logits", "-m", path, "--ids", "1 2", "--out", work_dir / "o.f32", *extra]))
        assert "pocketllm.act_scale" in msg, msg
