"""QUANTIZE / DEQUANTIZE / REQUANTIZE against PyTorch and TFLite's integer formula."""

import numpy as np
import pytest

from espnn_dev.graph_util import Out, run_op
from support.tflite_reference import mbqm

torch = pytest.importorskip("torch")

SCALES_ZPS = [(0.1, 3), (0.0039215689, -128), (0.75, 127), (1e-4, 0), (0.02, -7)]


@pytest.mark.parametrize("scale, zp", SCALES_ZPS)
def test_quantize_matches_pytorch_bit_exactly(scale, zp):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((4, 33)) * 128 * scale).astype(np.float32)
    # Exact ties and saturation on purpose: k + 0.5 steps and far out-of-range values.
    x[0, :8] = ((np.arange(8) - 4 + 0.5) * scale).astype(np.float32)
    x[1, :4] = np.array([1e9, -1e9, 300 * scale, -300 * scale], np.float32)
    inv_scale = 1.0 / scale
    got = run_op("QUANTIZE", [x], Out(x.shape, "INT8", scale, zp), inv_scale_f32=inv_scale, zero_point=zp)
    # The PT2E quantize_per_tensor formula (torchao's quantized_decomposed op):
    # the float32 tensor times the Python float 1/scale, rounded half to even.
    want = torch.clamp(torch.round(torch.from_numpy(x) * inv_scale) + zp, -128, 127).to(torch.int8).numpy()
    np.testing.assert_array_equal(got, want)


def test_quantize_maps_nan_to_the_zero_point():
    x = np.array([np.nan, 1.0], np.float32)
    got = run_op("QUANTIZE", [x], Out((2,), "INT8", 0.5, -3), inv_scale_f32=2.0, zero_point=-3)
    np.testing.assert_array_equal(got, [-3, -1])


@pytest.mark.parametrize("scale, zp", SCALES_ZPS)
def test_dequantize_matches_pytorch_bit_exactly(scale, zp):
    q = np.arange(-128, 128, dtype=np.int8).reshape(16, 16)
    got = run_op("DEQUANTIZE", [q], Out(q.shape, "FLOAT32"), scale_f32=scale, zero_point=zp)
    # The PT2E dequantize_per_tensor formula, in float32.
    want = ((torch.from_numpy(q).to(torch.float32) - zp) * scale).numpy()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mult, shift", [(1 << 30, 0), (2**31 - 1, -1), (1518500250, -7), (1 << 30, 22),
                                         (1073741825, -31), (1932735283, 3)])
@pytest.mark.parametrize("in_zp, out_zp", [(0, 0), (-128, 127), (17, -9)])
def test_requantize_matches_tflite_formula(mult, shift, in_zp, out_zp):
    q = np.arange(-128, 128, dtype=np.int8)
    got = run_op("REQUANTIZE", [q], Out(q.shape), input_zero_point=in_zp, output_zero_point=out_zp,
                 mult=mult, shift=shift)
    want = np.clip(mbqm(q.astype(np.int64) - in_zp, mult, shift) + out_zp, -128, 127)
    np.testing.assert_array_equal(got, np.array(want, np.int8))


@pytest.mark.parametrize(
    "op, params, message",
    [
        ("QUANTIZE", dict(inv_scale_f32=0.0, zero_point=0), "inv_scale_f32 must be a finite positive float"),
        ("QUANTIZE", dict(inv_scale_f32=1.0, zero_point=128), "zero_point = 128 is not in -128..127"),
        ("DEQUANTIZE", dict(scale_f32=float("inf"), zero_point=0), "scale_f32 must be a finite positive float"),
        ("REQUANTIZE", dict(input_zero_point=0, output_zero_point=0, mult=-1, shift=0), "mult = -1"),
        ("REQUANTIZE", dict(input_zero_point=0, output_zero_point=0, mult=1, shift=23), "shift = 23"),
    ],
)
def test_invalid_parameters_are_rejected_at_parse_time(op, params, message):
    in_dtype = "FLOAT32" if op == "QUANTIZE" else "INT8"
    out_dtype = "FLOAT32" if op == "DEQUANTIZE" else "INT8"
    x = np.zeros(4, np.float32 if in_dtype == "FLOAT32" else np.int8)
    with pytest.raises(ValueError, match=message):
        run_op(op, [x], Out((4,), out_dtype), **params)


def test_dtype_mismatch_is_rejected():
    with pytest.raises(ValueError, match="op 0 \\(QUANTIZE\\): input has dtype INT8, expected FLOAT32"):
        run_op("QUANTIZE", [np.zeros(4, np.int8)], Out((4,)), inv_scale_f32=1.0, zero_point=0)
