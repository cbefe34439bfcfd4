"""Whole networks through the user flow: EspNNQuantizer (PT2E, a few random
calibration batches) -> torch.export -> to_espnn_edge -> delegation_report,
then the lowered program runs on the host (the delegate on the native
runtime) and is compared with the convert_pt2e model.

* MobileNetV2 (width 1.0, 224x224): one partition, no compute op on the CPU,
  the payload parses natively. The 1-LSB criterion is per op group (the op
  tests); through 52 requantizing layers +-1 LSB rounding differences
  propagate, so the end-to-end bound is 3 LSB and the measured figures are
  printed (see models.py for why the BN statistics matter here).
* DS-CNN keyword spotting ([N,1,49,10] MFCCs): fully delegated, within 1 LSB.
"""

import pytest

pytest.importorskip("executorch")

import torch  # noqa: E402

from aot_harness import CHAIN_LSB, compare, delegate_nodes, output_scales, payloads  # noqa: E402
from executorch_espnn import _native, delegation_report, to_espnn_edge  # noqa: E402
from executorch_espnn.runtime import run_edge_program  # noqa: E402
from executorch_espnn.lowering.registry import lookup  # noqa: E402
from models import DSCNN, MobileNetV2, espnn_quantize, settle_batch_norm  # noqa: E402


def cpu_compute_ops(edge, method="forward"):
    """The report's CPU ops that do real work: unregistered ops count, ops
    registered as data movement / quantize-dequantize do not."""
    nodes = {n.name: n for n in edge.exported_program(method).graph.nodes}
    report = delegation_report(edge).methods[method]
    out = []
    for c in report.cpu_ops:
        entry = lookup(nodes[c.node])
        if entry is None or entry.compute:
            out.append(c)
    return out


def lowered(model, shape, seed):
    """Settle BN, quantize with 2 random calibration batches (+ the test input),
    export, lower (fallback on: the assertions below read the report)."""
    g = torch.Generator().manual_seed(seed)
    settle_batch_norm(model, [torch.randn(4, *shape[1:], generator=g)])
    x = (torch.randn(*shape, generator=g),)
    calibration = [(torch.randn(*shape, generator=g),) for _ in range(2)] + [x]
    converted = espnn_quantize(model, x, calibration)
    edge = to_espnn_edge(torch.export.export(converted, x))
    print(delegation_report(edge))
    return edge, converted, x


@pytest.fixture(scope="module")
def mobilenet_v2():
    torch.manual_seed(0)
    return lowered(MobileNetV2(), (1, 3, 224, 224), seed=1)


@pytest.fixture(scope="module")
def ds_cnn():
    torch.manual_seed(0)
    return lowered(DSCNN(), (4, 1, 49, 10), seed=2)


def op_histogram(blob):
    ops = {}
    for op in _native.Program(blob).summary()["ops"]:
        ops[op["op"]] = ops.get(op["op"], 0) + 1
    return ops


def test_mobilenet_v2_is_one_partition_with_no_cpu_compute(mobilenet_v2):
    edge, _, _ = mobilenet_v2
    report = delegation_report(edge).methods["forward"]
    assert len(report.partitions) == 1 and len(delegate_nodes(edge)) == 1
    assert cpu_compute_ops(edge) == []
    assert report.delegated_ops["aten.convolution.default"] == 52
    assert report.delegated_ops["aten.add.Tensor"] == 10
    (blob,) = payloads(edge)
    ops = op_histogram(blob)  # parses with the native parser
    print(f"MobileNetV2 payload: {len(blob)} bytes, XTS3 ops {ops}")
    # 17 depthwise 3x3, 35 other convolutions (stem + expansions + projections + 1x1 to 1280)
    assert ops["DEPTHWISE_CONV2D"] == 17 and ops["CONV2D"] == 35
    assert ops["ADD"] == 10 and ops["FULLY_CONNECTED"] == 1
    assert ops["QUANTIZE"] == 1 and ops["DEQUANTIZE"] == 1  # float in, float out


def test_mobilenet_v2_runs_natively_close_to_convert_pt2e(mobilenet_v2):
    edge, converted, x = mobilenet_v2
    outputs, calls = run_edge_program(edge, list(x))
    assert calls == 1
    (exact,) = compare(outputs, [converted(*x)], output_scales(converted), "MobileNetV2 (1000 logits)",
                       max_lsb=3.0)
    assert exact > 0.3


def test_ds_cnn_lowers_fully_and_matches_within_chain_bound(ds_cnn):
    edge, converted, x = ds_cnn
    report = delegation_report(edge).methods["forward"]
    assert len(report.partitions) == 1 and cpu_compute_ops(edge) == []
    ops = op_histogram(payloads(edge)[0])
    print(f"DS-CNN payload XTS3 ops {ops}")
    # The 10x4 stem conv from one input channel is lowered as a depthwise layer with ch_mult 64
    # (lowering/ops/conv.py: the S3 s16 mult8 path), beside the four depthwise 3x3 layers.
    assert ops["DEPTHWISE_CONV2D"] == 5 and ops["CONV2D"] == 4 and ops["FULLY_CONNECTED"] == 1
    # One input channel: NCHW -> NHWC is a RESHAPE; the eval-mode dropouts are identities
    # and keep the channels-last layout (no NHWC -> NCHW -> NHWC transpose pairs).
    assert "TRANSPOSE" not in ops
    outputs, calls = run_edge_program(edge, list(x))
    assert calls == 1
    compare(outputs, [converted(*x)], output_scales(converted), "DS-CNN (4x12 logits)", max_lsb=CHAIN_LSB)
