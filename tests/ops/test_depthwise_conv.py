"""DEPTHWISE_CONV2D: golden ESP-NN vectors, TFLite's integer formula, PyTorch, rejections.

Oracles: the real ESP-NN 1.2.3 ANSI outputs, an int64 numpy transcription of TFLite's
DepthwiseConvPerChannel (output channel c*M+m reads input channel c; dilation included) written
below, and PyTorch's quantized conv2d with groups = in_channels (within 1 LSB).
"""

import zlib

import numpy as np
import pytest

from executorch_espnn import _native
from espnn_dev.graph_util import Const, Input, Out, build_op, run_op
from support.tflite_reference import derive_output, per_channel_multipliers, requant, wrap32


# --------------------------------------------------------------------------- TFLite DepthwiseConvPerChannel
def dw_acc(x, w, bias, stride, pad, dil, ch_mult, in_off, out_hw):
    """TFLite DepthwiseConvPerChannel accumulators; x [N,H,W,C], w [1,kh,kw,C*M]."""
    n, h, wd, c = x.shape
    _, kh, kw, cm = w.shape
    (sh, sw), (ph, pw), (dh, dw), (oh, ow) = stride, pad, dil, out_hw
    need_h = (oh - 1) * sh + dh * (kh - 1) + 1
    need_w = (ow - 1) * sw + dw * (kw - 1) + 1
    xp = np.zeros((n, max(need_h, ph + h), max(need_w, pw + wd), c), np.int64)
    xp[:, ph:ph + h, pw:pw + wd, :] = x.astype(np.int64) + in_off  # skipped taps == zeros here
    acc = np.zeros((n, oh, ow, cm), np.int64)
    for ky in range(kh):
        for kx in range(kw):
            win = xp[:, ky * dh: ky * dh + (oh - 1) * sh + 1: sh, kx * dw: kx * dw + (ow - 1) * sw + 1: sw, :]
            acc += np.repeat(win, ch_mult, axis=-1) * w[0, ky, kx, :].astype(np.int64)
    if bias is not None:
        acc += bias.astype(np.int64)
    return wrap32(acc)


def torch_out_size(i, k, s, p, d):
    return (i + 2 * p - d * (k - 1) - 1) // s + 1


def run_dw(x, w, bias, mult, shift, *, stride, pad, dil=(1, 1), ch_mult, in_off, out_off, act, out_hw):
    return run_op(
        "DEPTHWISE_CONV2D",
        [Input(x, 0.05, -in_off), Const(w), None if bias is None else Const(bias), Const(mult), Const(shift)],
        Out((x.shape[0], out_hw[0], out_hw[1], w.shape[3]), "INT8", 0.1, out_off),
        stride_h=stride[0], stride_w=stride[1], pad_top=pad[0], pad_left=pad[1], dilation_h=dil[0],
        dilation_w=dil[1], ch_mult=ch_mult, input_offset=in_off, output_offset=out_off, act_min=act[0],
        act_max=act[1])


# --------------------------------------------------------------------------- golden vectors
def test_golden_vectors_bit_exact(vectors_dir):
    z = np.load(vectors_dir / "depthwise_conv_s8.npz")
    fields = z["params_fields"].tolist()
    ran, rejected = 0, []
    for i in range(int(z["num_cases"])):
        p = dict(zip(fields, z[f"c{i}_params"].tolist()))
        a = {k: z[f"c{i}_{k}"] for k in ("input", "filter", "bias", "mult", "shift", "output")}
        x = a["input"].reshape(1, p["in_h"], p["in_w"], p["in_ch"])
        w = a["filter"].reshape(1, p["k_h"], p["k_w"], p["out_ch"])
        bias = a["bias"] if p["has_bias"] else None
        geo = dict(stride=(p["stride_h"], p["stride_w"]), pad=(p["pad_h"], p["pad_w"]), ch_mult=p["ch_mult"],
                   in_off=p["in_offset"], out_off=p["out_offset"], act=(p["act_min"], p["act_max"]),
                   out_hw=(p["out_h"], p["out_w"]))
        want = a["output"].reshape(1, p["out_h"], p["out_w"], p["out_ch"])
        acc = dw_acc(x, w, bias, geo["stride"], geo["pad"], (1, 1), p["ch_mult"], p["in_offset"], geo["out_hw"])
        np.testing.assert_array_equal(requant(acc, a["mult"], a["shift"], p["out_offset"], geo["act"]), want,
                                      err_msg=f"oracle, case {i}")
        if p["pad_h"] >= p["k_h"] or p["pad_w"] >= p["k_w"]:
            # Pads at least as large as the kernel (output pixels that see only padding) are refused.
            with pytest.raises(ValueError, match=r"pad_(top|left) = \d+ is not in"):
                run_dw(x, w, bias, a["mult"], a["shift"], **geo)
            rejected.append(i)
            continue
        got = run_dw(x, w, bias, a["mult"], a["shift"], **geo)
        np.testing.assert_array_equal(got, want, err_msg=f"case {i}: {p}")
        ran += 1
    assert ran + len(rejected) == 100
    assert rejected == [16], rejected  # 1x1 kernel with pad 1


# --------------------------------------------------------------------------- exact formula, random cases
# (name, n, (h, w), channels, ch_mult, (kh, kw), stride, pad, dil, out_hw or None = PyTorch formula)
GEOMETRIES = [
    ("3x3 s1 p1 M1", 1, (8, 9), 16, 1, (3, 3), (1, 1), (1, 1), (1, 1), None),
    ("3x3 s2 p1 M2", 1, (9, 10), 5, 2, (3, 3), (2, 2), (1, 1), (1, 1), None),
    ("5x5 s3 p2 M3 clipped", 1, (11, 13), 3, 3, (5, 5), (3, 3), (2, 2), (1, 1), None),
    # The S3 scratch defect's geometry (3x3, M1, C % 16 == 0, pads not (0,0)/(1,1)): the runtime
    # stages these (padding written into scratch as the zero point, run with pads (0,0)).
    ("3x3 pads (1,0), C=16 (S3 scratch-defect shape)", 1, (9, 8), 16, 1, (3, 3), (2, 2), (1, 0), (1, 1), None),
    ("staged: pads (0,1) stride 1, C=32", 1, (7, 6), 32, 1, (3, 3), (1, 1), (0, 1), (1, 1), None),
    ("staged: pads (2,2) stride 1", 1, (5, 6), 16, 1, (3, 3), (1, 1), (2, 2), (1, 1), None),
    ("staged: pads (0,1), SAME end pad, batch 2", 2, (6, 7), 16, 1, (3, 3), (2, 2), (0, 1), (1, 1), (3, 4)),
    ("staged: pads (1,0), a column left unread", 1, (8, 10), 16, 1, (3, 3), (2, 2), (1, 0), (1, 1), None),
    ("SAME, end pad larger than leading pad", 1, (6, 7), 4, 2, (4, 4), (1, 1), (1, 1), (1, 1), (6, 7)),
    ("VALID dropping a row", 1, (9, 9), 6, 1, (2, 2), (2, 2), (0, 0), (1, 1), (4, 4)),
    ("kernel larger than the input", 1, (2, 3), 4, 2, (5, 5), (1, 1), (2, 2), (1, 1), None),
    ("dilation 2", 1, (10, 11), 8, 1, (3, 3), (1, 1), (2, 2), (2, 2), None),
    ("dilation 2 stride 2 M3", 1, (11, 9), 3, 3, (3, 3), (2, 2), (1, 2), (2, 2), None),
    ("dilation on one axis", 1, (7, 12), 5, 2, (3, 2), (1, 2), (0, 3), (1, 3), None),
    ("batch 3, odd image size", 3, (5, 7), 3, 2, (3, 3), (1, 2), (1, 1), (1, 1), None),
    ("1x1 M2", 1, (4, 5), 7, 2, (1, 1), (1, 1), (0, 0), (1, 1), None),
]


@pytest.mark.parametrize("per_channel", [True, False], ids=["per_channel", "per_tensor"])
@pytest.mark.parametrize("geo", GEOMETRIES, ids=[g[0] for g in GEOMETRIES])
def test_matches_tflite_integer_formula(geo, per_channel):
    name, n, hw, c, m, k, stride, pad, dil, out_hw = geo
    rng = np.random.default_rng(zlib.crc32(f"{name}/{per_channel}".encode()))
    if out_hw is None:
        out_hw = tuple(torch_out_size(hw[i], k[i], stride[i], pad[i], dil[i]) for i in range(2))
    x = rng.integers(-128, 128, size=(n, *hw, c), dtype=np.int8)
    w = rng.integers(-127, 128, size=(1, *k, c * m), dtype=np.int8)
    b = rng.integers(-3000, 3000, size=c * m).astype(np.int32)
    s_in = np.float32(rng.uniform(0.004, 0.2))
    s_w = rng.uniform(0.002, 0.03, size=c * m if per_channel else 1).astype(np.float32)
    s_w = s_w if per_channel else np.repeat(s_w, c * m)
    in_zp = int(rng.integers(-128, 128))
    acc = dw_acc(x, w, b, stride, pad, dil, m, -in_zp, out_hw)
    _, out_zp, mult, shift = derive_output(acc, s_in, s_w)
    got = run_dw(x, w, b, mult, shift, stride=stride, pad=pad, dil=dil, ch_mult=m, in_off=-in_zp, out_off=out_zp,
                 act=(-128, 127), out_hw=out_hw)
    np.testing.assert_array_equal(got, requant(acc, mult, shift, out_zp, (-128, 127)))
    assert (got == -128).any() and (got == 127).any()


@pytest.mark.parametrize("act", [(0, 127), (-128, 0), (-30, 30), (-7, -7)])
@pytest.mark.parametrize("in_zp,out_zp", [(-128, 127), (127, -128)])
def test_activation_clamps_and_extreme_zero_points(act, in_zp, out_zp):
    rng = np.random.default_rng(zlib.crc32(f"{act}/{in_zp}".encode()))
    x = rng.integers(-128, 128, size=(1, 6, 5, 4), dtype=np.int8)
    w = rng.integers(-127, 128, size=(1, 3, 3, 8), dtype=np.int8)
    acc = dw_acc(x, w, None, (1, 1), (1, 1), (1, 1), 2, -in_zp, (6, 5))
    _, _, mult, shift = derive_output(acc, np.float32(0.05), np.full(8, 0.01, np.float32), out_zp)
    got = run_dw(x, w, None, mult, shift, stride=(1, 1), pad=(1, 1), ch_mult=2, in_off=-in_zp, out_off=out_zp,
                 act=act, out_hw=(6, 5))
    want = requant(acc, mult, shift, out_zp, act)
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(want, requant(acc, mult, shift, out_zp, (-128, 127)))  # the clamp matters


@pytest.mark.parametrize("width", [32767, 40000])
def test_wide_rows_beyond_espnn_int16_window_origin(width):
    # ESP-NN computes the window origin in int16; rows wider than 32767 go to the interpreter's
    # own kernel, 32767 still to ESP-NN. Both must give TFLite's result.
    rng = np.random.default_rng(width)
    x = rng.integers(-128, 128, size=(1, 1, width, 2), dtype=np.int8)
    w = rng.integers(-127, 128, size=(1, 1, 3, 4), dtype=np.int8)
    b = np.array([5, -7, 100, 0], np.int32)
    mult, shift = np.full(4, 1 << 30, np.int32), np.full(4, -6, np.int32)
    acc = dw_acc(x, w, b, (1, 1), (0, 1), (1, 1), 2, 3, (1, width))
    got = run_dw(x, w, b, mult, shift, stride=(1, 1), pad=(0, 1), ch_mult=2, in_off=3, out_off=-1,
                 act=(-128, 127), out_hw=(1, width))
    np.testing.assert_array_equal(got, requant(acc, mult, shift, -1, (-128, 127)))


# --------------------------------------------------------------------------- PyTorch reference
@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")
@pytest.mark.parametrize("ch_mult,dil", [(1, 1), (2, 1), (3, 2)])
def test_matches_pytorch_quantized_depthwise_within_one_lsb(ch_mult, dil, exact_quantized_engine):
    torch = pytest.importorskip("torch")
    import torch.ao.nn.quantized.functional as qF

    c, hw, k, stride, pad = 6, (10, 9), (3, 3), (2, 1), (1, 2)
    g = torch.Generator().manual_seed(99 + ch_mult)
    x = torch.randn(1, c, *hw, generator=g)
    w = torch.randn(c * ch_mult, 1, *k, generator=g) * 0.3
    b = torch.randn(c * ch_mult, generator=g) * 0.2
    s_in = float(np.float32((x.max() - x.min()).item() / 255))
    zp_in_u8 = int(np.clip(round(-x.min().item() / s_in), 0, 255))
    s_w = (w.abs().amax(dim=(1, 2, 3)) / 127).to(torch.float32)
    xq = torch.quantize_per_tensor(x, s_in, zp_in_u8, torch.quint8)
    wq = torch.quantize_per_channel(w, s_w.double(), torch.zeros(c * ch_mult, dtype=torch.long), 0, torch.qint8)
    ref_f = torch.nn.functional.conv2d(xq.dequantize(), wq.dequantize(), b, stride, pad, dil, c)
    s_out = float(np.float32((ref_f.max() - ref_f.min()).item() / 255))
    zp_out_u8 = int(np.clip(round(-ref_f.min().item() / s_out), 0, 255))
    yq = qF.conv2d(xq, wq, b, stride=stride, padding=pad, dilation=dil, groups=c, scale=s_out,
                   zero_point=zp_out_u8)
    want = yq.int_repr().numpy().astype(np.int16).transpose(0, 2, 3, 1) - 128

    x8 = (xq.int_repr().numpy().astype(np.int16) - 128).astype(np.int8).transpose(0, 2, 3, 1).copy()
    w8 = wq.int_repr().numpy().transpose(1, 2, 3, 0).copy()  # [C*M,1,kh,kw] -> [1,kh,kw,C*M]
    s_w32 = s_w.numpy()
    bias = np.round(b.numpy().astype(np.float64) / (np.float64(s_in) * s_w32.astype(np.float64))).astype(np.int32)
    mult, shift = per_channel_multipliers(np.float32(s_in), s_w32, np.float32(s_out))
    got = run_dw(x8, w8, bias, mult, shift, stride=stride, pad=pad, dil=(dil, dil), ch_mult=ch_mult,
                 in_off=128 - zp_in_u8, out_off=zp_out_u8 - 128, act=(-128, 127), out_hw=tuple(want.shape[1:3]))
    diff = np.abs(got.astype(np.int16) - want)
    assert diff.max() <= 1
    assert (diff == 0).mean() > 0.9


# --------------------------------------------------------------------------- rejections
def dw_blob(*, x_shape=(1, 6, 6, 4), w_shape=(1, 3, 3, 8), out_shape=(1, 6, 6, 8), bias="int32", mult_len=None,
            shift_len=None, **over):
    cout = out_shape[-1]
    params = dict(stride_h=1, stride_w=1, pad_top=1, pad_left=1, dilation_h=1, dilation_w=1, ch_mult=2,
                  input_offset=0, output_offset=0, act_min=-128, act_max=127)
    params.update(over)
    b = {"int32": Const(np.zeros(cout, np.int32)), "int8": Const(np.zeros(cout, np.int8))}[bias]
    mult = np.full(cout if mult_len is None else mult_len, 1 << 30, np.int32)
    shift = np.zeros(cout if shift_len is None else shift_len, np.int32)
    blob, _ = build_op("DEPTHWISE_CONV2D", [Input(np.zeros(x_shape, np.int8)), Const(np.ones(w_shape, np.int8)), b,
                                            Const(mult), Const(shift)], [Out(out_shape)], **params)
    return blob


@pytest.mark.parametrize("kwargs,message", [
    (dict(), None),
    (dict(w_shape=(1, 3, 3, 6)), r"filter dims \[1,3,3,6\]: expected \[1, kh, kw, in_channels \* ch_mult = 8\]"),
    (dict(w_shape=(2, 3, 3, 8)), r"filter dims \[2,3,3,8\]"),
    (dict(out_shape=(1, 6, 6, 4), w_shape=(1, 3, 3, 4)), r"output channels 4 != in_channels \* ch_mult = 8"),
    (dict(ch_mult=0), r"ch_mult = 0 is not in 1\.\.65535"),
    (dict(stride_w=0), r"stride_w = 0 is not in 1\.\.65535"),
    (dict(dilation_h=0), r"dilation_h = 0 is not in"),
    (dict(pad_left=3), r"pad_left = 3 is not in 0\.\.2 \(must be < the effective kernel width 3\)"),
    (dict(pad_top=-2), r"pad_top = -2 is not in 0\.\.2"),
    (dict(out_shape=(1, 6, 3, 8)), r"output width 3 does not match input width 6.*expected 5\.\.7"),
    (dict(mult_len=4), r"mult has 4 elements, expected 8"),
    (dict(shift_len=9), r"shift has 9 elements, expected 8"),
    (dict(bias="int8"), r"bias has dtype INT8, expected INT32"),
    (dict(input_offset=-128), r"input_offset = -128 is not in -127\.\.128"),
    (dict(act_min=1, act_max=0), r"act_min 1 > act_max 0"),
    (dict(x_shape=(1, 70000, 1, 1), w_shape=(1, 1, 1, 2), out_shape=(1, 70000, 1, 2), pad_top=0, pad_left=0),
     r"input height = 70000 exceeds 65535 \(ESP-NN narrows convolution geometry to uint16\)"),
    (dict(x_shape=(1, 1, 1, 1), w_shape=(1, 1, 1, 70000), out_shape=(1, 1, 1, 70000), ch_mult=70000,
          pad_top=0, pad_left=0), r"output channels = 70000 exceeds 65535"),
])
def test_malformed_depthwise_is_rejected(kwargs, message):
    blob = dw_blob(**kwargs)
    if message is None:
        _native.Program(blob)
        return
    with pytest.raises(ValueError, match=r"op 0 \(DEPTHWISE_CONV2D\): " + message):
        _native.Program(blob)


def test_a_staged_layer_asks_for_its_padded_copy():
    # 3x3, M1, 16 channels, pads (1, 0): the staged route copies the image with its padding into
    # scratch, out * stride + 2 rows and columns (ESP-NN's pad-(0,0) path then pads nothing), then
    # ESP-NN's own scratch (0 on the host's ANSI build) and the 16-byte margin.
    blob = dw_blob(x_shape=(1, 8, 8, 16), w_shape=(1, 3, 3, 16), out_shape=(1, 8, 6, 16), ch_mult=1, pad_left=0)
    assert _native.Program(blob).scratch_bytes == (8 + 2) * (6 + 2) * 16 + 16
    blob = dw_blob(x_shape=(1, 9, 8, 16), w_shape=(1, 3, 3, 16), out_shape=(1, 5, 3, 16), ch_mult=1, pad_left=0,
                   stride_h=2, stride_w=2)
    assert _native.Program(blob).scratch_bytes == (5 * 2 + 2) * (3 * 2 + 2) * 16 + 16
    # pads (1, 1) are not the defect's geometry: no copy
    assert _native.Program(dw_blob(x_shape=(1, 8, 8, 16), w_shape=(1, 3, 3, 16), out_shape=(1, 8, 8, 16),
                                   ch_mult=1)).scratch_bytes == 16


def test_scratch_request_includes_the_depthwise_margin():
    # ESP-NN's size (0 for the ANSI build here) plus the 16-byte margin kept for ESP-NN 1.2.3's
    # S3 under-allocation; the interpreter's own (dilated) kernel needs no scratch at all.
    # The host always runs ESP-NN's ANSI C API, whose size function returns 0.
    assert _native.Program(dw_blob()).scratch_bytes == 16
    assert _native.Program(dw_blob(dilation_h=2, out_shape=(1, 4, 6, 8))).scratch_bytes == 0
