"""Small models for the op-group tests (test_lower_ops.py, test_lower_layout.py) and
the checks on their lowered payloads."""

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from aot_harness import lower_and_check, op_names, payloads
from executorch_espnn import _native


def rand(*shape, seed=1):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class LinearRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(16, 12), nn.Linear(12, 5)

    def forward(self, x):
        return self.b(F.relu(self.a(x)))


class Linear3d(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 6)

    def forward(self, x):
        return self.a(x)


class FusedActivations(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2, self.c3 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 1), nn.Conv2d(8, 8, 1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        y = F.relu(self.c1(x))
        y = F.relu6(self.c2(y))
        y = F.hardtanh(self.c3(y), min_val=-0.5, max_val=0.5)
        return F.hardtanh(self.fc(y.mean((2, 3))), min_val=-0.05, max_val=0.05)


# Ops whose integer rounding may differ from PyTorch's by 1 LSB (add, mul, avg pool,
# mean, softmax) read exactly quantized graph inputs here: a difference in their
# input would otherwise add to their own and the 1-LSB check would test the chain.


class AddMulBroadcast(nn.Module):
    """PyTorch-order broadcasting: [1,8,5,5] + [8,1,1], relu(a + b), [1,8,5,5] * [1,8,1,1], [4,8] + [8]."""

    def forward(self, x, y, z, a, b):
        return x + y, F.relu(x + x), x * z, a + b


class NhwcMulBroadcast(nn.Module):
    """The max pool's value is channels-last; the [1,C,1,1] operand joins it without a TRANSPOSE."""

    def forward(self, x, z):
        return F.max_pool2d(x, 2) * z


class Pools(nn.Module):
    """Pools read a 1x1 conv (quantizers share the pool's qparams with a quantized
    producer); the conv rounds like PyTorch but for rare ties, so its output differs
    from the reference in few elements and a pooled value stays within 1 LSB."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(5, 5, 1)

    def forward(self, x):
        x = self.c(x)
        return (F.max_pool2d(x, 2), F.max_pool2d(x, 3, stride=2, padding=1), F.avg_pool2d(x, 2),
                F.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False))


class Softmaxes(nn.Module):
    def forward(self, x, img):
        return torch.softmax(x, -1), torch.softmax(img, dim=1)


class Means(nn.Module):
    def forward(self, x):
        return x.mean((2, 3)), F.adaptive_avg_pool2d(x, 1)


class AdjacentMeans(nn.Module):
    """Means over one run of adjacent dims in PyTorch order (a transformer's token mean
    x.mean(1) of [N, T, D]; the last dim; dims 1..2 of a rank-4 tensor, keepdim): MEAN_HW
    on the bytes viewed as [outer, reduced, 1, inner], no TRANSPOSE."""

    def forward(self, x, y):
        return x.mean(1), x.mean(-1), y.mean((1, 2), keepdim=True)


class PoolFlattenHead(nn.Module):
    """adaptive_avg_pool2d(1) + flatten: [N,C,1,1] is the same bytes in NCHW and NHWC."""

    def __init__(self):
        super().__init__()
        self.c, self.fc = nn.Conv2d(3, 8, 3), nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(F.relu(self.c(x)), 1), 1))


class FlattenHW(nn.Module):
    """flatten of an [N,C,3,3] feature map needs PyTorch's NCHW order back."""

    def __init__(self):
        super().__init__()
        self.c, self.fc = nn.Conv2d(3, 4, 3, stride=2), nn.Linear(36, 5)

    def forward(self, x):
        return self.fc(self.c(x).flatten(1))


class PermuteToNhwc(nn.Module):
    """permute(0,2,3,1) of a conv output is the NHWC value itself: no TRANSPOSE."""

    def __init__(self):
        super().__init__()
        self.c, self.fc = nn.Conv2d(3, 6, 3), nn.Linear(6, 4)

    def forward(self, x):
        return self.fc(self.c(x).permute(0, 2, 3, 1))


class Activations(nn.Module):
    """hardswish -> HARD_SWISH; sigmoid, tanh, silu, gelu (exact and tanh), hardsigmoid
    -> LUT. They read the exactly quantized graph input: their slope can turn a 1-LSB
    difference of a producer into 2 LSB (sigmoid's fixed 1/256 output). Scalar add/mul
    operands become quantized constants (EspNNQuantizer), so they are ADD/MUL with a
    constant operand. A clamp after a sigmoid (which cannot absorb it) is a standalone
    1x1 MAX_POOL2D in the sigmoid's fixed quantization."""

    def forward(self, x):
        return (F.hardswish(x), torch.sigmoid(x), torch.tanh(x), F.silu(x), F.gelu(x),
                F.gelu(x, approximate="tanh"), F.hardsigmoid(x), x + 1.5, x * 0.5,
                torch.clamp(torch.sigmoid(x), 0.2, 0.8))


class TransposedConvs(nn.Module):
    """ConvTranspose2d with stride 2, output_padding 1 and groups 2 (+ fused relu), and a
    ConvTranspose1d."""

    def __init__(self):
        super().__init__()
        self.t2 = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
        self.t1 = nn.ConvTranspose1d(3, 5, 4, stride=3, padding=1, output_padding=2)

    def forward(self, x, s):
        return F.relu(self.t2(x)), self.t1(s)


class ConvWidePadding(nn.Module):
    """Padding >= the kernel extent (1x1 with padding 1; a depthwise 1x3 with padding
    (1, 1): only H needs it): an explicit PAD with the input zero point, then the conv."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 4, 1, padding=1)
        self.b = nn.Conv2d(4, 4, (1, 3), padding=(1, 1), groups=4)

    def forward(self, x):
        return self.b(F.relu(self.a(x)))


class Upsamples(nn.Module):
    """Nearest x2 (scale factor), nearest to a size, bilinear 5 -> 7 with align_corners
    True and False, on the NHWC conv output."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 1)

    def forward(self, x):
        y = self.c(x)
        return (F.interpolate(y, scale_factor=2, mode="nearest"), F.interpolate(y, size=(7, 8), mode="nearest"),
                F.interpolate(y, size=(7, 7), mode="bilinear", align_corners=True),
                F.interpolate(y, size=(7, 7), mode="bilinear", align_corners=False))


class DataMovement(nn.Module):
    """On NHWC values: chunk and split of the channels, cat of channels, pad of H and W,
    slice with steps. On a [rows, features] value (PyTorch order): chunk, cat, pad with
    a non-zero value, slice. No TRANSPOSE beyond the NCHW input and output."""

    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 8, 1), nn.Conv2d(11, 4, 3)
        self.fc = nn.Linear(16, 12)

    def forward(self, x, v):
        y = self.c1(x)
        a, b = torch.chunk(y, 2, 1)
        _, s2, _ = torch.split(y, [2, 3, 3], 1)
        z = self.c2(F.pad(torch.cat([b, a, s2], 1), (1, 0, 2, 1)))
        f0, f1, f2 = torch.chunk(self.fc(v), 3, 1)
        w = F.pad(torch.cat([f2, f0], 1), (1, 2), value=0.25)
        return z[:, 1:, 1::2, ::3], w[::2, 1::3]


class Attention(nn.Module):
    """The zoo ViT's attention (models/vit.py) without its layer norm: head split by
    reshape/permute/select, q @ k^T (k^T is a relabel: BATCH_MATMUL reads k's rows in
    place), scale, softmax, attn @ v (the runtime transposes v), head merge by
    transpose/reshape (a clone + view in the Edge dialect), projection."""

    def __init__(self):
        super().__init__()
        from executorch_espnn.models.vit import Attention as VitAttention

        self.attn = VitAttention(32, 4)

    def forward(self, x):
        return self.attn(x)


class MatmulForms(nn.Module):
    """bmm of two activations; matmul broadcasting a rank-2 activation over a rank-4
    one; matmul by a constant matrix (re-laid out to [N, K] at compile time); a fused relu."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(6, 6), nn.Linear(6, 5), nn.Linear(6, 6)
        self.w = nn.Parameter(torch.randn(6, 7) * 0.3)

    def forward(self, x, y, z):
        p = torch.bmm(self.a(x), self.c(x).transpose(1, 2))  # [2,4,6] @ [2,6,4]
        q = torch.matmul(self.a(y), self.b(z))  # [1,2,3,6] @ [6,5]
        return p, q, F.relu(torch.matmul(self.a(x), self.w))


CASES = {
    "attention": (Attention, (rand(1, 10, 32),)),
    "matmul_forms": (MatmulForms, (rand(2, 4, 6), rand(1, 2, 3, 6, seed=2), rand(6, 6, seed=3))),
    "linear_relu": (LinearRelu, (rand(3, 16),)),
    "linear_3d": (Linear3d, (rand(2, 5, 8),)),
    "fused_activations": (FusedActivations, (rand(1, 3, 8, 8),)),
    "add_mul_broadcast": (AddMulBroadcast, (rand(1, 8, 5, 5), rand(8, 1, 1, seed=2), rand(1, 8, 1, 1, seed=3),
                                              rand(4, 8, seed=4), rand(8, seed=5))),
    "nhwc_mul_broadcast": (NhwcMulBroadcast, (rand(1, 6, 6, 6), rand(1, 6, 1, 1, seed=2))),
    "pools": (Pools, (rand(1, 5, 11, 9),)),
    "softmax": (Softmaxes, (rand(2, 10), rand(1, 5, 4, 4, seed=2))),
    "mean": (Means, (rand(2, 6, 5, 7),)),
    "adjacent_means": (AdjacentMeans, (rand(2, 9, 8), rand(2, 3, 4, 5, seed=2))),
    "pool_flatten_head": (PoolFlattenHead, (rand(1, 3, 6, 6),)),
    "flatten_hw": (FlattenHW, (rand(1, 3, 7, 7),)),
    "permute_to_nhwc": (PermuteToNhwc, (rand(1, 3, 5, 5),)),
    "activations": (Activations, (3 * rand(1, 3, 6, 6),)),
    "transposed_conv": (TransposedConvs, (rand(1, 4, 5, 4), rand(2, 3, 7, seed=2))),
    "conv_wide_padding": (ConvWidePadding, (rand(1, 3, 5, 6),)),
    "upsample": (Upsamples, (rand(1, 3, 5, 5),)),
    "data_movement": (DataMovement, (rand(1, 3, 6, 7), rand(5, 16, seed=2))),
}

EXPECTED_OPS = {
    "linear_relu": {"FULLY_CONNECTED"},
    "attention": {"BATCH_MATMUL", "SLICE", "SOFTMAX", "MUL", "FULLY_CONNECTED"},
    "matmul_forms": {"BATCH_MATMUL", "FULLY_CONNECTED"},
    "linear_3d": {"FULLY_CONNECTED"},
    "fused_activations": {"CONV2D", "MEAN_HW", "FULLY_CONNECTED"},
    "add_mul_broadcast": {"ADD", "MUL"},
    "nhwc_mul_broadcast": {"MAX_POOL2D", "MUL"},
    "pools": {"MAX_POOL2D", "AVG_POOL2D"},
    "softmax": {"SOFTMAX"},
    "mean": {"MEAN_HW"},
    "adjacent_means": {"MEAN_HW"},
    "activations": {"HARD_SWISH", "LUT", "ADD", "MUL", "MAX_POOL2D"},
    "transposed_conv": {"TRANSPOSE_CONV2D"},
    "conv_wide_padding": {"PAD", "CONV2D", "DEPTHWISE_CONV2D"},
    "upsample": {"RESIZE_NEAREST", "RESIZE_BILINEAR"},
    "data_movement": {"SPLIT", "CONCAT", "PAD", "SLICE", "CONV2D", "FULLY_CONNECTED"},
}


def _ops_of(summary, name):
    return [op for op in summary["ops"] if op["op"] == name]


def _nchw_dequantizes(summary):
    """DEQUANTIZEs that read NHWC and write the NCHW float output (channels_last:
    the output TRANSPOSE folded into them)."""
    return [op for op in _ops_of(summary, "DEQUANTIZE") if op["params"].get("channels_last") == 1]


def _check_activations(ops, summary):
    assert ops.count("HARD_SWISH") == 1 and ops.count("LUT") == 7, ops  # sigmoid twice
    lut_out = {(summary["tensors"][op["outputs"][0]]["scale"], summary["tensors"][op["outputs"][0]]["zero_point"])
               for op in _ops_of(summary, "LUT")}
    assert {(1 / 256, -128), (1 / 128, 0)} <= lut_out, lut_out  # sigmoid's and tanh's fixed quantization
    # clamp(sigmoid, 0.2, 0.8) in the sigmoid's 1/256, -128: round(51.2) - 128, round(204.8) - 128.
    (pool,) = _ops_of(summary, "MAX_POOL2D")
    assert (pool["params"]["act_min"], pool["params"]["act_max"]) == (-77, 77)


def _check_transposed_conv(ops, summary):
    # (the stride-2 2-D one and the 1-D one, in whichever order the planner runs them)
    t2, t1 = sorted(_ops_of(summary, "TRANSPOSE_CONV2D"), key=lambda op: -op["params"]["stride_h"])
    assert tuple(summary["tensors"][t2["inputs"][1]]["shape"]) == (6, 3, 3, 2)  # [Cout, kh, kw, Cin/groups]
    assert (t2["params"]["groups"], t2["params"]["stride_h"], t2["params"]["pad_top"]) == (2, 2, 1)
    assert t2["params"]["act_min"] == max(-128, t2["params"]["output_offset"])  # relu fused: real 0
    assert tuple(summary["tensors"][t1["inputs"][1]]["shape"]) == (5, 1, 4, 3)  # conv_transpose1d: height 1
    assert (t1["params"]["stride_h"], t1["params"]["stride_w"]) == (1, 3)


def _check_conv_wide_padding(ops, summary):
    # (The float NCHW input is quantized straight into NHWC: QUANTIZE's channels_last.)
    # (and the NHWC result dequantized straight into the NCHW output: DEQUANTIZE's channels_last.)
    assert ops == ["QUANTIZE", "PAD", "CONV2D", "PAD", "DEPTHWISE_CONV2D", "DEQUANTIZE"]
    assert len(_nchw_dequantizes(summary)) == 1
    (pad_a, pad_b), conv, dw = _ops_of(summary, "PAD"), _ops_of(summary, "CONV2D")[0], \
        _ops_of(summary, "DEPTHWISE_CONV2D")[0]
    # The padding is the real 0 of the conv's input; the kernel then pads nothing (1x1)
    # or only along W (the 1x3 depthwise: pad 1 < its extent 3).
    for pad, consumer, hw in ((pad_a, conv, (1, 1)), (pad_b, dw, (1, 0))):
        assert pad["params"]["pad_value"] == -consumer["params"]["input_offset"]
        assert (pad["params"]["before1"], pad["params"]["before2"]) == hw
    assert (conv["params"]["pad_top"], conv["params"]["pad_left"]) == (0, 0)
    assert (dw["params"]["pad_top"], dw["params"]["pad_left"]) == (0, 1)


def _check_upsample(ops, summary):
    assert ops.count("RESIZE_NEAREST") == 2 and ops.count("RESIZE_BILINEAR") == 2, ops
    assert "REQUANTIZE" not in ops  # the resizes share their input's quantization
    # each of the 4 NCHW outputs dequantized from NHWC (the input: QUANTIZE's channels_last)
    assert "TRANSPOSE" not in ops and len(_nchw_dequantizes(summary)) == 4, ops


def _check_data_movement(ops, summary):
    # the image in and out (QUANTIZE's and DEQUANTIZE's channels_last): the movement runs on NHWC
    assert "TRANSPOSE" not in ops and len(_nchw_dequantizes(summary)) == 1, ops
    assert "REQUANTIZE" not in ops, ops  # parts share the quantization of the whole
    splits, concats, pads = _ops_of(summary, "SPLIT"), _ops_of(summary, "CONCAT"), _ops_of(summary, "PAD")
    # (in whichever order the planner runs the image's and the features' ops)
    assert sorted(s["params"]["axis"] for s in splits) == [1, 3, 3]  # features, NHWC channels twice
    assert sorted(c["params"]["axis"] for c in concats) == [1, 3]
    (image_pad,) = [p for p in pads if len(summary["tensors"][p["inputs"][0]]["shape"]) == 4]
    assert (image_pad["params"]["before1"], image_pad["params"]["before2"]) == (2, 1)  # H and W of NHWC
    assert ops.count("SLICE") == 5, ops


def _check_attention(ops, summary):
    qk, av = _ops_of(summary, "BATCH_MATMUL")
    assert qk["params"]["rhs_transposed"] == 1  # k^T read as k's [N, K] rows: no TRANSPOSE for it
    assert av["params"]["rhs_transposed"] == 0  # v [K, N] as it is
    assert ops.count("SLICE") == 3, ops  # qkv[0], qkv[1], qkv[2]
    assert ops.count("TRANSPOSE") == 2, ops  # the head split and the head merge only


def _check_matmul_forms(ops, summary):
    mms = _ops_of(summary, "BATCH_MATMUL")
    assert len(mms) == 3, ops
    ranks = sorted(len(summary["tensors"][m["inputs"][1]]["shape"]) for m in mms)
    assert ranks == [3, 3, 4], ranks  # the rank-2 rhs is viewed at the output's rank
    const_mm = [m for m in mms if summary["tensors"][m["inputs"][1]]["memory"] == "CONSTANT"]
    assert len(const_mm) == 1 and const_mm[0]["params"]["rhs_transposed"] == 1
    assert const_mm[0]["params"]["act_min"] > -128 or const_mm[0]["params"]["output_offset"] == -128  # relu fused


def _check_adjacent_means(ops, summary):
    assert ops.count("MEAN_HW") == 3 and "TRANSPOSE" not in ops, ops
    views = sorted(tuple(summary["tensors"][m["inputs"][0]]["shape"]) for m in _ops_of(summary, "MEAN_HW"))
    assert views == [(2, 9, 1, 8), (2, 12, 1, 5), (18, 8, 1, 1)], views  # [outer, reduced, 1, inner]


CHECKS = {
    "adjacent_means": _check_adjacent_means,
    "attention": _check_attention,
    "matmul_forms": _check_matmul_forms,
    "activations": _check_activations,
    "transposed_conv": _check_transposed_conv,
    "conv_wide_padding": _check_conv_wide_padding,
    "upsample": _check_upsample,
    "data_movement": _check_data_movement,
}


def check_case(name, quantize):
    make_model, inputs = CASES[name]
    torch.manual_seed(0)  # weights independent of what ran before
    model = make_model()
    edge, _, fractions = lower_and_check(model, inputs, quantize, label=name)
    blobs = payloads(edge)
    assert len(blobs) == 1
    ops = op_names(blobs[0])
    assert EXPECTED_OPS.get(name, set()) <= set(ops), ops
    if name in CHECKS:
        CHECKS[name](ops, _native.Program(blobs[0]).summary())
    if name == "fused_activations":
        # relu, relu6 and hardtanh are absorbed by their producer as act_min/act_max
        # (TFLite's rounding of the real bounds in the output quantization): EspNNQuantizer
        # gives conv/linear + clamp one output observer, so no standalone clamp remains.
        summary = _native.Program(blobs[0]).summary()
        # (BAND_LOOP, when the default schedule fuses convs into a band region, is no compute op.)
        assert [op for op in ops if op != "BAND_LOOP"] == ["QUANTIZE", "CONV2D", "CONV2D", "CONV2D",
                                                           "MEAN_HW", "FULLY_CONNECTED", "DEQUANTIZE"], ops
        ops_ = summary["ops"]
        convs = [op for op in ops_ if op["op"] == "CONV2D"]
        fc = next(op for op in ops_ if op["op"] == "FULLY_CONNECTED")
        assert convs[0]["params"]["act_min"] == max(-128, convs[0]["params"]["output_offset"])  # relu: real 0

        def bounds(op, lo, hi):
            t = summary["tensors"][op["outputs"][0]]
            s, zp = np.float32(t["scale"]), t["zero_point"]
            rnd = lambda v: int(np.sign(v) * np.floor(abs(v) + 0.5))  # noqa: E731  (half away from 0)
            return max(-128, zp + rnd(np.float32(lo) / s)), min(127, zp + rnd(np.float32(hi) / s))

        assert (convs[2]["params"]["act_min"], convs[2]["params"]["act_max"]) == bounds(convs[2], -0.5, 0.5)
        assert (fc["params"]["act_min"], fc["params"]["act_max"]) == bounds(fc, -0.05, 0.05)
    # The partition input is NCHW float; a rank-4 input is quantized straight
    # into NHWC (QUANTIZE's channels_last), with no TRANSPOSE.
    if name in ("pool_flatten_head", "permute_to_nhwc"):
        assert "TRANSPOSE" not in ops, ops
        assert _ops_of(_native.Program(blobs[0]).summary(), "QUANTIZE")[0]["params"]["channels_last"] == 1
    if name == "flatten_hw":
        assert ops.count("TRANSPOSE") == 1, ops  # back to NCHW before flatten
    if name == "add_mul_broadcast":
        # One partition with five graph inputs and four outputs; relu fused into the add.
        summary = _native.Program(blobs[0]).summary()
        assert len(summary["inputs"]) == 5 and len(summary["outputs"]) == 4
        assert "TRANSPOSE" not in ops and "MAX_POOL2D" not in ops
    if name == "nhwc_mul_broadcast":
        # in and out through QUANTIZE's and DEQUANTIZE's channels_last: no TRANSPOSE
        assert "TRANSPOSE" not in ops, ops
        assert len(_nchw_dequantizes(_native.Program(blobs[0]).summary())) == 1
    return fractions
