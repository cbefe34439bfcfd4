"""HARD_SWISH, LUT and CHANNEL_LUT: golden ESP-NN vectors, TFLite's int16 HardSwish formula, PyTorch, rejections."""

import math

import numpy as np
import pytest

from executorch_espnn import _native
from executorch_espnn import quant_params as qp
from espnn_dev.graph_util import Const, Input, Out, build_op, expect_rejected, run_op
from support.tflite_reference import rdbp

ALL_INT8 = np.arange(-128, 128, dtype=np.int8)


def golden_cases(vectors_dir, name):
    z = np.load(vectors_dir / name)
    fields = z["params_fields"].tolist()
    for i in range(int(z["num_cases"])):
        yield i, dict(zip(fields, z[f"c{i}_params"].tolist())), z, f"c{i}_"


# ================================================================ HARD_SWISH

HS_FIELDS = ("input_zero_point", "output_zero_point", "output_mult_fxp", "reluish_mult_fxp", "reluish_mult_exp",
             "output_mult_exp")


def _srdhm16(a, b):
    """gemmlowp SaturatingRoundingDoublingHighMul for int16."""
    ab = a.astype(np.int64) * b
    v = ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    q = np.where(v >= 0, v >> 15, -((-v) >> 15))
    return np.where((a == -32768) & (b == -32768), 32767, q)


def hard_swish_oracle(x, input_zero_point, output_zero_point, output_mult_fxp, reluish_mult_fxp,
                      reluish_mult_exp, output_mult_exp):
    """TFLite reference_ops::HardSwish for int8 (int16 fixed point), vectorised in int64."""
    v = x.astype(np.int64) - input_zero_point
    hires = v * 128
    on_out_scale = _srdhm16(hires, output_mult_fxp)
    r = hires
    if reluish_mult_exp > 0:
        r = np.clip(r << (reluish_mult_exp - 1), -32768, 32767)
    r = _srdhm16(r, reluish_mult_fxp)
    if reluish_mult_exp > 0:
        r = np.clip(r << 1, -32768, 32767)
    elif reluish_mult_exp < 0:
        r = rdbp(r, -reluish_mult_exp)
    r = (r + (1 << 15)) >> 1                     # [-1, 1] -> [0, 1]
    prod = r * on_out_scale                      # SaturatingDoublingHighMul: truncating, no rounding
    pre = np.where(prod >= 0, prod >> 15, -((-prod) >> 15))
    y = rdbp(pre, -output_mult_exp) + output_zero_point
    return np.clip(y, -128, 127).astype(np.int8)


def run_hard_swish(x, q_in, q_out, params):
    return run_op("HARD_SWISH", [Input(x, *q_in)], Out(x.shape, "INT8", *q_out), **params)


def test_hard_swish_golden_vectors_bit_exact(vectors_dir):
    n = 0
    for i, p, z, c in golden_cases(vectors_dir, "hard_swish_s8.npz"):
        params = {f: p[f.replace("_zero_point", "_zp")] for f in HS_FIELDS}
        x, want = z[c + "input"], z[c + "output"]
        s_in, s_out = (float(v) for v in z[c + "fscale"])
        got = run_hard_swish(x, (s_in, p["input_zp"]), (s_out, p["output_zp"]), params)
        np.testing.assert_array_equal(got, want, err_msg=f"case {i}")
        np.testing.assert_array_equal(hard_swish_oracle(x, **params), want, err_msg=f"oracle, case {i}")
        n += 1
    assert n == 40


# (s_in, zp_in, s_out, zp_out): reluish exponents < 0, 0 and > 0; extreme zero points.
HS_QUANT = [(0.05, 0, 0.03, -80), (0.1, -128, 0.08, -50), (0.003, 20, 0.002, -128), (0.25, 127, 0.2, 0),
            (0.02, -7, 0.02, 3), (0.0117, 60, 0.004, -100)]


@pytest.mark.parametrize("s_in, zp_in, s_out, zp_out", HS_QUANT)
def test_hard_swish_matches_tflite_formula(s_in, zp_in, s_out, zp_out):
    params = dict(qp.hard_swish_params(s_in, s_out), input_zero_point=zp_in, output_zero_point=zp_out)
    x = np.concatenate([ALL_INT8, ALL_INT8[::-1]]).reshape(2, 4, 4, 16)  # any rank
    got = run_hard_swish(x, (s_in, zp_in), (s_out, zp_out), params)
    np.testing.assert_array_equal(got, hard_swish_oracle(x, **params))


@pytest.mark.filterwarnings("ignore:.*quantized tensor creation functions.*:UserWarning")
@pytest.mark.parametrize("s_in, zp_in, s_out, zp_out", HS_QUANT)
def test_hard_swish_within_one_lsb_of_pytorch(s_in, zp_in, s_out, zp_out, exact_quantized_engine):
    torch = pytest.importorskip("torch")
    from torch.ao.nn.quantized import functional as qF

    params = dict(qp.hard_swish_params(s_in, s_out), input_zero_point=zp_in, output_zero_point=zp_out)
    got = run_hard_swish(ALL_INT8, (s_in, zp_in), (s_out, zp_out), params)
    qx = torch._make_per_tensor_quantized_tensor(torch.from_numpy(ALL_INT8.copy()), s_in, zp_in)
    want = qF.hardswish(qx, s_out, zp_out).int_repr().numpy()
    assert np.abs(got.astype(np.int16) - want).max() <= 1


def hs_blob(shape=(3, 5), out_shape=None, **overrides):
    params = dict(qp.hard_swish_params(0.05, 0.03), input_zero_point=0, output_zero_point=0)
    params.update(overrides)
    blob, _ = build_op("HARD_SWISH", [Input(np.zeros(shape, np.int8), 0.05, 0)],
                       [Out(out_shape or shape, "INT8", 0.03, 0)], **params)
    return blob


def test_hard_swish_accepts_the_reference_blob():
    _native.Program(hs_blob())


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        (dict(output_mult_exp=1), "output_mult_exp = 1 is not in -31..0"),
        (dict(output_mult_exp=-32), "output_mult_exp = -32"),
        (dict(reluish_mult_exp=32), "reluish_mult_exp = 32"),
        (dict(reluish_mult_exp=-32), "reluish_mult_exp = -32"),
        (dict(output_mult_fxp=32768), "output_mult_fxp = 32768 is not in -32768..32767"),
        (dict(reluish_mult_fxp=-32769), "reluish_mult_fxp = -32769"),
        (dict(input_zero_point=128), "input_zero_point = 128"),
        (dict(output_zero_point=-129), "output_zero_point = -129"),
        (dict(out_shape=(5, 3)), "input and output have different shapes"),
    ],
)
def test_hard_swish_rejects_bad_params(overrides, fragment):
    out_shape = overrides.pop("out_shape", None)
    expect_rejected(hs_blob(out_shape=out_shape, **overrides), fragment)


# ======================================================================= LUT

def run_lut(x, table, q_in, q_out):
    return run_op("LUT", [Input(x, *q_in), Const(table)], Out(x.shape, "INT8", *q_out))


def logistic_lut_f32(zp, scale):
    """ESP-NN's logistic table: float32 roundf(256 / (1 + expf(-(q - zp) * s))) - 128, clamped.

    Entry j is the output for the int8 input whose bit pattern is j.
    """
    q = np.arange(256, dtype=np.uint8).view(np.int8).astype(np.int32)
    x = (q - zp).astype(np.float32) * np.float32(scale)
    # expf as glibc computes it (correctly rounded), the same on every host: numpy's float32 exp
    # is a SIMD approximation on AVX2/AVX-512 hosts (up to 2 ulp off) and libm's elsewhere.
    with np.errstate(over="ignore"):  # expf overflows to inf for very negative inputs: 256/inf = 0
        e = np.exp(-x.astype(np.float64)).astype(np.float32)
        v = np.float32(256.0) / (np.float32(1.0) + e)
    r = np.floor(v.astype(np.float64) + 0.5)  # roundf for v >= 0: half away from zero
    return np.clip(r - 128, -128, 127).astype(np.int8)


def test_lut_runs_the_golden_logistic_vectors_bit_exact(vectors_dir):
    n = 0
    for i, p, z, c in golden_cases(vectors_dir, "logistic_s8.npz"):
        lut, x, want = z[c + "lut"], z[c + "input"], z[c + "output"]
        scale = float(z[c + "fscale"][0])
        got = run_lut(x, lut, (scale, p["input_zp"]), (1.0 / 256, -128))
        np.testing.assert_array_equal(got, want, err_msg=f"case {i}")
        # The table the lowering computes ahead of time (numpy float32) is the stored one.
        np.testing.assert_array_equal(logistic_lut_f32(p["input_zp"], np.float32(scale)), lut, err_msg=f"lut {i}")
        n += 1
    assert n == 40


def test_lut_indexes_by_the_uint8_view_of_the_input():
    table = np.arange(256, dtype=np.int32).astype(np.uint8).view(np.int8)[::-1].copy()  # table[j] = int8(255 - j)
    x = ALL_INT8.reshape(2, 2, 2, 4, 8)  # rank 5
    got = run_lut(x, table, (0.1, 0), (0.5, 9))
    np.testing.assert_array_equal(got.ravel(), table[ALL_INT8.view(np.uint8)])
    assert got[0, 0, 0, 0, 0] == table[128] and got.ravel()[128] == table[0]  # x=-128 -> entry 128, x=0 -> entry 0


def float_lut(fn, s_in, zp_in, s_out, zp_out):
    """The table written in the test from float math: quantize(fn(dequantize(q)))."""
    q = np.arange(256, dtype=np.uint8).view(np.int8).astype(np.float64)
    y = fn((q - zp_in) * s_in)
    return np.clip(np.round(y / s_out) + zp_out, -128, 127).astype(np.int8)


def _gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


# name: (float function, PyTorch function name, input quant, output quant)
FUNCTIONS = {
    "sigmoid": (lambda x: 1.0 / (1.0 + np.exp(-x)), "sigmoid", (0.06, -10), (1.0 / 256, -128)),
    "tanh": (np.tanh, "tanh", (0.03, 5), (1.0 / 128, 0)),
    "silu": (lambda x: x / (1.0 + np.exp(-x)), "silu", (0.05, 20), (0.035, -120)),
    "gelu": (_gelu, "gelu", (0.04, -3), (0.03, -110)),
    "hardsigmoid": (lambda x: np.clip(x / 6.0 + 0.5, 0.0, 1.0), "hardsigmoid", (0.05, 0), (1.0 / 256, -128)),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_lut_of_float_functions_within_one_lsb_of_pytorch(name):
    torch = pytest.importorskip("torch")
    fn, torch_name, (s_in, zp_in), (s_out, zp_out) = FUNCTIONS[name]
    table = float_lut(fn, s_in, zp_in, s_out, zp_out)
    x = np.random.default_rng(len(name)).integers(-128, 128, (3, 7, 11), dtype=np.int8)
    x[0, 0, :] = [-128, -1, 0, 1, 127, zp_in, -100, 100, 50, -50, 2]
    got = run_lut(x, table, (s_in, zp_in), (s_out, zp_out))
    xf = (torch.from_numpy(x).to(torch.float32) - zp_in) * s_in
    yf = getattr(torch.nn.functional, torch_name)(xf)
    want = torch.clamp(torch.round(yf / s_out) + zp_out, -128, 127).to(torch.int16).numpy()
    assert np.abs(got.astype(np.int16) - want).max() <= 1


def lut_blob(table, table_is_const=True, out_shape=(4, 6), out_dtype="INT8"):
    x = np.zeros((4, 6), np.int8)
    tbl = Const(table) if table_is_const else Input(table)
    blob, _ = build_op("LUT", [Input(x, 0.1, 0), tbl], [Out(out_shape, out_dtype, 1.0 / 256, -128)])
    return blob


def test_lut_accepts_a_256_entry_int8_table_of_any_shape():
    _native.Program(lut_blob(np.zeros(256, np.int8)))
    _native.Program(lut_blob(np.zeros((16, 16), np.int8)))


@pytest.mark.parametrize(
    "table, kw, fragment",
    [
        (np.zeros(255, np.int8), {}, "table has 255 elements, expected 256"),
        (np.zeros(257, np.int8), {}, "table has 257 elements, expected 256"),
        (np.zeros(256, np.int32), {}, "table has dtype INT32, expected INT8"),
        (np.zeros(256, np.int8), dict(table_is_const=False), "table must be a constant"),
        (np.zeros(256, np.int8), dict(out_shape=(6, 4)), "input and output have different shapes"),
        (np.zeros(256, np.int8), dict(out_dtype="INT32"), "output has dtype INT32, expected INT8"),
    ],
)
def test_lut_rejects_bad_tables_and_outputs(table, kw, fragment):
    expect_rejected(lut_blob(table, **kw), fragment)


# =============================================================== CHANNEL_LUT

def random_tables(rng, channels):
    return rng.integers(-128, 128, (channels, 256), dtype=np.int8)


@pytest.mark.parametrize("shape, axis", [((7,), 0), ((3, 5), 0), ((3, 5), 1), ((2, 3, 4, 6), 3), ((2, 3, 4, 6), 1),
                                         ((1, 2, 3, 2, 5), 2)])
def test_channel_lut_picks_the_table_of_each_elements_index_along_axis(shape, axis):
    rng = np.random.default_rng(len(shape) * 10 + axis)
    x = rng.integers(-128, 128, shape, dtype=np.int8)
    x.ravel()[:2] = [-128, 127]
    tables = random_tables(rng, shape[axis])
    got = run_op("CHANNEL_LUT", [Input(x, 0.1, 0), Const(tables)], Out(shape, "INT8", 0.2, 3), axis=axis)
    # Oracle: move `axis` first, index row c of the tables with the uint8 view of x.
    xc = np.moveaxis(x, axis, 0)
    want = np.stack([tables[c][xc[c].view(np.uint8)] for c in range(shape[axis])])
    np.testing.assert_array_equal(got, np.moveaxis(want, 0, axis))


def test_channel_lut_prelu_tables_match_pytorch_prelu_within_one_lsb():
    """Per-channel prelu as the lowering tabulates it, against PyTorch's float prelu
    on the dequantized NHWC input, requantized."""
    torch = pytest.importorskip("torch")
    (s_in, zp_in), (s_out, zp_out) = (0.05, 7), (0.04, -20)
    slopes = np.array([-0.5, 0.0, 0.1, 0.25, 1.0, 3.0], np.float32)
    tables = np.stack([float_lut(lambda v, k=k: np.where(v >= 0, v, k * v), s_in, zp_in, s_out, zp_out)
                       for k in slopes])
    x = np.random.default_rng(11).integers(-128, 128, (1, 4, 5, 6), dtype=np.int8)  # NHWC
    got = run_op("CHANNEL_LUT", [Input(x, s_in, zp_in), Const(tables)], Out(x.shape, "INT8", s_out, zp_out), axis=3)
    xf = (torch.from_numpy(x).permute(0, 3, 1, 2).to(torch.float32) - zp_in) * s_in  # NCHW for torch
    yf = torch.nn.functional.prelu(xf, torch.from_numpy(slopes)).permute(0, 2, 3, 1)
    want = torch.clamp(torch.round(yf / s_out) + zp_out, -128, 127).to(torch.int16).numpy()
    assert np.abs(got.astype(np.int16) - want).max() <= 1


def channel_lut_blob(tables, axis=1, table_is_const=True, out_shape=(4, 6)):
    x = np.zeros((4, 6), np.int8)
    tbl = Const(tables) if table_is_const else Input(tables)
    blob, _ = build_op("CHANNEL_LUT", [Input(x, 0.1, 0), tbl], [Out(out_shape, "INT8", 0.1, 0)], axis=axis)
    return blob


@pytest.mark.parametrize(
    "tables, kw, fragment",
    [
        (np.zeros((5, 256), np.int8), {}, "table is [5, 256], expected [6, 256] (input dimension 1, LUT entries)"),
        (np.zeros((6, 255), np.int8), {}, "table is [6, 255], expected [6, 256]"),
        (np.zeros((4, 256), np.int8), {}, "table is [4, 256], expected [6, 256]"),
        (np.zeros(6 * 256, np.int8), {}, "table has rank 1, expected 2"),
        (np.zeros((6, 256), np.int32), {}, "table has dtype INT32, expected INT8"),
        (np.zeros((6, 256), np.int8), dict(table_is_const=False), "table must be a constant"),
        (np.zeros((6, 256), np.int8), dict(axis=2), "axis = 2 is not in 0..1"),
        (np.zeros((6, 256), np.int8), dict(axis=-1), "axis = -1 is not in 0..1"),
        (np.zeros((6, 256), np.int8), dict(out_shape=(6, 4)), "input and output have different shapes"),
    ],
)
def test_channel_lut_rejects_bad_tables_axes_and_outputs(tables, kw, fragment):
    expect_rejected(channel_lut_blob(tables, **kw), fragment)


def test_channel_lut_accepts_matching_tables_on_either_axis():
    _native.Program(channel_lut_blob(np.zeros((6, 256), np.int8), axis=1))
    _native.Program(channel_lut_blob(np.zeros((4, 256), np.int8), axis=0))
