"""RESIZE_NEAREST and RESIZE_BILINEAR (int8 NHWC) on the native interpreter.

The ops execute precomputed index/weight tables, built by the lowering's
`aot_nearest_index_table` / `aot_bilinear_table`
(executorch_espnn/lowering/ops/resize_tables.py), which restate PyTorch's
source-index mapping. Oracles:
  * nearest: torch.nn.functional.interpolate on the int8 values as floats
    (nearest only copies values, so this is exact);
  * bilinear: TFLite's integer formula written here in numpy int64 (bit-exact),
    and PyTorch's quantized upsample / float upsample of the dequantized
    values within 1 LSB (PyTorch uses float weights and ties-to-even).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from executorch_espnn import _native
from executorch_espnn.lowering.ops.resize_tables import (
    FRAC_BITS,
    FRAC_ONE,
    aot_bilinear_table,
    aot_nearest_index_table,
)
from espnn_dev.graph_util import Const, Input, Out, build_op, run_op


# ---------------------------------------------------------------- oracles

def bilinear_integer_reference(x: np.ndarray, ytab: np.ndarray, xtab: np.ndarray,
                               accumulator: bool = False) -> np.ndarray:
    """TFLite's integer bilinear resize on raw int8 values, NHWC, in int64.

    With accumulator=True, returns the Q20 sums before rounding."""
    x = x.astype(np.int64)
    wy1, wx1 = ytab[:, 2].astype(np.int64), xtab[:, 2].astype(np.int64)
    wy0, wx0 = FRAC_ONE - wy1, FRAC_ONE - wx1
    r0, r1 = x[:, ytab[:, 0]], x[:, ytab[:, 1]]  # [N, out_h, W, C]
    acc = ((r0[:, :, xtab[:, 0]] * wx0[None, None, :, None] + r0[:, :, xtab[:, 1]] * wx1[None, None, :, None])
           * wy0[None, :, None, None]
           + (r1[:, :, xtab[:, 0]] * wx0[None, None, :, None] + r1[:, :, xtab[:, 1]] * wx1[None, None, :, None])
           * wy1[None, :, None, None])
    if accumulator:
        return acc
    half = 1 << (2 * FRAC_BITS - 1)
    mag = (np.abs(acc) + half) >> (2 * FRAC_BITS)  # round half away from zero
    return (np.sign(acc) * mag).astype(np.int8)


def _torch():
    return pytest.importorskip("torch")


def _nchw(torch, x_nhwc: np.ndarray):
    return torch.from_numpy(np.ascontiguousarray(x_nhwc.transpose(0, 3, 1, 2)))


def _nhwc(t) -> np.ndarray:
    return np.ascontiguousarray(t.numpy().transpose(0, 2, 3, 1))


def torch_nearest(x: np.ndarray, size, mode: str, scale_factor=None) -> np.ndarray:
    torch = _torch()
    xt = _nchw(torch, x).to(torch.float32)
    kw = {"scale_factor": scale_factor} if scale_factor is not None else {"size": size}
    return _nhwc(torch.nn.functional.interpolate(xt, mode=mode, **kw)).astype(np.int8)


def torch_quantized_bilinear(x: np.ndarray, size, align_corners: bool, scale: float, zp: int) -> np.ndarray:
    torch = _torch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantized tensors are deprecated in recent PyTorch
        q = torch._make_per_tensor_quantized_tensor(_nchw(torch, x), scale, zp)
        y = torch.nn.functional.interpolate(q, size=size, mode="bilinear", align_corners=align_corners)
        return _nhwc(y.int_repr())


def torch_float_bilinear(x: np.ndarray, size, align_corners: bool, scale: float, zp: int) -> np.ndarray:
    torch = _torch()
    real = (_nchw(torch, x).to(torch.float32) - zp) * scale
    y = torch.nn.functional.interpolate(real, size=size, mode="bilinear", align_corners=align_corners)
    # quantize_per_tensor's formula (ties to even), without the deprecated API.
    return _nhwc(torch.clamp(torch.round(y / scale) + zp, -128, 127).to(torch.int8))


# ---------------------------------------------------------------- helpers

SCALE, ZP = 0.07, 5


def _image(shape, seed=0, lo=-128, hi=128) -> np.ndarray:
    return np.random.default_rng(seed).integers(lo, hi, size=shape, dtype=np.int8)


def run_nearest(x, ytab, xtab, zp=ZP, scale=SCALE):
    n, _, _, c = x.shape
    return run_op("RESIZE_NEAREST", [Input(x, scale, zp), Const(ytab), Const(xtab)],
                  Out((n, len(ytab), len(xtab), c), "INT8", scale, zp))


def run_bilinear(x, ytab, xtab, zp=ZP, scale=SCALE):
    n, _, _, c = x.shape
    return run_op("RESIZE_BILINEAR", [Input(x, scale, zp), Const(ytab), Const(xtab)],
                  Out((n, len(ytab), len(xtab), c), "INT8", scale, zp))


def _reject(op, inputs, out, match):
    blob, _ = build_op(op, inputs, [out])
    with pytest.raises(ValueError, match=match):
        _native.Program(blob)


# (in_h, in_w) -> (out_h, out_w): scale 2, non-integer up (5->7), down, mixed, identity.
SIZES = [((4, 4), (8, 8)), ((5, 5), (7, 7)), ((5, 7), (7, 5)), ((6, 5), (2, 3)), ((2, 3), (5, 9)),
         ((3, 4), (3, 4)), ((1, 1), (3, 2)), ((7, 3), (1, 1))]


# ---------------------------------------------------------------- nearest

@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("src,dst", SIZES)
def test_nearest_matches_pytorch(mode, src, dst):
    x = _image((2, *src, 3), seed=src[0] * 10 + dst[1])
    ytab = aot_nearest_index_table(src[0], dst[0], mode)
    xtab = aot_nearest_index_table(src[1], dst[1], mode)
    np.testing.assert_array_equal(run_nearest(x, ytab, xtab), torch_nearest(x, dst, mode))


@pytest.mark.parametrize("factor", [2.0, 1.7, 0.6])
def test_nearest_with_scale_factor_matches_pytorch(factor):
    # With scale_factor PyTorch maps with 1/factor, not in/out: only the table
    # changes, the op is the same.
    x = _image((1, 5, 6, 5), seed=int(factor * 10))
    oh, ow = int(np.floor(5 * factor)), int(np.floor(6 * factor))
    ytab = aot_nearest_index_table(5, oh, "nearest", factor)
    xtab = aot_nearest_index_table(6, ow, "nearest", factor)
    np.testing.assert_array_equal(run_nearest(x, ytab, xtab), torch_nearest(x, None, "nearest", factor))


def test_nearest_arbitrary_table():
    # Any in-range table is legal (e.g. a flip); out[n,y,x,:] = in[n,yi[y],xi[x],:].
    x = _image((2, 3, 4, 7), seed=1)
    ytab = np.array([2, 1, 0, 0], np.int32)
    xtab = np.array([3, 3, 0], np.int32)
    np.testing.assert_array_equal(run_nearest(x, ytab, xtab), x[:, ytab][:, :, xtab])


# ---------------------------------------------------------------- bilinear

@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("src,dst", SIZES)
def test_bilinear_is_the_integer_formula_exactly(align_corners, src, dst):
    x = _image((2, *src, 5), seed=src[1] * 7 + dst[0])
    ytab = aot_bilinear_table(src[0], dst[0], align_corners)
    xtab = aot_bilinear_table(src[1], dst[1], align_corners)
    np.testing.assert_array_equal(run_bilinear(x, ytab, xtab), bilinear_integer_reference(x, ytab, xtab))


@pytest.mark.parametrize("zp", [-128, 5, 127])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("src,dst", SIZES)
def test_bilinear_within_one_lsb_of_pytorch(zp, align_corners, src, dst):
    x = _image((2, *src, 3), seed=src[0] + 31 * dst[1])
    ytab = aot_bilinear_table(src[0], dst[0], align_corners)
    xtab = aot_bilinear_table(src[1], dst[1], align_corners)
    got = run_bilinear(x, ytab, xtab, zp=zp).astype(np.int32)
    for oracle in (torch_quantized_bilinear, torch_float_bilinear):
        want = oracle(x, dst, align_corners, SCALE, zp).astype(np.int32)
        assert got.shape == want.shape
        assert np.max(np.abs(got - want)) <= 1, oracle.__name__


@pytest.mark.parametrize("zp", [-128, 5, 127])
def test_bilinear_scale_2_differs_from_pytorch_only_at_ties(zp):
    # At scale 2 the weights (1/4, 3/4) are exact in Q10 and in float, so
    # PyTorch's quantized kernel sees the same real value; it rounds ties to
    # even, TFLite's formula (ours) away from zero. Everywhere else: equal.
    x = _image((1, 8, 8, 16), seed=2)
    tab = aot_bilinear_table(8, 16, False)
    got = run_bilinear(x, tab, tab, zp=zp).astype(np.int32)
    want = torch_quantized_bilinear(x, (16, 16), False, SCALE, zp).astype(np.int32)
    # Ties: the real interpolated value is k + 1/2 (the tables' Q20 weights are exact).
    acc = bilinear_integer_reference(x, tab, tab, accumulator=True)
    tie = (acc % (1 << 2 * FRAC_BITS)) == (1 << (2 * FRAC_BITS - 1))
    assert tie.any() and (got != want).any()
    np.testing.assert_array_equal(got[~tie], want[~tie])
    np.testing.assert_array_equal(got[tie], (np.sign(acc[tie]) * ((np.abs(acc[tie]) + (1 << 19)) >> 20)))


def test_bilinear_rounds_half_away_from_zero():
    # 1x1 output between two taps at frac 1/2: exact .5 ties.
    pairs = np.array([[-1, 0], [0, 1], [2, 3], [-3, -2], [-128, 127], [127, 127], [-128, -128]], np.int8)
    x = pairs.reshape(len(pairs), 1, 2, 1)  # N images of 1x2
    ytab = np.array([[0, 0, 0]], np.int32)
    xtab = np.array([[0, 1, FRAC_ONE // 2]], np.int32)
    got = run_bilinear(x, ytab, xtab).reshape(-1)
    np.testing.assert_array_equal(got, [-1, 1, 3, -3, -1, 127, -128])


def test_bilinear_frac_endpoints_select_one_tap():
    x = _image((1, 2, 2, 4), seed=3)
    for frac, col in [(0, 0), (FRAC_ONE, 1)]:
        got = run_bilinear(x, np.array([[0, 1, frac]], np.int32), np.array([[0, 1, frac]], np.int32))
        np.testing.assert_array_equal(got[0, 0, 0], x[0, col, col])


def test_bilinear_extremes_do_not_overflow():
    # All taps at -128 / 127 with the largest weight products stay exact.
    for v in (-128, 127):
        x = np.full((1, 3, 3, 2), v, np.int8)
        tab = np.array([[0, 1, 1], [1, 2, 1023], [2, 2, 512]], np.int32)
        np.testing.assert_array_equal(run_bilinear(x, tab, tab), np.full((1, 3, 3, 2), v, np.int8))


# ---------------------------------------------------------------- rejections

def _x():
    return Input(_image((1, 4, 5, 2)), SCALE, ZP)


def test_nearest_rejects_index_out_of_range():
    out = Out((1, 3, 2, 2), "INT8", SCALE, ZP)
    _reject("RESIZE_NEAREST", [_x(), Const(np.array([0, 4, 1], np.int32)), Const(np.array([0, 1], np.int32))],
            out, r"y_index\[1\] = 4 is not in 0..3 \(input height 4\)")
    _reject("RESIZE_NEAREST", [_x(), Const(np.array([0, 1, 1], np.int32)), Const(np.array([0, -1], np.int32))],
            out, r"x_index\[1\] = -1 is not in 0..4 \(input width 5\)")


def test_nearest_rejects_table_length_and_kind():
    out = Out((1, 3, 2, 2), "INT8", SCALE, ZP)
    _reject("RESIZE_NEAREST", [_x(), Const(np.array([0, 1], np.int32)), Const(np.array([0, 1], np.int32))],
            out, r"y_index has 2 elements, expected 3")
    _reject("RESIZE_NEAREST", [_x(), Const(np.zeros(3, np.int32)), Input(np.zeros(2, np.int32))],
            out, r"x_index must be a constant")
    _reject("RESIZE_NEAREST", [_x(), Const(np.zeros(3, np.int8)), Const(np.zeros(2, np.int32))],
            out, r"y_index has dtype INT8, expected INT32")


def test_bilinear_rejects_index_out_of_range():
    out = Out((1, 2, 2, 2), "INT8", SCALE, ZP)
    ok = np.array([[0, 1, 0], [1, 2, 512]], np.int32)
    _reject("RESIZE_BILINEAR", [_x(), Const(ok), Const(np.array([[0, 1, 0], [4, 5, 512]], np.int32))],
            out, r"x_table\[1\].i1 = 5 is not in 0..4 \(input width 5\)")
    _reject("RESIZE_BILINEAR", [_x(), Const(np.array([[-1, 1, 0], [1, 2, 0]], np.int32)), Const(ok)],
            out, r"y_table\[0\].i0 = -1 is not in 0..3 \(input height 4\)")


def test_bilinear_rejects_frac_out_of_range():
    out = Out((1, 2, 2, 2), "INT8", SCALE, ZP)
    ok = np.array([[0, 1, 0], [1, 2, 512]], np.int32)
    _reject("RESIZE_BILINEAR", [_x(), Const(np.array([[0, 1, 1025], [1, 2, 0]], np.int32)), Const(ok)],
            out, r"y_table\[0\].frac = 1025 is not in 0..1024")
    _reject("RESIZE_BILINEAR", [_x(), Const(ok), Const(np.array([[0, 1, 0], [1, 2, -1]], np.int32))],
            out, r"x_table\[1\].frac = -1 is not in 0..1024")


def test_bilinear_rejects_table_shape():
    out = Out((1, 2, 2, 2), "INT8", SCALE, ZP)
    ok = np.array([[0, 1, 0], [1, 2, 512]], np.int32)
    _reject("RESIZE_BILINEAR", [_x(), Const(ok.reshape(-1)), Const(ok)], out, r"y_table must have dims \[2,3\]")
    _reject("RESIZE_BILINEAR", [_x(), Const(ok), Const(ok[:1])], out, r"x_table has 3 elements, expected 6")


def test_resize_rejects_image_mismatches():
    ytab, xtab = Const(np.zeros(2, np.int32)), Const(np.zeros(2, np.int32))
    _reject("RESIZE_NEAREST", [_x(), ytab, xtab], Out((1, 2, 2, 3), "INT8", SCALE, ZP),
            r"output channels dims\[3\] = 3, input has 2")
    _reject("RESIZE_NEAREST", [_x(), ytab, xtab], Out((2, 2, 2, 2), "INT8", SCALE, ZP),
            r"output batch dims\[0\] = 2, input has 1")
    _reject("RESIZE_NEAREST", [_x(), ytab, xtab], Out((1, 2, 2, 2), "INT8", SCALE, ZP + 1),
            r"must share quantization")
    _reject("RESIZE_NEAREST", [Input(_image((4, 5, 2)), SCALE, ZP), ytab, xtab], Out((1, 2, 2, 2), "INT8", SCALE, ZP),
            r"input has rank 3, expected 4")
