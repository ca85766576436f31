"""`pocketllm prune --compensate ...` and `--ffn-plan sensitivity`, checked independently of
the pruner's code on tiny models:
  * numpy runs the calibration text through the reference forward pass, collects the input
    of every ffn_down / attn_output, and solves the ridge least-squares problem by its normal
    equations for the channels the pruner kept: W'_K = (W·G[:, K] + W_K·Λ_KK)(G_KK + Λ_KK)⁻¹
    with G = X̃ᵀX̃/T (X̃ with a column of ones for the intercept modes) and Λ = λI plus the
    shrinkage diag(SHRINK · n / T · Var(x_j)) -- which must be what the file holds (F32
    model: no re-quantisation in between), the bias included;
  * the kept channels fit at least as well as numpy's own one-at-a-time greedy choice, and
    better than dropping the statistics-ranked channels;
  * bias mode: the removed channels are the lowest ||W[:,j]||²·Var(x_j), b = W_R·mean(x_R);
  * the compensated files run: our logits match the numpy reference on the same file
    (output biases included), and llama.cpp loads them;
  * the sensitivity plan takes more from a layer made unimportant, keeps the total, and
    writes per-layer sizes (deci);
  * bad settings give one clear error.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

import pllm_cli
import tiny_models as tm
import tolerances as tol
from reference import Reference
from test_prune import CALIB_TEXT, LLAMA_BENCH, Raw, _kept_rows, _prune

CONFIGS = tm.model_configs()
CTX = 64
TEXT = CALIB_TEXT * 5
RIDGE = 1e-4  # the default --ridge
SHRINK = 3.0  # the default --shrink


def _calib_inputs(pllm_bin, model: Path, text: Path, names: list[str]) -> dict[str, np.ndarray]:
    """Every input row of the named weights over the calibration run: chunks of CTX tokens
    from an empty cache, as the calibrator runs them (the tiny vocab adds no BOS)."""
    proc = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["tokenize", "-m", model, "-f", text, "--add-special"]))
    ids = pllm_cli.parse_ids(proc.stdout)
    ref = Reference(model)
    seen = {n: [] for n in names}

    def observe(name, x):
        if name in seen:
            seen[name].append(np.array(x, dtype=np.float64))
    for c in range(0, len(ids), CTX):
        ref.forward(ids[c:c + CTX], last_only=True, observe=observe)
    return {n: np.vstack(v) for n, v in seen.items()}


def _penalty(X: np.ndarray, intercept: bool) -> np.ndarray:
    """The diagonal Λ: λ = RIDGE × the mean power on every channel (the constant one too),
    plus SHRINK · n / T × the channel's variance on the real ones."""
    T, n = X.shape
    lam = RIDGE * np.mean(np.mean(X ** 2, axis=0)) + SHRINK * n / T * X.var(axis=0)
    return np.append(lam, RIDGE * np.mean(np.mean(X ** 2, axis=0))) if intercept else lam


def _ridge_fit(W: np.ndarray, X: np.ndarray, keep: list[int], intercept: bool):
    """Normal equations of min ||W̃X̃ᵀ − W'_K X̃_Kᵀ||²/T + Σ_j Λ_j ||W'_j − W̃_j||² (the constant
    column last and always kept when intercept)."""
    T, n = X.shape
    Xa = np.hstack([X, np.ones((T, 1))]) if intercept else X
    Wa = np.hstack([W, np.zeros((W.shape[0], 1))]) if intercept else W
    K = list(keep) + ([n] if intercept else [])
    G = Xa.T @ Xa / T
    lam = _penalty(X, intercept)[K]
    A = G[np.ix_(K, K)] + np.diag(lam)
    Wk = np.linalg.solve(A, (Wa @ G[:, K] + Wa[:, K] * lam).T).T
    return (Wk[:, :-1], Wk[:, -1]) if intercept else (Wk, None)


def _condition(X: np.ndarray, keep: list[int], intercept: bool) -> float:
    T, n = X.shape
    Xa = np.hstack([X, np.ones((T, 1))]) if intercept else X
    K = list(keep) + ([n] if intercept else [])
    G = Xa.T @ Xa / T
    return float(np.linalg.cond(G[np.ix_(K, K)] + np.diag(_penalty(X, intercept)[K])))


def _residual(W, X, keep, Wk, b):
    y = X @ W.T
    y2 = X[:, keep] @ Wk.T + (0.0 if b is None else b)
    return float(np.mean(np.sum((y - y2) ** 2, axis=1)))


def _greedy_one_at_a_time(W, X, n_remove, intercept):
    """Optimal Brain Surgeon one channel at a time on H = G + Λ: numpy's own greedy choice."""
    T, n = X.shape
    Xa = np.hstack([X, np.ones((T, 1))]) if intercept else X
    Wa = np.hstack([W, np.zeros((W.shape[0], 1))]) if intercept else W.copy()
    G = Xa.T @ Xa / T
    Hinv = np.linalg.inv(G + np.diag(_penalty(X, intercept)))
    removed = []
    for _ in range(n_remove):
        sal = np.sum(Wa ** 2, axis=0) / np.diag(Hinv)
        sal[removed + ([n] if intercept else [])] = np.inf
        j = int(np.argmin(sal))
        Wa = Wa - np.outer(Wa[:, j], Hinv[j]) / Hinv[j, j]
        Hinv = Hinv - np.outer(Hinv[:, j], Hinv[j]) / Hinv[j, j]
        removed.append(j)
    return sorted(set(range(n)) - set(removed))


@pytest.fixture(scope="module")
def calib_file(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("calib") / "calib.txt"
    p.write_text(TEXT)
    return p


@pytest.mark.parametrize("mode", ["lsq-bias", "lsq"])
def test_fitted_columns_are_the_ridge_least_squares_solution(pllm_bin, tiny_models_paths, work_dir, calib_file,
                                                            mode):
    src, out = tiny_models_paths["llama-F32"], work_dir / f"{mode}.gguf"
    pllm_cli.check_ok(_prune(pllm_bin, src, out, ["--ffn", "0.35", "--calib", calib_file, "--calib-ctx", CTX,
                                                  "--compensate", mode]))
    orig, pruned = Raw(src), Raw(out)
    assert pruned.field("pocketllm.prune.compensate") == mode
    n_layer = CONFIGS["llama-F32"].dims.n_layer
    X = _calib_inputs(pllm_bin, src, calib_file, [f"blk.{l}.ffn_down.weight" for l in range(n_layer)])
    for l in range(n_layer):
        p = f"blk.{l}."
        W = orig.val[p + "ffn_down.weight"]
        Xl = X[p + "ffn_down.weight"]
        keep = _kept_rows(orig.raw[p + "ffn_gate.weight"], pruned.raw[p + "ffn_gate.weight"])
        assert keep == _kept_rows(orig.raw[p + "ffn_up.weight"], pruned.raw[p + "ffn_up.weight"])
        Wk, b = _ridge_fit(W, Xl, keep, intercept=mode == "lsq-bias")
        got = pruned.val[p + "ffn_down.weight"]
        scale = np.abs(Wk).max()
        # The engine's activations are f32 (relative error ~1e-6 after two layers of f32
        # sums), its per-batch products too; the solve multiplies a relative perturbation of
        # G by up to the condition number of the regularised system.
        bound = 2e-6 * _condition(Xl, keep, mode == "lsq-bias")
        print(f"layer {l}: max |diff| / max |W'| = {np.abs(got - Wk).max() / scale:.2e}, bound {bound:.2e}")
        assert np.abs(got - Wk).max() <= bound * scale
        if b is None:
            assert p + "ffn_down.bias" not in pruned.val
        else:
            assert np.abs(pruned.val[p + "ffn_down.bias"] - b).max() <= bound * max(np.abs(b).max(), scale)
        # The choice: no worse than numpy's one-at-a-time greedy (the pruner removes in
        # small batches), clearly better than dropping the statistics-ranked channels.
        err = _residual(W, Xl, keep, Wk, b)
        g_keep = _greedy_one_at_a_time(W, Xl, W.shape[1] - len(keep), mode == "lsq-bias")
        g_err = _residual(W, Xl, g_keep, *_ridge_fit(W, Xl, g_keep, mode == "lsq-bias"))
        assert err <= 1.05 * g_err, (l, err, g_err)
        ranked = np.sort(np.argsort(-np.linalg.norm(W, axis=0) * np.sqrt((Xl ** 2).mean(axis=0)),
                                    kind="stable")[:len(keep)])
        drop_err = _residual(W, Xl, list(ranked), W[:, ranked], None)
        assert err < 0.7 * drop_err, (l, err, drop_err)


def test_bias_mode_moves_the_removed_mean(pllm_bin, tiny_models_paths, work_dir, calib_file):
    src, out = tiny_models_paths["llama-F32"], work_dir / "bias.gguf"
    pllm_cli.check_ok(_prune(pllm_bin, src, out, ["--ffn", "0.35", "--calib", calib_file, "--calib-ctx", CTX,
                                                  "--compensate", "bias"]))
    orig, pruned = Raw(src), Raw(out)
    n_layer = CONFIGS["llama-F32"].dims.n_layer
    X = _calib_inputs(pllm_bin, src, calib_file, [f"blk.{l}.ffn_down.weight" for l in range(n_layer)])
    for l in range(n_layer):
        p = f"blk.{l}."
        W, Xl = orig.val[p + "ffn_down.weight"], X[p + "ffn_down.weight"]
        keep = _kept_rows(orig.raw[p + "ffn_gate.weight"], pruned.raw[p + "ffn_gate.weight"])
        fluct = np.sum(W ** 2, axis=0) * Xl.var(axis=0)
        want = np.sort(np.argsort(-fluct, kind="stable")[:len(keep)])
        assert keep == list(want), l
        removed = sorted(set(range(W.shape[1])) - set(keep))
        b = W[:, removed] @ Xl[:, removed].mean(axis=0)
        # each engine activation within ~1e-4 of numpy's (f32 sums of 256 terms, two layers
        # deep), so each bias entry within 1e-4 of the sum of its terms' magnitudes
        bound = 1e-4 * (np.abs(W[:, removed]) @ np.abs(Xl[:, removed]).mean(axis=0))
        assert np.all(np.abs(pruned.val[p + "ffn_down.bias"] - b) <= bound)
        assert np.array_equal(pruned.val[p + "ffn_down.weight"], W[:, keep])  # kept columns untouched


@pytest.mark.parametrize("model,args", [
    ("llama-F32", ["--ffn", "0.35", "--compensate", "lsq-bias"]),
    ("llama-Q8_0", ["--ffn", "0.35", "--heads", "0.5", "--compensate", "lsq-bias"]),
    ("llama-Q4_1", ["--ffn", "0.25", "--ffn-plan", "sensitivity"]),  # deci + biases
    ("qwen2-Q8_0", ["--ffn", "0.3", "--compensate", "lsq"]),
    ("gemma3-F32", ["--ffn", "0.35"]),  # auto: lsq (gemma3 reads no output biases)
])
def test_compensated_model_runs_and_llama_cpp_loads_it(pllm_bin, tiny_models_paths, work_dir, calib_file, model,
                                                        args):
    src, out = tiny_models_paths[model], work_dir / "out.gguf"
    report = pllm_cli.check_ok(_prune(pllm_bin, src, out, args + ["--calib", calib_file, "--calib-ctx", CTX]))
    pruned = Raw(out)
    has_bias = any(n.endswith(("ffn_down.bias", "attn_output.bias")) for n in pruned.val)
    assert has_bias == (model.startswith("llama")), report.stdout.decode()
    if "--heads" in args:
        assert any(n.endswith("attn_output.bias") for n in pruned.val)
    cfg = CONFIGS[model]
    ref = Reference(out)
    ids = tm.sample_ids(cfg, 16)
    got = pllm_cli.run_logits(pllm_bin, out, ids, work_dir / "l.f32", ref.hp.n_vocab)
    max_rel, rms_rel = tol.tol_for(cfg.wtype, tol.EXACT)
    tol.assert_logits_close(got, ref.forward(ids), max_rel, rms_rel, tol.argmax_min_fraction(cfg.wtype),
                            what=f"compensated {model}")
    # ... and the biases matter: the reference without them is further away.
    if has_bias:
        assert np.abs(got - ref.forward(ids, use_bias=False)).max() > np.abs(got - ref.forward(ids)).max()
    if not LLAMA_BENCH.is_file():
        return
    proc = subprocess.run([str(LLAMA_BENCH), "-m", str(out), "-p", "8", "-n", "4", "-t", "2"],
                          capture_output=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:] + proc.stdout.decode()[-2000:]
    assert b"tg4" in proc.stdout


def test_sensitivity_plan_takes_from_the_unimportant_layer(pllm_bin, work_dir, calib_file):
    """llama-F32 with layer 0's FFN output scaled down 20x: cutting there costs little, so the
    plan removes more of layer 0 than of layer 1, the total stays the uniform plan's, and the
    file carries per-layer sizes (deci)."""
    cfg = CONFIGS["llama-F32"]
    spec = tm.build_spec(cfg)
    t = next(t for t in spec.tensors if t.name == "blk.0.ffn_down.weight")
    t.data = (np.frombuffer(t.data, dtype=np.float32) * np.float32(0.05)).tobytes()
    src, out = work_dir / "quiet0.gguf", work_dir / "sens.gguf"
    tm.write_with_gguf_writer(spec, src)
    proc = pllm_cli.check_ok(_prune(pllm_bin, src, out, ["--ffn", "0.25", "--ffn-plan", "sensitivity", "--calib",
                                                         calib_file, "--calib-ctx", CTX]))
    report = proc.stdout.decode()
    assert "ffn plan: sensitivity" in report, report
    pruned = Raw(out)
    assert pruned.field("general.architecture") == "deci"
    n_ff = [int(x) for x in pruned.field("deci.feed_forward_length")]
    uniform = 384  # 512 * 0.75, whole 32-channel blocks
    assert sum(n_ff) == 2 * uniform, n_ff
    assert n_ff[0] < n_ff[1], n_ff
    # The pruned file still matches the reference.
    ref = Reference(out)
    ids = tm.sample_ids(cfg, 12)
    got = pllm_cli.run_logits(pllm_bin, out, ids, work_dir / "l.f32", ref.hp.n_vocab)
    max_rel, rms_rel = tol.tol_for(cfg.wtype, tol.EXACT)
    tol.assert_logits_close(got, ref.forward(ids), max_rel, rms_rel, tol.argmax_min_fraction(cfg.wtype),
                            what="sensitivity-planned")


BAD = {
    "compensate_unknown": (["--ffn", "0.3", "--compensate", "obs"], "unknown compensation"),
    "compensate_needs_calib": (["--ffn", "0.3", "--compensate", "lsq", "--weights-only"], "--calib"),
    "ridge_negative": (["--ffn", "0.3", "--compensate", "lsq", "--ridge", "-1", "@calib"], "--ridge"),
    "ridge_nan": (["--ffn", "0.3", "--compensate", "lsq", "--ridge", "nan", "@calib"], "--ridge"),
    "shrink_negative": (["--ffn", "0.3", "--compensate", "lsq", "--shrink", "-0.5", "@calib"], "--shrink"),
    # 8 tokens cannot determine 512 channels, and neither ridge nor shrinkage stands in for them
    "singular": (["--ffn", "0.3", "--compensate", "lsq", "--ridge", "0", "--shrink", "0", "--calib-tokens", "8",
                  "@calib"], "singular"),
    "plan_needs_calib": (["--ffn", "0.3", "--ffn-plan", "sensitivity", "--weights-only"], "--calib"),
    "plan_unknown": (["--ffn", "0.3", "--ffn-plan", "greedy", "@calib"], "--ffn-plan"),
    "sens_tokens_zero": (["--ffn", "0.3", "--ffn-plan", "sensitivity", "--sens-tokens", "0", "@calib"],
                         "--sens-tokens"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_compensation_settings(pllm_bin, tiny_models_paths, work_dir, calib_file, case):
    args, needle = BAD[case]
    args = [a for a in args if a != "@calib"] + (["--calib", calib_file, "--calib-ctx", CTX] if "@calib" in args
                                                  else [])
    out = work_dir / "bad.gguf"
    msg = pllm_cli.assert_clean_error(_prune(pllm_bin, tiny_models_paths["llama-F32"], out, args))
    assert needle in msg, msg
    assert not out.exists()


def test_bias_modes_refused_where_llama_cpp_reads_no_bias(pllm_bin, tiny_models_paths, work_dir, calib_file):
    for model in ("qwen2-Q8_0", "gemma3-F32"):
        for mode in ("bias", "lsq-bias"):
            out = work_dir / "x.gguf"
            msg = pllm_cli.assert_clean_error(_prune(pllm_bin, tiny_models_paths[model], out,
                                                     ["--ffn", "0.3", "--compensate", mode, "--calib", calib_file,
                                                      "--calib-ctx", CTX]))
            assert "output biases" in msg and "lsq" in msg, msg
            assert not out.exists()


def test_saved_gram_matrices_replace_the_calibration(pllm_bin, tiny_models_paths, work_dir, calib_file):
    """--save-gram then --gram + --stats: the same channels and, up to the file's ~48-bit
    precision of each sum, the same fitted weights; a Gram file of another model, a damaged one
    and one that lacks a layer are refused with one clear error."""
    src = tiny_models_paths["llama-F32"]
    a, b = work_dir / "a.gguf", work_dir / "b.gguf"
    gram, stats = work_dir / "g.gguf", work_dir / "s.gguf"
    common = ["--ffn", "0.35", "--compensate", "lsq-bias"]
    pllm_cli.check_ok(_prune(pllm_bin, src, a, common + ["--calib", calib_file, "--calib-ctx", CTX,
                                                         "--save-gram", gram, "--save-stats", stats]))
    pllm_cli.check_ok(_prune(pllm_bin, src, b, common + ["--stats", stats, "--gram", gram]))
    ra, rb = Raw(a), Raw(b)
    for name, v in ra.val.items():
        assert v.shape == rb.val[name].shape, name
        assert np.abs(v - rb.val[name]).max() <= 1e-9 * max(1.0, np.abs(v).max()), name
    # another model's file
    other = work_dir / "other.gguf"
    msg = pllm_cli.assert_clean_error(_prune(pllm_bin, tiny_models_paths["llama-Q8_0"], other,
                                             common + ["--stats", stats, "--gram", gram]))
    assert "another model" in msg, msg
    # damaged: one value of an off-diagonal entry changed (no longer symmetric), then cut short
    from gguf import GGUFReader
    t = next(t for t in GGUFReader(str(gram)).tensors if t.name.endswith("ffn_down.weight.gram_hi"))
    data = bytearray(gram.read_bytes())
    off = int(t.data_offset) + 4 * 1  # entry (0, 1)
    data[off:off + 4] = np.float32(123.0).tobytes()
    bad = work_dir / "bad.gguf"
    bad.write_bytes(bytes(data))
    msg = pllm_cli.assert_clean_error(_prune(pllm_bin, src, other, common + ["--stats", stats, "--gram", bad]))
    assert "symmetric" in msg, msg
    bad.write_bytes(gram.read_bytes()[:len(data) // 2])
    msg = pllm_cli.assert_clean_error(_prune(pllm_bin, src, other, common + ["--stats", stats, "--gram", bad]))
    assert "bad.gguf" in msg, msg
    # a Gram file without attn_output cannot compensate --heads
    msg = pllm_cli.assert_clean_error(_prune(pllm_bin, src, other, common + ["--heads", "0.5", "--stats", stats,
                                                                             "--gram", gram]))
    assert "attn_output" in msg, msg
    assert not other.exists()


def test_short_calibration_is_warned_about(pllm_bin, tiny_models_paths, work_dir, calib_file):
    """A fit on fewer than 16 calibration tokens per FFN channel (the tiny model's 512: 8192)
    warns on stderr, with the count; 8192 or more, or no fit at all, does not."""
    src, out = tiny_models_paths["llama-F32"], work_dir / "w.gguf"
    long_text = work_dir / "long.txt"
    long_text.write_text(CALIB_TEXT * 40)  # well over 8192 tokens of the tiny vocabulary
    common = ["--ffn", "0.25", "--calib-ctx", CTX]

    def run(text, *extra):
        proc = pllm_cli.check_ok(_prune(pllm_bin, src, out, common + ["--calib", text, *extra]))
        return proc.stdout.decode(), proc.stderr.decode()

    stdout, stderr = run(calib_file)
    tokens = int(stdout.split("fitted on ")[1].split()[0])
    assert tokens < 8192, stdout
    assert f"warning: the compensation is fitted on {tokens} calibration tokens" in stderr, stderr
    assert "below 16 per channel (8192 tokens here)" in stderr, stderr
    stdout, stderr = run(long_text)
    assert int(stdout.split("fitted on ")[1].split()[0]) >= 8192, stdout
    assert "warning" not in stderr, stderr
    # the threshold itself: 8192 tokens do not warn, 8191 do
    assert "warning" not in run(long_text, "--calib-tokens", "8192")[1]
    assert "fitted on 8191 calibration tokens" in run(long_text, "--calib-tokens", "8191")[1]
    # nothing fitted, nothing to warn about
    assert "warning" not in run(calib_file, "--compensate", "none")[1]
