"""TRANSPOSE_CONV2D: PyTorch ConvTranspose2d semantics in TFLite integer arithmetic.

Oracles: a scatter-form int64 numpy transcription written below (each input pixel adds
x * w into output position iy*stride - pad + ky*dilation; the runtime gathers instead), using
PyTorch's own weight layout [Cin, Cout/groups, kh, kw] so that the permutation to the XTS3 layout
[Cout, kh, kw, Cin/groups] is checked too; and PyTorch's quantized ConvTranspose2d (within 1 LSB).
"""

import zlib

import numpy as np
import pytest

from executorch_espnn import _native
from espnn_dev.graph_util import Const, Input, Out, build_op, run_op
from support.tflite_reference import derive_output, quantize_multiplier, requant, wrap32


# --------------------------------------------------------------------------- transposed convolution
def out_size(i, k, s, p, d, op):
    """PyTorch ConvTranspose2d output size."""
    return (i - 1) * s - 2 * p + d * (k - 1) + op + 1


def tconv_acc(x, w_pt, bias, stride, pad, dil, groups, in_off, out_hw):
    """Scatter form: x [N,H,W,Cin] int8, w_pt [Cin, Cout/groups, kh, kw] (PyTorch layout)."""
    n, h, wd, cin = x.shape
    _, og, kh, kw = w_pt.shape
    cout, cg = og * groups, cin // groups
    (sh, sw), (ph, pw), (dh, dw), (oh, ow) = stride, pad, dil, out_hw
    full = np.zeros((n, max((h - 1) * sh + dh * (kh - 1) + 1, ph + oh), max((wd - 1) * sw + dw * (kw - 1) + 1, pw + ow),
                     cout), np.int64)
    xo = x.astype(np.int64) + in_off
    for ky in range(kh):
        for kx in range(kw):
            for g in range(groups):
                contrib = np.einsum("nyxi,ij->nyxj", xo[..., g * cg:(g + 1) * cg],
                                    w_pt[g * cg:(g + 1) * cg, :, ky, kx].astype(np.int64))
                full[:, ky * dh: ky * dh + (h - 1) * sh + 1: sh, kx * dw: kx * dw + (wd - 1) * sw + 1: sw,
                     g * og:(g + 1) * og] += contrib
    acc = full[:, ph:ph + oh, pw:pw + ow, :]
    if bias is not None:
        acc = acc + bias.astype(np.int64)
    return wrap32(acc)


def to_xts3_filter(w_pt, groups):
    """PyTorch [Cin, Cout/g, kh, kw] -> XTS3 [Cout, kh, kw, Cin/g]: W'[g*Og + j, ky, kx, i] = W[g*Cg + i, j, ky, kx]."""
    cin, og, kh, kw = w_pt.shape
    cg = cin // groups
    w = w_pt.reshape(groups, cg, og, kh, kw).transpose(0, 2, 3, 4, 1)  # [g, j, ky, kx, i]
    return np.ascontiguousarray(w.reshape(groups * og, kh, kw, cg))


def run_tconv(x, w, bias, mult, shift, *, stride, pad, dil=(1, 1), groups=1, in_off, out_off, act, out_hw):
    return run_op(
        "TRANSPOSE_CONV2D",
        [Input(x, 0.05, -in_off), Const(w), None if bias is None else Const(bias), Const(mult), Const(shift)],
        Out((x.shape[0], out_hw[0], out_hw[1], w.shape[0]), "INT8", 0.1, out_off),
        stride_h=stride[0], stride_w=stride[1], pad_top=pad[0], pad_left=pad[1], dilation_h=dil[0],
        dilation_w=dil[1], groups=groups, input_offset=in_off, output_offset=out_off, act_min=act[0],
        act_max=act[1])


def test_filter_permutation_matches_the_definition():
    rng = np.random.default_rng(0)
    w_pt = rng.integers(-128, 128, size=(6, 4, 2, 3), dtype=np.int8)  # Cin 6, groups 3, Cout 12
    w = to_xts3_filter(w_pt, 3)
    for o in range(12):
        g, j = divmod(o, 4)
        for i in range(2):
            np.testing.assert_array_equal(w[o, :, :, i], w_pt[g * 2 + i, j])


# --------------------------------------------------------------------------- exact formula
# (name, n, (h, w), cin, cout, (kh, kw), stride, pad, dil, groups, output_padding)
GEOMETRIES = [
    ("k3 s2 p1 op1 (2x upsample)", 1, (5, 6), 4, 6, (3, 3), (2, 2), (1, 1), (1, 1), 1, (1, 1)),
    ("k4 s2 p1", 1, (4, 5), 3, 5, (4, 4), (2, 2), (1, 1), (1, 1), 1, (0, 0)),
    ("k2 s3 p0 op2 (gaps between taps)", 1, (3, 4), 5, 4, (2, 2), (3, 3), (0, 0), (1, 1), 1, (2, 2)),
    ("k3 s1 p0 (full conv)", 1, (5, 5), 3, 3, (3, 3), (1, 1), (0, 0), (1, 1), 1, (0, 0)),
    ("k5 s1 p4 (heavy cropping)", 1, (7, 6), 2, 3, (5, 5), (1, 1), (4, 4), (1, 1), 1, (0, 0)),
    ("dilation 2", 1, (5, 4), 4, 4, (3, 3), (1, 1), (1, 1), (2, 2), 1, (0, 0)),
    ("dilation 3 > stride 2, op 2", 1, (4, 4), 3, 2, (2, 3), (2, 2), (1, 2), (3, 3), 1, (2, 1)),
    ("groups 2", 1, (4, 5), 4, 6, (3, 3), (2, 2), (1, 1), (1, 1), 2, (1, 0)),
    ("groups == in_channels", 1, (5, 5), 4, 8, (3, 3), (2, 2), (1, 1), (1, 1), 4, (1, 1)),
    ("mixed axes", 1, (3, 7), 3, 4, (1, 3), (3, 1), (0, 1), (1, 2), 1, (1, 0)),
    ("batch 3", 3, (3, 4), 3, 5, (3, 2), (2, 3), (1, 0), (1, 1), 1, (0, 2)),
]


@pytest.mark.parametrize("per_channel", [True, False], ids=["per_channel", "per_tensor"])
@pytest.mark.parametrize("geo", GEOMETRIES, ids=[g[0] for g in GEOMETRIES])
def test_matches_pytorch_semantics_in_tflite_arithmetic(geo, per_channel):
    name, n, hw, cin, cout, k, stride, pad, dil, groups, op = geo
    rng = np.random.default_rng(zlib.crc32(f"{name}/{per_channel}".encode()))
    out_hw = tuple(out_size(hw[i], k[i], stride[i], pad[i], dil[i], op[i]) for i in range(2))
    x = rng.integers(-128, 128, size=(n, *hw, cin), dtype=np.int8)
    w_pt = rng.integers(-127, 128, size=(cin, cout // groups, *k), dtype=np.int8)
    b = rng.integers(-4000, 4000, size=cout).astype(np.int32)
    s_in = np.float32(rng.uniform(0.004, 0.2))
    s_w = rng.uniform(0.002, 0.03, size=cout if per_channel else 1).astype(np.float32)
    s_w = s_w if per_channel else np.repeat(s_w, cout)
    in_zp = int(rng.integers(-128, 128))
    acc = tconv_acc(x, w_pt, b, stride, pad, dil, groups, -in_zp, out_hw)
    _, out_zp, mult, shift = derive_output(acc, s_in, s_w)
    got = run_tconv(x, to_xts3_filter(w_pt, groups), b, mult, shift, stride=stride, pad=pad, dil=dil, groups=groups,
                    in_off=-in_zp, out_off=out_zp, act=(-128, 127), out_hw=out_hw)
    np.testing.assert_array_equal(got, requant(acc, mult, shift, out_zp, (-128, 127)))
    assert (got == -128).any() and (got == 127).any()


@pytest.mark.parametrize("act,in_zp,out_zp", [((0, 127), -128, -128), ((-128, 5), 127, 127), ((-9, 9), 0, 3)])
def test_clamps_extreme_zero_points_and_no_bias(act, in_zp, out_zp):
    rng = np.random.default_rng(zlib.crc32(f"{act}".encode()))
    x = rng.integers(-128, 128, size=(1, 4, 4, 3), dtype=np.int8)
    w_pt = rng.integers(-127, 128, size=(3, 5, 3, 3), dtype=np.int8)
    mult, shift = np.full(5, 1 << 30, np.int32), np.full(5, -9, np.int32)
    acc = tconv_acc(x, w_pt, None, (2, 2), (1, 1), (1, 1), 1, -in_zp, (8, 8))
    want = requant(acc, mult, shift, out_zp, act)
    got = run_tconv(x, to_xts3_filter(w_pt, 1), None, mult, shift, stride=(2, 2), pad=(1, 1), in_off=-in_zp,
                    out_off=out_zp, act=act, out_hw=(8, 8))
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(want, requant(acc, mult, shift, out_zp, (-128, 127)))  # the clamp matters


# --------------------------------------------------------------------------- PyTorch reference
@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")
@pytest.mark.parametrize("k,stride,pad,op,dil,groups", [
    (3, 2, 1, 1, 1, 1),
    (4, 2, 1, 0, 1, 2),
    (3, 1, 2, 0, 2, 1),
])
def test_matches_pytorch_quantized_conv_transpose_within_one_lsb(k, stride, pad, op, dil, groups,
                                                                  exact_quantized_engine):
    torch = pytest.importorskip("torch")
    import torch.ao.nn.quantized as nnq

    cin, cout, hw = 4, 6, (5, 6)
    g = torch.Generator().manual_seed(k * 100 + stride * 10 + dil)
    x = torch.randn(1, cin, *hw, generator=g)
    w = torch.randn(cin, cout // groups, k, k, generator=g) * 0.3
    b = torch.randn(cout, generator=g) * 0.3
    s_in = float(np.float32((x.max() - x.min()).item() / 255))
    zp_in_u8 = int(np.clip(round(-x.min().item() / s_in), 0, 255))
    s_w = float(np.float32(w.abs().max().item() / 127))  # PyTorch supports per-tensor weights only here
    xq = torch.quantize_per_tensor(x, s_in, zp_in_u8, torch.quint8)
    wq = torch.quantize_per_tensor(w, s_w, 0, torch.qint8)
    ref_f = torch.nn.functional.conv_transpose2d(xq.dequantize(), wq.dequantize(), b, stride, pad, op, groups, dil)
    s_out = float(np.float32((ref_f.max() - ref_f.min()).item() / 255))
    zp_out_u8 = int(np.clip(round(-ref_f.min().item() / s_out), 0, 255))
    m = nnq.ConvTranspose2d(cin, cout, k, stride=stride, padding=pad, output_padding=op, groups=groups, bias=True,
                            dilation=dil)
    m.set_weight_bias(wq, b)
    m.scale, m.zero_point = s_out, zp_out_u8
    want = m(xq).int_repr().numpy().astype(np.int16).transpose(0, 2, 3, 1) - 128

    x8 = (xq.int_repr().numpy().astype(np.int16) - 128).astype(np.int8).transpose(0, 2, 3, 1).copy()
    w8 = to_xts3_filter(wq.int_repr().numpy(), groups)
    bias = np.round(b.numpy().astype(np.float64) / (float(np.float32(s_in)) * s_w)).astype(np.int32)
    mq, e = quantize_multiplier(float(np.float32(s_in)) * s_w / float(np.float32(s_out)))
    got = run_tconv(x8, w8, bias, np.full(cout, mq, np.int32), np.full(cout, e, np.int32), stride=(stride, stride),
                    pad=(pad, pad), dil=(dil, dil), groups=groups, in_off=128 - zp_in_u8, out_off=zp_out_u8 - 128,
                    act=(-128, 127), out_hw=tuple(want.shape[1:3]))
    diff = np.abs(got.astype(np.int16) - want)
    assert diff.max() <= 1
    assert (diff == 0).mean() > 0.9


# --------------------------------------------------------------------------- rejections
def tconv_blob(*, x_shape=(1, 4, 4, 4), w_shape=(6, 3, 3, 4), out_shape=(1, 8, 8, 6), bias="int32", mult_len=None,
               shift_len=None, **over):
    cout = out_shape[-1]
    params = dict(stride_h=2, stride_w=2, pad_top=1, pad_left=1, dilation_h=1, dilation_w=1, groups=1,
                  input_offset=0, output_offset=0, act_min=-128, act_max=127)
    params.update(over)
    b = {"int32": Const(np.zeros(cout, np.int32)), "int8": Const(np.zeros(cout, np.int8)), None: None}[bias]
    mult = np.full(cout if mult_len is None else mult_len, 1 << 30, np.int32)
    shift = np.zeros(cout if shift_len is None else shift_len, np.int32)
    blob, _ = build_op("TRANSPOSE_CONV2D", [Input(np.zeros(x_shape, np.int8)), Const(np.ones(w_shape, np.int8)), b,
                                            Const(mult), Const(shift)], [Out(out_shape)], **params)
    return blob


@pytest.mark.parametrize("kwargs,message", [
    (dict(), None),  # (4-1)*2 - 2 + 2 + 1 = 7, output_padding 1
    (dict(out_shape=(1, 7, 7, 6)), None),  # output_padding 0
    (dict(bias=None), None),
    (dict(out_shape=(1, 9, 8, 6)),
     r"output height 9 does not match input height 4, kernel 3, stride 2, dilation 1, pad_top 1 \(expected 7\.\.8"),
    (dict(out_shape=(1, 8, 6, 6)), r"output width 6 does not match.*expected 7\.\.8"),
    (dict(x_shape=(1, 1, 4, 4), w_shape=(6, 1, 3, 4), out_shape=(1, 1, 8, 6), pad_top=1, stride_h=1),
     r"output height: input height 1, kernel 1, stride 1, dilation 1, pad_top 1 give no output"),
    (dict(w_shape=(6, 3, 3, 3)), r"filter dims \[6,3,3,3\]: expected \[out_channels = 6, kh, kw, in_channels/groups = 4\]"),
    (dict(w_shape=(6, 3, 3, 2), groups=2), None),
    (dict(w_shape=(6, 3, 3, 4), groups=2), r"filter dims \[6,3,3,4\]: .*in_channels/groups = 2\]"),
    (dict(w_shape=(6, 3, 3, 1), groups=3), r"groups = 3 does not divide input channels 4"),
    (dict(w_shape=(6, 3, 3, 1), groups=4), r"groups = 4 does not divide output channels 6"),
    (dict(groups=0), r"groups = 0 is not in"),
    (dict(stride_h=0), r"stride_h = 0 is not in 1\.\.65535"),
    (dict(dilation_w=0), r"dilation_w = 0 is not in 1\.\.65535"),
    (dict(pad_left=-1), r"pad_left = -1 is not in 0\.\.65535"),
    (dict(mult_len=5), r"mult has 5 elements, expected 6"),
    (dict(shift_len=7), r"shift has 7 elements, expected 6"),
    (dict(bias="int8"), r"bias has dtype INT8, expected INT32"),
    (dict(output_offset=-129), r"output_offset = -129 is not in -128\.\.127"),
    (dict(out_shape=(2, 8, 8, 6)), r"output batch 2 != input batch 1"),
])
def test_malformed_transpose_conv_is_rejected(kwargs, message):
    blob = tconv_blob(**kwargs)
    if message is None:
        _native.Program(blob)
        return
    with pytest.raises(ValueError, match=r"op 0 \(TRANSPOSE_CONV2D\): " + message):
        _native.Program(blob)
