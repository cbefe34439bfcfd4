"""MEAN_HW: golden ESP-NN vectors, TFLM's QuantizedMeanOrSum integer formula, PyTorch, rejections."""

import numpy as np
import pytest

from executorch_espnn import _native
from executorch_espnn import quant_params as qp
from espnn_dev.graph_util import Input, Out, build_op, expect_rejected, run_op
from support.tflite_reference import mbqm


def mean_oracle(x, zp_in, zp_out, mult, shift):
    """TFLM QuantizedMeanOrSum over H, W with 1/(H*W) folded into (mult, shift): [N,H,W,C] -> [N,C]."""
    n, h, w, c = x.shape
    acc = x.astype(np.int64).sum(axis=(1, 2)) - h * w * zp_in
    return np.clip(mbqm(acc, mult, shift, wrap=False) + zp_out, -128, 127).astype(np.int8)


def run_mean(x, q_in, q_out, params, keepdims=False):
    n, _, _, c = x.shape
    out = Out((n, 1, 1, c) if keepdims else (n, c), "INT8", *q_out)
    return run_op("MEAN_HW", [Input(x, *q_in)], out, **params).reshape(n, c)


def golden_cases(vectors_dir):
    z = np.load(vectors_dir / "mean_s8.npz")
    fields = z["params_fields"].tolist()
    for i in range(int(z["num_cases"])):
        yield i, dict(zip(fields, z[f"c{i}_params"].tolist())), z[f"c{i}_input"], z[f"c{i}_output"], z[f"c{i}_fscale"]


@pytest.mark.parametrize("keepdims", [False, True])
def test_golden_vectors_bit_exact(vectors_dir, keepdims):
    n = 0
    for i, p, x, want, fscale in golden_cases(vectors_dir):
        x4 = x.reshape(1, p["H"], p["W"], p["C"])
        params = dict(input_zero_point=p["input_zp"], output_zero_point=p["output_zp"], mult=p["mult"],
                      shift=p["shift"])
        got = run_mean(x4, (float(fscale[0]), p["input_zp"]), (float(fscale[1]), p["output_zp"]), params, keepdims)
        np.testing.assert_array_equal(got[0], want, err_msg=f"case {i}")
        np.testing.assert_array_equal(mean_oracle(x4, p["input_zp"], p["output_zp"], p["mult"], p["shift"])[0],
                                      want, err_msg=f"oracle, case {i}")
        n += 1
    assert n == 40


# (N, H, W, C, s_in, zp_in, s_out, zp_out): N not a power of two (the batch
# loop), H*W not a power of two (the fold truncates), ratios above and below 1.
CASES = [
    (3, 7, 7, 16, 0.05, -128, 0.02, -100),
    (5, 3, 5, 3, 0.1, 10, 0.1, -5),
    (3, 1, 1, 8, 0.02, 0, 0.05, 7),
    (6, 14, 14, 5, 0.03, -20, 0.004, 0),
    (7, 2, 9, 1, 0.2, 127, 0.3, -128),
    (3, 20, 20, 4, 0.01, -128, 0.006, 127),
]


@pytest.mark.parametrize("n, h, w, c, s_in, zp_in, s_out, zp_out", CASES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_matches_tflm_formula(n, h, w, c, s_in, zp_in, s_out, zp_out, keepdims):
    rng = np.random.default_rng(n * 1000 + h * w + c)
    x = rng.integers(-128, 128, (n, h, w, c), dtype=np.int8)
    x[0] = 127  # one saturating image
    mult, shift = qp.mean_params(s_in, s_out, h * w)
    params = dict(input_zero_point=zp_in, output_zero_point=zp_out, mult=mult, shift=shift)
    got = run_mean(x, (s_in, zp_in), (s_out, zp_out), params, keepdims)
    np.testing.assert_array_equal(got, mean_oracle(x, zp_in, zp_out, mult, shift))


# The global pool of VWW MobileNetV1-0.25 (96x96: a 3x3 map after ReLU) with the
# scales EspNNQuantizer chose there: s_in / s_out = 2.27, so TFLM's fold of 1/9
# leaves a right shift of 1 and rounded 28 % of the outputs twice.
VWW_POOL = (4, 3, 3, 256, 0.020762315, -128, 0.0091458522, -128)


@pytest.mark.parametrize("n, h, w, c, s_in, zp_in, s_out, zp_out", CASES + [VWW_POOL])
def test_equals_pytorch_float_mean_rounded_once(n, h, w, c, s_in, zp_in, s_out, zp_out):
    """The mean is the convert_pt2e model's (dequantize, float mean over H and W,
    quantize) exactly: mean_params makes MBQM round once (quant_params.mean_params)."""
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(h * w).integers(-128, 128, (n, h, w, c), dtype=np.int8)
    mult, shift = qp.mean_params(s_in, s_out, h * w)
    params = dict(input_zero_point=zp_in, output_zero_point=zp_out, mult=mult, shift=shift)
    got = run_mean(x, (s_in, zp_in), (s_out, zp_out), params)
    xf = (torch.from_numpy(x).to(torch.float64) - zp_in) * float(np.float32(s_in))
    real = (xf.mean(dim=(1, 2)) / float(np.float32(s_out))).numpy()
    want = np.clip(np.round(real) + zp_out, -128, 127)
    tie = np.abs(np.abs(real - np.trunc(real)) - 0.5) < 1e-9  # torch rounds half to even, MBQM away from 0
    np.testing.assert_array_equal(np.where(tie, want, got), want)


# ---------------------------------------------------------------- rejections

def mean_blob(in_shape=(2, 4, 4, 3), out_shape=(2, 3), **overrides):
    params = dict(input_zero_point=0, output_zero_point=0, mult=1 << 30, shift=-3)
    params.update(overrides)
    blob, _ = build_op("MEAN_HW", [Input(np.zeros(in_shape, np.int8), 0.1, 0)], [Out(out_shape, "INT8", 0.1, 0)],
                       **params)
    return blob


def test_accepts_both_output_layouts():
    _native.Program(mean_blob())
    _native.Program(mean_blob(out_shape=(2, 1, 1, 3)))


@pytest.mark.parametrize("out_shape", [(1, 3), (2, 4), (2, 1, 1, 4), (2, 1, 2, 3), (2, 3, 1), (6,)])
def test_rejects_bad_output_shape(out_shape):
    expect_rejected(mean_blob(out_shape=out_shape), "output shape must be [2,1,1,3] or [2,3]")


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        (dict(input_zero_point=128), "input_zero_point = 128"),
        (dict(output_zero_point=-129), "output_zero_point = -129"),
        (dict(mult=-1), "mult = -1"),
        (dict(shift=-32), "shift = -32"),
        (dict(shift=31), "shift = 31"),
        # 255 * 16 << 20 > INT32_MAX: the left shift would wrap.
        (dict(shift=20), "shift = 20: 255*H*W << shift overflows int32"),
        (dict(in_shape=(2, 4, 3), out_shape=(2, 3)), "input has rank 3, expected 4"),
    ],
)
def test_rejects_bad_params(overrides, fragment):
    shapes = {k: overrides.pop(k) for k in ("in_shape", "out_shape") if k in overrides}
    expect_rejected(mean_blob(**shapes, **overrides), fragment)


def test_rejects_a_window_whose_sum_overflows_int32():
    # H*W = 2^24: 255 * H * W > INT32_MAX (the arena is never allocated).
    expect_rejected(mean_blob(in_shape=(1, 4096, 4096, 1), out_shape=(1, 1)), "255*H*W overflows the int32 sum")
    _native.Program(mean_blob(in_shape=(1, 2048, 4096, 1), out_shape=(1, 1), shift=-31))
