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
def test_depthwise_3x3_with_defect_pads_is_prepadded_onto_the_simd_path(padding):
    x = (torch.randn(1, 16, 9, 10, generator=torch.Generator().manual_seed(1)),)
    edge, _, _ = lower_and_check(depthwise(padding), x, espnn_quantize, label=f"dw pad {padding}")
    (blob,) = payloads(edge)
    pm = payload_metrics(blob)
    ops = [o.opcode for o in pm.ops]
    assert ops[ops.index("DEPTHWISE_CONV2D") - 1] == "PAD"
    dw = next(o for o in pm.ops if o.opcode == "DEPTHWISE_CONV2D")
    assert dw.s3_simd, dw.reason
    assert pm.s3_simd_fraction == 1.0


@pytest.mark.parametrize("padding, channels", [((1, 1), 16), ((0, 0), 16), ((1, 0), 8)])
def test_other_depthwise_layers_are_not_prepadded(padding, channels):
    """(1,1)/(0,0) and C % 16 != 0 are on SIMD paths already: no PAD copy."""
    x = (torch.randn(1, channels, 9, 10, generator=torch.Generator().manual_seed(1)),)
    edge, _, _ = lower_and_check(depthwise(padding, channels), x, espnn_quantize, label=f"dw {padding} {channels}")
    (blob,) = payloads(edge)
    pm = payload_metrics(blob)
    assert "PAD" not in [o.opcode for o in pm.ops]
    assert pm.s3_simd_fraction == 1.0
