"""`pocketllm calibrate-act IN OUT --calib TEXT`: static activation scales by
calibration, checked against the numpy reference and an independent numpy version of
the threshold methods.

  * every product input gets a histogram whose counts are those of the reference's own
    activations (same text, same chunks) binned with the engine's range: the f32/f64
    difference may move a value that sits on a bin edge, nothing more;
  * minmax: the step is max |x| / 127 of the reference's activations (f32 rounding);
  * kl / percentile: numpy's TensorRT entropy search / percentile over the engine's
    reported histogram picks exactly the engine's threshold;
  * the output is the input plus the keys (tensors byte-identical, metadata kept), and
    --static-act runs it with every int8 product static.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import pllm_cli
import tiny_models as tm
from reference import Reference

CALIB_TEXT = ("The quick brown fox jumps over the lazy dog. " * 3 + "def main():\n    return 42\n"
              "Pack my box with five dozen liquor jugs! 0123456789 " * 2)
CTX = 24


def kl_thresholds_numpy(counts: np.ndarray, width: float, levels: int = 128) -> list[float]:
    """TensorRT's entropy calibration (as described in its docs / MXNet's port): the
    thresholds (i + 0.5) * width of every i whose KL(P || Q) is the minimum (up to 1e-9
    relative: equal divergences are real on small data, and which of them wins then
    depends on summation order)."""
    counts = counts.astype(np.float64)
    used = int(np.nonzero(counts)[0][-1]) + 1
    if used <= levels:
        return [(used + 0.5) * width]
    kls = {}
    for i in range(levels, used + 1):
        p = counts[:i].copy()
        p[i - 1] += counts[i:].sum()
        per = i // levels
        group = np.minimum(np.arange(i) // per, levels - 1)
        mass = np.bincount(group, weights=counts[:i], minlength=levels)
        nonzero = np.bincount(group, weights=(p > 0).astype(np.float64), minlength=levels)
        q = np.where(p > 0, mass[group] / np.maximum(nonzero[group], 1), 0.0)
        if p[i - 1] > 0 and q[i - 1] == 0:
            q[i - 1] = 0.1
        m = p > 0
        pn, qn = p[m] / p.sum(), q[m] / q.sum()
        kls[i] = float(np.sum(pn * np.log(pn / qn)))
    best = min(kls.values())
    return [(i + 0.5) * width for i, kl in kls.items() if kl <= best * (1 + 1e-9) + 1e-15]


def percentile_threshold_numpy(counts: np.ndarray, width: float, fraction: float) -> float:
    c = np.cumsum(counts.astype(np.float64))
    b = int(np.nonzero(c >= fraction * c[-1])[0][0])
    return (b + 1) * width


def engine_bins(a: np.ndarray, rng: float, n: int) -> np.ndarray:
    """Bin b holds (b*w, (b+1)*w], bin 0 also zero (kl_calib.h)."""
    b = np.ceil(a / rng * n) - 1
    return np.clip(b, 0, n - 1).astype(np.int64)


def reference_inputs(ref: Reference, ids: list[int]) -> dict[str, list[np.ndarray]]:
    """Every matmul input of the reference over the calibration chunks."""
    seen: dict[str, list[np.ndarray]] = {}
    for c0 in range(0, len(ids), CTX):
        # the calibration session keeps an f32 KV cache (quantizer/calibration.cpp)
        ref.forward(ids[c0:c0 + CTX], kv_dtype="f32",
                    observe=lambda name, x: seen.setdefault(name, []).append(x.copy()))
    return seen


def calibrate(pllm_bin, model, out, text_path, report, method, extra=()):
    proc = pllm_cli.run_cli(pllm_bin, ["calibrate-act", model, out, "--calib", text_path,
                                       "--act-calib", method, "--calib-ctx", CTX,
                                       "--calib-tokens", 0, "--report", report, "-t", 2, *extra])
    pllm_cli.check_ok(proc)
    return json.loads(report.read_text())


@pytest.mark.parametrize("name", ["llama-Q4_0", "qwen2-Q4_K"])
def test_calibrate_act_matches_reference(pllm_bin, tiny_models_paths, work_dir, name):
    from gguf import GGUFReader
    model = tiny_models_paths[name]
    text = work_dir / "calib.txt"
    text.write_text(CALIB_TEXT)
    ids = pllm_cli.parse_ids(pllm_cli.check_ok(pllm_cli.run_cli(
        pllm_bin, ["tokenize", "-m", model, "-f", text, "--add-special"])).stdout)
    ref = Reference(model)
    inputs = reference_inputs(ref, ids)

    reports = {}
    for method in ("minmax", "kl", "percentile"):
        out = work_dir / f"{method}.gguf"
        rep = calibrate(pllm_bin, model, out, text, work_dir / f"{method}.json", method)
        reports[method] = rep
        assert rep["tokens"] == len(ids)
        by_name = {t["tensor"]: t for t in rep["tensors"]}
        assert set(by_name) == set(inputs), "one histogram per product input"
        for tname, t in by_name.items():
            a = np.abs(np.concatenate([x.reshape(-1) for x in inputs[tname]]))
            counts = np.asarray(t["counts"], dtype=np.int64)
            n = counts.size
            assert counts.sum() == a.size and t["non_finite"] == 0
            np.testing.assert_allclose(t["max_abs"], a.max(), rtol=1e-5)
            want = np.bincount(engine_bins(a, t["range"], n), minlength=n)
            moved = int(np.abs(want - counts).sum()) // 2
            assert moved <= max(2, a.size // 2000), f"{tname}: {moved} values in other bins"
            w = t["range"] / n
            if method == "minmax":
                options = [t["max_abs"]]
            elif method == "kl":
                options = [min(x, t["max_abs"]) for x in kl_thresholds_numpy(counts, w)]
            else:
                options = [min(percentile_threshold_numpy(counts, w, 0.9999), t["max_abs"])]
            assert any(t["threshold"] == pytest.approx(x, rel=1e-12) for x in options), \
                f"{method} {tname}: {t['threshold']} not in {options[:5]}"
            assert t["scale"] == pytest.approx(np.float32(t["threshold"] / 127), rel=1e-7)

        # the file: input + keys
        rd_in, rd_out = GGUFReader(str(model)), GGUFReader(str(out))
        assert [t.name for t in rd_in.tensors] == [t.name for t in rd_out.tensors]
        for a_t, b_t in zip(rd_in.tensors, rd_out.tensors):
            assert a_t.tensor_type == b_t.tensor_type and np.array_equal(a_t.data, b_t.data), a_t.name
        keys = {k for k in rd_out.fields if k.startswith("pocketllm.act_scale.")}
        assert keys == {f"pocketllm.act_scale.{t}" for t in by_name}
        for t in by_name.values():
            assert rd_out.fields[f"pocketllm.act_scale.{t['tensor']}"].contents() == pytest.approx(t["scale"], rel=1e-7)
        assert rd_out.fields["pocketllm.act_calib.method"].contents() == \
            ("percentile:99.99" if method == "percentile" else method)
        for k in rd_in.fields:
            if not k.startswith("GGUF."):
                assert k in rd_out.fields, k

        proc = pllm_cli.check_ok(pllm_cli.run_cli(
            pllm_bin, ["logits", "-m", out, "--ids", " ".join(map(str, ids[:8])), "--out",
                       work_dir / "l.f32", "--static-act"]))
        assert f"static activations: {len(by_name)} matrix products with a calibrated scale, 0 dynamic".encode() \
            in proc.stderr

    # the methods differ where the data has a tail: kl and percentile never above minmax
    for t_kl, t_mm in zip(reports["kl"]["tensors"], reports["minmax"]["tensors"]):
        assert t_kl["threshold"] <= t_mm["threshold"]


def test_recalibration_replaces_old_scales(pllm_bin, tiny_models_paths, work_dir):
    from gguf import GGUFReader
    model = tiny_models_paths["llama-Q4_0"]
    text = work_dir / "calib.txt"
    text.write_text(CALIB_TEXT)
    first = work_dir / "a.gguf"
    calibrate(pllm_bin, model, first, text, work_dir / "a.json", "minmax",
              ["--skip", "ffn_down"])
    second = work_dir / "b.gguf"
    rep = calibrate(pllm_bin, first, second, text, work_dir / "b.json", "kl")
    keys = {k for k in GGUFReader(str(second)).fields if k.startswith("pocketllm.act_scale.")}
    assert keys == {f"pocketllm.act_scale.{t['tensor']}" for t in rep["tensors"]}
    assert any("ffn_down" in k for k in keys)
    skipped = {k for k in GGUFReader(str(first)).fields if k.startswith("pocketllm.act_scale.")}
    assert skipped and not any("ffn_down" in k for k in skipped)


@pytest.mark.parametrize("case", ["no_calib", "missing_text", "empty_text", "same_file", "bad_method",
                                  "bad_percentile", "bad_skip_regex", "missing_model"])
def test_calibrate_act_errors(pllm_bin, tiny_models_paths, work_dir, case):
    model = tiny_models_paths["llama-Q4_0"]
    text = work_dir / "calib.txt"
    text.write_text(CALIB_TEXT)
    empty = work_dir / "empty.txt"
    empty.write_text("")
    out = work_dir / "o.gguf"
    args = {
        "no_calib": ["calibrate-act", model, out],
        "missing_text": ["calibrate-act", model, out, "--calib", work_dir / "nope.txt"],
        "empty_text": ["calibrate-act", model, out, "--calib", empty],
        "same_file": ["calibrate-act", model, model, "--calib", text],
        "bad_method": ["calibrate-act", model, out, "--calib", text, "--act-calib", "entropy"],
        "bad_percentile": ["calibrate-act", model, out, "--calib", text, "--act-calib", "percentile",
                           "--percentile", "150"],
        "bad_skip_regex": ["calibrate-act", model, out, "--calib", text, "--skip", "ffn_(down"],
        "missing_model": ["calibrate-act", work_dir / "nope.gguf", out, "--calib", text],
    }[case]
    pllm_cli.assert_clean_error(pllm_cli.run_cli(pllm_bin, args))
    assert not out.exists()
