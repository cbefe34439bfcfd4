"""CONV2D: golden ESP-NN vectors, TFLite's integer conv formula, PyTorch's quantized conv, rejections.

The oracles here are independent of the runtime: the golden outputs of the real ESP-NN 1.2.3
ANSI kernel, an int64 numpy transcription of TFLite's ConvPerChannel integer pipeline (with
grouping and dilation) written below (its requantization and parameter recipes are shared, in
tests/support/tflite_reference.py), and PyTorch's quantized conv2d (within 1 LSB: its requantization
rounds differently).
"""

import zlib

import numpy as np
import pytest

from executorch_espnn import _native
from executorch_espnn.xts3_writer import Xts3Writer
from espnn_dev.graph_util import Const, Input, Out, build_op, run_op
from support.tflite_reference import activation_range, derive_output, per_channel_multipliers, requant, wrap32


# --------------------------------------------------------------------------- TFLite ConvPerChannel
def conv_acc(x, w, bias, stride, pad, dil, groups, in_off, out_hw):
    """int32 accumulators of TFLite ConvPerChannel: sum over in-image taps of (x + in_off) * w, + bias.

    x [N,H,W,Cin] int8, w [Cout,kh,kw,Cin/groups] int8. Taps outside the image are skipped, which
    is the same as padding x + in_off with zeros on every side.
    """
    n, h, wd, cin = x.shape
    cout, kh, kw, cg = w.shape
    (sh, sw), (ph, pw), (dh, dw), (oh, ow) = stride, pad, dil, out_hw
    need_h = (oh - 1) * sh + dh * (kh - 1) + 1
    need_w = (ow - 1) * sw + dw * (kw - 1) + 1
    xp = np.zeros((n, max(need_h, ph + h), max(need_w, pw + wd), cin), np.int64)
    xp[:, ph:ph + h, pw:pw + wd, :] = x.astype(np.int64) + in_off
    acc = np.zeros((n, oh, ow, cout), np.int64)
    og = cout // groups
    for ky in range(kh):
        for kx in range(kw):
            win = xp[:, ky * dh: ky * dh + (oh - 1) * sh + 1: sh, kx * dw: kx * dw + (ow - 1) * sw + 1: sw, :]
            for g in range(groups):
                acc[..., g * og:(g + 1) * og] += np.einsum(
                    "nyxi,oi->nyxo", win[..., g * cg:(g + 1) * cg], w[g * og:(g + 1) * og, ky, kx, :].astype(np.int64))
    if bias is not None:
        acc += bias.astype(np.int64)
    return wrap32(acc)


def conv_oracle(x, w, bias, mult, shift, *, stride, pad, dil=(1, 1), groups=1, in_off, out_off, act, out_hw):
    return requant(conv_acc(x, w, bias, stride, pad, dil, groups, in_off, out_hw), mult, shift, out_off, act)


def torch_out_size(i, k, s, p, d):
    return (i + 2 * p - d * (k - 1) - 1) // s + 1


# --------------------------------------------------------------------------- running the op
def run_conv(x, w, bias, mult, shift, *, stride, pad, dil=(1, 1), groups=1, in_off, out_off, act, out_hw):
    n, cout = x.shape[0], w.shape[0]
    return run_op(
        "CONV2D",
        [Input(x, 0.05, -in_off), Const(w), None if bias is None else Const(bias), Const(mult), Const(shift)],
        Out((n, out_hw[0], out_hw[1], cout), "INT8", 0.1, out_off),
        stride_h=stride[0], stride_w=stride[1], pad_top=pad[0], pad_left=pad[1], dilation_h=dil[0],
        dilation_w=dil[1], groups=groups, input_offset=in_off, output_offset=out_off, act_min=act[0],
        act_max=act[1])


# --------------------------------------------------------------------------- golden vectors
def golden_cases(vectors_dir):
    z = np.load(vectors_dir / "conv_s8.npz")
    fields = z["params_fields"].tolist()
    for i in range(int(z["num_cases"])):
        p = dict(zip(fields, z[f"c{i}_params"].tolist()))
        yield i, p, {k: z[f"c{i}_{k}"] for k in ("input", "filter", "bias", "mult", "shift", "output")}


def test_golden_vectors_bit_exact(vectors_dir):
    ran, rejected = 0, []
    for i, p, a in golden_cases(vectors_dir):
        x = a["input"].reshape(1, p["in_h"], p["in_w"], p["in_ch"])
        geo = dict(stride=(p["stride_h"], p["stride_w"]), pad=(p["pad_h"], p["pad_w"]), groups=p["groups"],
                   in_off=p["in_offset"], out_off=p["out_offset"], act=(p["act_min"], p["act_max"]),
                   out_hw=(p["out_h"], p["out_w"]))
        bias = a["bias"] if p["has_bias"] else None
        want = a["output"].reshape(1, p["out_h"], p["out_w"], p["out_ch"])
        # The test's own oracle reproduces the library on every case, including the rejected ones.
        np.testing.assert_array_equal(conv_oracle(x, a["filter"], bias, a["mult"], a["shift"], **geo), want,
                                      err_msg=f"oracle, case {i}")
        if p["pad_h"] >= p["k_h"] or p["pad_w"] >= p["k_w"]:
            # A pad at least as large as the kernel gives output rows that see only padding;
            # the runtime refuses it (ESP-NN's generic-opt 1x1 path ignores padding).
            blob, _ = build_op("CONV2D", [Input(x), Const(a["filter"]), None if bias is None else Const(bias),
                                          Const(a["mult"]), Const(a["shift"])],
                               [Out(want.shape)], stride_h=geo["stride"][0], stride_w=geo["stride"][1],
                               pad_top=p["pad_h"], pad_left=p["pad_w"], dilation_h=1, dilation_w=1,
                               groups=p["groups"], input_offset=p["in_offset"], output_offset=p["out_offset"],
                               act_min=p["act_min"], act_max=p["act_max"])
            with pytest.raises(ValueError, match=r"pad_(top|left) = \d+ is not in"):
                _native.Program(blob)
            rejected.append(i)
            continue
        got = run_conv(x, a["filter"], bias, a["mult"], a["shift"], **geo)
        np.testing.assert_array_equal(got, want, err_msg=f"case {i}: {p}")
        ran += 1
    assert ran + len(rejected) == 120
    assert rejected == [16], rejected  # the only case with pad >= kernel (1x1 kernel, pad 1)


# --------------------------------------------------------------------------- exact formula, random cases
def make_case(rng, *, n, hw, cin, cout, k, groups=1, per_channel=True, in_zp=None, out_zp=None, bias=True):
    """Random int8 layer with parameters derived from float scales as TFLite/ESP-NN's AOT does."""
    x = rng.integers(-128, 128, size=(n, hw[0], hw[1], cin), dtype=np.int8)
    w = rng.integers(-127, 128, size=(cout, k[0], k[1], cin // groups), dtype=np.int8)
    s_in = np.float32(rng.uniform(0.004, 0.2))
    s_w = rng.uniform(0.001, 0.02, size=cout if per_channel else 1).astype(np.float32)
    s_w = np.broadcast_to(s_w, (cout,)) if not per_channel else s_w
    in_zp = int(rng.integers(-128, 128)) if in_zp is None else in_zp
    b = rng.integers(-5000, 5000, size=cout).astype(np.int32) if bias else None
    return x, w, b, s_in, s_w, in_zp, out_zp


# (name, n, (h, w), cin, cout, (kh, kw), stride, pad, dil, groups, out_hw or None (= PyTorch formula))
GEOMETRIES = [
    ("3x3 s1 p1", 1, (8, 9), 5, 7, (3, 3), (1, 1), (1, 1), (1, 1), 1, None),
    ("3x3 s2 p1", 1, (9, 10), 6, 8, (3, 3), (2, 2), (1, 1), (1, 1), 1, None),
    ("5x5 s3 p2 clipped", 1, (11, 13), 4, 6, (5, 5), (3, 3), (2, 2), (1, 1), 1, None),
    ("SAME odd total, pad only at the end", 1, (8, 7), 3, 5, (3, 3), (2, 2), (0, 0), (1, 1), 1, (4, 4)),
    ("SAME, end pad larger than the leading pad", 1, (6, 7), 4, 4, (4, 4), (1, 1), (1, 1), (1, 1), 1, (6, 7)),
    ("VALID dropping a row and a column", 1, (9, 9), 3, 4, (2, 2), (2, 2), (0, 0), (1, 1), 1, (4, 4)),
    ("kernel larger than the input", 1, (3, 3), 6, 5, (5, 5), (1, 1), (2, 2), (1, 1), 1, None),
    ("1x1 stride 2", 1, (7, 6), 16, 8, (1, 1), (2, 2), (0, 0), (1, 1), 1, None),
    ("1-D window", 1, (10, 4), 3, 8, (5, 1), (3, 1), (2, 0), (1, 1), 1, None),
    ("dilation 2", 1, (10, 11), 4, 6, (3, 3), (1, 1), (2, 2), (2, 2), 1, None),
    ("dilation 2 stride 2", 1, (11, 9), 3, 5, (3, 3), (2, 2), (1, 2), (2, 2), 1, None),
    ("dilation on one axis, clipped", 1, (7, 12), 5, 3, (3, 2), (1, 2), (0, 3), (1, 3), 1, None),
    ("dilation 2 grouped", 1, (9, 9), 8, 6, (3, 3), (1, 1), (2, 2), (2, 2), 2, None),
    ("Conv2d(16, 16, 3, groups=4)", 1, (8, 8), 16, 16, (3, 3), (1, 1), (1, 1), (1, 1), 4, None),
    ("grouped 1x1", 1, (5, 6), 12, 9, (1, 1), (1, 1), (0, 0), (1, 1), 3, None),
    ("grouped, groups == channels", 1, (6, 6), 4, 8, (3, 3), (2, 2), (1, 1), (1, 1), 4, None),
    ("batch 3, odd image size", 3, (5, 7), 3, 5, (3, 3), (1, 2), (1, 1), (1, 1), 1, None),
    ("batch 2, grouped and dilated", 2, (7, 6), 6, 4, (2, 3), (2, 1), (1, 2), (3, 2), 2, None),
    # Staged routes (conv.cpp): dilation by phases, groups one by one, through the dense kernel.
    ("dilation 3, uneven phases, SAME-like pad", 1, (10, 11), 3, 4, (3, 3), (1, 1), (3, 2), (3, 3), 1, None),
    ("dilation on width only, stride 2 in height", 1, (9, 13), 4, 5, (3, 3), (2, 1), (1, 4), (1, 4), 1, None),
    ("TCN: 1-D causal, dilation 8", 1, (1, 40), 6, 6, (1, 3), (1, 1), (0, 0), (1, 8), 1, None),
    ("dilation 2, several bands", 2, (40, 36), 16, 8, (3, 3), (1, 1), (2, 2), (2, 2), 1, None),
    ("grouped, several bands, ch % 8 == 0 per group", 1, (48, 40), 32, 32, (3, 3), (1, 1), (1, 1), (1, 1), 2,
     None),
    ("grouped 1x1 stride 2, 8 channels per group", 2, (9, 8), 16, 24, (1, 1), (2, 2), (0, 0), (1, 1), 2, None),
    ("grouped, asymmetric end pad", 1, (6, 7), 8, 8, (4, 4), (1, 1), (1, 1), (1, 1), 4, (6, 7)),
    # More phases than outputs: only the first out_h x out_w phases hold an output (the fuzzer's
    # dilation-65535 case looped over all of them: dilation_h * dilation_w empty calls).
    ("dilation far beyond the output", 1, (3, 4), 5, 3, (2, 2), (1, 1), (150, 100), (300, 200), 1, None),
]


@pytest.mark.parametrize("per_channel", [True, False], ids=["per_channel", "per_tensor"])
@pytest.mark.parametrize("geo", GEOMETRIES, ids=[g[0] for g in GEOMETRIES])
def test_matches_tflite_integer_formula(geo, per_channel):
    name, n, hw, cin, cout, k, stride, pad, dil, groups, out_hw = geo
    rng = np.random.default_rng(zlib.crc32(f"{name}/{per_channel}".encode()))
    if out_hw is None:
        out_hw = tuple(torch_out_size(hw[i], k[i], stride[i], pad[i], dil[i]) for i in range(2))
    x, w, b, s_in, s_w, in_zp, _ = make_case(rng, n=n, hw=hw, cin=cin, cout=cout, k=k, groups=groups,
                                             per_channel=per_channel)
    geom = dict(stride=stride, pad=pad, dil=dil, groups=groups, out_hw=out_hw)
    acc = conv_acc(x, w, b, stride, pad, dil, groups, -in_zp, out_hw)
    s_out, out_zp, mult, shift = derive_output(acc, s_in, s_w, None)
    if not per_channel:
        assert len(set(mult.tolist())) == 1 and len(set(shift.tolist())) == 1  # repeated per-tensor value
    want = requant(acc, mult, shift, out_zp, (-128, 127))
    got = run_conv(x, w, b, mult, shift, in_off=-in_zp, out_off=out_zp, act=(-128, 127), **geom)
    np.testing.assert_array_equal(got, want)
    assert (got == -128).any() and (got == 127).any()  # the whole range is exercised


@pytest.mark.parametrize("fused", ["relu", "relu6", "relu_n1_to_1", "narrow"])
def test_fused_activation_clamps(fused):
    rng = np.random.default_rng(7)
    x, w, b, s_in, s_w, in_zp, _ = make_case(rng, n=1, hw=(7, 8), cin=6, cout=9, k=(3, 3))
    geom = dict(stride=(1, 1), pad=(1, 1), out_hw=(7, 8))
    acc = conv_acc(x, w, b, (1, 1), (1, 1), (1, 1), 1, -in_zp, (7, 8))
    s_out, out_zp, mult, shift = derive_output(acc, s_in, s_w, None)
    act = (-20, 33) if fused == "narrow" else activation_range(fused, s_out, out_zp)
    assert act != (-128, 127)
    want = requant(acc, mult, shift, out_zp, act)
    got = run_conv(x, w, b, mult, shift, in_off=-in_zp, out_off=out_zp, act=act, **geom)
    np.testing.assert_array_equal(got, want)
    assert got.min() == act[0] and got.max() == act[1]  # both clamps bite


@pytest.mark.parametrize("in_zp,out_zp", [(-128, -128), (127, 127), (-128, 127), (127, -128), (0, 0)])
def test_extreme_zero_points(in_zp, out_zp):
    rng = np.random.default_rng(zlib.crc32(f"{in_zp}/{out_zp}".encode()))
    x, w, b, s_in, s_w, _, _ = make_case(rng, n=1, hw=(6, 5), cin=7, cout=5, k=(3, 3), in_zp=in_zp)
    acc = conv_acc(x, w, b, (2, 1), (1, 1), (1, 1), 1, -in_zp, (3, 5))
    _, _, mult, shift = derive_output(acc, s_in, s_w, out_zp)
    want = requant(acc, mult, shift, out_zp, (-128, 127))
    got = run_conv(x, w, b, mult, shift, stride=(2, 1), pad=(1, 1), in_off=-in_zp, out_off=out_zp,
                   act=(-128, 127), out_hw=(3, 5))
    np.testing.assert_array_equal(got, want)


def test_bias_absent_and_extreme_requant_parameters():
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, size=(1, 5, 6, 8), dtype=np.int8)
    w = rng.integers(-128, 128, size=(4, 3, 3, 8), dtype=np.int8)
    mult = np.array([2**31 - 1, 2**30, 1518500250, 0], np.int32)
    shift = np.array([-31, 2, -7, 0], np.int32)  # largest right shift, a left shift, mult 0
    acc = conv_acc(x, w, None, (1, 1), (1, 1), (1, 1), 1, 128, (5, 6))
    want = requant(acc, mult, shift, -5, (-128, 127))
    got = run_conv(x, w, None, mult, shift, stride=(1, 1), pad=(1, 1), in_off=128, out_off=-5,
                   act=(-128, 127), out_hw=(5, 6))
    np.testing.assert_array_equal(got, want)
    assert (got[..., 3] == -5).all()


def test_wide_layer_within_espnn_limits():
    # A 1x1 conv over a 65535-wide row: the largest width ESP-NN's uint16 geometry allows.
    rng = np.random.default_rng(11)
    x = rng.integers(-128, 128, size=(1, 1, 65535, 1), dtype=np.int8)
    w = np.array([[[[3]]], [[[-2]]]], np.int8)
    mult, shift = np.array([1 << 30, 1 << 30], np.int32), np.array([-1, 0], np.int32)
    acc = conv_acc(x, w, None, (1, 1), (0, 0), (1, 1), 1, 7, (1, 65535))
    got = run_conv(x, w, None, mult, shift, stride=(1, 1), pad=(0, 0), in_off=7, out_off=1, act=(-128, 127),
                   out_hw=(1, 65535))
    np.testing.assert_array_equal(got, requant(acc, mult, shift, 1, (-128, 127)))


# --------------------------------------------------------------------------- PyTorch reference
TORCH_CASES = [
    # (name, n, hw, cin, cout, k, stride, pad, dil, groups)
    ("conv", 1, (9, 8), 6, 8, (3, 3), (2, 1), (1, 1), (1, 1), 1),
    ("grouped conv", 2, (8, 8), 16, 16, (3, 3), (1, 1), (1, 1), (1, 1), 4),
    ("dilated conv", 1, (11, 10), 5, 7, (3, 3), (1, 1), (2, 2), (2, 2), 1),
]


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")
@pytest.mark.parametrize("case", TORCH_CASES, ids=[c[0] for c in TORCH_CASES])
def test_matches_pytorch_quantized_conv_within_one_lsb(case, exact_quantized_engine):
    torch = pytest.importorskip("torch")
    import torch.ao.nn.quantized.functional as qF

    name, n, hw, cin, cout, k, stride, pad, dil, groups = case
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(n, cin, *hw, generator=g) * 1.5 + 0.3
    w = torch.randn(cout, cin // groups, *k, generator=g) * 0.2
    b = torch.randn(cout, generator=g) * 0.5
    # float32 scales, as TFLite stores them; quint8 activations (int8 = quint8 - 128).
    s_in = float(np.float32((x.max() - x.min()).item() / 255))
    zp_in_u8 = int(round(-x.min().item() / s_in))
    s_w = (w.abs().amax(dim=(1, 2, 3)) / 127).to(torch.float32)
    xq = torch.quantize_per_tensor(x, s_in, zp_in_u8, torch.quint8)
    wq = torch.quantize_per_channel(w, s_w.double(), torch.zeros(cout, dtype=torch.long), 0, torch.qint8)
    ref_f = torch.nn.functional.conv2d(xq.dequantize(), wq.dequantize(), b, stride, pad, dil, groups)
    s_out = float(np.float32((ref_f.max() - ref_f.min()).item() / 255))
    zp_out_u8 = int(np.clip(round(-ref_f.min().item() / s_out), 0, 255))
    yq = qF.conv2d(xq, wq, b, stride=stride, padding=pad, dilation=dil, groups=groups, scale=s_out,
                   zero_point=zp_out_u8, dtype=torch.quint8)
    want = yq.int_repr().numpy().astype(np.int16).transpose(0, 2, 3, 1) - 128

    # The lowering's job, done here from the float scales: NHWC/OHWI layouts, int32 bias, F3 multipliers.
    x8 = (xq.int_repr().numpy().astype(np.int16) - 128).astype(np.int8).transpose(0, 2, 3, 1).copy()
    w8 = wq.int_repr().numpy().transpose(0, 2, 3, 1).copy()
    s_w32 = s_w.numpy().astype(np.float32)
    bias = np.round(b.numpy().astype(np.float64) / (np.float64(s_in) * s_w32.astype(np.float64))).astype(np.int32)
    mult, shift = per_channel_multipliers(np.float32(s_in), s_w32, np.float32(s_out))
    out_hw = tuple(want.shape[1:3])
    got = run_conv(x8, w8, bias, mult, shift, stride=stride, pad=pad, dil=dil, groups=groups,
                   in_off=-(zp_in_u8 - 128), out_off=zp_out_u8 - 128, act=(-128, 127), out_hw=out_hw)
    diff = np.abs(got.astype(np.int16) - want)
    assert diff.max() <= 1, f"{name}: max diff {diff.max()} ({exact_quantized_engine})"
    assert (diff == 0).mean() > 0.9


# --------------------------------------------------------------------------- rejections
def conv_blob(*, x_shape=(1, 6, 6, 8), w_shape=(4, 3, 3, 8), out_shape=(1, 6, 6, 4), bias="int32",
              mult_len=None, shift_len=None, mult_val=1 << 30, shift_val=-3, w_const=True, w_zp=0, **over):
    cout = w_shape[0]
    params = dict(stride_h=1, stride_w=1, pad_top=1, pad_left=1, dilation_h=1, dilation_w=1, groups=1,
                  input_offset=3, output_offset=-2, act_min=-128, act_max=127)
    params.update(over)
    w = np.ones(w_shape, np.int8)
    b = {"int32": Const(np.zeros(cout, np.int32)), "int8": Const(np.zeros(cout, np.int8)), None: None}[bias]
    mult = np.full(cout if mult_len is None else mult_len, mult_val, np.int32)
    shift = np.full(cout if shift_len is None else shift_len, shift_val, np.int32)
    filt = Const(w, zero_point=w_zp) if w_const else Input(w)
    blob, _ = build_op("CONV2D", [Input(np.zeros(x_shape, np.int8)), filt, b, Const(mult), Const(shift)],
                       [Out(out_shape)], **params)
    return blob


def test_valid_blob_parses():
    _native.Program(conv_blob())
    _native.Program(conv_blob(bias=None))


@pytest.mark.parametrize("kwargs,message", [
    (dict(w_shape=(4, 3, 3, 7)), r"filter dims \[4,3,3,7\]: expected \[out_channels = 4, kh, kw, in_channels/groups = 8\]"),
    (dict(w_shape=(5, 3, 3, 8)), r"filter dims \[5,3,3,8\]"),
    (dict(w_shape=(4, 3, 3, 2), groups=4, out_shape=(1, 6, 6, 4)), None),  # valid grouped layer
    (dict(w_shape=(4, 3, 3, 4), groups=2), None),
    (dict(w_shape=(4, 3, 3, 8), groups=2), r"filter dims \[4,3,3,8\].*in_channels/groups = 4"),
    (dict(x_shape=(1, 6, 6, 16), w_shape=(4, 3, 3, 5), groups=3), r"groups = 3 does not divide input channels 16"),
    (dict(x_shape=(1, 6, 6, 8), w_shape=(6, 3, 3, 2), out_shape=(1, 6, 6, 6), groups=4),
     r"groups = 4 does not divide output channels 6"),
    (dict(groups=0), r"groups = 0 is not in 1\.\.8"),
    (dict(stride_h=0), r"stride_h = 0 is not in 1\.\.65535"),
    (dict(stride_w=0), r"stride_w = 0 is not in"),
    (dict(dilation_w=0), r"dilation_w = 0 is not in"),
    (dict(pad_top=3), r"pad_top = 3 is not in 0\.\.2 \(must be < the effective kernel height 3\)"),
    (dict(pad_left=-1), r"pad_left = -1 is not in 0\.\.2"),
    (dict(pad_top=4, dilation_h=2, out_shape=(1, 6, 6, 4)), None),  # pad 4 < dilated extent 5
    (dict(pad_top=5, dilation_h=2, out_shape=(1, 6, 6, 4)), r"pad_top = 5 is not in 0\.\.4 \(must be < the effective kernel height 5\)"),
    (dict(out_shape=(1, 5, 6, 4)), None),  # pad_top 1, implied bottom pad 0
    (dict(out_shape=(1, 7, 6, 4)), None),  # implied bottom pad 2
    (dict(out_shape=(1, 8, 6, 4)), r"output height 8 does not match input height 6, kernel 3, stride 1, dilation 1, pad_top 1 \(expected 5\.\.7\)"),
    (dict(out_shape=(1, 4, 6, 4)), r"output height 4 .*expected 5\.\.7"),
    (dict(out_shape=(1, 6, 8, 4)), r"output width 8 does not match"),
    (dict(stride_h=2, out_shape=(1, 2, 6, 4)), r"output height 2 .*expected 3\.\.4"),
    (dict(out_shape=(2, 6, 6, 4)), r"output batch 2 != input batch 1"),
    (dict(mult_len=3), r"mult has 3 elements, expected 4"),
    (dict(shift_len=5), r"shift has 5 elements, expected 4"),
    (dict(bias="int8"), r"bias has dtype INT8, expected INT32"),
    (dict(mult_val=-1), r"mult\[0\] = -1 is negative"),
    (dict(shift_val=31), r"shift\[0\] = 31 is not in -31\.\.30"),
    (dict(shift_val=-32), r"shift\[0\] = -32 is not in"),
    (dict(input_offset=-128), r"input_offset = -128 is not in -127\.\.128"),
    (dict(input_offset=129), r"input_offset = 129"),
    (dict(output_offset=128), r"output_offset = 128 is not in -128\.\.127"),
    (dict(act_min=5, act_max=4), r"act_min 5 > act_max 4"),
    (dict(act_max=128), r"act_max = 128"),
    (dict(w_const=False), r"filter must be a constant"),
    (dict(w_zp=3), r"filter zero point 3"),
    (dict(w_shape=(4, 3, 3)), r"filter has rank 3, expected 4"),
    (dict(x_shape=(6, 6, 8), out_shape=(6, 6, 4)), r"input has rank 3, expected 4"),
    (dict(x_shape=(1, 1, 70000, 1), w_shape=(1, 1, 1, 1), out_shape=(1, 1, 70000, 1), pad_top=0, pad_left=0),
     r"input width = 70000 exceeds 65535 \(ESP-NN narrows convolution geometry to uint16\)"),
    (dict(x_shape=(1, 1, 1, 70000), w_shape=(1, 1, 1, 70000), out_shape=(1, 1, 1, 1), pad_top=0, pad_left=0),
     r"input channels = 70000 exceeds 65535"),
    (dict(x_shape=(1, 1, 1, 1), w_shape=(70000, 1, 1, 1), out_shape=(1, 1, 1, 70000), pad_top=0, pad_left=0),
     r"output channels = 70000 exceeds 65535"),
    (dict(stride_h=70000), r"stride_h = 70000 is not in 1\.\.65535"),
])
def test_malformed_conv_is_rejected(kwargs, message):
    blob = conv_blob(**kwargs)
    if message is None:
        _native.Program(blob)
        return
    with pytest.raises(ValueError, match=r"op 0 \(CONV2D\): " + message):
        _native.Program(blob)


def test_in_place_conv_is_rejected():
    w = Xts3Writer()
    x = w.tensor((1, 4, 4, 4), "INT8", offset=0)
    y = w.tensor((1, 4, 4, 4), "INT8", offset=0)  # same arena bytes as the input
    filt = w.constant(np.ones((4, 1, 1, 4), np.int8))
    mult = w.constant(np.full(4, 1 << 30, np.int32))
    shift = w.constant(np.zeros(4, np.int32))
    w.op("CONV2D", [x, filt, None, mult, shift], [y], stride_h=1, stride_w=1, pad_top=0, pad_left=0,
         dilation_h=1, dilation_w=1, groups=1, input_offset=0, output_offset=0, act_min=-128, act_max=127)
    w.set_inputs([x])
    w.set_outputs([y])
    with pytest.raises(ValueError, match=r"input and output overlap in the arena"):
        _native.Program(w.to_bytes())
