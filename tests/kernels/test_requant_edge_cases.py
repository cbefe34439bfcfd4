"""Exact edge cases of ESP-NN's requantization, against TFLite's integer formulas.

The oracle is TFLite's documented integer arithmetic (SRDHM, RDBP and MBQM with
ESP-NN's wrapping left shift), written in tests/support/tflite_reference.py independently
of the C++ under test and shared with the op tests; test_oracle_examples below
guards the oracle itself. TFLite leaves the overflow of x * 2^s undefined, so
only a few cases below exercise it.

The values are observed through the kernels with size-1 tensors.  mul_s8
computes clamp(MBQM((x1 + o1) * (x2 + o2), m, s) + out_offset): with x1 = x2 = 0,
o1 = X and o2 = 1 the MBQM input is any int32 X.  The output is only 8 bits,
so out_offset is chosen as (target - expected) with a small target: the
kernel then returns exactly `target`, and any error d in the int32 requantized
value shows up as target + d (clamped, so still visibly wrong).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from support.tflite_reference import INT32_MAX, INT32_MIN, mbqm, rdbp, srdhm, wrap32


# ---- access through the kernels -------------------------------------------------


@pytest.fixture(scope="module")
def kernels():
    from executorch_espnn import _native  # the built extension; no fallback

    return _native.kernels


def _target_for(expected: int) -> int:
    # keeps out_offset = target - expected inside int32
    return 50 if expected >= 0 else -50


def kernel_mbqm_matches(kernels, x: int, m: int, s: int) -> tuple[int, int]:
    """Run MBQM(x, m, s) through mul_s8; return (observed, wanted) int8 outputs."""
    expected = int(mbqm(x, m, s))
    target = _target_for(expected)
    zero = np.zeros(1, np.int8)
    out = kernels.mul_s8(
        zero, zero, in1_offset=x, in2_offset=1, out_offset=target - expected,
        out_mult=m, out_shift=s, act_min=-128, act_max=127,
    )
    assert out.dtype == np.int8 and out.shape == (1,)
    return int(out[0]), target


def check(kernels, x: int, m: int, s: int) -> None:
    got, want = kernel_mbqm_matches(kernels, x, m, s)
    assert got == want, (
        f"MBQM(x={x}, mult={m}, shift={s}): kernel is off by {got - want} "
        f"from TFLite's {mbqm(x, m, s)}"
    )


# ---- the oracle itself (guards against a wrong test) ----------------------------


def test_oracle_examples():
    assert srdhm(1, 1 << 30) == 1  # +0.5 rounds up
    assert srdhm(-1, 1 << 30) == 0  # -0.5 rounds toward +inf in SRDHM
    assert srdhm(-3, 1 << 30) == -1  # -1.5 -> -1
    assert srdhm(INT32_MIN, INT32_MIN) == INT32_MAX
    assert srdhm(INT32_MIN, INT32_MAX) == -INT32_MAX
    assert rdbp(5, 1) == 3 and rdbp(-5, 1) == -3  # ties away from zero
    assert rdbp(6, 2) == 2 and rdbp(-6, 2) == -2
    assert rdbp(5, 2) == 1 and rdbp(-5, 2) == -1
    assert mbqm(100, 1 << 30, 0) == 50


# ---- edge cases through the kernel ----------------------------------------------

MULTS = [1 << 30, INT32_MAX, 1518500250, 1073741825, 2**31 - 2**20]
XS = [0, 1, -1, 2, -2, 3, -3, 255, -255, 65025, -65025, 12345678, -12345678, INT32_MAX, INT32_MIN]


@pytest.mark.parametrize("shift", range(-31, 31))
def test_every_shift(kernels, shift):
    for x, m in itertools.product(XS, MULTS):
        if shift > 0 and x * (1 << shift) != wrap32(x * (1 << shift)):
            continue  # overflowing left shifts are covered separately
        check(kernels, x, m, shift)


@pytest.mark.parametrize("right", range(1, 32))
def test_rdbp_exact_ties(kernels, right):
    # mult = 2^30 halves exactly, so SRDHM(2r, 2^30) = r; pick r = (2k+1) * 2^(right-1),
    # an exact tie for the rounding right shift, on both sides of zero.
    half = 1 << (right - 1)
    for k in (0, 1, 2, 7):
        r = (2 * k + 1) * half
        for sign in (1, -1):
            x = sign * 2 * r
            if not INT32_MIN <= x <= INT32_MAX:
                continue
            assert srdhm(x, 1 << 30) == sign * r
            check(kernels, x, 1 << 30, -right)
            # one below / above the tie must round the other way
            for delta in (-2, 2):
                if INT32_MIN <= x + delta <= INT32_MAX:
                    check(kernels, x + delta, 1 << 30, -right)


def test_rdbp_tie_at_31_with_int32_min(kernels):
    # SRDHM(INT32_MIN, 2^30) = -2^30 exactly; RDBP(-2^30, 31) is the tie -0.5 -> -1
    assert mbqm(INT32_MIN, 1 << 30, -31) == -1
    check(kernels, INT32_MIN, 1 << 30, -31)


def test_srdhm_ties_and_signs(kernels):
    # products that land exactly on +-0.5 ulp of the Q31 result
    for x in (1, -1, 3, -3, 5, -5, 1 << 20, -(1 << 20) - 1):
        for m in (1 << 30, -(1 << 30), 3 << 29):
            check(kernels, x, m, 0)


def test_int32_min_saturation(kernels):
    # SRDHM(INT32_MIN, INT32_MIN) is the one overflowing product: INT32_MAX
    for s in (0, -1, -2, -15, -30, -31):
        check(kernels, INT32_MIN, INT32_MIN, s)
    assert mbqm(INT32_MIN, INT32_MIN, 0) == INT32_MAX
    # neighbours do not saturate
    check(kernels, INT32_MIN + 1, INT32_MIN, 0)
    check(kernels, INT32_MIN, INT32_MIN + 1, 0)
    check(kernels, INT32_MIN, INT32_MAX, 0)
    check(kernels, INT32_MAX, INT32_MAX, 0)


@pytest.mark.parametrize("m", [1 << 30, INT32_MAX])
def test_extreme_multipliers(kernels, m):
    for x in (INT32_MIN, INT32_MIN + 1, -(1 << 30), -1, 0, 1, 1 << 30, INT32_MAX):
        for s in (-31, -20, -1, 0):
            check(kernels, x, m, s)


def test_left_shift_wraps_like_espnn(kernels):
    # ESP-NN forms x * 2^s in int32 with wrap-around before SRDHM
    for x, s in ((1 << 20, 12), (-(1 << 20), 12), (3, 30), (-3, 30), (12345, 20), (INT32_MAX, 1)):
        assert wrap32(x * (1 << s)) != x * (1 << s)
        check(kernels, x, 1 << 30, s)


def test_random_against_oracle(kernels):
    rng = np.random.default_rng(1234)
    for _ in range(2000):
        x = int(rng.integers(INT32_MIN, INT32_MAX, endpoint=True)) >> int(rng.integers(0, 31))
        m = int(rng.integers(1 << 30, 1 << 31))
        s = int(rng.integers(-31, 31))
        check(kernels, x, m, s)


def test_add_kernel_composition(kernels):
    """add_s8's own chain: per-input SRDHM + RDBP after a left pre-shift, then the sum."""
    zero = np.zeros(1, np.int8)
    cases = [
        # (o1, o2, m1, m2, sh1, sh2, left_shift, out_mult, out_shift)
        (255, -255, INT32_MAX, 1 << 30, 0, -1, 20, 1 << 30, -20),
        (-128, 127, 1 << 30, 1 << 30, -1, -1, 20, INT32_MAX, -31),
        (1, 0, 1 << 30, 1 << 30, -21, 0, 20, 1 << 30, 0),  # 2^20 * 1/2 / 2^21 = 0.25 -> 0
        (3, 0, 1 << 30, 1 << 30, -21, 0, 20, 1 << 30, 0),  # 0.75 -> 1
        (-3, -1, 1 << 30, 1 << 30, -20, -20, 0, 1 << 30, 0),  # ties on negative values
        (INT32_MIN, 0, INT32_MIN, 1 << 30, 0, 0, 0, INT32_MAX, 0),  # SRDHM(MIN, MIN) = MAX
        (5, 7, 1518500250, 1073741825, -3, -5, 20, 1317922825, -19),
    ]
    for o1, o2, m1, m2, sh1, sh2, ls, mo, sho in cases:
        a = rdbp(srdhm(wrap32(o1 << ls), m1), -sh1)
        b = rdbp(srdhm(wrap32(o2 << ls), m2), -sh2)
        expected = int(rdbp(srdhm(wrap32(a + b), mo), -sho))
        target = _target_for(expected)
        out = kernels.add_s8(
            zero, zero, in1_offset=o1, in2_offset=o2, in1_mult=m1, in2_mult=m2, in1_shift=sh1,
            in2_shift=sh2, left_shift=ls, out_offset=target - expected, out_mult=mo, out_shift=sho,
            act_min=-128, act_max=127,
        )
        params = (o1, o2, m1, m2, sh1, sh2, ls, mo, sho)
        assert int(out[0]) == target, f"add case {params}: off by {int(out[0]) - target}"

