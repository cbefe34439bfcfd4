"""SOFTMAX: golden ESP-NN vectors, TFLite's int8 softmax (gemmlowp fixed point) in Python, PyTorch, rejections."""

import numpy as np
import pytest

from executorch_espnn import _native
from executorch_espnn import quant_params as qp
from espnn_dev.graph_util import Input, Out, build_op, expect_rejected, run_op

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
OUT_SCALE, OUT_ZP = 1.0 / 256.0, -128


# ------------------------------------------------- TFLite int8 softmax oracle
# Written from the TFLite/gemmlowp definitions (Python ints, exact).

def _wrap32(v):
    return ((v + 2**31) % 2**32) - 2**31


def _srdhm(a, b):
    if a == b == INT32_MIN:
        return INT32_MAX
    p = a * b
    p += (1 << 30) if p >= 0 else 1 - (1 << 30)
    return -((-p) >> 31) if p < 0 else p >> 31  # truncating division by 2^31


def _rdbp(x, e):
    mask = (1 << e) - 1
    return (x >> e) + (1 if (x & mask) > (mask >> 1) + (1 if x < 0 else 0) else 0)


def _sat_shl(x, e):
    return max(INT32_MIN, min(INT32_MAX, x << e))


def _exp_on_negative_values(a):
    """exp(a) for a <= 0 given in Q5.26; result in Q0.31."""
    quarter = 1 << 24
    r = (a & (quarter - 1)) - quarter           # a mod 1/4, shifted into [-1/4, 0)
    # exp on [-1/4, 0): Taylor series around -1/8 (Q0.31)
    x = _sat_shl(r, 5) + (1 << 28)
    x2 = _srdhm(x, x)
    x3 = _srdhm(x2, x)
    x4 = _srdhm(x2, x2)
    poly = _rdbp(_srdhm(_rdbp(x4, 2) + x3, 715827883) + x2, 1)
    result = 1895147668 + _srdhm(1895147668, x + poly)
    rest = r - a
    for bit, mult in enumerate([1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242]):
        if rest & (1 << (24 + bit)):
            result = _srdhm(result, mult)
    return INT32_MAX if a == 0 else result


def _one_over_one_plus_x(x):
    """1/(1+x) for x in [0,1) in Q0.31 (Newton-Raphson in Q2.29)."""
    s = x + INT32_MAX  # RoundingHalfSum(x, one): (s + sign(s)) / 2, truncating
    half = (s + 1) // 2 if s >= 0 else -((-s + 1) // 2)
    est = 1515870810 + _srdhm(half, -1010580540)
    for _ in range(3):
        err = (1 << 29) - _srdhm(half, est)
        est = est + _sat_shl(_srdhm(est, err), 2)
    return _sat_shl(est, 1)


def tflite_softmax_row(row, mult, shift, diff_min):
    row = [int(v) for v in row]
    mx = max(row)
    exps = [_exp_on_negative_values(_srdhm(d << shift, mult)) if d >= diff_min else None
            for d in (v - mx for v in row)]
    total = _wrap32(sum(_rdbp(e, 12) for e in exps if e is not None))
    clz = 32 - int(total & 0xFFFFFFFF).bit_length()
    scale = _one_over_one_plus_x(_wrap32(((total & 0xFFFFFFFF) << clz) - 2**31))
    bits = 12 - clz + 31 - 8
    return [-128 if e is None else max(-128, min(127, _rdbp(_srdhm(scale, e), bits) - 128)) for e in exps]


def tflite_softmax(x, mult, shift, diff_min):
    rows = x.reshape(-1, x.shape[-1])
    return np.array([tflite_softmax_row(r, mult, shift, diff_min) for r in rows], np.int8).reshape(x.shape)


# ------------------------------------------------------------------ helpers

def run_softmax(x, s_in, zp_in, params, out_q=(OUT_SCALE, OUT_ZP)):
    return run_op("SOFTMAX", [Input(x, s_in, zp_in)], Out(x.shape, "INT8", *out_q), **params)


def golden_cases(vectors_dir):
    z = np.load(vectors_dir / "softmax_s8.npz")
    fields = z["params_fields"].tolist()
    for i in range(int(z["num_cases"])):
        yield i, dict(zip(fields, z[f"c{i}_params"].tolist())), z[f"c{i}_input"], z[f"c{i}_output"], z[f"c{i}_fscale"]


def test_golden_vectors_bit_exact(vectors_dir):
    n = 0
    for i, p, x, want, fscale in golden_cases(vectors_dir):
        params = dict(input_mult=p["mult"], input_left_shift=p["shift"], diff_min=p["diff_min"])
        x2 = x.reshape(p["height"], p["width"])
        got = run_softmax(x2, float(fscale[0]), p["input_zp"], params)
        np.testing.assert_array_equal(got, want.reshape(got.shape), err_msg=f"case {i}")
        # Rows are the leading dims, whatever the rank: [h, w] as [1, h, 1, w].
        got4 = run_softmax(x2.reshape(1, p["height"], 1, p["width"]), float(fscale[0]), p["input_zp"], params)
        np.testing.assert_array_equal(got4.reshape(got.shape), got, err_msg=f"rank 4, case {i}")
        # The test's own TFLite oracle reproduces the real library.
        np.testing.assert_array_equal(tflite_softmax(x2, p["mult"], p["shift"], p["diff_min"]),
                                      want.reshape(got.shape), err_msg=f"oracle, case {i}")
        n += 1
    assert n == 50


# (shape, input scale, beta): rank 1..5, softmax over the last dim only.
CASES = [((10,), 0.1, 1.0), ((3, 7), 0.05, 1.0), ((2, 3, 16), 0.25, 1.0), ((1, 1, 1, 40), 0.02, 1.0),
         ((2, 2, 2, 2, 5), 0.5, 1.0), ((4, 33), 0.1, 2.0), ((2, 64), 0.01, 0.5)]


@pytest.mark.parametrize("shape, s_in, beta", CASES)
def test_matches_tflite_formula(shape, s_in, beta):
    rng = np.random.default_rng(len(shape) * 1000 + shape[-1])
    x = rng.integers(-128, 128, shape, dtype=np.int8)
    x.reshape(-1, shape[-1])[0, :] = 7  # a row of equal values: uniform output
    params = qp.softmax_params(s_in, beta)
    got = run_softmax(x, s_in, 3, params)
    want = tflite_softmax(x, params["input_mult"], params["input_left_shift"], params["diff_min"])
    np.testing.assert_array_equal(got, want)


def test_rows_are_independent_and_ignore_the_input_zero_point():
    x = np.array([[-128, 127, 0, 0], [127, 127, 127, 127], [-5, -5, -128, -128]], np.int8)
    params = qp.softmax_params(0.1)
    got = run_softmax(x, 0.1, 0, params)
    np.testing.assert_array_equal(run_softmax(x, 0.1, -77, params), got)
    for r in range(3):
        np.testing.assert_array_equal(run_softmax(x[r:r + 1], 0.1, 0, params)[0], got[r])
    # four equal values: 1/4 of 256 = 64 -> -128 + 64
    np.testing.assert_array_equal(got[1], [-64] * 4)


def test_scratch_is_sized_from_the_last_dimension():
    # [1,1,1,N]: the scratch (4*width on the optimized builds) must follow N,
    # not dims[1] x dims[2] as TFLM does. The host reports what its ESP-NN asks for.
    x = np.zeros((1, 1, 1, 300), np.int8)
    blob, _ = build_op("SOFTMAX", [Input(x, 0.1, 0)], [Out(x.shape, "INT8", OUT_SCALE, OUT_ZP)],
                       **qp.softmax_params(0.1))
    want = _native.kernels.softmax_scratch_size(width=300, height=1)
    assert _native.Program(blob).scratch_bytes == (want + 15) // 16 * 16


@pytest.mark.parametrize("shape, s_in", [((4, 10), 0.1), ((3, 100), 0.05), ((2, 5, 7), 0.3), ((6, 2), 0.02)])
def test_within_one_lsb_of_pytorch(shape, s_in):
    torch = pytest.importorskip("torch")
    zp = -20
    x = np.random.default_rng(shape[-1]).integers(-128, 128, shape, dtype=np.int8)
    got = run_softmax(x, s_in, zp, qp.softmax_params(s_in))
    xf = (torch.from_numpy(x).to(torch.float32) - zp) * s_in
    p = torch.softmax(xf, dim=-1)
    want = torch.clamp(torch.round(p / OUT_SCALE) + OUT_ZP, -128, 127).to(torch.int16).numpy()
    assert np.abs(got.astype(np.int16) - want).max() <= 1


# ---------------------------------------------------------------- rejections

def softmax_blob(shape=(2, 8), out_q=(OUT_SCALE, OUT_ZP), out_shape=None, **overrides):
    params = dict(qp.softmax_params(0.1))
    params.update(overrides)
    x = np.zeros(shape, np.int8)
    blob, _ = build_op("SOFTMAX", [Input(x, 0.1, 0)], [Out(out_shape or shape, "INT8", *out_q)], **params)
    return blob


def test_accepts_the_reference_blob_and_scale_within_tolerance():
    _native.Program(softmax_blob())
    _native.Program(softmax_blob(out_q=(OUT_SCALE * (1 + 1e-5), OUT_ZP)))


@pytest.mark.parametrize("out_q", [(1.0 / 255.0, -128), (OUT_SCALE, 0), (OUT_SCALE, -127), (1.0 / 128.0, -128)])
def test_rejects_wrong_output_quantization(out_q):
    expect_rejected(softmax_blob(out_q=out_q), "output quantization", "must be scale 1/256, zero point -128")


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        (dict(input_left_shift=32), "input_left_shift = 32 is not in 0..31"),
        (dict(input_left_shift=-1), "input_left_shift = -1"),
        (dict(diff_min=1), "diff_min = 1 is not in"),
        (dict(input_mult=-5), "input_mult = -5"),
        (dict(input_left_shift=31, diff_min=-2), "diff_min = -2 with input_left_shift = 31 overflows"),
        (dict(out_shape=(2, 9)), "input and output have different shapes"),
    ],
)
def test_rejects_bad_params(overrides, fragment):
    out_shape = overrides.pop("out_shape", None)
    expect_rejected(softmax_blob(out_shape=out_shape, **overrides), fragment)


def test_rejects_non_int8_input():
    blob, _ = build_op("SOFTMAX", [Input(np.zeros((2, 3), np.float32))], [Out((2, 3), "INT8", OUT_SCALE, OUT_ZP)],
                       **qp.softmax_params(0.1))
    expect_rejected(blob, "input has dtype FLOAT32, expected INT8")


def test_longest_supported_row_is_exact_and_longer_rows_are_rejected():
    # A flat row of 511 equal values: each output is 1/511 -> round(256/511) - 128 = -127.
    width = _native.LIMITS["max_softmax_width"]
    assert width == 511
    x = np.zeros((1, width), np.int8)
    got = run_softmax(x, 0.1, 0, qp.softmax_params(0.1))
    assert (got == -127).all()
    # From 512 elements on, the Q12 sum of exponentials can reach 512 and the
    # reference arithmetic shifts by more than 31 bits (ESP-NN 1.2.3 outputs
    # 127 everywhere): the runtime refuses the op so the lowering keeps it on the CPU.
    expect_rejected(softmax_blob(shape=(1, width + 1)), "row length 512 exceeds 511")
