"""Convolutions lowered end to end: quantized with EspNNQuantizer, lowered
with to_espnn_edge in strict mode (everything delegated), every delegate run on
the native interpreter, outputs within 1 LSB of the convert_pt2e model."""

import pytest

pytest.importorskip("executorch")

import torch  # noqa: E402
from torch import nn  # noqa: E402

from executorch_espnn import _native  # noqa: E402
from aot_harness import lower_and_check, op_names, payloads  # noqa: E402


class Seq(nn.Module):
    def __init__(self, *layers):
        super().__init__()
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        return self.body(x)


def rand(*shape):
    return (torch.randn(*shape, generator=torch.Generator().manual_seed(1)),)


def seeded(factory):
    torch.manual_seed(0)
    return factory()


CASES = {
    "strided_padded": (lambda: Seq(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU()), rand(1, 3, 11, 9), "CONV2D"),
    "depthwise": (lambda: Seq(nn.Conv2d(4, 8, 1), nn.Conv2d(8, 8, 3, padding=1, groups=8)), rand(1, 4, 7, 7),
                  "DEPTHWISE_CONV2D"),
    "depthwise_multiplier": (lambda: Seq(nn.Conv2d(4, 8, 3, stride=2, groups=4)), rand(2, 4, 9, 8), "DEPTHWISE_CONV2D"),
    "grouped_16_16_g4": (lambda: Seq(nn.Conv2d(16, 16, 3, groups=4)), rand(1, 16, 8, 8), "CONV2D"),
    "dilated": (lambda: Seq(nn.Conv2d(4, 6, 3, dilation=2, padding=2), nn.ReLU()), rand(1, 4, 9, 9), "CONV2D"),
    "conv1d": (lambda: Seq(nn.Conv1d(4, 8, 5, stride=2, padding=2), nn.ReLU(), nn.Conv1d(8, 8, 3, groups=8)),
               rand(2, 4, 20), "DEPTHWISE_CONV2D"),
    "batch_no_bias": (lambda: Seq(nn.Conv2d(3, 5, (3, 1), padding=(1, 0), bias=False)), rand(3, 3, 6, 5), "CONV2D"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_conv(name, quantize):
    make_model, inputs, xts3_op = CASES[name]
    model = seeded(make_model)
    edge, _, fractions = lower_and_check(model, inputs, quantize, label=name)
    blobs = payloads(edge)
    assert len(blobs) == 1
    ops = op_names(blobs[0])
    assert xts3_op in ops
    # Float in, float out: the partition quantizes its input and dequantizes its output itself.
    assert ops[0] == "QUANTIZE" and ops[-1] == "DEQUANTIZE"
    if name == "grouped_16_16_g4":
        # A grouped CONV2D (not depthwise) with an OHWI [16,3,3,16/4] filter.
        summary = _native.Program(blobs[0]).summary()
        conv = next(op for op in summary["ops"] if op["op"] == "CONV2D")
        assert conv["params"]["groups"] == 4
        assert tuple(summary["tensors"][conv["inputs"][1]]["shape"]) == (16, 3, 3, 4)

