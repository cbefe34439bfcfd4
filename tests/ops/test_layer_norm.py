"""LAYER_NORM (layer norm and RMS norm over the last dim, int8 -> int8).

Oracles: (a) the integer formula of docs/xts3-format.md (LAYER_NORM), written here
in Python ints / numpy int64, bit-exact; (b) PyTorch's float layer_norm / rms_norm
of the dequantized input, quantized with round-half-even, within 1 LSB (the kernel
keeps its error below 1e-3 LSB, so only values within that of a rounding tie can
differ, by one). Plus the parser's rejections.
"""

import math

import numpy as np
import pytest

from executorch_espnn import _native
from executorch_espnn import quant_params as qp
from espnn_dev.graph_util import Const, Input, Out, build_op, expect_rejected, run_op

EPS_BITS = _native.NORM_EPS_FRAC_BITS      # 14
Z_BITS = _native.NORM_VALUE_FRAC_BITS      # 22
BETA_BITS = _native.NORM_BETA_FRAC_BITS    # 16


# ------------------------------------------------------- integer reference

def _round_shift(v: int, k: int) -> int:
    """round(v / 2^k), ties toward +infinity (floor of v / 2^k + 1/2)."""
    return (v + (1 << (k - 1))) >> k


def _row_reciprocal_sqrt(d: int) -> tuple[int, int]:
    """(mult, e) with 1/sqrt(d) ~= mult * 2^(e/2 - 61), per the format doc."""
    if d == 0:
        return 0, 0
    p = d.bit_length() - 1
    e = 2 * math.floor((61 - p) / 2)
    dn = d << e if e >= 0 else d >> -e
    assert 2**60 <= dn < 2**62
    s = math.isqrt(dn)
    return (2**61 + s // 2) // s, e


def reference(x, zp_in, zp_out, gamma_mult, gamma_shift, beta, eps_term, rms, act=(-128, 127)):
    rows = x.reshape(-1, x.shape[-1]).astype(np.int64)
    n_width = rows.shape[1]
    out = np.empty(rows.shape, np.int8)
    gm = [int(v) for v in np.broadcast_to(gamma_mult, (n_width,))]
    gs = [int(v) for v in np.broadcast_to(gamma_shift, (n_width,))]
    for r, row in enumerate(rows):
        d = [int(v) - zp_in for v in row]
        s1 = 0 if rms else sum(d)
        s2 = sum(v * v for v in d)
        var = n_width * s2 - s1 * s1
        mult, e = _row_reciprocal_sqrt((var << EPS_BITS) + eps_term)
        for j, dj in enumerate(d):
            z = _round_shift((n_width * dj - s1) * mult, 32 - e // 2)
            acc = _round_shift(z * gm[j], Z_BITS + 31 - BETA_BITS - gs[j])
            if beta is not None:
                acc += int(beta[j])
            q = (acc + (1 << (BETA_BITS - 1)) >> BETA_BITS) + zp_out
            out[r, j] = min(max(q, act[0]), act[1])
    return out.reshape(x.shape)


# ------------------------------------------------------------------ helpers

def norm_inputs(p, width):
    return [Const(p["gamma_mult"]), Const(p["gamma_shift"]), None if p["beta"] is None else Const(p["beta"])]


def run_norm(x, s_in, zp_in, s_out, zp_out, p, act=(-128, 127)):
    return run_op("LAYER_NORM", [Input(x, s_in, zp_in), *norm_inputs(p, x.shape[-1])],
                  Out(x.shape, "INT8", s_out, zp_out), act_min=act[0], act_max=act[1], **p["params"])


def eps_term(p):
    return (p["params"]["eps_hi"] << 32) | (p["params"]["eps_lo"] & 0xFFFFFFFF)


def random_case(seed):
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 5))
    width = int(rng.choice([1, 2, 3, 7, 16, 33, 64, 100, 257]))
    shape = tuple(int(v) for v in rng.integers(1, 4, rank - 1)) + (width,)
    rms = bool(rng.integers(0, 2))
    s_in = float(10 ** rng.uniform(-3, 0))
    s_out = float(10 ** rng.uniform(-2.5, -0.5))
    zp_in, zp_out = (int(v) for v in rng.integers(-128, 128, 2))
    eps = float(rng.choice([1e-5, 1e-6, 1e-3, 0.1, 0.0]))
    affine = rng.integers(0, 3)  # 0: none, 1: gamma, 2: gamma and beta
    gamma = rng.normal(1.0, 0.5, width) if affine else None
    beta = rng.normal(0.0, 0.5, width) if affine == 2 and not rms else None
    # Inputs near the zero point too, so that the eps term matters.
    spread = int(rng.choice([1, 3, 20, 127]))
    x = np.clip(zp_in + rng.integers(-spread, spread + 1, shape), -128, 127).astype(np.int8)
    return x, s_in, zp_in, s_out, zp_out, eps, gamma, beta, rms


def torch_norm(x, s_in, zp_in, s_out, zp_out, eps, gamma, beta, rms):
    torch = pytest.importorskip("torch")
    xf = (torch.from_numpy(x.astype(np.float32)) - zp_in) * np.float32(s_in)
    w = None if gamma is None else torch.tensor(gamma, dtype=torch.float32)
    b = None if beta is None else torch.tensor(beta, dtype=torch.float32)
    shape = [x.shape[-1]]
    y = torch.rms_norm(xf, shape, w, eps) if rms else torch.layer_norm(xf, shape, w, b, eps)
    return torch.clamp(torch.round(y / np.float32(s_out)) + zp_out, -128, 127).to(torch.int16).numpy()


# -------------------------------------------------------------------- tests

@pytest.mark.parametrize("seed", range(40))
def test_matches_the_documented_integer_formula(seed):
    x, s_in, zp_in, s_out, zp_out, eps, gamma, beta, rms = random_case(seed)
    p = qp.layer_norm_params(s_in, s_out, eps, x.shape[-1], gamma, beta, rms)
    got = run_norm(x, s_in, zp_in, s_out, zp_out, p)
    want = reference(x, zp_in, zp_out, p["gamma_mult"], p["gamma_shift"], p["beta"], eps_term(p), rms)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("seed", range(40))
def test_within_one_lsb_of_pytorch(seed):
    x, s_in, zp_in, s_out, zp_out, eps, gamma, beta, rms = random_case(seed)
    if eps == 0.0 and not rms:
        eps = 1e-5  # PyTorch gives NaN for a constant row with eps = 0
    if eps == 0.0 and rms:
        eps = 1e-6
    p = qp.layer_norm_params(s_in, s_out, eps, x.shape[-1], gamma, beta, rms)
    got = run_norm(x, s_in, zp_in, s_out, zp_out, p).astype(np.int16)
    want = torch_norm(x, s_in, zp_in, s_out, zp_out, eps, gamma, beta, rms)
    assert np.abs(got - want).max() <= 1


def test_mostly_exact_against_pytorch():
    """The fixed point keeps the error far below an LSB: over many random rows, all but
    values at a rounding tie of float32 PyTorch equal it exactly (measured: see report)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    x = rng.integers(-128, 128, (64, 96), dtype=np.int8)
    gamma, beta = rng.normal(1, 0.3, 96), rng.normal(0, 0.3, 96)
    for rms in (False, True):
        b = None if rms else beta
        p = qp.layer_norm_params(0.05, 0.03, 1e-5, 96, gamma, b, rms)
        got = run_norm(x, 0.05, 3, 0.03, -2, p).astype(np.int16)
        want = torch_norm(x, 0.05, 3, 0.03, -2, 1e-5, gamma, b, rms)
        assert np.abs(got - want).max() <= 1
        assert np.count_nonzero(got != want) <= x.size // 1000, torch.__version__


def test_width_one_and_constant_rows():
    # Layer norm of one element (or of equal elements) is beta; RMS norm of one
    # element is its sign times gamma (up to eps).
    x = np.array([[-100], [0], [5], [127]], np.int8)
    p = qp.layer_norm_params(0.1, 0.05, 1e-5, 1, [2.0], [0.5])
    np.testing.assert_array_equal(run_norm(x, 0.1, 0, 0.05, 1, p), np.full((4, 1), 11, np.int8))
    p = qp.layer_norm_params(0.1, 0.05, 1e-5, 1, [2.0], None, rms=True)
    np.testing.assert_array_equal(run_norm(x, 0.1, 0, 0.05, 1, p).ravel(), [-39, 1, 41, 41])
    # eps = 0 and a constant row: the numerator is 0, so the output is beta (PyTorch: NaN).
    row = np.full((1, 8), 9, np.int8)
    p = qp.layer_norm_params(0.1, 0.05, 0.0, 8, np.ones(8), np.full(8, -0.25))
    np.testing.assert_array_equal(run_norm(row, 0.1, 0, 0.05, 0, p), np.full((1, 8), -5, np.int8))


def test_eps_dominates_tiny_variance():
    # One LSB of spread at scale 1e-3 has variance 2.5e-7; eps = 1e-3 flattens it.
    x = np.array([[0, 1] * 8], np.int8)
    p = qp.layer_norm_params(1e-3, 0.01, 1e-3, 16)
    got = run_norm(x, 1e-3, 0, 0.01, 0, p)
    want = torch_norm(x, 1e-3, 0, 0.01, 0, 1e-3, None, None, False)
    np.testing.assert_array_equal(got, want)
    assert np.abs(got).max() == 2  # 0.0005 / sqrt(0.00100025) / 0.01 = 1.58


def test_extreme_values_and_max_width_do_not_overflow():
    width = _native.LIMITS["max_norm_width"]
    x = np.full((1, width), 127, np.int8)
    x[0, ::2] = -128
    for rms in (False, True):
        p = qp.layer_norm_params(1.0, 1 / 64, 0.0, width, None, None, rms)
        got = run_norm(x, 1.0, -128, 1 / 64, 0, p)
        want = reference(x, -128, 0, p["gamma_mult"], p["gamma_shift"], None, eps_term(p), rms)
        np.testing.assert_array_equal(got, want)
    # one outlier in a long row: |z| = sqrt(N - 1) ~ 256, the largest the kernel sees
    x = np.zeros((1, width), np.int8)
    x[0, 0] = 127
    p = qp.layer_norm_params(1.0, 4.0, 0.0, width, None, None)
    got = run_norm(x, 1.0, -128, 4.0, 0, p)
    assert got[0, 0] == 64 and got[0, 1] == 0  # 255.99 / 4 -> 64, -0.0039 / 4 -> 0


def test_activation_clamp_and_output_zero_point():
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (5, 20), dtype=np.int8)
    p = qp.layer_norm_params(0.1, 0.01, 1e-5, 20, rng.normal(1, 0.2, 20), rng.normal(0, 0.1, 20))
    full = run_norm(x, 0.1, 0, 0.01, 10, p)
    np.testing.assert_array_equal(run_norm(x, 0.1, 0, 0.01, 10, p, act=(10, 60)), np.clip(full, 10, 60))


def test_per_channel_gamma_equal_values_match_per_tensor():
    rng = np.random.default_rng(4)
    x = rng.integers(-128, 128, (3, 40), dtype=np.int8)
    per_tensor = qp.layer_norm_params(0.02, 0.02, 1e-5, 40, None, None)
    per_channel = qp.layer_norm_params(0.02, 0.02, 1e-5, 40, np.ones(40), None)
    assert per_tensor["gamma_mult"].shape == (1,) and per_channel["gamma_mult"].shape == (40,)
    np.testing.assert_array_equal(run_norm(x, 0.02, 0, 0.02, 0, per_tensor), run_norm(x, 0.02, 0, 0.02, 0, per_channel))


def test_negative_and_zero_gamma():
    rng = np.random.default_rng(5)
    x = rng.integers(-128, 128, (4, 12), dtype=np.int8)
    gamma = np.array([-1.0, 0.0, 1e-10, 2.0] * 3)  # 1e-10 / 0.02 < 2^-25: flushed
    p = qp.layer_norm_params(0.05, 0.02, 1e-5, 12, gamma, None)
    assert p["gamma_mult"][0] < 0 and p["gamma_mult"][1] == 0 and p["gamma_mult"][2] == 0
    got = run_norm(x, 0.05, 0, 0.02, 0, p)
    np.testing.assert_array_equal(got[:, 1::4], 0)
    np.testing.assert_array_equal(got, reference(x, 0, 0, p["gamma_mult"], p["gamma_shift"], None, eps_term(p), False))
    assert np.abs(got.astype(np.int16) - torch_norm(x, 0.05, 0, 0.02, 0, 1e-5, gamma, None, False)).max() <= 1


def test_params_reject_what_the_kernel_cannot_represent():
    with pytest.raises(ValueError, match="eps"):
        qp.layer_norm_params(1e-6, 0.1, 1.0, 4096)
    with pytest.raises(ValueError, match="too large"):
        qp.layer_norm_params(0.1, 1e-10, 1e-5, 4, np.ones(4))
    with pytest.raises(ValueError, match="beta"):
        qp.layer_norm_params(0.1, 1e-6, 1e-5, 4, np.ones(4) * 1e-7, np.ones(4) * 1e6)
    with pytest.raises(ValueError, match="RMS"):
        qp.layer_norm_params(0.1, 0.1, 1e-5, 4, None, np.ones(4), rms=True)
    for kw in (dict(eps=float("nan")), dict(gamma=[1, np.inf, 1, 1]), dict(beta=[0, 0, np.nan, 0])):
        args = dict(eps=1e-5, gamma=None, beta=None) | kw
        with pytest.raises(ValueError, match="not finite"):
            qp.layer_norm_params(0.1, 0.1, args["eps"], 4, args["gamma"], args["beta"])


def test_format_version_two():
    p = qp.layer_norm_params(0.1, 0.1, 1e-5, 4)
    blob, _ = build_op("LAYER_NORM", [Input(np.zeros((2, 4), np.int8), 0.1, 0), *norm_inputs(p, 4)],
                       [Out((2, 4), "INT8", 0.1, 0)], act_min=-128, act_max=127, **p["params"])
    assert _native.parse(blob)["version"] == 2 == _native.OPCODES["LAYER_NORM"]["min_version"]


# ---------------------------------------------------------------- rejections

def norm_blob(shape=(2, 8), out_shape=None, gamma_n=None, beta_n=None, beta=True, gamma_dtype=np.int32,
              shift_value=0, in_dtype=np.int8, out_dtype="INT8", const_gamma=True, **overrides):
    width = shape[-1]
    params = dict(rms_norm=0, eps_lo=100, eps_hi=0, act_min=-128, act_max=127)
    params.update(overrides)
    g = np.full(width if gamma_n is None else gamma_n, 1 << 30).astype(gamma_dtype)
    gamma = Const(g) if const_gamma else Input(g)
    shift = Const(np.full(g.shape, shift_value, np.int32))
    b = Const(np.zeros(width if beta_n is None else beta_n, np.int32)) if beta else None
    blob, _ = build_op("LAYER_NORM", [Input(np.zeros(shape, in_dtype), 0.1, 0), gamma, shift, b],
                       [Out(out_shape or shape, out_dtype, 0.1, 0)], **params)
    return blob


def test_accepts_the_reference_blobs():
    _native.Program(norm_blob())
    _native.Program(norm_blob(gamma_n=1))
    _native.Program(norm_blob(beta=False, rms_norm=1))
    _native.Program(norm_blob(shape=(3, 1)))
    _native.Program(norm_blob(shape=(1, 2, 1, 2, 3), eps_hi=(1 << 30) - 1, eps_lo=-1))


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(out_shape=(2, 9)), "input and output have different shapes"),
        (dict(in_dtype=np.float32), "input has dtype FLOAT32"),
        (dict(out_dtype="INT32"), "output has dtype INT32"),
        (dict(gamma_n=7), "gamma_mult has 7 elements, expected 8"),
        (dict(gamma_n=0 + 2), "gamma_mult has 2 elements"),
        (dict(gamma_dtype=np.int8), "gamma_mult has dtype INT8"),
        (dict(const_gamma=False), "gamma_mult must be a constant"),
        (dict(beta_n=7), "beta has 7 elements, expected 8"),
        (dict(beta=True, rms_norm=1), "beta must be absent for RMS norm"),
        (dict(rms_norm=2), "rms_norm = 2 is not in 0..1"),
        (dict(rms_norm=-1), "rms_norm = -1"),
        (dict(eps_hi=1 << 30), "eps_hi = 1073741824 is not in 0..1073741823"),
        (dict(eps_hi=-1), "eps_hi = -1"),
        (dict(shift_value=31), "gamma_shift[0] = 31 is not in -24..30"),
        (dict(shift_value=-25), "gamma_shift[0] = -25"),
        (dict(act_min=5, act_max=4), "act_min 5 > act_max 4"),
        (dict(act_max=128), "act_max = 128"),
        (dict(shape=(1, _native.LIMITS["max_norm_width"] + 1)), "row length 65536 exceeds 65535"),
    ],
)
def test_rejects(kwargs, fragment):
    expect_rejected(norm_blob(**kwargs), "LAYER_NORM", fragment)


def test_rejects_gamma_shift_of_other_length():
    g, s = Const(np.full(4, 1 << 30, np.int32)), Const(np.zeros(1, np.int32))
    blob, _ = build_op("LAYER_NORM", [Input(np.zeros((2, 4), np.int8), 0.1, 0), g, s, None],
                       [Out((2, 4), "INT8", 0.1, 0)], rms_norm=0, eps_lo=0, eps_hi=0, act_min=-128, act_max=127)
    expect_rejected(blob, "gamma_shift has 1 elements, expected 4")
