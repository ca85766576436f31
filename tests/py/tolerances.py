"""Tolerances for engine logits vs the float64 numpy reference, and where they come from.

Metrics (see reference.compare): with d = engine - reference over all positions
and the whole vocabulary, and rms = RMS of the reference logits,
    max_rel = max|d| / rms,     rms_rel = RMS(d) / rms.

The engine has three activation modes, and each has its own bounds:
  * exact (the default): every weight row -- float or block-quantised -- is
    dequantised to f32 and dotted with f32 activations. The weights are then the
    very values the reference uses (it dequantises the file too), so the only
    difference is f32 rounding/accumulation, for EVERY weight type.
  * int8 (`--int8-act` on run/chat/logits): for block-quantised weights the
    activations are first rounded to int8 blocks (W8A8/W4A8 as in llama.cpp).
    Float weights always take f32 activations, so for F32/F16/BF16 the flag
    changes nothing and the exact-mode bound still applies.
  * f16 (`--f16-act`, W4A16): for Q4_0/Q4_1/Q8_0 weights every matmul input is
    rounded to IEEE half once per row; the weights are dequantised exactly as in
    exact mode. Other weight types (float, K-quants) keep f32 activations, so
    their models are bit-identical to exact mode and keep the exact bound.

Exact mode, tiny models (every type: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K)
-------------------------------------------------------------------------------
Quantised weights are dequantised exactly (a block-quantised value is a small
integer times an f16/f32 scale, exactly representable in f32), and float weights
are used as they are, so with f32 activations the only differences are f32
rounding and accumulation (~1e-7 relative per op, ~1e-5 after a 2-layer forward pass). The
bound is set far above that to also admit storing intermediates (e.g. the KV cache)
in f16: rounding *every* matmul input to f16 (half-ulp 2^-12 relative) moves
the tiny models' logits by max_rel ~2e-3 / rms_rel ~5e-4 (measured with the
reference), so max_rel <= 5e-3 and rms_rel <= 1e-3 still hold with 2x headroom.
Anything that is actually wrong (rope pairing, base, rope_freqs, eps, biases,
tied output) moves the logits by max_rel >= 0.28 (tests/py/test_reference.py checks
this for every feature), i.e. 50x the bound. Measured: the engine gives max_rel
0.6e-6..1.9e-6 / rms_rel 1.5e-7..3e-7 for every type and ISA level, and the
reference with f32 matmuls 2.4e-6..8e-6 / 5.5e-7..8e-7. In exact mode int8
activations would show up as max_rel >= 0.045, 9x over the bound.

Int8 mode, tiny models (W8A8 / W4A8: Q8_0, Q4_0, Q4_1 with 32-blocks; Q4_K, Q6_K with 256-blocks)
-----------------------------------------------------------------------------------------------
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
simulated error stays below half of each bound; the engine measured max_rel
0.045-0.064 / rms_rel 0.012-0.016 (B=32) and 0.095-0.115 / 0.021-0.024 (B=256).

SmolLM2-135M (Q4_1 layers, Q8_0 token_embd/output, 30 layers), exact mode
-------------------------------------------------------------------------
Only f32 rounding, now over 30 layers and longer dot products. With the unit
roundoff u = 2^-24 ~ 6e-8:
  * a length-n dot product accumulated in f32 (sequentially, the worst of the
    usual orders; SIMD lanes and blocked sums do better) makes n roundings of
    partial sums that grow like sqrt(k); for random-sign terms they add in
    quadrature to a relative output error of ~u*sqrt(n/6): ~1.0e-6 for
    ffn_down (n = 1536), ~6e-7 for the n = 576 projections; rounding the inputs
    to f32 and the f32 norm/rope/softmax/silu add terms of order u;
  * 7 matmuls per layer * 30 + the output projection = 211, adding in
    quadrature (the int8 analysis above shows the network neither amplifies
    nor damps relative errors much: its estimate and simulation agree within
    2x): rms_rel ~ sqrt(211) * 1e-6 ~ 1.5e-5, call it 2e-5;
  * the max over 8 x 49152 logits of a Gaussian-like error is ~5x its RMS:
    max_rel ~ 1e-4.
Bounds at 10x that estimate: max_rel 1e-3, rms_rel 2e-4 -- margin for the
estimate's factor-of-a-few uncertainty (summation order, approximate expf or
1/sqrt in the engine), not a fit to the engine. For comparison: running every
matmul of the reference in float32 (Reference.forward(f32_matmul=True);
test_reference.py asserts it stays below a tenth of the bounds) gives
max_rel 1.1e-5 / rms_rel 2.1e-6, and the engine measured max_rel 2.8e-6..1.5e-5 /
rms_rel 5.6e-7..2.6e-6 (avx512 .. scalar), so the estimate is pessimistic and the
bound has >= 60x headroom over anything measured. Int8 activations give
max_rel ~0.18 (180x the bound), so an accidental fall back to W4A8 fails; so
would an f16 KV cache, which is not exact mode. Greedy decoding (test_real_model.py)
must equal the reference's wherever the reference's top-1/top-2 margin exceeds
2 * max_rel * rms(ref logits) (each of the two logits may move by max_rel * rms).

SmolLM2-135M, int8 mode (--int8-act)
------------------------------------
Same estimate as for the tiny models with N_q = 4*30 + 1 = 121 rounding points
and eps ~0.57%: rms_rel ~ sqrt(121)*0.57% ~ 6%, max over 8 x 49152 logits ~5x
that ~ 30%. Bounds at 2x the estimate: rms_rel 0.12, max_rel 0.60. The
simulation gives rms_rel ~0.04 and max_rel ~0.17-0.19 (3x headroom); the engine
measured max_rel 0.18-0.20 / rms_rel 0.03-0.04.

F16 mode (--f16-act; W4A16 for Q8_0, Q4_0, Q4_1; other types as in exact mode)
-----------------------------------------------------------------------------
The weights are the reference's; the error is the rounding of each matmul input
to fp16, plus the accumulation: f32 on x86 and in the scalar twins (negligible,
as in exact mode), fp16 FMLA on ARM CPUs with FP16 arithmetic.
  * rounding to nearest on an 11-bit significand leaves a relative error of at
    most 2^-12..2^-11 (by where the value sits in its binade), RMS eps_h ~2e-4;
    values in the fp16 subnormal range (< 6.1e-5) keep only an absolute 2^-25;
  * as for int8 above, independent input errors give an output error of the same
    relative size and the N_q rounding points add in quadrature: tiny models
    (N_q = 9) rms_rel ~3 eps_h ~6e-4, max over ~5000 logits ~4x ~2.4e-3;
    SmolLM2 (N_q = 121: its Q8_0 output head has W4A16 kernels too) rms_rel
    ~11 eps_h ~2.2e-3, max over 8 x 49152 logits ~5x ~1.1e-2;
  * ARM FP16 FMLA: per 32-element block each fp16 lane sums 4 products with 4
    roundings of partial sums of 1..4 terms, error variance ~(1+2+3+4)/3 u_h^2
    sigma_p^2 per lane, 2.5x the variance the rounding of the inputs adds
    (Q4_1 also sums x in fp16): rms ~sqrt(1 + 2.5) ~1.9x the x86 figure; allow 2.5x.
Bounds, with f32 accumulation, at 3x (tiny) / 2x (SmolLM2) the estimates like
the int8 bounds: tiny max_rel 7.5e-3, rms_rel 1.8e-3; SmolLM2 max_rel 2.2e-2,
rms_rel 4.4e-3. With fp16 accumulation (pllm_cli.fp16_arith(isa)) 2.5x those:
tiny 1.9e-2 / 4.5e-3, SmolLM2 5.5e-2 / 1.1e-2. Rounding the reference's matmul
inputs the same way (Reference.forward(act_f16=True)) gives max_rel 1.5e-3..2.2e-3 /
rms_rel 4.1e-4..5.4e-4 on the tiny models and 3.9e-3..5.3e-3 / 1.1e-3..1.3e-3 on
SmolLM2 (Q4_0/Q4_1/Q8_0 files); test_reference.py asserts it stays below half of
the f32-accumulation bounds. The engine (x86, avx512/avx2/scalar) measured max_rel
1.1e-3..2.3e-3 / rms_rel 1.4e-4..5.4e-4 (tiny) and 3.5e-3..6.3e-3 / 0.9e-3..2.3e-3
(SmolLM2) against either reference. It is not much closer to the act_f16 reference
than to the plain one: rounding to fp16 is discontinuous, so the engine's f32
activations (within ~1e-6 of the reference's) round the other way wherever they
sit that close to a rounding boundary, and the network spreads those flips
(perturbing the act_f16 reference's matmul inputs by 1e-7 before rounding moves
its logits by max_rel 1.3e-3 / rms_rel 2.7e-4). So both comparisons use these
bounds, and a separate test checks --f16-act is not silently the exact path
(for Q4_0/Q4_1/Q8_0 models its logits must differ from exact mode's by > 1e-4
relative; measured >= 1e-3). Int8 activations (max_rel >= 0.045 tiny, >= 0.16
SmolLM2) exceed every f16 bound by >= 2.4x, a wrong model feature by >= 15x.
ARM end to end is not run here (kernels only, under qemu), so the 2.5x factor
is an estimate, not a measurement.

Int16 mode (--int16-act; every block-quantised weight type, float weights exact)
-----------------------------------------------------------------------------
Each matmul input is rounded per 32 values to d * q, d = amax / 32767: an error of at
most half a step, 2^-16 of the block maximum, on every value (int8 mode: 2^-8). Its
size relative to a value depends on how far the block's largest value stands above
the rest, which a formula cannot know, so the bound is scaled from the rounding
itself: the reference with its matmul inputs rounded the same way
(Reference.forward(act_i16=True)) against the plain reference. Tiny models: max_rel
4.7e-4..9.5e-4, rms_rel 1.2e-4..2.5e-4; the float bound (5e-3, 1e-3) stays above 4x
that, so int16 mode keeps the exact-mode bound. SmolLM2 (Q4_1, 8 ids): max_rel
1.5e-3, rms_rel 2.6e-4 (SmolLM2's outlier channels make some blocks' maxima large);
bound at 3x: 4.5e-3 / 8e-4, a fifth of the f16-mode bound. test_reference.py asserts
the reference's own effect stays below half of each bound. As in f16 mode the engine's
f32 inputs sit within ~1e-6 of the reference's and cross rounding steps the reference
does not, so the engine is compared with both references under the same bound; a
separate test checks --int16-act is not silently the exact path (quantised tiny models
move by max_rel > 1e-4 against exact mode).

Engine vs engine (thread counts, prefix of a longer batch)
---------------------------------------------------------
Both runs apply identical rounding; what differs is at most f32 summation order
and, in int8 mode, rarely an int8 rounding decision flipping by one step (~1e-3
relative on one output); in f16 mode the fp16 rounding flips described above
(max_rel ~1.3e-3). Bound: max_rel 1e-2 for every type and every mode.
"""
from __future__ import annotations

FLOAT_TYPES = {"F32", "F16", "BF16"}
BLOCK32_TYPES = {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL"}
# 256-element blocks (int8 mode: Q8_K activations), llama.cpp's low-bit types included
# (test_lowbit_models.py)
K_TYPES = {"Q4_K", "Q6_K", "Q2_K", "Q3_K", "Q5_K", "IQ4_XS"}

# Activation modes: "exact" = `--exact`, "int8" = `--int8-act`, "f16" = `--f16-act` (W4A16),
# "int16" = `--int16-act` (the engine's default).
EXACT = "exact"
INT8 = "int8"
F16 = "f16"
I16 = "int16"
MODES = (EXACT, INT8, F16, I16)
F16_ACT_TYPES = {"Q8_0", "Q4_0", "Q4_1"}  # types with W4A16 kernels

# (max_rel, rms_rel)
FLOAT_TOL = (5e-3, 1e-3)

# Exact mode: every type gets the float bound (weights dequantised exactly).
TINY_TOL = {t: FLOAT_TOL for t in FLOAT_TYPES | BLOCK32_TYPES | K_TYPES}

# Int8 mode (--int8-act): float weights still take f32 activations.
TINY_TOL_INT8 = {
    **{t: FLOAT_TOL for t in FLOAT_TYPES},
    **{t: (0.20, 0.05) for t in BLOCK32_TYPES},
    **{t: (0.35, 0.09) for t in K_TYPES},
}

# F16 mode (--f16-act): the W4A16 types; the others are exact mode. FP16_ACC: ARM
# kernels accumulating in fp16 (2.5x, see above).
TINY_TOL_F16 = {
    **{t: FLOAT_TOL for t in FLOAT_TYPES | K_TYPES | (BLOCK32_TYPES - F16_ACT_TYPES)},
    **{t: (7.5e-3, 1.8e-3) for t in F16_ACT_TYPES},
}
FP16_ACC_FACTOR = 2.5

SMOLLM2_EXACT_TOL = (1e-3, 2e-4)
SMOLLM2_TOL = (0.60, 0.12)  # int8 mode
SMOLLM2_F16_TOL = (2.2e-2, 4.4e-3)  # f16 mode, f32 accumulation
SMOLLM2_I16_TOL = (4.5e-3, 8e-4)  # int16 mode

# Gemma 3 270M (Q4_K_M: Q5_0/Q8_0/Q4_K/Q6_K weights, 18 layers, 262144-token tied output).
# Exact mode: the SmolLM2 estimate with fewer matmuls (7 * 18 + 1 = 127 vs 211) and
# similar lengths (n <= 2048): the SmolLM2 bounds. The reference with f32 matmuls gives
# max_rel 6.4e-6 / rms_rel 8.5e-7 and the engine measured 1.5e-6..2.4e-6 / 3.1e-7..3.8e-7.
# Int8 mode: N_q = 4 * 18 + 1 = 73 rounding points, per layer the q/k/v and gate/up inputs
# in Q8_0 blocks (eps ~0.57%), attn_output (Q4_K) and the heavy-tailed ffn_down input
# (Q6_K) in Q8_K blocks (eps ~0.8%, ~1%): ~1.5% per layer, rms_rel ~ sqrt(18) * 1.5% ~ 6.4%,
# max over 12 x 262144 logits ~5x that ~ 32%. Bounds at 2x: max_rel 0.65, rms_rel 0.13.
# Simulated: 0.26 / 0.040; the engine measured 0.25-0.34 / 0.037-0.051.
GEMMA3_EXACT_TOL = SMOLLM2_EXACT_TOL
GEMMA3_TOL = (0.65, 0.13)  # int8 mode
# Int16 mode: the reference's own int16 rounding on the 6 short ids is max_rel 4.5e-4,
# rms_rel 9.5e-5 (f32 KV); bound at 3x, as for SmolLM2.
GEMMA3_I16_TOL = (1.5e-3, 3e-4)

CONSISTENCY_MAX_REL = 1e-2

# Fraction of positions whose argmax must agree with the reference. In addition
# every position whose reference top-1/top-2 margin exceeds 2 * (max_rel * rms)
# must agree (no allowed error can flip those).
ARGMAX_MIN_FRACTION = {"float": 0.9, "quant": 0.75}


def mode_args(mode: str) -> list[str]:
    """CLI flags selecting an activation mode (for run, chat, logits and bench)."""
    if mode not in MODES:
        raise ValueError(mode)
    return {EXACT: ["--exact"], INT8: ["--int8-act"], F16: ["--f16-act"], I16: ["--int16-act"]}[mode]


def _scaled(t: tuple[float, float], f: float) -> tuple[float, float]:
    return (t[0] * f, t[1] * f)


def tol_for(wtype: str, mode: str = EXACT, fp16_acc: bool = False) -> tuple[float, float]:
    """Tiny-model bound; fp16_acc: the f16-mode kernels accumulate in fp16 (ARM FP16)."""
    if mode not in MODES:
        raise ValueError(mode)
    if mode == F16:
        t = TINY_TOL_F16[wtype]
        return _scaled(t, FP16_ACC_FACTOR) if fp16_acc and wtype in F16_ACT_TYPES else t
    return (TINY_TOL if mode in (EXACT, I16) else TINY_TOL_INT8)[wtype]


def smollm2_tol(mode: str = EXACT, fp16_acc: bool = False) -> tuple[float, float]:
    if mode not in MODES:
        raise ValueError(mode)
    if mode == F16:
        return _scaled(SMOLLM2_F16_TOL, FP16_ACC_FACTOR) if fp16_acc else SMOLLM2_F16_TOL
    return {EXACT: SMOLLM2_EXACT_TOL, I16: SMOLLM2_I16_TOL}.get(mode, SMOLLM2_TOL)


def argmax_min_fraction(wtype: str, mode: str = EXACT) -> float:
    exact_like = mode in (EXACT, F16, I16) or wtype in FLOAT_TYPES
    return ARGMAX_MIN_FRACTION["float" if exact_like else "quant"]


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
