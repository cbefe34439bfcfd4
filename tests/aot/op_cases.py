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


CASES = {
    "linear_relu": (LinearRelu, (rand(3, 16),)),
    "linear_3d": (Linear3d, (rand(2, 5, 8),)),
    "fused_activations": (FusedActivations, (rand(1, 3, 8, 8),)),
    "add_mul_broadcast": (AddMulBroadcast, (rand(1, 8, 5, 5), rand(8, 1, 1, seed=2), rand(1, 8, 1, 1, seed=3),
                                              rand(4, 8, seed=4), rand(8, seed=5))),
    "nhwc_mul_broadcast": (NhwcMulBroadcast, (rand(1, 6, 6, 6), rand(1, 6, 1, 1, seed=2))),
    "pools": (Pools, (rand(1, 5, 11, 9),)),
    "softmax": (Softmaxes, (rand(2, 10), rand(1, 5, 4, 4, seed=2))),
    "mean": (Means, (rand(2, 6, 5, 7),)),
    "pool_flatten_head": (PoolFlattenHead, (rand(1, 3, 6, 6),)),
    "flatten_hw": (FlattenHW, (rand(1, 3, 7, 7),)),
    "permute_to_nhwc": (PermuteToNhwc, (rand(1, 3, 5, 5),)),
}

EXPECTED_OPS = {
    "linear_relu": {"FULLY_CONNECTED"},
    "linear_3d": {"FULLY_CONNECTED"},
    "fused_activations": {"CONV2D", "MEAN_HW", "FULLY_CONNECTED"},
    "add_mul_broadcast": {"ADD", "MUL"},
    "nhwc_mul_broadcast": {"MAX_POOL2D", "MUL"},
    "pools": {"MAX_POOL2D", "AVG_POOL2D"},
    "softmax": {"SOFTMAX"},
    "mean": {"MEAN_HW"},
}


def check_case(name, quantize):
    make_model, inputs = CASES[name]
    torch.manual_seed(0)  # weights independent of what ran before
    model = make_model()
    edge, _, _ = lower_and_check(model, inputs, quantize, label=name)
    blobs = payloads(edge)
    assert len(blobs) == 1
    ops = op_names(blobs[0])
    assert EXPECTED_OPS.get(name, set()) <= set(ops), ops
    if name == "fused_activations":
        # relu and hardtanh are absorbed by their producer as act_min/act_max (TFLite's
        # rounding of the real bounds in the output quantization). A clamp that a
        # quantizer gives its own output quantization (XNNPACK's does for relu6) is a
        # standalone 1x1 MAX_POOL2D + REQUANTIZE; nothing else may appear.
        summary = _native.Program(blobs[0]).summary()
        assert set(ops) <= {"QUANTIZE", "TRANSPOSE", "CONV2D", "MAX_POOL2D", "REQUANTIZE", "MEAN_HW",
                            "FULLY_CONNECTED", "DEQUANTIZE"}, ops
        assert ops.count("MAX_POOL2D") == ops.count("REQUANTIZE") <= 1, ops
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
    # The partition input is NCHW float; a rank-4 input costs one TRANSPOSE to NHWC.
    if name in ("pool_flatten_head", "permute_to_nhwc"):
        assert ops.count("TRANSPOSE") == 1, ops
    if name == "flatten_hw":
        assert ops.count("TRANSPOSE") == 2, ops  # input, and back to NCHW before flatten
    if name == "add_mul_broadcast":
        # One partition with five graph inputs and four outputs; relu fused into the add.
        summary = _native.Program(blobs[0]).summary()
        assert len(summary["inputs"]) == 5 and len(summary["outputs"]) == 4
        assert "TRANSPOSE" not in ops and "MAX_POOL2D" not in ops
    if name == "nhwc_mul_broadcast":
        assert ops.count("TRANSPOSE") == 2, ops  # the NCHW input in, the NCHW output back
