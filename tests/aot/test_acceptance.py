"""The backend's acceptance list, bullet by bullet, end to end with EspNNQuantizer:
quantize (PT2E) -> torch.export -> to_espnn_edge -> native parser / host run
against the convert_pt2e model.

Where each bullet is tested (tests here add the end-to-end form where the
existing test covers one side only):

* op groups within 1 LSB, fraction of exact elements reported:
  test_lower_conv.py::test_conv, test_lower_ops.py::test_op_group,
  test_lower_layout.py::test_op_group (aot_harness.compare prints the fraction).
* MobileNetV2 224x224: one partition, no compute op on the CPU; DS-CNN fully
  lowered: test_models.py (the reduced network: test_mobilenet_block.py).
* strict mode names the node of an unsupported op:
  test_partitioner.py::test_strict_mode_names_the_unsupported_node;
  here: test_strict_mode_names_the_unsupported_node.
* per-module None keeps that module's conv+relu and softmax float: the
  quantizer side is test_quantizer.py::test_none_module_config_keeps_conv_relu_and_softmax_float;
  here: test_module_name_none_stays_float_on_the_cpu_with_reasons (the lowering side).
* hardtanh with keyword min/max fuses: the quantizer side is
  test_quantizer.py::test_hardtanh_with_keyword_min_max_fuses (linear);
  here: test_hardtanh_with_keyword_bounds_fuses_into_the_conv (the payload).
* grouped Conv2d(16,16,3,groups=4) matches: test_lower_conv.py::test_conv[grouped_16_16_g4];
  here: test_grouped_conv_matches_within_1_lsb.
* the same model lowered twice gives identical bytes: payloads in
  test_partitioner.py::test_lowering_is_deterministic; here payloads and .pte,
  for one ExportedProgram lowered twice and for the whole flow run twice:
  test_same_model_gives_identical_payload_and_pte_bytes.
* a dict of methods, report per method: test_partitioner.py::test_methods_and_compile_specs;
  here: test_two_methods_lower_with_a_report_per_method.
"""

import pytest

pytest.importorskip("executorch")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from aot_harness import compare, cpu_nodes, delegate_nodes, op_names, output_scales, payloads  # noqa: E402
from executorch_espnn import EspNNQuantizer, _native, delegation_report, to_espnn_edge  # noqa: E402
from executorch_espnn.runtime import run_edge_program  # noqa: E402
from models import espnn_quantize  # noqa: E402


def rand(*shape, seed=1):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def build(factory):
    """The module with weights independent of the tests that ran before."""
    torch.manual_seed(0)
    return factory().eval()


def calibration(shape, n=2, seed=10):
    return [(rand(*shape, seed=seed + i),) for i in range(n)]


def quantize_and_export(model, x, quantizer=None):
    """EspNNQuantizer with 2 random calibration batches plus the test input."""
    torch.manual_seed(0)
    converted = espnn_quantize(model, x, calibration(x[0].shape) + [x], quantizer)
    return converted, torch.export.export(converted, x)


def run_and_compare(edge, converted, x, label, method="forward"):
    outputs, calls = run_edge_program(edge, list(x), method)
    assert calls == len(delegate_nodes(edge, method))
    refs = converted(*x)
    return compare(outputs, list(refs) if isinstance(refs, (list, tuple)) else [refs], output_scales(converted),
                   label)


# --- strict mode -------------------------------------------------------------------------------

class CumsumInTheMiddle(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 4, 1)

    def forward(self, x):
        return self.b(torch.cumsum(F.relu(self.a(x)), dim=3))


def test_strict_mode_names_the_unsupported_node():
    x = (rand(1, 3, 6, 6),)
    converted, ep = quantize_and_export(build(CumsumInTheMiddle), x)
    with pytest.raises(RuntimeError) as e:
        to_espnn_edge(ep, allow_cpu_fallback=False)
    msg = str(e.value)
    print(msg)
    # the node, its op, the reason - and only that node
    assert "aten_cumsum_default" in msg and "aten.cumsum.default" in msg and "no ESP-NN lowering" in msg
    assert "1 op(s) would run on the CPU" in msg
    # with fallback (the default) the same program lowers around it
    edge = to_espnn_edge(ep)
    assert [n.name for n in cpu_nodes(edge)] == ["aten_cumsum_default"] and len(delegate_nodes(edge)) == 2
    run_and_compare(edge, converted, x, "cumsum fallback")


# --- per-module None ---------------------------------------------------------------------------

class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.relu = nn.Conv2d(8, 4, 1), nn.ReLU()

    def forward(self, x):
        return F.softmax(self.relu(self.conv(x)).flatten(1), dim=-1)


class FeaturesAndHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 1), nn.ReLU())
        self.head = Head()

    def forward(self, x):
        return self.head(self.features(x))


def test_module_name_none_stays_float_on_the_cpu_with_reasons():
    x = (rand(2, 3, 4, 4),)
    converted, ep = quantize_and_export(build(FeaturesAndHead), x, EspNNQuantizer().set_module_name("head", None))
    edge = to_espnn_edge(ep)
    report = delegation_report(edge)
    print(report)
    m = report.methods["forward"]
    # the quantized features: one partition with both convolutions and their relus
    assert len(m.partitions) == 1
    assert m.delegated_ops["aten.convolution.default"] == 2 and m.delegated_ops["aten.relu.default"] == 2
    # the head: conv, relu and softmax on the CPU, each with a reason saying it is float
    cpu = {c.op: c.reason for c in m.cpu_ops}
    for op in ("aten.convolution.default", "aten.relu.default", "aten._softmax.default"):
        assert op in cpu, f"{op} not on the CPU: {cpu}"
        assert "not quantized" in cpu[op] or "float" in cpu[op], (op, cpu[op])
    with pytest.raises(RuntimeError, match="aten.convolution.default"):
        to_espnn_edge(ep, allow_cpu_fallback=False)
    # the float head reads the dequantized int8 features: equal to the reference's
    # when the delegate matches; compare in the softmax's own terms
    (out,), _ = run_edge_program(edge, list(x))
    ref = converted(*x)
    err = float((out - ref.detach()).abs().max())
    print(f"float head after the delegate: max |diff| {err:.2e} (softmax outputs)")
    assert err < 1e-2


# --- hardtanh with keyword bounds --------------------------------------------------------------

class ConvHardtanh(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)

    def forward(self, x):
        return F.hardtanh(self.conv(x), min_val=-0.5, max_val=0.5)


def _with_keyword_bounds(gm):
    """torch.export writes the bounds positionally; graphs rewritten by other passes
    may carry them as keywords (the case under test)."""
    (ht,) = [n for n in gm.graph.nodes if n.target == torch.ops.aten.hardtanh.default]
    ht.args, ht.kwargs = (ht.args[0],), {"min_val": -0.5, "max_val": 0.5}
    gm.recompile()
    return gm


def test_hardtanh_with_keyword_bounds_fuses_into_the_conv():
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    x = (rand(1, 4, 6, 6),)
    gm = _with_keyword_bounds(torch.export.export(build(ConvHardtanh), x).module(check_guards=False))
    prepared = prepare_pt2e(gm, EspNNQuantizer())
    for batch in calibration(x[0].shape) + [x]:
        prepared(*batch)
    converted = convert_pt2e(prepared)
    edge = to_espnn_edge(torch.export.export(converted, x), allow_cpu_fallback=False)
    (blob,) = payloads(edge)
    ops = op_names(blob)
    print("XTS3 ops:", ops)
    # no clamp of its own: neither the standalone-clamp form (1x1 MAX_POOL2D) nor a requantize
    assert ops.count("CONV2D") == 1 and not {"MAX_POOL2D", "REQUANTIZE"} & set(ops)
    summary = _native.Program(blob).summary()
    conv = next(op for op in summary["ops"] if op["op"] == "CONV2D")
    out = summary["tensors"][conv["outputs"][0]]
    print("CONV2D params:", conv["params"], "output tensor:", out)
    # one output observer after the clamp: the int8 range spans [-0.5, 0.5]
    # (an observer on the conv itself would see its whole, wider range)
    scale, zp = out["scale"], out["zero_point"]
    assert abs(255 * scale - 1.0) < 0.02, scale
    lo, hi = conv["params"]["act_min"], conv["params"]["act_max"]
    assert abs((lo - zp) * scale + 0.5) <= scale and abs((hi - zp) * scale - 0.5) <= scale
    run_and_compare(edge, converted, x, "conv + hardtanh(min_val=, max_val=)")


# --- grouped convolution -----------------------------------------------------------------------

def test_grouped_conv_matches_within_1_lsb():
    x = (rand(2, 16, 9, 9),)
    converted, ep = quantize_and_export(build(lambda: nn.Conv2d(16, 16, 3, groups=4)), x)
    edge = to_espnn_edge(ep, allow_cpu_fallback=False)
    (blob,) = payloads(edge)
    summary = _native.Program(blob).summary()
    (conv,) = [op for op in summary["ops"] if op["op"] in ("CONV2D", "DEPTHWISE_CONV2D")]
    assert conv["op"] == "CONV2D" and conv["params"]["groups"] == 4
    (exact,) = run_and_compare(edge, converted, x, "Conv2d(16,16,3,groups=4)")
    assert exact > 0.9


# --- determinism -------------------------------------------------------------------------------

class SmallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU6())
        self.dw = nn.Sequential(nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8), nn.ReLU())
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        y = self.dw(self.c1(x))
        return F.softmax(self.fc(F.adaptive_avg_pool2d(y, 1).flatten(1)), dim=-1)


def _bytes(ep):
    edge = to_espnn_edge(ep)
    return payloads(edge), edge.to_executorch().buffer


def test_same_model_gives_identical_payload_and_pte_bytes():
    x = (rand(1, 3, 12, 12),)
    model = build(SmallNet)
    _, ep = quantize_and_export(model, x)
    blobs, pte = _bytes(ep)
    assert len(blobs) == 1
    again_blobs, again_pte = _bytes(ep)  # the same ExportedProgram lowered again
    assert again_blobs == blobs and again_pte == pte
    _, ep2 = quantize_and_export(model, x)  # the whole flow again from the module
    fresh_blobs, fresh_pte = _bytes(ep2)
    assert fresh_blobs == blobs and fresh_pte == pte
    print(f"payload {len(blobs[0])} bytes, .pte {len(pte)} bytes: identical three times")


# --- methods -----------------------------------------------------------------------------------

def test_two_methods_lower_with_a_report_per_method():
    xa, xb = (rand(1, 3, 8, 8),), (rand(1, 3, 6, 6, seed=2),)
    qa, epa = quantize_and_export(build(SmallNet), xa)
    qb, epb = quantize_and_export(build(CumsumInTheMiddle), xb)
    edge = to_espnn_edge({"forward": epa, "scan": epb})
    report = delegation_report(edge)
    print(report)
    assert set(report.methods) == {"forward", "scan"} and set(edge.methods) == {"forward", "scan"}
    fwd, scan = report.methods["forward"], report.methods["scan"]
    assert len(fwd.partitions) == 1 and fwd.cpu_ops == []
    assert "aten._softmax.default" in fwd.delegated_ops
    assert len(scan.partitions) == 2 and [c.op for c in scan.cpu_ops] == ["aten.cumsum.default"]
    d = report.to_dict()
    assert d["forward"]["num_cpu_ops"] == 0 and d["scan"]["num_cpu_ops"] == 1
    text = str(report)
    assert "method forward: 1 partition(s)" in text and "method scan: 2 partition(s)" in text
    run_and_compare(edge, qa, xa, "method forward", "forward")
    run_and_compare(edge, qb, xb, "method scan", "scan")
    # the report is read from the lowered graphs: lowering something else does not change it
    to_espnn_edge(epb)
    assert delegation_report(edge).to_dict() == d
    pte = edge.to_executorch()
    assert set(pte.methods) == {"forward", "scan"}
