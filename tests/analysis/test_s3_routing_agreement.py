"""The lowering and the runtime's S3 routing agree because they are one
implementation: random conv/depthwise layers (and one-input-channel convs)
are lowered end to end, and every DEPTHWISE_CONV2D of the payload is checked
against the runtime's own routing (Program.op_routes): a layer with the
geometry of ESP-NN's S3 scratch defect is staged by the runtime (padding
written into scratch) and stays on the SIMD path, so the lowering puts no PAD
in front of it; a one-channel conv becomes a depthwise layer exactly when
_native.s3_depthwise_route gives that layer a SIMD path."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("executorch")

import torch  # noqa: E402
from torch import nn  # noqa: E402

from aot_harness import lower_and_check, payloads  # noqa: E402
from executorch_espnn import _native  # noqa: E402
from models import espnn_quantize  # noqa: E402

LAYERS = 6  # random layers per model (one lowering each model, to keep it quick)


def random_layer(rng):
    """(nn.Conv2d, input shape) of a random depthwise (mostly ch_mult 1, the
    defect's case), dense or one-input-channel conv with PyTorch's
    symmetric padding."""
    c = int(rng.choice([8, 16, 32, 48]))
    kh, kw = (int(v) for v in rng.choice([(3, 3), (3, 3), (3, 3), (5, 5), (1, 3), (3, 1)]))
    pad = (int(rng.integers(0, kh)), int(rng.integers(0, kw)))
    stride = int(rng.choice([1, 1, 2]))
    h, w = (int(v) for v in rng.integers(max(kh, kw) + 1, 13, size=2))
    kind = rng.choice(["depthwise", "depthwise", "depthwise", "multiplier", "dense", "one_channel"])
    if kind == "one_channel":
        out = int(rng.choice([3, 4, 8, 16]))
        return nn.Conv2d(1, out, (kh, kw), stride=stride, padding=pad), (1, 1, h, w)
    groups = 1 if kind == "dense" else c
    out = 2 * c if kind == "multiplier" else c
    return nn.Conv2d(c, out, (kh, kw), stride=stride, padding=pad, groups=groups), (1, c, h, w)


class Branches(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, *xs):
        return tuple(layer(x) for layer, x in zip(self.layers, xs))


def producer(summary, tensor):
    return next((op for op in summary["ops"] if tensor in op["outputs"]), None)


def branch_of(summary, op):
    """The graph input (branch) an op's first input comes from: the planner
    may run the independent branches in any order."""
    t = op["inputs"][0]
    while t not in summary["inputs"]:
        t = producer(summary, t)["inputs"][0]
    return summary["inputs"].index(t)


def layer_route(layer, shape):
    """The runtime's answer for `layer` as a depthwise layer (for a one-channel
    conv: with ch_mult = its output channels)."""
    _, c, h, w = shape
    kh, kw = layer.kernel_size
    oh = (h + 2 * layer.padding[0] - kh) // layer.stride[0] + 1
    ow = (w + 2 * layer.padding[1] - kw) // layer.stride[1] + 1
    return _native.s3_depthwise_route(
        in_hwc=(h, w, c), kernel=(kh, kw), ch_mult=layer.out_channels // c, out_hw=(oh, ow),
        stride=layer.stride, padding=layer.padding, dilation=layer.dilation, input_offset=0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lowering_and_runtime_routing_agree_on_random_layers(seed):
    rng = np.random.default_rng(2600 + seed)
    torch.manual_seed(seed)
    layers, shapes = zip(*(random_layer(rng) for _ in range(LAYERS)))
    gen = torch.Generator().manual_seed(seed)
    inputs = tuple(torch.randn(*s, generator=gen) for s in shapes)
    edge, _, _ = lower_and_check(Branches(layers).eval(), inputs, espnn_quantize, label=f"seed {seed}")
    (blob,) = payloads(edge)
    summary = _native.Program(blob).summary()
    convs = sorted((op for op in summary["ops"] if op["op"] in ("CONV2D", "DEPTHWISE_CONV2D")),
                   key=lambda op: branch_of(summary, op))
    assert [branch_of(summary, op) for op in convs] == list(range(LAYERS))  # one per branch
    for layer, shape, op in zip(layers, shapes, convs):
        route = summary["s3_routes"][op["index"]]
        if layer.in_channels == 1 and layer.out_channels > 1:
            assert (op["op"] == "DEPTHWISE_CONV2D") is layer_route(layer, shape)["simd"], (layer, op)
        if op["op"] != "DEPTHWISE_CONV2D":
            continue
        assert "-> ANSI" not in route["reason"] or "aligned" in route["reason"], route
        src = producer(summary, op["inputs"][0])
        if src is not None and src["op"] == "PAD":  # only for a pad beyond the kernel's extent
            assert any(p >= d * (k - 1) + 1 for p, d, k in zip(layer.padding, layer.dilation, layer.kernel_size))
        if layer_route(layer, shape)["route"] == "staged_padding" and (src is None or src["op"] != "PAD"):
            assert "staged padding" in route["kernel"], route


def test_the_seeds_reach_every_choice():
    """The random layers are not all on one side of the rules: among the drawn
    layers some depthwise ones have the defect's geometry and some do not,
    and some one-channel convs become depthwise and some stay convs."""
    counts = {"staged": 0, "not staged": 0, "one channel simd": 0, "one channel conv": 0}
    for seed in (0, 1, 2):
        rng = np.random.default_rng(2600 + seed)
        for _ in range(LAYERS):
            layer, shape = random_layer(rng)
            if layer.in_channels == 1:
                counts["one channel simd" if layer_route(layer, shape)["simd"] else "one channel conv"] += 1
            elif layer.groups > 1:
                counts["staged" if layer_route(layer, shape)["route"] == "staged_padding" else "not staged"] += 1
    assert min(counts.values()) >= 1, counts
