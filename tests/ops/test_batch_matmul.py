"""BATCH_MATMUL through the native interpreter (single-op XTS3 graphs).

Oracles, independent of the C++ under test:
* the documented integer formula (docs/xts3-format.md, BATCH_MATMUL) in numpy int64, bit-exact:
  acc[.., m, n] = sum_k (lhs[.., m, k] + lhs_offset) * (rhs[.., k, n] + rhs_offset),
  y = clamp(MBQM(acc, mult, shift) + output_offset, act_min, act_max), MBQM from
  tests/support/tflite_reference.py (TFLite's double rounding);
* PyTorch's float matmul of the dequantized operands (float64, exact for these sums),
  requantized by rounding, within 1 LSB (the multiplier is a 31-bit approximation of
  s_lhs * s_rhs / s_out).
Plus rejection tests: a malformed op must fail to load with a message naming the field.
"""

from __future__ import annotations

import numpy as np
import pytest

from executorch_espnn import _native
from espnn_dev.graph_util import Const, Input, Out, build_op, rejection_message, run_op
from support.tflite_reference import in_int32, mbqm, quantize_multiplier


def reference(lhs, rhs, p):
    """lhs [B.., M, K], rhs [B.., N, K] (rhs_transposed) or [B.., K, N]; numpy broadcasting of the
    batch dims is the op's rule (equal or 1)."""
    a = lhs.astype(np.int64) + p["lhs_offset"]
    b = rhs.astype(np.int64) + p["rhs_offset"]
    if p["rhs_transposed"]:
        b = np.swapaxes(b, -1, -2)
    acc = in_int32(a @ b)
    y = mbqm(acc, p["mult"], p["shift"], wrap=False) + p["output_offset"]
    return np.clip(y, p["act_min"], p["act_max"]).astype(np.int8)


def params(lhs_offset=0, rhs_offset=0, output_offset=0, mult=2**30, shift=-8, act_min=-128, act_max=127,
           rhs_transposed=1):
    return dict(lhs_offset=lhs_offset, rhs_offset=rhs_offset, output_offset=output_offset, mult=mult,
                shift=shift, act_min=act_min, act_max=act_max, rhs_transposed=rhs_transposed)


def out_shape(lhs, rhs, transposed):
    n = rhs.shape[-2] if transposed else rhs.shape[-1]
    batch = np.broadcast_shapes(lhs.shape[:-2], rhs.shape[:-2])
    return tuple(batch) + (lhs.shape[-2], n)


def run(lhs, rhs, rhs_const=False, **p):
    p = params(**p)
    shape = out_shape(lhs, rhs, p["rhs_transposed"])
    return run_op("BATCH_MATMUL", [Input(lhs), Const(rhs) if rhs_const else Input(rhs)], Out(shape), **p)


def rand(rng, shape):
    return rng.integers(-128, 128, size=shape, dtype=np.int8)


# ---- the integer formula, bit-exact ---------------------------------------------------------


@pytest.mark.parametrize("transposed", [1, 0])
@pytest.mark.parametrize("lhs_shape,rhs_shape", [
    ((5, 7), (9, 7)),                      # rank 2, K not a multiple of 16 (row copies)
    ((4, 16, 32), (4, 16, 32)),            # attention-like: aligned rows
    ((1, 4, 6, 16), (1, 4, 6, 16)),        # [1, heads, tokens, head_dim]
    ((2, 1, 3, 5, 11), (1, 3, 1, 13, 11)),  # rank 5, broadcast on both sides
    ((3, 2, 200), (1, 150, 200)),          # rhs broadcast over the batch, N > 128 (two ESP-NN calls)
])
def test_matches_integer_formula(transposed, lhs_shape, rhs_shape):
    rng = np.random.default_rng(sum(lhs_shape) + 7 * transposed)
    lhs = rand(rng, lhs_shape)
    rhs_nk = rand(rng, rhs_shape)  # [.., N, K]
    rhs = rhs_nk if transposed else np.ascontiguousarray(np.swapaxes(rhs_nk, -1, -2))
    k = lhs_shape[-1]
    mult, shift = quantize_multiplier(1.0 / (40.0 * np.sqrt(k)))
    p = dict(lhs_offset=-7, rhs_offset=13, output_offset=5, mult=mult, shift=shift, rhs_transposed=transposed)
    got = run(lhs, rhs, **p)
    want = reference(lhs, rhs, params(**p))
    np.testing.assert_array_equal(got, want)
    assert 0.05 < np.mean((want > -128) & (want < 127))  # not a saturated test


@pytest.mark.parametrize("transposed", [1, 0])
def test_constant_rhs(transposed):
    rng = np.random.default_rng(11)
    lhs, rhs = rand(rng, (2, 3, 24)), rand(rng, (2, 5, 24) if transposed else (2, 24, 5))
    p = dict(lhs_offset=3, rhs_offset=-100, mult=2**30 + 12345, shift=-12, rhs_transposed=transposed)
    np.testing.assert_array_equal(run(lhs, rhs, rhs_const=True, **p), reference(lhs, rhs, params(**p)))


def test_activation_clamp_and_offsets_at_the_ends():
    rng = np.random.default_rng(5)
    lhs, rhs = rand(rng, (3, 4, 20)), rand(rng, (3, 6, 20))
    for lo_off, rhs_off in [(128, -127), (-127, 128)]:
        p = dict(lhs_offset=lo_off, rhs_offset=rhs_off, output_offset=-20, mult=2**31 - 1, shift=-20,
                 act_min=-50, act_max=60)
        got = run(lhs, rhs, **p)
        np.testing.assert_array_equal(got, reference(lhs, rhs, params(**p)))
        assert got.min() >= -50 and got.max() <= 60


def test_positive_shift_within_the_bound():
    rng = np.random.default_rng(6)
    lhs, rhs = rand(rng, (2, 3, 4)), rand(rng, (2, 3, 4))
    p = dict(mult=2**30, shift=3)
    np.testing.assert_array_equal(run(lhs, rhs, **p), reference(lhs, rhs, params(**p)))


def test_scratch_bytes():
    def scratch(lhs_shape, rhs_shape, transposed):
        lhs, rhs = np.zeros(lhs_shape, np.int8), np.zeros(rhs_shape, np.int8)
        blob, _ = build_op("BATCH_MATMUL", [Input(lhs), Input(rhs)], [Out(out_shape(lhs, rhs, transposed))],
                           **params(rhs_transposed=transposed))
        return _native.Program(blob).scratch_bytes

    assert scratch((2, 4, 32), (2, 8, 32), 1) == 0        # filter used in place, rows aligned
    assert scratch((2, 4, 5), (2, 8, 5), 1) == 16         # one aligned row copy
    assert scratch((2, 4, 32), (2, 32, 8), 0) == 256      # one batch's rhs transposed
    assert scratch((2, 4, 5), (2, 5, 3), 0) == 16 + 16    # 15 bytes rounded up, then the row copy


# ---- PyTorch float, within 1 LSB ----------------------------------------------------------------


@pytest.mark.parametrize("transposed", [1, 0])
def test_matches_pytorch_float_matmul(transposed):
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(21 + transposed)
    qf = torch.randn(1, 4, 16, 16, generator=g)
    kf = torch.randn(1, 4, 16, 16, generator=g) * 0.5 + 0.2
    s_a, zp_a, s_b, zp_b = 0.03, 4, 0.011, -9
    a = torch.clamp(torch.round(qf / s_a) + zp_a, -128, 127).to(torch.int8)
    b_nk = torch.clamp(torch.round(kf / s_b) + zp_b, -128, 127).to(torch.int8)
    real = ((a.double() - zp_a) * s_a) @ ((b_nk.double() - zp_b) * s_b).transpose(-1, -2)
    s_out, zp_out = float(real.abs().max()) / 110.0, -3
    want = torch.clamp(torch.round(real / s_out) + zp_out, -128, 127).to(torch.int32).numpy()

    mult, shift = quantize_multiplier(float(np.float32(s_a) * np.float32(s_b)) / float(np.float32(s_out)))
    b = b_nk.numpy() if transposed else np.ascontiguousarray(b_nk.numpy().swapaxes(-1, -2))
    got = run(a.numpy(), b, lhs_offset=-zp_a, rhs_offset=-zp_b, output_offset=zp_out, mult=mult, shift=shift,
              rhs_transposed=transposed).astype(np.int32)
    diff = np.abs(got - want)
    assert diff.max() <= 1, diff.max()
    assert (diff == 0).mean() > 0.95


# ---- rejection ------------------------------------------------------------------------------


def load_error(lhs_shape, rhs_shape, out, rhs_dtype=np.int8, **p) -> str:
    ins = [Input(np.zeros(lhs_shape, np.int8)), Input(np.zeros(rhs_shape, rhs_dtype))]
    blob, _ = build_op("BATCH_MATMUL", ins, [Out(out)], **params(**p))
    return rejection_message(blob)


def test_valid_baseline_loads():
    blob, _ = build_op("BATCH_MATMUL", [Input(np.zeros((2, 3, 4), np.int8)), Input(np.zeros((2, 5, 4), np.int8))],
                       [Out((2, 3, 5))], **params())
    _native.Program(blob)


@pytest.mark.parametrize("lhs,rhs,out,p,fragment", [
    ((2, 3, 4), (2, 5, 4), (2, 3, 5), dict(rhs_transposed=2), "rhs_transposed"),
    ((2, 3, 4), (2, 5, 4), (2, 3, 5), dict(rhs_transposed=-1), "rhs_transposed"),
    ((2, 3, 4), (2, 5, 6), (2, 3, 5), {}, "rhs inner dim 6 != lhs last dim 4"),
    ((2, 3, 4), (2, 4, 5), (2, 3, 4), dict(rhs_transposed=0), "output dims [..,3,4], expected [..,3,5]"),
    ((2, 3, 4), (2, 5, 4), (2, 3, 4), {}, "output dims"),
    ((2, 3, 4), (3, 5, 4), (3, 3, 5), {}, "batch dims[0]"),
    ((2, 3, 4), (1, 5, 4), (4, 3, 5), {}, "batch dims[0]"),
    ((2, 3, 4), (5, 4), (2, 3, 5), {}, "rhs has rank 2"),
    ((2, 3, 4), (2, 5, 4), (3, 5), {}, "output has rank 2"),
    ((4,), (4,), (1,), {}, "rank 1, expected 2 or more"),
    ((2, 3, 4), (2, 5, 4), (2, 3, 5), dict(lhs_offset=129), "lhs_offset"),
    ((2, 3, 4), (2, 5, 4), (2, 3, 5), dict(lhs_offset=-128), "lhs_offset"),
    ((2, 3, 4), (2, 5, 4), (2, 3, 5), dict(rhs_offset=129), "rhs_offset"),
    ((2, 3, 4), (2, 5, 4), (2, 3, 5), dict(output_offset=128), "output_offset"),
    ((2, 3, 4), (2, 5, 4), (2, 3, 5), dict(mult=-1), "mult"),
    ((2, 3, 4), (2, 5, 4), (2, 3, 5), dict(shift=31), "shift"),
    ((2, 3, 4), (2, 5, 4), (2, 3, 5), dict(shift=-32), "shift"),
    ((2, 3, 4), (2, 5, 4), (2, 3, 5), dict(act_min=5, act_max=4), "act_min 5 > act_max 4"),
    ((1, 65536), (1, 65536), (1, 1), {}, "K = 65536 exceeds 65535"),
    ((1, 1), (65536, 1), (1, 65536), {}, "N = 65536 exceeds 65535"),
])
def test_rejects(lhs, rhs, out, p, fragment):
    assert fragment in load_error(lhs, rhs, out, **p)


def test_rejects_non_int8_rhs():
    assert "rhs has dtype INT32" in load_error((2, 3, 4), (2, 5, 4), (2, 3, 5), rhs_dtype=np.int32)


def test_rejects_an_accumulator_that_can_overflow():
    # 33026 * 255 * 255 > 2^31 - 1 >= 33025 * 255 * 255 (offsets 128: |q + 128| <= 255).
    ok = dict(lhs_offset=128, rhs_offset=128)
    blob, _ = build_op("BATCH_MATMUL", [Input(np.zeros((1, 33025), np.int8)), Input(np.zeros((1, 33025), np.int8))],
                       [Out((1, 1))], **params(**ok))
    _native.Program(blob)
    assert "can exceed int32" in load_error((1, 33026), (1, 33026), (1, 1), **ok)
    # a left shift lowers the bound: 2 * 255 * 255 << 15 > 2^31 - 1 >= 2 * 255 * 255 << 14
    assert "shifted left by 15" in load_error((1, 2), (1, 2), (1, 1), shift=15, **ok)
    blob, _ = build_op("BATCH_MATMUL", [Input(np.zeros((1, 2), np.int8)), Input(np.zeros((1, 2), np.int8))],
                       [Out((1, 1))], **params(shift=14, **ok))
    _native.Program(blob)


def test_format_version_2():
    assert _native.OPCODES["BATCH_MATMUL"]["min_version"] == 2
