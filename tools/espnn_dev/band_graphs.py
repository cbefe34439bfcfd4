"""Chains of row-local ops for fused-region tests (BAND_LOOP): random
geometry (kernel, stride, dilation, pad at the borders, residual ADD,
elementwise ops), built with Xts3Writer. Shared by tests/ops/test_band_loop.py
and the op corpus."""

from __future__ import annotations

import numpy as np

from executorch_espnn import quant_params as qp
from executorch_espnn.xts3_writer import Xts3Writer

S, Z = 0.05, -3


def _requant(w: Xts3Writer, rng, cout: int):
    mult, shift = qp.conv_multipliers(S, np.full(cout, 0.01, np.float32), S)
    return [w.constant(rng.integers(-500, 500, cout, dtype=np.int32)), w.constant(mult), w.constant(shift)]


def _out_size(n: int, k: int, stride: int, dil: int, pad: int, end_pad: int) -> int:
    return (n + pad + end_pad - (dil * (k - 1) + 1)) // stride + 1


def _window(rng, n: int):
    """(k, stride, dilation, pad, out) for one axis of size n, pads at both borders."""
    while True:
        k = int(rng.choice([1, 3, 5]))
        stride = int(rng.choice([1, 1, 2]))
        dil = int(rng.choice([1, 1, 2])) if k > 1 else 1
        extent = dil * (k - 1) + 1
        pad = int(rng.integers(0, extent)) if extent > 1 else 0
        end = int(rng.integers(0, extent)) if extent > 1 else 0
        if n + pad + end >= extent:
            return k, stride, dil, pad, _out_size(n, k, stride, dil, pad, end)


def conv(w, rng, x, shape, *, depthwise: bool, k=None, stride=None, dil=None, pad=None, cout=None,
         act=(-128, 127)):
    """A CONV2D or DEPTHWISE_CONV2D on x ([1,H,W,C]); returns (output, its shape)."""
    _, h, wd, c = shape
    if k is None:
        kh, sh, dh, ph, oh = _window(rng, h)
        kw, sw, dw_, pw, ow = _window(rng, wd)
    else:  # the same square window on both axes, symmetric padding (None: "same")
        pad = dil * (k - 1) // 2 if pad is None else pad
        kh, sh, dh, ph = kw, sw, dw_, pw = k, stride, dil, pad
        oh, ow = _out_size(h, kh, sh, dh, ph, ph), _out_size(wd, kw, sw, dw_, pw, pw)
    cout = c if depthwise else (cout or int(rng.integers(1, 9)))
    params = dict(stride_h=sh, stride_w=sw, pad_top=ph, pad_left=pw, dilation_h=dh, dilation_w=dw_,
                  input_offset=-Z, output_offset=Z, act_min=act[0], act_max=act[1])
    y = w.tensor([1, oh, ow, cout], scale=S, zero_point=Z)
    if depthwise:
        f = w.constant(rng.integers(-127, 128, (1, kh, kw, cout), dtype=np.int8))
        w.op("DEPTHWISE_CONV2D", [x, f, *_requant(w, rng, cout)], [y], ch_mult=1, **params)
    else:
        f = w.constant(rng.integers(-127, 128, (cout, kh, kw, c), dtype=np.int8))
        w.op("CONV2D", [x, f, *_requant(w, rng, cout)], [y], groups=1, **params)
    return y, (1, oh, ow, cout)


def add(w, a, b, shape):
    y = w.tensor(list(shape), scale=S, zero_point=Z)
    w.op("ADD", [a, b], [y], input1_offset=-Z, input2_offset=-Z, input1_mult=1 << 30, input1_shift=0,
         input2_mult=1 << 30, input2_shift=-1, left_shift=20, output_offset=Z, output_mult=1 << 30,
         output_shift=-19, act_min=-128, act_max=127)
    return y


def lut(w, rng, x, shape):
    y = w.tensor(list(shape), scale=S, zero_point=Z)
    w.op("LUT", [x, w.constant(rng.integers(-128, 128, 256, dtype=np.int8))], [y])
    return y


def pool(w, rng, x, shape, kind: str):
    """AVG_POOL2D or MAX_POOL2D with a random window (pads < kernel)."""
    _, h, wd, c = shape
    axes = []
    for n in (h, wd):
        while True:
            k, s = int(rng.integers(1, 4)), int(rng.integers(1, 3))
            pad = int(rng.integers(0, k))
            end = int(rng.integers(0, k))
            if n + pad + end >= k:
                axes.append((k, s, pad, (n + pad + end - k) // s + 1))
                break
    (kh, sh, ph, oh), (kw, sw, pw, ow) = axes
    y = w.tensor([1, oh, ow, c], scale=S, zero_point=Z)
    w.op(kind, [x], [y], kernel_h=kh, kernel_w=kw, stride_h=sh, stride_w=sw, pad_top=ph, pad_left=pw,
         act_min=-128, act_max=127)
    return y, (1, oh, ow, c)


def elementwise(w, rng, x, shape, kind: str):
    """HARD_SWISH or REQUANTIZE with fixed valid parameters (same shape)."""
    y = w.tensor(list(shape), scale=S, zero_point=Z)
    if kind == "HARD_SWISH":
        w.op(kind, [x], [y], input_zero_point=Z, output_zero_point=Z, output_mult_fxp=21000,
             reluish_mult_fxp=18000, reluish_mult_exp=3, output_mult_exp=-1)
    else:
        w.op(kind, [x], [y], input_zero_point=Z, output_zero_point=Z, mult=1_500_000_000, shift=1)
    return y


def random_chain(seed: int) -> tuple[Xts3Writer, int]:
    """A graph whose ops 0..n-1 form one fusable chain: convs and depthwise
    convs of random geometry, average/max pools, LUT, HARD_SWISH, REQUANTIZE, and a residual ADD of the chain input when
    the shapes allow. Returns (writer, number of ops)."""
    rng = np.random.default_rng(seed)
    w = Xts3Writer()
    h, wd, c = int(rng.integers(4, 14)), int(rng.integers(3, 8)), int(rng.integers(1, 9))
    shape = (1, h, wd, c)
    x = w.tensor(list(shape), scale=S, zero_point=Z)
    t, n = x, 0
    for _ in range(int(rng.integers(2, 6))):
        keep_shape = seed % 3 == 0  # a third of the chains keep the shape: they end in a residual ADD
        kinds = ["same_dw", "same_pw", "lut", "hswish"] if keep_shape else [
            "conv", "dw", "pw", "lut", "pool", "hswish", "requant"]
        kind = rng.choice(kinds)
        if kind == "same_dw":
            t, shape = conv(w, rng, t, shape, depthwise=True, k=3, stride=1, dil=int(rng.integers(1, 3)), pad=None)
        elif kind == "same_pw":
            t, shape = conv(w, rng, t, shape, depthwise=False, k=1, stride=1, dil=1, pad=0, cout=c)
        elif kind in ("hswish", "requant"):
            t = elementwise(w, rng, t, shape, "HARD_SWISH" if kind == "hswish" else "REQUANTIZE")
        elif kind == "pool":
            t, shape = pool(w, rng, t, shape, str(rng.choice(["AVG_POOL2D", "MAX_POOL2D"])))
        elif kind == "lut":
            t = lut(w, rng, t, shape)
        elif kind == "pw":
            t, shape = conv(w, rng, t, shape, depthwise=False, k=1, stride=1, dil=1, pad=0)
        else:
            t, shape = conv(w, rng, t, shape, depthwise=kind == "dw")
        n += 1
    if shape == (1, h, wd, c) and (keep_shape or rng.random() < 0.7):
        t = add(w, t, x, shape)
        n += 1
    w.set_inputs([x])
    w.set_outputs([t])
    return w, n


def inverted_residual(h: int = 10, wd: int = 6, c: int = 8, expand: int = 24, seed: int = 0,
                      stride: int = 1) -> tuple[Xts3Writer, int]:
    """expand 1x1 -> depthwise 3x3 (stride) -> project 1x1 (+ residual ADD when stride 1)."""
    rng = np.random.default_rng(seed)
    w = Xts3Writer()
    x = w.tensor([1, h, wd, c], scale=S, zero_point=Z)
    e, s1 = conv(w, rng, x, (1, h, wd, c), depthwise=False, k=1, stride=1, dil=1, pad=0, cout=expand)
    d, s2 = conv(w, rng, e, s1, depthwise=True, k=3, stride=stride, dil=1, pad=1)
    p, s3 = conv(w, rng, d, s2, depthwise=False, k=1, stride=1, dil=1, pad=0, cout=c)
    n = 3
    if stride == 1 and s3 == (1, h, wd, c):
        p = add(w, p, x, s3)
        n = 4
    w.set_inputs([x])
    w.set_outputs([p])
    return w, n


def mul(w, a, b, shape):
    """MUL (of two maps of one shape: it cannot run on bands, a region over
    it is refused; of a map by a channel vector: the squeeze-excite scale)."""
    y = w.tensor(list(shape), scale=S, zero_point=Z)
    w.op("MUL", [a, b], [y], input1_offset=-Z, input2_offset=-Z, output_offset=Z, output_mult=1 << 30,
         output_shift=-5, act_min=-128, act_max=127)
    return y


def random_graph(seed: int, num_ops: int = 8) -> Xts3Writer:
    """A random graph of image ops in which many runs of ops cannot form a
    fused region: each op reads the latest tensor or an earlier one (so
    intermediates fan out past a run's end), ADD and MUL read two tensors of
    one shape, MUL cannot run on bands, and every tensor no op reads is a
    graph output (some in the middle of the op order)."""
    rng = np.random.default_rng(seed)
    w = Xts3Writer()
    shape = (1, int(rng.integers(4, 10)), int(rng.integers(3, 6)), int(rng.integers(1, 5)))
    x = w.tensor(list(shape), scale=S, zero_point=Z)
    made, read = [(x, shape)], {x}
    for _ in range(num_ops):
        t, sh = made[-1] if rng.random() < 0.6 else made[int(rng.integers(len(made)))]
        read.add(t)
        kind = str(rng.choice(["conv", "dw", "pool", "lut", "hswish", "requant", "add", "mul"]))
        if kind in ("add", "mul"):
            same = [m for m, s in made if s == sh]
            u = same[int(rng.integers(len(same)))]
            read.add(u)
            y = (add if kind == "add" else mul)(w, t, u, sh)
        elif kind in ("conv", "dw"):
            y, sh = conv(w, rng, t, sh, depthwise=kind == "dw")
        elif kind == "pool":
            y, sh = pool(w, rng, t, sh, str(rng.choice(["AVG_POOL2D", "MAX_POOL2D"])))
        elif kind == "lut":
            y = lut(w, rng, t, sh)
        else:
            y = elementwise(w, rng, t, sh, "HARD_SWISH" if kind == "hswish" else "REQUANTIZE")
        made.append((y, sh))
    outputs = [t for t, _ in made if t not in read]
    if rng.random() < 0.5:  # also a tensor that later ops read
        outputs.append(made[int(rng.integers(1, len(made)))][0])
    w.set_inputs([x])
    w.set_outputs(list(dict.fromkeys(outputs)))
    return w


def region_at_limits(h: int = 8, wd: int = 4, c: int = 4, seed: int = 0) -> tuple[Xts3Writer, int, int]:
    """A graph whose ops first .. first+num-1 form a region at the format's
    limits, kMaxRegionOps ops and kMaxRegionTensors tensors: a 3x3 depthwise,
    then ADDs each of another region input (LUTs of the graph input, before
    the region). Returns (writer, first, num)."""
    from executorch_espnn import _native

    num = _native.LIMITS["max_region_ops"]
    assert _native.LIMITS["max_region_tensors"] == 1 + num + (num - 1)  # x, the outputs, the other inputs
    rng = np.random.default_rng(seed)
    w = Xts3Writer()
    shape = (1, h, wd, c)
    x = w.tensor(list(shape), scale=S, zero_point=Z)
    others = [lut(w, rng, x, shape) for _ in range(num - 1)]
    t, _ = conv(w, rng, x, shape, depthwise=True, k=3, stride=1, dil=1, pad=1)
    for u in others:
        t = add(w, t, u, shape)
    w.set_inputs([x])
    w.set_outputs([t])
    return w, num - 1, num


# ------------------------------------------------------------------ upsampling
def resize(w, rng, x, shape, kind: str):
    """RESIZE_NEAREST or RESIZE_BILINEAR to a random size (up, and now and
    then down), with the tables the lowering writes for a random PyTorch
    mode (resize_tables)."""
    from executorch_espnn.lowering.ops.resize_tables import aot_bilinear_table, aot_nearest_index_table

    _, h, wd, c = shape
    oh, ow = int(rng.integers(max(1, h - 2), 3 * h + 2)), int(rng.integers(max(1, wd - 1), 2 * wd + 2))
    if kind == "RESIZE_NEAREST":
        mode = str(rng.choice(["nearest", "nearest-exact"]))
        tabs = [aot_nearest_index_table(n, o, mode) for n, o in ((h, oh), (wd, ow))]
    else:
        align = bool(rng.random() < 0.5)
        tabs = [aot_bilinear_table(n, o, align) for n, o in ((h, oh), (wd, ow))]
    y = w.tensor([1, oh, ow, c], scale=S, zero_point=Z)
    w.op(kind, [x, w.constant(tabs[0]), w.constant(tabs[1])], [y])
    return y, (1, oh, ow, c)


def transpose_conv(w, rng, x, shape, *, k=None, stride=None, pad=None, cout=None):
    """TRANSPOSE_CONV2D with a random window of kernel >= stride and no
    output row past the last input row's reach on rows (what a region takes:
    output_padding <= pad), any on columns; returns (output, its shape)."""
    _, h, wd, c = shape
    axes = []
    for axis, n in enumerate((h, wd)):
        s = stride or int(rng.integers(1, 4))
        kk = k or int(rng.integers(s, s + 3))
        dil = 1 if k else int(rng.choice([1, 1, 2]))
        p = pad if pad is not None else int(rng.integers(0, (dil * (kk - 1) + 1) // 2 + 1))
        extra = 0 if k else int(rng.integers(0, max(s, dil) if axis else min(max(s, dil), p + 1)))
        out = (n - 1) * s - 2 * p + dil * (kk - 1) + 1 + extra
        if out < 1:
            p, out = 0, (n - 1) * s + dil * (kk - 1) + 1 + extra
        axes.append((kk, s, dil, p, out))
    (kh, sh, dh, ph, oh), (kw, sw, dw_, pw, ow) = axes
    cout = cout or int(rng.integers(1, 9))
    y = w.tensor([1, oh, ow, cout], scale=S, zero_point=Z)
    f = w.constant(rng.integers(-127, 128, (cout, kh, kw, c), dtype=np.int8))
    w.op("TRANSPOSE_CONV2D", [x, f, *_requant(w, rng, cout)], [y], stride_h=sh, stride_w=sw, pad_top=ph,
         pad_left=pw, dilation_h=dh, dilation_w=dw_, groups=1, input_offset=-Z, output_offset=Z, act_min=-128,
         act_max=127)
    return y, (1, oh, ow, cout)


def concat(w, a, b, shape_a, shape_b):
    """Channel CONCAT of two images of the same rows and columns."""
    shape = (1, shape_a[1], shape_a[2], shape_a[3] + shape_b[3])
    y = w.tensor(list(shape), scale=S, zero_point=Z)
    w.op("CONCAT", [a, b], [y], axis=3)
    return y, shape


def upsampling_chain(seed: int) -> tuple[Xts3Writer, int]:
    """A graph whose ops 0..n-1 form one fusable chain with the ops of
    dense-prediction decoders: nearest and bilinear resizes, transposed
    convs, channel CONCATs (of the chain's own tensors, or with the chain
    input as a skip connection) and 3x3 convs between them. Returns
    (writer, number of ops)."""
    rng = np.random.default_rng(seed)
    w = Xts3Writer()
    shape = x_shape = (1, int(rng.integers(2, 7)), int(rng.integers(2, 6)), int(rng.integers(1, 5)))
    x = w.tensor(list(shape), scale=S, zero_point=Z)
    t, n = x, 0
    for _ in range(int(rng.integers(2, 6))):
        kind = str(rng.choice(["nearest", "bilinear", "tconv", "concat", "conv"]))
        if kind in ("nearest", "bilinear"):
            t, shape = resize(w, rng, t, shape, "RESIZE_NEAREST" if kind == "nearest" else "RESIZE_BILINEAR")
        elif kind == "tconv":
            t, shape = transpose_conv(w, rng, t, shape)
        elif kind == "conv":
            t, shape = conv(w, rng, t, shape, depthwise=False, k=3, stride=1, dil=1, pad=1)
        elif shape[1:3] == x_shape[1:3] and t is not x:
            t, shape = concat(w, t, x, shape, x_shape) if rng.random() < 0.5 else concat(w, x, t, x_shape, shape)
        else:
            u = lut(w, rng, t, shape)
            n += 1
            t, shape = concat(w, u, t, shape, shape)
        n += 1
    w.set_inputs([x])
    w.set_outputs([t])
    return w, n


def unet_decoder(h: int = 6, wd: int = 5, c: int = 4, seed: int = 0) -> tuple[Xts3Writer, int, int]:
    """A U-Net level: a 3x3 conv (the encoder's map, kept for the skip
    connection), 2x2 max pool, a 3x3 conv to 2c channels, then the decoder:
    a 2x2 stride-2 TRANSPOSE_CONV2D back up, CONCAT with the encoder's map
    and a 3x3 conv. Returns (writer, first op of the decoder, its number of
    ops)."""
    rng = np.random.default_rng(seed)
    w = Xts3Writer()
    fine = (1, 2 * h, 2 * wd, c)
    x = w.tensor(list(fine), scale=S, zero_point=Z)
    skip, _ = conv(w, rng, x, fine, depthwise=False, k=3, stride=1, dil=1, pad=1, cout=c)
    coarse = w.tensor([1, h, wd, c], scale=S, zero_point=Z)
    w.op("MAX_POOL2D", [skip], [coarse], kernel_h=2, kernel_w=2, stride_h=2, stride_w=2, pad_top=0, pad_left=0,
         act_min=-128, act_max=127)
    mid, s2 = conv(w, rng, coarse, (1, h, wd, c), depthwise=False, k=3, stride=1, dil=1, pad=1, cout=2 * c)
    up, s3 = transpose_conv(w, rng, mid, s2, k=2, stride=2, pad=0, cout=c)
    cat, s4 = concat(w, up, skip, s3, fine)
    out, _ = conv(w, rng, cat, s4, depthwise=False, k=3, stride=1, dil=1, pad=1, cout=c)
    w.set_inputs([x])
    w.set_outputs([out])
    return w, 3, 3


def mean_hw(w, x, c: int):
    """MEAN_HW of x to [1,1,1,c]."""
    y = w.tensor([1, 1, 1, c], scale=S, zero_point=Z)
    w.op("MEAN_HW", [x], [y], input_zero_point=Z, output_zero_point=Z, mult=1_500_000_000, shift=-5)
    return y


def squeeze_excite(h: int = 10, wd: int = 6, c: int = 8, expand: int = 24, seed: int = 0,
                   stride: int = 1, out: int | None = None, then_expand: int = 0,
                   scale_first: bool = False) -> tuple[Xts3Writer, dict[str, int]]:
    """An inverted residual with squeeze-and-excitation (MobileNetV3's bneck):
    expand 1x1, HARD_SWISH, depthwise 3x3 (stride), HARD_SWISH -> x; s =
    LUT(conv 1x1(conv 1x1(MEAN_HW(x)))); MUL(x, s), project 1x1 to ``out``
    channels (default c; + residual ADD when that keeps the input's shape);
    ``scale_first``: MUL(s, x), as torchvision's SqueezeExcitation writes it;
    with ``then_expand``, the next block's expand 1x1 to that many channels
    and depthwise 3x3. Returns (writer, op index by role: "mean", "mul",
    "last" = the block's last op)."""
    rng = np.random.default_rng(seed)
    w = Xts3Writer()
    x0 = w.tensor([1, h, wd, c], scale=S, zero_point=Z)
    e, s1 = conv(w, rng, x0, (1, h, wd, c), depthwise=False, k=1, stride=1, dil=1, pad=0, cout=expand)
    e = elementwise(w, rng, e, s1, "HARD_SWISH")
    d, s2 = conv(w, rng, e, s1, depthwise=True, k=3, stride=stride, dil=1, pad=1)
    x = elementwise(w, rng, d, s2, "HARD_SWISH")
    m = mean_hw(w, x, expand)
    q, sq = conv(w, rng, m, (1, 1, 1, expand), depthwise=False, k=1, stride=1, dil=1, pad=0, cout=max(expand // 4, 1))
    u, su = conv(w, rng, q, sq, depthwise=False, k=1, stride=1, dil=1, pad=0, cout=expand)
    scale = lut(w, rng, u, su)
    xs = mul(w, scale, x, s2) if scale_first else mul(w, x, scale, s2)
    p, s3 = conv(w, rng, xs, s2, depthwise=False, k=1, stride=1, dil=1, pad=0, cout=out or c)
    if s3 == (1, h, wd, c):
        p = add(w, p, x0, s3)
    last = len(w._ops) - 1
    if then_expand:
        p, s4 = conv(w, rng, p, s3, depthwise=False, k=1, stride=1, dil=1, pad=0, cout=then_expand)
        p, _ = conv(w, rng, p, s4, depthwise=True, k=3, stride=1, dil=1, pad=1)
    w.set_inputs([x0])
    w.set_outputs([p])
    return w, {"mean": 4, "mul": 8, "last": last}
