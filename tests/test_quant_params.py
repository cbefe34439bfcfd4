"""The AOT parameter computation reproduces every derived golden case of the real ESP-NN vectors exactly."""

import numpy as np
import pytest

from executorch_espnn import quant_params as qp
from support.tflite_reference import mbqm


def _cases(vectors_dir, name):
    z = np.load(vectors_dir / name)
    fields = z["params_fields"].tolist()
    for i in range(int(z["num_cases"])):
        p = dict(zip(fields, z[f"c{i}_params"].tolist()))
        if p.get("derived", 0) == 1:
            yield i, p, z, f"c{i}_"


def _check_act(p, s_out, zp_out):
    assert qp.activation_range(p["fused_act"], s_out, zp_out) == (p["act_min"], p["act_max"])


@pytest.mark.parametrize("name", ["conv_s8.npz", "depthwise_conv_s8.npz", "fully_connected_per_ch_s8.npz"])
def test_per_channel_multipliers(vectors_dir, name):
    n = 0
    for i, p, z, c in _cases(vectors_dir, name):
        s_in, s_out = z[c + "fscale"].tolist()
        w = z[c + "wscale"]
        mult, shift = qp.conv_multipliers(s_in, w, s_out)
        out_ch = len(z[c + "mult"])
        np.testing.assert_array_equal(np.resize(mult, out_ch), z[c + "mult"], err_msg=f"case {i}")
        np.testing.assert_array_equal(np.resize(shift, out_ch), z[c + "shift"], err_msg=f"case {i}")
        _check_act(p, s_out, p["output_zp"])
        n += 1
    assert n > 20


def test_fc_per_tensor_multiplier(vectors_dir):
    n = 0
    for i, p, z, c in _cases(vectors_dir, "fully_connected_s8.npz"):
        s_in, s_out = z[c + "fscale"].tolist()
        m, e = qp.fc_per_tensor_multiplier(s_in, float(z[c + "wscale"][0]), s_out)
        assert (m, e) == (int(z[c + "mult"][0]), int(z[c + "shift"][0])), f"case {i}"
        _check_act(p, s_out, p["output_zp"])
        n += 1
    assert n > 20


def test_add_params(vectors_dir):
    n = 0
    for i, p, z, c in _cases(vectors_dir, "add_s8.npz"):
        s1, s2, s_out = z[c + "fscale"].tolist()
        got = qp.add_params(s1, s2, s_out)
        for k in ("input1_mult", "input1_shift", "input2_mult", "input2_shift", "left_shift"):
            pk = k.replace("input", "in")
            assert got[k] == p[pk], f"case {i}: {k}"
        assert (got["output_mult"], got["output_shift"]) == (p["out_mult"], p["out_shift"]), f"case {i}"
        _check_act(p, s_out, p["output_zp"])
        n += 1
    assert n > 20


@pytest.mark.parametrize("name", ["mul_s8.npz", "mul_broadcast_channel_s8.npz"])
def test_mul_multiplier(vectors_dir, name):
    n = 0
    for i, p, z, c in _cases(vectors_dir, name):
        s1, s2, s_out = z[c + "fscale"].tolist()
        assert qp.mul_multiplier(s1, s2, s_out) == (p["out_mult"], p["out_shift"]), f"case {i}"
        _check_act(p, s_out, p["output_zp"])
        n += 1
    assert n > 20


@pytest.mark.parametrize("name", ["avg_pool_s8.npz", "max_pool_s8.npz"])
def test_pool_activation_range(vectors_dir, name):
    n = 0
    for i, p, z, c in _cases(vectors_dir, name):
        (scale,) = z[c + "fscale"].tolist()
        _check_act(p, scale, p["zp"])
        n += 1
    assert n > 20


def test_softmax_params(vectors_dir):
    n = 0
    for i, p, z, c in _cases(vectors_dir, "softmax_s8.npz"):
        s_in, beta, _ = z[c + "fscale"].tolist()
        got = qp.softmax_params(s_in, beta)
        assert (got["input_mult"], got["input_left_shift"], got["diff_min"]) == (
            p["mult"], p["shift"], p["diff_min"]), f"case {i}"
        n += 1
    assert n > 20


def _off_by_rounding(mult, shift, ratio, max_abs):
    """How many sums |x| <= max_abs MBQM(x, mult, shift) puts elsewhere than x * ratio rounded
    to nearest (half away from zero), leaving out sums within the int32 multiplier's error
    (2^-31 of |x|) of a half step, where either rounding is right."""
    x = np.arange(-max_abs, max_abs + 1, dtype=np.int64)
    exact = x * ratio
    want = np.sign(exact) * np.floor(np.abs(exact) + 0.5)
    near_tie = np.abs(np.abs(exact - np.trunc(exact)) - 0.5) <= np.abs(x) * 2.0**-31
    return int(((mbqm(x, mult, shift, wrap=False) != want) & ~near_tie).sum())


def test_mean_params_round_once(vectors_dir):
    """MEAN_HW's (mult, shift) make MBQM round sum * s_in / (N * s_out) once, for every sum
    of N int8 values. The golden cases' TFLM recipe (the vectors' mult/shift: 1/N folded into
    a normalized multiplier, a right shift left over) rounds twice and misses in most cases;
    its unfolded multiplier is still TFLite's QuantizeMultiplier of the ratio."""
    n = tflm_misses = 0
    for i, p, z, c in _cases(vectors_dir, "mean_s8.npz"):
        s_in, s_out = z[c + "fscale"].tolist()
        assert qp.quantize_multiplier(qp.f32(s_in) / qp.f32(s_out)) == (p["mult_unfolded"], p["shift_unfolded"])
        ratio = qp.f32(s_in) / qp.f32(s_out) / p["N"]
        assert _off_by_rounding(*qp.mean_params(s_in, s_out, p["N"]), ratio, 255 * p["N"]) == 0, f"case {i}"
        tflm_misses += _off_by_rounding(p["mult"], p["shift"], ratio, 255 * p["N"]) > 0
        n += 1
    assert n > 10 and tflm_misses > n // 2


@pytest.mark.parametrize("real", [2.0**-40, 1e-6, 0.0123, 0.25, 0.3, 0.4999, 0.5, 0.77, 1.0, 2.27, 1000.5])
@pytest.mark.parametrize("max_abs", [255, 255 * 9, 255 * 4096])
def test_single_rounding_multiplier(real, max_abs):
    mult, shift = qp.single_rounding_multiplier(real, max_abs)
    assert 0 <= mult <= qp.INT32_MAX and -31 <= shift <= 30
    assert (max_abs << max(shift, 0)) <= qp.INT32_MAX, "the left shift must not wrap"
    # (2^-40 is below the int32 multiplier's resolution at 255 * 4096: every product is
    # within its error of 0, so the count below is about the tie filter; it stays 0.)
    assert _off_by_rounding(mult, shift, real, max_abs) == 0


def test_quantize_multiplier_rounds_twice_where_a_right_shift_is_left():
    """Why the recipe above: TFLite's normalized multiplier for 0.3 needs a right shift of 1,
    and MBQM then puts a quarter of the int8 range one step off."""
    m, e = qp.quantize_multiplier(0.3)
    assert e == -1 and _off_by_rounding(m, e, 0.3, 255) > 100


def test_hard_swish_params(vectors_dir):
    n = 0
    for i, p, z, c in _cases(vectors_dir, "hard_swish_s8.npz"):
        s_in, s_out = z[c + "fscale"].tolist()
        got = qp.hard_swish_params(s_in, s_out)
        for k in ("output_mult_fxp", "reluish_mult_fxp", "reluish_mult_exp", "output_mult_exp"):
            assert got[k] == p[k], f"case {i}: {k}"
        n += 1
    assert n > 10


@pytest.mark.parametrize("d, want", [
    (0.0, (0, 0)),
    (0.5, (1 << 30, 0)),
    (1.0, (1 << 30, 1)),
    (0.75, (1610612736, 0)),
    (2.0**-40, (0, 0)),          # exponent below -31 -> zero multiplier
    (1 - 2.0**-33, (1 << 30, 1)),  # rounds up to 2^31 -> renormalized
])
def test_quantize_multiplier_edge_cases(d, want):
    assert qp.quantize_multiplier(d) == want
