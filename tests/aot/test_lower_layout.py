"""Pooling, mean and the layout decisions (NCHW partition I/O, NHWC inside,
TRANSPOSE only where the bytes differ) lowered end to end, plus per-tensor
weights. Models and payload checks: op_cases.py."""

import pytest

pytest.importorskip("executorch")

import torch  # noqa: E402
from torch import nn  # noqa: E402

from aot_harness import compare, export, output_scales, payloads, run_lowered  # noqa: E402
from op_cases import check_case  # noqa: E402

NAMES = ["pools", "mean", "adjacent_means", "pool_flatten_head", "flatten_hw", "permute_to_nhwc"]


@pytest.mark.parametrize("name", NAMES)
def test_op_group(name, quantize):
    check_case(name, quantize)


def test_per_tensor_weights():
    """Per-tensor symmetric weights: conv repeats the scale per channel, linear uses
    TFLite's per-tensor FC multiplier (a single mult/shift)."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    from executorch_espnn import _native, quantize, to_espnn_edge

    model = nn.Sequential(nn.Conv2d(3, 6, 3), nn.ReLU(), nn.Flatten(), nn.Linear(6 * 4 * 4, 5))
    x = (torch.randn(2, 3, 6, 6, generator=torch.Generator().manual_seed(1)),)
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=False))
    converted = quantize(model, x, [x], quantizer=quantizer)
    edge = to_espnn_edge(export(converted, x), allow_cpu_fallback=False)
    outputs, _ = run_lowered(edge, list(x))
    compare(outputs, [converted(*x)], output_scales(converted), "per-tensor")
    summary = _native.Program(payloads(edge)[0]).summary()
    fc = next(op for op in summary["ops"] if op["op"] == "FULLY_CONNECTED")
    assert tuple(summary["tensors"][fc["inputs"][3]]["shape"]) == (1,)  # one mult for all channels
