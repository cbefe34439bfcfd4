"""TFLite's integer arithmetic and parameter recipes, written for the tests from TFLite's documented formulas.

These are oracles: the product never imports this module, and nothing here is derived from the runtime's
C++ or from executorch_espnn. Op-specific transcriptions (conv accumulators, softmax's fixed-point
exp, hard-swish's int16 pipeline, ...) stay in their test files; this module holds what several of them share.
Everything works element-wise on numpy int64 arrays (Python ints are accepted and give 0-d arrays).

* SaturatingRoundingDoublingHighMul (SRDHM): the product a*b, a nudge of +2^30 (product >= 0) or
  1 - 2^30 (product < 0), then division by 2^31 truncating toward zero; SRDHM(INT32_MIN, INT32_MIN)
  saturates to INT32_MAX.
* RoundingDivideByPOT (RDBP): mask = 2^e - 1, remainder = x & mask, threshold = (mask >> 1) + (x < 0),
  result = (x >> e) + (remainder > threshold), i.e. round to nearest with ties away from zero.
* MultiplyByQuantizedMultiplier (MBQM, double rounding): RDBP(SRDHM(x * 2^max(s, 0), m), max(-s, 0)).
  ESP-NN forms x * 2^s in int32 with wrap-around (reference/espnn-kernels.md, section 2.1); TFLite
  leaves that overflow undefined.
* QuantizeMultiplier: d = m * 2^(e - 31) with m in [2^30, 2^31), rounded half away from zero.
"""

from __future__ import annotations

import math

import numpy as np

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


# ---- integer arithmetic ----------------------------------------------------------------


def wrap32(v):
    """Two's-complement wrap-around to int32 (ESP-NN is built with -fwrapv semantics)."""
    v = np.asarray(v, np.int64)
    return ((v + 2**31) & 0xFFFFFFFF) - 2**31


def in_int32(v):
    """v, asserted to lie inside int32 (for formulas whose overflow TFLite leaves undefined)."""
    assert np.all((v >= INT32_MIN) & (v <= INT32_MAX)), "test case leaves int32"
    return v


def srdhm(a, b):
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    ab = a * b
    num = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    q = np.where(num >= 0, num // 2**31, -((-num) // 2**31))  # truncation toward zero
    return np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, q)


def rdbp(x, e):
    x = np.asarray(x, np.int64)
    e = np.asarray(e, np.int64)
    assert np.all((e >= 0) & (e <= 31))
    mask = (np.int64(1) << e) - 1
    threshold = (mask >> 1) + (x < 0)
    return (x >> e) + ((x & mask) > threshold)


def mbqm(x, m, s, *, wrap: bool = True):
    """MBQM with a signed exponent s (positive = left shift).

    wrap=True: the left shift wraps in int32 like ESP-NN's; wrap=False: the case must not overflow
    (asserted), for tests that claim TFLite's formula, which leaves the overflow undefined.
    """
    x, m, s = (np.asarray(a, np.int64) for a in (x, m, s))
    shifted = x * (np.int64(1) << np.maximum(s, 0))
    shifted = wrap32(shifted) if wrap else in_int32(shifted)
    return rdbp(srdhm(shifted, m), np.maximum(-s, 0))


def requant(acc, mult, shift, out_off, act):
    """The conv family's output stage: clamp(MBQM(acc, mult, shift) + out_off, act) as int8."""
    return np.clip(wrap32(mbqm(acc, mult, shift) + out_off), act[0], act[1]).astype(np.int8)


# ---- parameter recipes (the AOT side, from float scales) -----------------------------------


def quantize_multiplier(d: float) -> tuple[int, int]:
    """TFLite QuantizeMultiplier (double rounding build): d = m * 2^(e - 31), m in [2^30, 2^31)."""
    if d == 0:
        return 0, 0
    q, e = math.frexp(d)
    m = math.floor(q * 2**31 + 0.5)  # q > 0: round half away from zero
    if m == 2**31:
        m, e = 2**30, e + 1
    if e < -31:
        return 0, 0
    return m, e


def per_channel_multipliers(s_in, s_w, s_out) -> tuple[np.ndarray, np.ndarray]:
    """int32 mult and shift arrays, one per weight scale: QuantizeMultiplier(s_in * s_w[o] / s_out)."""
    qm = [quantize_multiplier(float(s_in) * float(sw) / float(s_out)) for sw in s_w]
    return np.array([m for m, _ in qm], np.int32), np.array([e for _, e in qm], np.int32)


def activation_range(fused, s_out, zp_out) -> tuple[int, int]:
    """TFLite CalculateActivationRangeQuantized (float32 division, roundf).

    fused: "relu", "relu6" or "relu_n1_to_1"; anything else means no fused activation.
    """
    def q(f):
        r = np.float32(f) / np.float32(s_out)
        return zp_out + int(math.copysign(math.floor(abs(float(r)) + 0.5), float(r)))
    lo, hi = -128, 127
    if fused == "relu":
        lo = max(lo, q(0.0))
    elif fused == "relu6":
        lo, hi = max(lo, q(0.0)), min(hi, q(6.0))
    elif fused == "relu_n1_to_1":
        lo, hi = max(lo, q(-1.0)), min(hi, q(1.0))
    return lo, hi


def derive_output(acc, s_in, s_w, out_zp=None):
    """Output quantization for a random conv-family layer with int32 accumulators acc.

    The output scale spans the layer's real output range with 300 levels over 256 codes, so both
    ends saturate a little; then TFLite's per-channel multipliers. Returns (s_out, out_zp, mult, shift).
    """
    real = acc * (float(s_in) * s_w.astype(np.float64))
    lo, hi = min(real.min(), 0.0), max(real.max(), 1e-3)
    s_out = np.float32((hi - lo) / 300.0)
    if out_zp is None:
        out_zp = int(np.clip(round(-128 - lo / float(s_out)) - 20, -128, 127))
    mult, shift = per_channel_multipliers(s_in, s_w, s_out)
    return s_out, out_zp, mult, shift
