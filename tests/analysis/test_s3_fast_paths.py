"""Lowering choices that keep layers on ESP32-S3 SIMD paths (by ESP-NN
1.2.3's documented rules, executorch_espnn.analysis): checked statically on
the payload and numerically against the convert_pt2e model."""

from __future__ import annotations

import pytest

pytest.importorskip("executorch")

import torch  # noqa: E402
from torch import nn  # noqa: E402

from aot_harness import lower_and_check, payloads  # noqa: E402
from executorch_espnn.analysis import payload_metrics  # noqa: E402
from models import espnn_quantize  # noqa: E402


def depthwise(padding, channels=16):
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(channels, channels, 3, padding=padding, groups=channels)).eval()


@pytest.mark.parametrize("padding", [(1, 0), (0, 1), (2, 2)])
def test_depthwise_3x3_with_defect_pads_is_staged_onto_the_simd_path(padding):
    """The S3 scratch defect's pads: the runtime stages the padding in scratch (no PAD op, no
    second arena tensor) and the layer stays on the s8 asm path; the result matches the
    quantized model (lower_and_check)."""
    x = (torch.randn(1, 16, 9, 10, generator=torch.Generator().manual_seed(1)),)
    edge, _, _ = lower_and_check(depthwise(padding), x, espnn_quantize, label=f"dw pad {padding}")
    (blob,) = payloads(edge)
    pm = payload_metrics(blob)
    assert "PAD" not in [o.opcode for o in pm.ops]
    dw = next(o for o in pm.ops if o.opcode == "DEPTHWISE_CONV2D")
    assert dw.s3_simd and "staged padding" in dw.kernel, dw
    assert pm.s3_simd_fraction == 1.0


def test_a_one_channel_stem_conv_is_lowered_as_depthwise():
    """A grayscale 3x3 stem (1 -> 8 channels) runs as a depthwise layer with ch_mult 8 (the S3
    s16 mult8 asm) rather than the general conv, which pads one channel to 16; the result
    matches the quantized model (lower_and_check)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 8, 3, stride=2, padding=1), nn.ReLU()).eval()
    x = (torch.randn(1, 1, 12, 12, generator=torch.Generator().manual_seed(1)),)
    edge, _, _ = lower_and_check(model, x, espnn_quantize, label="one-channel stem")
    (blob,) = payloads(edge)
    ops = [o for o in payload_metrics(blob).ops if o.opcode in ("CONV2D", "DEPTHWISE_CONV2D")]
    assert [o.opcode for o in ops] == ["DEPTHWISE_CONV2D"]
    assert ops[0].s3_simd and "mult8" in ops[0].kernel, ops[0]


@pytest.mark.parametrize("padding, channels", [((1, 1), 16), ((0, 0), 16), ((1, 0), 8)])
def test_other_depthwise_layers_are_not_prepadded(padding, channels):
    """(1,1)/(0,0) and C % 16 != 0 are on SIMD paths already: no PAD copy."""
    x = (torch.randn(1, channels, 9, 10, generator=torch.Generator().manual_seed(1)),)
    edge, _, _ = lower_and_check(depthwise(padding, channels), x, espnn_quantize, label=f"dw {padding} {channels}")
    (blob,) = payloads(edge)
    pm = payload_metrics(blob)
    assert "PAD" not in [o.opcode for o in pm.ops]
    assert pm.s3_simd_fraction == 1.0
