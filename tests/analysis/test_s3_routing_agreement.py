"""The lowering's depthwise pre-padding and the runtime's S3 routing agree
because they are one implementation: random conv/depthwise layers are lowered
end to end, and every DEPTHWISE_CONV2D of the payload is checked against the
runtime's own routing (Program.op_routes) and, where the lowering put a PAD in
front of it, the layer as PyTorch wrote it against the same routing asked
through _native.s3_depthwise_route: a PAD exactly where the unpadded layer
would have gone to ANSI for ESP-NN's S3 scratch defect, and no lowered layer
left on that route."""

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
    defect's case) or dense conv with PyTorch's symmetric padding."""
    c = int(rng.choice([8, 16, 32, 48]))
    kh, kw = (int(v) for v in rng.choice([(3, 3), (3, 3), (3, 3), (5, 5), (1, 3), (3, 1)]))
    pad = (int(rng.integers(0, kh)), int(rng.integers(0, kw)))
    stride = int(rng.choice([1, 1, 2]))
    h, w = (int(v) for v in rng.integers(max(kh, kw) + 1, 13, size=2))
    kind = rng.choice(["depthwise", "depthwise", "depthwise", "multiplier", "dense"])
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


def unpadded_route(summary, op, pad):
    """The runtime's route of this DEPTHWISE_CONV2D as it was before the
    lowering's PAD (pad = that PAD's before1/before2)."""
    t = summary["tensors"]
    _, h, w, c = t[op["inputs"][0]]["shape"]
    _, kh, kw, _ = t[op["inputs"][1]]["shape"]
    _, oh, ow, _ = t[op["outputs"][0]]["shape"]
    p = op["params"]
    return _native.s3_depthwise_route(
        in_hwc=(h - 2 * pad[0], w - 2 * pad[1], c), kernel=(kh, kw), ch_mult=p["ch_mult"], out_hw=(oh, ow),
        stride=(p["stride_h"], p["stride_w"]), padding=(p["pad_top"] + pad[0], p["pad_left"] + pad[1]),
        dilation=(p["dilation_h"], p["dilation_w"]), input_offset=p["input_offset"])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lowering_and_runtime_routing_agree_on_random_layers(seed):
    rng = np.random.default_rng(2600 + seed)
    torch.manual_seed(seed)
    layers, shapes = zip(*(random_layer(rng) for _ in range(LAYERS)))
    gen = torch.Generator().manual_seed(seed)
    inputs = tuple(torch.randn(*s, generator=gen) for s in shapes)
    edge, _, _ = lower_and_check(Branches(layers).eval(), inputs, espnn_quantize, label=f"seed {seed}")
    seen = 0
    for blob in payloads(edge):
        summary = _native.Program(blob).summary()
        for op in summary["ops"]:
            if op["op"] != "DEPTHWISE_CONV2D":
                continue
            seen += 1
            route = summary["s3_routes"][op["index"]]
            assert "scratch defect" not in route["reason"], route
            src = producer(summary, op["inputs"][0])
            if src is not None and src["op"] == "PAD":
                pad = (src["params"]["before1"], src["params"]["before2"])
                assert unpadded_route(summary, op, pad)["route"] == "ansi_scratch_defect", (op, pad)
            else:
                assert unpadded_route(summary, op, (0, 0))["route"] != "ansi_scratch_defect", op
    assert seen >= 1  # over the seeds both choices occur: test_the_seeds_reach_both_choices


def test_the_seeds_reach_both_choices():
    """The random layers are not all on one side of the rule: among the drawn
    depthwise layers some have the defect's geometry and some do not."""
    counts = {True: 0, False: 0}
    for seed in (0, 1, 2):
        rng = np.random.default_rng(2600 + seed)
        for _ in range(LAYERS):
            layer, (_, c, h, w) = random_layer(rng)
            if layer.groups == 1:
                continue
            kh, kw = layer.kernel_size
            oh = (h + 2 * layer.padding[0] - kh) // layer.stride[0] + 1
            ow = (w + 2 * layer.padding[1] - kw) // layer.stride[1] + 1
            route = _native.s3_depthwise_route(
                in_hwc=(h, w, c), kernel=(kh, kw), ch_mult=layer.out_channels // c, out_hw=(oh, ow),
                stride=layer.stride, padding=layer.padding, dilation=layer.dilation, input_offset=0)
            counts[route["route"] == "ansi_scratch_defect"] += 1
    assert counts[True] >= 2 and counts[False] >= 2, counts
