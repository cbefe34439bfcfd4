"""Ahead-of-time integer parameters for ESP-NN / TFLite int8 kernels.

These are the compile-time computations that TFLite(-Micro) does in its
``Prepare`` functions and that ESP-NN expects its caller to have done:
QuantizeMultiplier, activation ranges, the add/softmax/mean/hard-swish
recipes. Scales are rounded to float32 first, as TFLite stores them, so the
results are bit-identical to what esp-tflite-micro passes to ESP-NN (the
golden vectors in tests/kernels check every formula here against the real
library's cases) — except the mean and requantize multipliers
(single_rounding_multiplier), which round once where TFLM's recipes round
twice.
"""

from __future__ import annotations

import math

import numpy as np

from . import _native

INT32_MAX = 2**31 - 1

# TFLite fused-activation codes (also used by the golden vectors).
ACT_NONE, ACT_RELU, ACT_RELU_N1_TO_1, ACT_RELU6 = 0, 1, 2, 3


def f32(x: float) -> float:
    """x rounded to float32 and widened back to a Python float."""
    return float(np.float32(x))


def _round_half_away(x: float) -> int:
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


def quantize_multiplier(d: float) -> tuple[int, int]:
    """TFLite QuantizeMultiplier: d ~= m * 2^(e - 31), m in [2^30, 2^31).

    Returns (m, e); e is a signed exponent, positive = left shift, which is
    ESP-NN's `shift` convention. d == 0 (or too small to represent) -> (0, 0).
    """
    if d == 0.0:
        return 0, 0
    q, e = math.frexp(d)
    m = _round_half_away(q * (1 << 31))
    if m == 1 << 31:
        m //= 2
        e += 1
    if e < -31:
        return 0, 0
    return m, e


def quantize_multiplier_smaller_than_one(d: float) -> tuple[int, int]:
    if not 0.0 < d < 1.0:
        raise ValueError(f"multiplier {d} must be in (0, 1)")
    m, e = quantize_multiplier(d)
    if e > 0:
        raise ValueError(f"multiplier {d} gives a left shift {e}")
    return m, e


def activation_range(act: int, scale: float, zero_point: int) -> tuple[int, int]:
    """TFLite CalculateActivationRangeQuantized for int8 ([-128, 127] base)."""

    def q(v: float) -> int:
        # float32 division, then std::round (half away from zero)
        return zero_point + _round_half_away(float(np.float32(v) / np.float32(scale)))

    if act == ACT_NONE:
        return -128, 127
    if act == ACT_RELU:
        return max(-128, q(0.0)), 127
    if act == ACT_RELU6:
        return max(-128, q(0.0)), min(127, q(6.0))
    if act == ACT_RELU_N1_TO_1:
        return max(-128, q(-1.0)), min(127, q(1.0))
    raise ValueError(f"unknown fused activation {act}")


def conv_multipliers(s_in: float, s_w: np.ndarray, s_out: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel (mult, shift) for conv, depthwise and per-channel FC.

    Double product of the float32 scales, as TFLite's PopulateConvolutionQuantizationParams.
    """
    pairs = [quantize_multiplier(f32(s_in) * f32(w) / f32(s_out)) for w in np.atleast_1d(s_w)]
    return (np.array([m for m, _ in pairs], np.int32), np.array([e for _, e in pairs], np.int32))


def fc_per_tensor_multiplier(s_in: float, s_w: float, s_out: float) -> tuple[int, int]:
    """Per-tensor FC: the input x weight scale product is taken in float32 first."""
    return quantize_multiplier(f32(np.float32(s_in) * np.float32(s_w)) / f32(s_out))


def add_params(s1: float, s2: float, s_out: float, left_shift: int = 20) -> dict:
    """TFLite int8 ADD parameters (every shift <= 0)."""
    twice = 2.0 * max(f32(s1), f32(s2))
    m1, e1 = quantize_multiplier_smaller_than_one(f32(s1) / twice)
    m2, e2 = quantize_multiplier_smaller_than_one(f32(s2) / twice)
    mo, eo = quantize_multiplier_smaller_than_one(twice / ((1 << left_shift) * f32(s_out)))
    return dict(input1_mult=m1, input1_shift=e1, input2_mult=m2, input2_shift=e2, left_shift=left_shift,
                output_mult=mo, output_shift=eo)


def mul_multiplier(s1: float, s2: float, s_out: float) -> tuple[int, int]:
    return quantize_multiplier(f32(s1) * f32(s2) / f32(s_out))


def softmax_params(s_in: float, beta: float = 1.0) -> dict:
    """int8 -> int8 softmax: input multiplier/left shift and diff_min (5 integer bits)."""
    real = min(f32(beta) * f32(s_in) * float(1 << 26), float(INT32_MAX))
    mult, shift = quantize_multiplier(real)
    diff_min = -math.floor(31.0 * (1 << 26) / (1 << shift))
    return dict(input_mult=mult, input_left_shift=shift, diff_min=diff_min)


def single_rounding_multiplier(real: float, max_abs: int) -> tuple[int, int]:
    """(mult, shift) such that MBQM(x, mult, shift) is x * real rounded to nearest
    once (half away from zero) for every |x| <= max_abs, up to the int32
    multiplier's error.

    QuantizeMultiplier's normalized multiplier (m in [2^30, 2^31)) needs a right
    shift of -log2(real) bits, and MBQM rounds twice: SRDHM to 2^-shift of a
    step, then RoundingDivideByPOT. A value whose fraction lies within
    2^-(shift+1) below one half of a step is rounded up, so with a shift of 1
    (real in [0.25, 0.5)) a quarter of all values land one step above x * real
    rounded. With shift 0 and mult = real * 2^31 unnormalized, MBQM is the
    single rounding of SRDHM; its error is |x| * |mult * 2^-31 - real|
    <= max_abs * 2^-32 steps. Of the right shifts whose multiplier fits int32,
    the one that bounds (double-rounding error + multiplier error) lowest is
    taken: 0 whenever max_abs * 2^-32 is below 1/4 (all int8 inputs, and any
    sum of up to 2^22 of them). real >= 1 takes the smallest left shift that
    fits mult in int32 (one rounding, as with QuantizeMultiplier).
    """
    if real <= 0.0:
        raise ValueError(f"multiplier {real} must be positive")
    if real >= 1.0:
        ls = 1
        while round(real * 2.0 ** (31 - ls)) > INT32_MAX:
            ls += 1
        return int(round(real * 2.0 ** (31 - ls))), ls
    best = None
    for rs in range(32):
        m = int(round(real * 2.0 ** (31 + rs)))
        if m > INT32_MAX:
            break
        bound = (2.0 ** -(rs + 1) if rs else 0.0) + max_abs * abs(m * 2.0 ** -(31 + rs) - real)
        if best is None or bound < best[0]:
            best = (bound, m, -rs)
    return best[1], best[2]


def mean_params(s_in: float, s_out: float, n: int) -> tuple[int, int]:
    """(mult, shift) for MEAN_HW over N = H*W elements: MBQM(sum - N*zp_in, mult,
    shift) rounds sum * s_in / (N * s_out) to nearest once
    (single_rounding_multiplier; |sum| <= 255 N).

    Not TFLM's QuantizedMeanOrSum recipe, which folds 1/N into a normalized
    multiplier (m << floor(log2 N)) // N with shift s - floor(log2 N): that
    leaves a right shift of one or two bits for the usual scale ratios, so MBQM
    rounds twice. On VWW MobileNetV1-0.25's global pool (s_in / s_out = 2.27,
    N = 9: shift -1) 28 % of the outputs came out one step above the rounded
    mean, the largest per-layer difference from the convert_pt2e model
    (tests/aot/test_layerwise_reference.py). ESP-NN's mean kernels (ANSI and
    the ESP32-S3 C version) apply the same MBQM to any int32 multiplier.
    """
    # float64 division: relative error 2^-52, far below the int32 multiplier's.
    return single_rounding_multiplier(f32(s_in) / f32(s_out) / n, 255 * n)


def hard_swish_params(s_in: float, s_out: float) -> dict:
    """TFLite HardSwish int8 parameters (float32 arithmetic, Q15 multipliers)."""

    def downscale(m: int) -> int:
        return 32767 if m >= INT32_MAX - (1 << 15) else (m + (1 << 15)) >> 16

    hires = np.float32(1.0 / 128.0) * np.float32(s_in)
    out_m = float(hires / np.float32(s_out))
    relu_m = float(hires / np.float32(3.0 / 32768.0))
    o_q31, o_exp = quantize_multiplier(out_m)
    r_q31, r_exp = quantize_multiplier(relu_m)
    return dict(output_mult_fxp=downscale(o_q31), reluish_mult_fxp=downscale(r_q31), reluish_mult_exp=r_exp,
                output_mult_exp=o_exp)


def lut_from_function(fn, s_in: float, zp_in: int, s_out: float, zp_out: int) -> np.ndarray:
    """256-entry int8 table for an elementwise function, indexed by the uint8 view of the input.

    The function is evaluated in float64 on the dequantized input and
    quantized with round half to even, so the device needs no libm.
    """
    q = np.arange(256, dtype=np.uint8).view(np.int8).astype(np.float64)
    y = fn((q - zp_in) * s_in)
    return np.clip(np.round(y / s_out) + zp_out, -128, 127).astype(np.int8)


def layer_norm_params(s_in: float, s_out: float, eps: float, width: int, gamma=None, beta=None,
                      rms: bool = False) -> dict:
    """LAYER_NORM constants and parameters (docs/xts3-format.md, LAYER_NORM).

    gamma/beta are the float affine parameters over the last dim (None when the
    module has none). Returns ``gamma_mult``/``gamma_shift`` (int32 [width], or [1]
    without gamma), ``beta`` (int32 [width] in output units, Q NORM_BETA_FRAC_BITS,
    or None) and ``params`` (the op's fields). Raises ValueError when the
    arithmetic cannot represent them (the caller keeps the op on the CPU).
    """

    eps_bits, beta_bits = _native.NORM_EPS_FRAC_BITS, _native.NORM_BETA_FRAC_BITS
    min_shift, max_shift = _native.NORM_GAMMA_SHIFT_RANGE
    if rms and beta is not None:
        raise ValueError("RMS norm has no beta")
    for what, v in (("eps", eps), ("weight", gamma), ("bias", beta)):
        if v is not None and not np.all(np.isfinite(np.asarray(v, np.float64))):
            raise ValueError(f"{what} is not finite")
    # eps in the units of the integer variance N*S2 - S1^2 (input scale^2 / N^2), Q14.
    s_in, s_out = f32(s_in), f32(s_out)
    eps_term = round(float(eps) * width * width * (1 << eps_bits) / (s_in * s_in))
    if not 0 <= eps_term < 1 << 62:
        raise ValueError(f"eps {eps} at input scale {s_in} is out of the kernel's range")
    g = np.ones(1) if gamma is None else np.asarray(gamma, np.float64).reshape(-1)
    mults, shifts = [], []
    for real in g / s_out:
        m, e = quantize_multiplier(abs(float(real)))
        if e < min_shift:  # |gamma| / s_out < 2^-25: under 2^-17 output LSB over every |z| < 256
            m, e = 0, 0
        if e > max_shift:
            raise ValueError(f"gamma / output scale = {real:g} is too large")
        mults.append(-m if real < 0 else m)
        shifts.append(e)
    beta_q = None
    if beta is not None:
        b = np.rint(np.asarray(beta, np.float64).reshape(-1) / s_out * (1 << beta_bits))
        if np.abs(b).max(initial=0) >= 2**31:
            raise ValueError("beta / output scale is out of the kernel's range")
        beta_q = b.astype(np.int32)
    return dict(gamma_mult=np.array(mults, np.int32), gamma_shift=np.array(shifts, np.int32), beta=beta_q,
                params=dict(rms_norm=int(rms), eps_lo=_int32_view(eps_term & 0xFFFFFFFF), eps_hi=eps_term >> 32))


def _int32_view(word: int) -> int:
    """The int32 whose bits are the unsigned 32-bit ``word`` (XTS3 parameter words are int32)."""
    return word - (1 << 32) if word & 0x80000000 else word


def recurrent_tables() -> tuple[np.ndarray, np.ndarray]:
    """GRU/LSTM sigmoid and tanh tables (docs/xts3-format.md, GRU and LSTM):
    int32 [RECURRENT_TABLE_ENTRIES], entry k = round(f(x_k) * 2^15) at the Q3.12
    input x_k = -8 + k * 2^(RECURRENT_TABLE_STEP_BITS - 12), clamped to the
    Q0.15 range the kernel accepts. Evaluated with Python's math module (the
    platform's libm, not a vectorised numpy), so the bytes do not depend on the
    host's SIMD extensions."""

    n, step = _native.RECURRENT_TABLE_ENTRIES, _native.RECURRENT_TABLE_STEP_BITS
    gate, state = _native.RECURRENT_GATE_FRAC_BITS, _native.RECURRENT_STATE_FRAC_BITS
    one, top = 1 << state, (1 << state) - 1
    xs = [(-(1 << 15) + (k << step)) / (1 << gate) for k in range(n)]

    def table(fn, lo):
        return np.array([min(top, max(lo, _round_half_away(fn(x) * one))) for x in xs], np.int32)

    return table(lambda x: 1.0 / (1.0 + math.exp(-x)), 0), table(math.tanh, -top)


def _per_row_int8(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 per output row (what torchao's per-channel weight observer gives):
    (int8 weights, float scale per row); an all-zero row gets scale 1."""
    w = np.asarray(w, np.float32)
    amax = np.abs(w).max(axis=1).astype(np.float64)
    scales = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    q = np.clip(np.round(w / scales[:, None]), -127, 127).astype(np.int8)
    return q, scales


def recurrent_params(w_ih, w_hh, b_ih, b_hh, s_in: float, s_out: float) -> dict:
    """Constants and parameters of one GRU or LSTM layer (docs/xts3-format.md,
    GRU and LSTM) from the float weights [G*H, I], [G*H, H] and biases [G*H]
    (None = no bias). s_in: the input sequence's scale; s_out: the output
    sequence's, which is also the scale of the hidden state w_hh reads.
    Weights are quantized per gate row (symmetric int8), biases to int32 in
    units of the row's scale product, and each row's product requantized to
    Q3.12 (RECURRENT_GATE_FRAC_BITS) with the conv recipe."""

    gate_scale = 2.0 ** -_native.RECURRENT_GATE_FRAC_BITS
    out = {}
    for name, w, b, s in (("ih", w_ih, b_ih, s_in), ("hh", w_hh, b_hh, s_out)):
        q, scales = _per_row_int8(w)
        bias_scale = np.array([f32(s) * f32(x) for x in scales], np.float64)
        bias = np.zeros(q.shape[0], np.int32)
        if b is not None:
            qb = np.round(np.asarray(b, np.float64) / bias_scale)
            if np.any(np.abs(qb) > 2**31 - 1):
                raise ValueError(f"b_{name} does not fit int32 in units of the weight x "
                                 f"{'input' if name == 'ih' else 'state'} scale product")
            bias = qb.astype(np.int32)
        mult, shift = conv_multipliers(s, scales, gate_scale)
        if np.any(shift < -31) or np.any(shift > 30):
            raise ValueError(f"w_{name}: the weight x {'input' if name == 'ih' else 'state'} scale product is "
                             "outside the requantization range to the gate pre-activations")
        out.update({f"w_{name}": q, f"bias_{name}": bias, f"mult_{name}": mult, f"shift_{name}": shift})
    m, e = quantize_multiplier(2.0 ** -_native.RECURRENT_STATE_FRAC_BITS / s_out)
    if e < -31 or e > 30 or m == 0:
        raise ValueError(f"output scale {s_out} is outside the requantization range of the hidden state")
    out["sigmoid"], out["tanh"] = recurrent_tables()
    out["params"] = {"state_mult": m, "state_shift": e}
    return out
