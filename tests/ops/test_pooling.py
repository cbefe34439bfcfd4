"""AVG_POOL2D / MAX_POOL2D: golden ESP-NN vectors, TFLite's integer pooling formula, PyTorch, rejections."""

import numpy as np
import pytest

from executorch_espnn import _native
from espnn_dev.graph_util import Input, Out, build_op, expect_rejected, run_op

OPS = {"avg": "AVG_POOL2D", "max": "MAX_POOL2D"}


def pool_oracle(kind, x, k, s, pad, out_hw, act=(-128, 127)):
    """TFLite reference_integer_ops AveragePool / MaxPool on int8 NHWC, in int64.

    Windows start at o*stride - pad and are clipped to the image; avg divides the
    sum of the in-image taps by their count, rounding half away from zero.
    """
    n, h, w, c = x.shape
    (kh, kw), (sh, sw), (ph, pw), (oh, ow) = k, s, pad, out_hw
    xi = x.astype(np.int64)
    y = np.empty((n, oh, ow, c), np.int64)
    for oy in range(oh):
        y0, y1 = max(0, oy * sh - ph), min(h, oy * sh - ph + kh)
        for ox in range(ow):
            x0, x1 = max(0, ox * sw - pw), min(w, ox * sw - pw + kw)
            win = xi[:, y0:y1, x0:x1, :]
            assert win.size > 0, "oracle called with an empty window"
            if kind == "max":
                v = win.max(axis=(1, 2))
            else:
                total, cnt = win.sum(axis=(1, 2)), (y1 - y0) * (x1 - x0)
                v = np.where(total > 0, (total + cnt // 2) // cnt, -((-total + cnt // 2) // cnt))
            y[:, oy, ox, :] = v
    return np.clip(y, act[0], act[1]).astype(np.int8)


def run_pool(kind, x, k, s, pad, out_hw, act=(-128, 127), scale=0.05, zp=-3):
    n, _, _, c = x.shape
    return run_op(OPS[kind], [Input(x, scale, zp)], Out((n, out_hw[0], out_hw[1], c), "INT8", scale, zp),
                  kernel_h=k[0], kernel_w=k[1], stride_h=s[0], stride_w=s[1], pad_top=pad[0], pad_left=pad[1],
                  act_min=act[0], act_max=act[1])


def golden_cases(vectors_dir, kind):
    z = np.load(vectors_dir / f"{kind}_pool_s8.npz")
    fields = z["params_fields"].tolist()
    for i in range(int(z["num_cases"])):
        yield i, dict(zip(fields, z[f"c{i}_params"].tolist())), z[f"c{i}_input"], z[f"c{i}_output"], z[f"c{i}_fscale"]


@pytest.mark.parametrize("kind", ["avg", "max"])
def test_golden_vectors_bit_exact(vectors_dir, kind):
    n = 0
    for i, p, x, want, fscale in golden_cases(vectors_dir, kind):
        x4 = x.reshape(1, p["in_h"], p["in_w"], p["ch"])
        geo = dict(k=(p["k_h"], p["k_w"]), s=(p["stride_h"], p["stride_w"]), pad=(p["pad_h"], p["pad_w"]),
                   out_hw=(p["out_h"], p["out_w"]), act=(p["act_min"], p["act_max"]))
        scale = float(fscale[0]) if np.isfinite(fscale[0]) else 0.05
        got = run_pool(kind, x4, scale=scale, zp=p["zp"], **geo)
        np.testing.assert_array_equal(got.reshape(want.shape), want, err_msg=f"{kind} case {i}")
        # The test's own oracle agrees with the real library too.
        np.testing.assert_array_equal(pool_oracle(kind, x4, **geo).reshape(want.shape), want,
                                      err_msg=f"oracle, {kind} case {i}")
        n += 1
    assert n == 60


# (in_hw, channels, kernel, stride, pad, out_hw): channels 3/5/6 take the explicit
# ANSI route (ESP32-S3 max pool writes nothing for them); windows clipped by
# top/left and implicit bottom/right padding; stride 2; global pooling; a
# kernel larger than the input.
GEOMETRIES = [
    ((7, 6), 3, (3, 3), (2, 2), (1, 1), (4, 3)),     # PyTorch padding=1, stride 2
    ((8, 9), 5, (3, 3), (2, 2), (0, 1), (4, 5)),     # TFLite SAME, odd total pad: bottom/right implicit
    ((5, 5), 6, (2, 2), (1, 1), (0, 0), (5, 5)),     # SAME, pad only at bottom/right
    ((9, 9), 8, (2, 2), (2, 2), (0, 0), (4, 4)),     # VALID, a row and a column dropped
    ((6, 7), 5, (6, 7), (1, 1), (0, 0), (1, 1)),     # global pooling
    ((3, 4), 4, (5, 5), (1, 1), (2, 2), (3, 4)),     # kernel larger than the input
    ((10, 4), 16, (5, 1), (3, 1), (2, 0), (4, 4)),   # 1-D window, stride 3
    ((17, 17), 3, (17, 17), (1, 1), (0, 0), (1, 1)),  # 289 taps: would overflow S3's int16 avg path
]


@pytest.mark.parametrize("kind", ["avg", "max"])
@pytest.mark.parametrize("in_hw, ch, k, s, pad, out_hw", GEOMETRIES)
def test_matches_integer_oracle(kind, in_hw, ch, k, s, pad, out_hw):
    rng = np.random.default_rng(hash((kind, in_hw, ch, k)) % 2**32)
    x = rng.integers(-128, 128, (3, *in_hw, ch), dtype=np.int8)  # 3 images: the batch loop
    got = run_pool(kind, x, k, s, pad, out_hw)
    np.testing.assert_array_equal(got, pool_oracle(kind, x, k, s, pad, out_hw))


@pytest.mark.parametrize("kind", ["avg", "max"])
def test_extreme_values_and_activation_clamp(kind):
    # 289 taps of 127 (one -128 in channel 1): the sum needs more than int16.
    x = np.full((1, 17, 17, 5), 127, np.int8)
    x[0, 0, 0, 1] = -128
    got = run_pool(kind, x, (17, 17), (1, 1), (0, 0), (1, 1))[0, 0, 0]
    # avg of channel 1: (288 * 127 - 128) / 289 = 126.1 -> 126
    np.testing.assert_array_equal(got, [127, 126 if kind == "avg" else 127, 127, 127, 127])
    x = np.random.default_rng(1).integers(-128, 128, (2, 6, 6, 4), dtype=np.int8)
    for act in [(-3, 3), (0, 6), (-128, -100), (120, 127), (5, 5)]:
        got = run_pool(kind, x, (3, 3), (1, 1), (1, 1), (6, 6), act=act)
        np.testing.assert_array_equal(got, pool_oracle(kind, x, (3, 3), (1, 1), (1, 1), (6, 6), act))
        assert got.min() >= act[0] and got.max() <= act[1]


def test_avg_rounds_half_away_from_zero():
    # Two taps: sums +1 and -1 average to +-0.5 -> +1 and -1; +3/-3 -> +-1.5 -> +-2.
    x = np.array([1, 0, -1, 0, 3, 0, -3, 0], np.int8).reshape(1, 1, 8, 1)
    got = run_pool("avg", x, (1, 2), (1, 2), (0, 0), (1, 4))
    np.testing.assert_array_equal(got.ravel(), [1, -1, 2, -2])


@pytest.mark.filterwarnings("ignore:.*quantized tensor creation functions.*:UserWarning")
@pytest.mark.parametrize("kind", ["avg", "max"])
@pytest.mark.parametrize("ch, k, s, p, in_hw", [(3, 3, 2, 1, (9, 8)), (8, 2, 2, 0, (8, 8)), (5, 3, 1, 1, (6, 7)),
                                                 (16, 5, 2, 2, (11, 10)), (6, 4, 4, 0, (8, 12))])
def test_within_one_lsb_of_pytorch(kind, ch, k, s, p, in_hw):
    # The oracle is PyTorch's float pooling of the dequantized input, requantized with
    # quantize_per_tensor: no quantized engine is involved. (PyTorch's quantized
    # avg_pool2d is not usable as an engine-independent oracle: under the QNNPACK engine,
    # the one the other ops' oracles pin, it ignores count_include_pad=False and is off by
    # tens of LSB at padded borders.) Max pooling commutes with the monotone dequantize/
    # requantize pair, so it must match exactly; average pooling within 1 LSB (float
    # rounding of sum/count at exact ties).
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    scale, zp = 0.037, 11
    rng = np.random.default_rng(ch * 100 + k)
    x = rng.integers(-128, 128, (2, *in_hw, ch), dtype=np.int8)
    out_hw = tuple((d + 2 * p - k) // s + 1 for d in in_hw)  # PyTorch floor mode
    got = run_pool(kind, x, (k, k), (s, s), (p, p), out_hw, scale=scale, zp=zp)
    xf = (torch.from_numpy(x.astype(np.float32)) - zp).permute(0, 3, 1, 2) * scale
    if kind == "avg":
        yf = F.avg_pool2d(xf, k, s, p, count_include_pad=False)
    else:
        yf = F.max_pool2d(xf, k, s, p)
    # int8 = quint8 - 128, so quantize to quint8 with zero point zp + 128
    qy = torch.quantize_per_tensor(yf, scale, zp + 128, torch.quint8)
    want = (qy.int_repr().permute(0, 2, 3, 1).numpy().astype(np.int16) - 128)
    assert want.shape == got.shape
    diff = np.abs(got.astype(np.int16) - want)
    assert diff.max() <= (1 if kind == "avg" else 0)


# ---------------------------------------------------------------- rejections

def pool_blob(kind="avg", in_shape=(1, 4, 4, 4), out_shape=(1, 2, 2, 4), in_q=(0.1, 0), out_q=(0.1, 0),
              **overrides):
    params = dict(kernel_h=2, kernel_w=2, stride_h=2, stride_w=2, pad_top=0, pad_left=0, act_min=-128, act_max=127)
    params.update(overrides)
    x = np.zeros(in_shape, np.int8)
    blob, _ = build_op(OPS[kind], [Input(x, *in_q)], [Out(out_shape, "INT8", *out_q)], **params)
    return blob


@pytest.mark.parametrize("kind", ["avg", "max"])
def test_accepts_the_reference_blob(kind):
    _native.Program(pool_blob(kind))


@pytest.mark.parametrize("kind", ["avg", "max"])
@pytest.mark.parametrize("out_q", [(0.1, 1), (0.2, 0)])
def test_rejects_mismatched_quantization(kind, out_q):
    expect_rejected(pool_blob(kind, out_q=out_q), "input", "output", "must share quantization")


@pytest.mark.parametrize("kind", ["avg", "max"])
def test_rejects_a_window_without_in_image_tap(kind):
    # pad_top == kernel_h: the first window lies entirely in the padding.
    expect_rejected(pool_blob(kind, pad_top=2, out_shape=(1, 3, 2, 4)), "pad_top = 2", "no in-image tap")
    # One output column too many: the last window starts past the input.
    expect_rejected(pool_blob(kind, out_shape=(1, 2, 3, 4)), "output width 3", "no in-image tap")


@pytest.mark.parametrize("kind", ["avg", "max"])
def test_rejects_channels_beyond_uint16(kind):
    expect_rejected(pool_blob(kind, in_shape=(1, 1, 1, 65536), out_shape=(1, 1, 1, 65536), kernel_h=1,
                              kernel_w=1, stride_h=1, stride_w=1), "channels 65536", "uint16")


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        (dict(kernel_h=0), "kernel_h = 0"),
        (dict(kernel_w=65536), "kernel_w = 65536"),
        (dict(stride_h=0), "stride_h = 0"),
        (dict(stride_w=-2), "stride_w = -2"),
        (dict(pad_left=-1), "pad_left = -1"),
        (dict(act_min=-129), "act_min = -129"),
        (dict(act_min=5, act_max=4), "act_min 5 > act_max 4"),
        (dict(out_shape=(1, 1, 2, 4)), "output height 1 < 2"),
        (dict(out_shape=(2, 2, 2, 4)), "output batch 2 != input batch 1"),
        (dict(out_shape=(1, 2, 2, 5)), "output channels 5 != input channels 4"),
        (dict(in_shape=(4, 4, 4), out_shape=(2, 2, 4)), "input has rank 3, expected 4"),
        (dict(in_shape=(1, 65536, 1, 1), out_shape=(1, 32768, 1, 1)), "input height 65536 exceeds"),
    ],
)
def test_rejects_bad_geometry(overrides, fragment):
    kw = {k: overrides.pop(k) for k in ("in_shape", "out_shape") if k in overrides}
    expect_rejected(pool_blob("max", **kw, **overrides), fragment)


def test_rejects_avg_window_whose_sum_overflows_int32():
    # 4097 x 4097 in-image taps: 128 * taps > INT32_MAX. (Max pool has no sum.)
    geo = dict(in_shape=(1, 4097, 4097, 1), out_shape=(1, 1, 1, 1), kernel_h=4097, kernel_w=4097)
    expect_rejected(pool_blob("avg", **geo), "overflow the int32 sum")
    _native.Program(pool_blob("max", **geo))
