"""Tolerances for engine logits vs the float64 numpy reference, and where they come from.

Metrics (see reference.compare): with d = engine - reference over all positions
and the whole vocabulary, and rms = RMS of the reference logits,
    max_rel = max|d| / rms,     rms_rel = RMS(d) / rms.

Float weights (F32, F16, BF16)
------------------------------
The engine multiplies float weights with f32 activations, so the only differences
are f32 rounding (~1e-7 relative per op, ~1e-5 after a 2-layer forward pass). The
bound is set far above that to also admit storing intermediates (e.g. the KV cache)
in f16: rounding *every* matmul input to f16 (half-ulp 2^-12 relative) moves
the tiny models' logits by max_rel ~2e-3 / rms_rel ~5e-4 (measured with the
reference), so max_rel <= 5e-3 and rms_rel <= 1e-3 still hold with 2x headroom.
Anything that is actually wrong (rope pairing, base, rope_freqs, eps, biases,
tied output) moves the logits by max_rel >= 0.28 (tests/py/test_reference.py checks
this for every feature), i.e. 50x the bound.

Int8 activations (W8A8 / W4A8: Q8_0, Q4_0, Q4_1 with 32-blocks; Q4_K, Q6_K with 256-blocks)
------------------------------------------------------------------------------------------
The engine rounds every matmul input to int8 blocks with step d = amax_block/127.
The weights are the same on both sides (the reference dequantises the file), so
this rounding is the whole expected error:
  * per element the error is uniform in +-d/2, RMS d/sqrt(12); relative to the
    block's RMS sigma that is eps_B = (amax/sigma) / (127*sqrt(12)):
      B=32  Gaussian-like blocks, amax ~2.5 sigma            -> eps ~0.57%
      B=256 amax ~3 sigma for a Gaussian, ~4.5 sigma for the
            heavy-tailed silu(g)*u input of ffn_down           -> eps up to ~1.0%
  * a matmul turns independent input errors into an output error of the same
    relative size; the tiny models have N_q = 4 rounding points per layer
    (qkv input, attention output, ffn input, ffn_down input) * 2 layers + the
    output projection = 9, adding in quadrature: rms_rel ~ 3*eps ->
    ~1.7% (B=32), ~3% (B=256);
  * the max over ~5000 logits (16 positions x 303 vocab) of a roughly Gaussian
    error is ~4x its RMS: max_rel ~ 7% (B=32), ~12% (B=256).
The bounds are 3x those estimates: B=32: max_rel 0.20, rms_rel 0.05; B=256:
max_rel 0.35, rms_rel 0.09. Simulating exactly this rounding in the reference
(Reference.forward(act_quant=True)) gives max_rel 0.05-0.06 / rms_rel ~0.015 (B=32)
and max_rel 0.10-0.12 / rms_rel ~0.024 (B=256); test_reference.py asserts the
simulated error stays below half of each bound.

SmolLM2-135M (Q4_1 layers, Q8_0 token_embd/output, 30 layers)
-------------------------------------------------------------
Same estimate with N_q = 4*30 + 1 = 121 rounding points and eps ~0.57%:
rms_rel ~ sqrt(121)*0.57% ~ 6%, max over 8 x 49152 logits ~5x that ~ 30%.
Bounds at 2x the estimate: rms_rel 0.12, max_rel 0.60. The simulation gives
rms_rel ~0.04 and max_rel ~0.17-0.19 (3x headroom).

Engine vs engine (thread counts, prefix of a longer batch)
---------------------------------------------------------
Both runs apply identical rounding; what differs is at most f32 summation order
and, rarely, an int8 rounding decision flipping by one step (~1e-3 relative on
one output). Bound: max_rel 1e-2 for every type.
"""
from __future__ import annotations

FLOAT_TYPES = {"F32", "F16", "BF16"}
BLOCK32_TYPES = {"Q8_0", "Q4_0", "Q4_1"}
K_TYPES = {"Q4_K", "Q6_K"}

# type -> (max_rel, rms_rel)
TINY_TOL = {
    **{t: (5e-3, 1e-3) for t in FLOAT_TYPES},
    **{t: (0.20, 0.05) for t in BLOCK32_TYPES},
    **{t: (0.35, 0.09) for t in K_TYPES},
}

SMOLLM2_TOL = (0.60, 0.12)

CONSISTENCY_MAX_REL = 1e-2

# Fraction of positions whose argmax must agree with the reference. In addition
# every position whose reference top-1/top-2 margin exceeds 2 * (max_rel * rms)
# must agree (no allowed error can flip those).
ARGMAX_MIN_FRACTION = {"float": 0.9, "quant": 0.75}


def tol_for(wtype: str) -> tuple[float, float]:
    return TINY_TOL[wtype]


def argmax_min_fraction(wtype: str) -> float:
    return ARGMAX_MIN_FRACTION["float" if wtype in FLOAT_TYPES else "quant"]


def assert_logits_close(got, ref, max_rel: float, rms_rel: float, min_agree: float,
                        what: str = "") -> dict:
    """Assert engine logits `got` match reference logits `ref` ([n_pos, n_vocab])."""
    import numpy as np
    from reference import compare, format_stats
    s = compare(got, ref)
    msg = f"{what}: {format_stats(s)} (bounds: max_rel {max_rel:g}, rms_rel {rms_rel:g}, " \
          f"argmax >= {min_agree:.0%})"
    print(msg)
    assert s["max_rel"] <= max_rel and s["rms_rel"] <= rms_rel, "logits differ too much: " + msg
    srt = np.sort(ref, axis=1)
    margin = srt[:, -1] - srt[:, -2]
    sure = margin > 2 * max_rel * s["ref_rms"]
    agree = np.argmax(got, axis=1) == np.argmax(ref, axis=1)
    bad = np.nonzero(sure & ~agree)[0]
    assert bad.size == 0, f"argmax differs at positions {bad.tolist()} whose reference " \
                          f"margin exceeds any allowed error: " + msg
    assert s["argmax_agree"] >= min_agree, "too few argmax agreements: " + msg
    return s
