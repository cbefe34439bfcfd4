"""EspNNPartitioner / to_espnn_edge behaviour: strict mode, CPU fallback with
several delegates, determinism, parser rejections falling back to the CPU,
reports, methods, compile specs."""

import pytest

pytest.importorskip("executorch")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from aot_harness import (  # noqa: E402
    compare, cpu_nodes, delegate_nodes, export, output_scales, payloads, run_lowered)
from executorch_espnn import (  # noqa: E402
    EspNNBackend, EspNNCompileSpecBuilder, EspNNPartitioner, delegation_report, to_espnn_edge)


def rand(*shape, seed=1):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class CumsumInTheMiddle(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 4, 1)

    def forward(self, x):
        y = F.relu(self.a(x))
        return self.b(torch.cumsum(y, dim=3))


class ConvReluLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.c, self.fc = nn.Conv2d(3, 8, 3), nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(F.relu(self.c(x)).mean((2, 3)))


@pytest.fixture(scope="module")
def cumsum_model(quantize):
    x = (rand(1, 3, 6, 6),)
    torch.manual_seed(0)
    converted = quantize(CumsumInTheMiddle(), x)
    return converted, export(converted, x), x


@pytest.fixture(scope="module")
def conv_linear(quantize):
    x = (rand(2, 3, 7, 7),)
    torch.manual_seed(0)
    converted = quantize(ConvReluLinear(), x)
    return converted, export(converted, x), x


def test_strict_mode_names_the_unsupported_node(cumsum_model):
    _, ep, _ = cumsum_model
    with pytest.raises(RuntimeError) as e:
        to_espnn_edge(ep, allow_cpu_fallback=False)
    msg = str(e.value)
    assert "cumsum" in msg and "aten.cumsum.default" in msg and "no ESP-NN lowering" in msg
    assert "1 op(s) would run on the CPU" in msg  # only the cumsum: its quantize/dequantize neighbours are delegated


def test_fallback_runs_two_delegates_around_a_cpu_op(cumsum_model):
    converted, ep, x = cumsum_model
    edge = to_espnn_edge(ep)
    assert len(delegate_nodes(edge)) == 2
    assert [n.name for n in cpu_nodes(edge)] == ["aten_cumsum_default"]
    outputs, calls = run_lowered(edge, list(x))
    assert calls == 2
    compare(outputs, [converted(*x)], output_scales(converted), "cumsum fallback")
    report = delegation_report(edge)
    cpu = report.to_dict()["forward"]["cpu_ops"]
    assert cpu == [{"node": "aten_cumsum_default", "op": "aten.cumsum.default",
                    "reason": "no ESP-NN lowering for aten.cumsum.default", "kind": "compute"}]
    table = str(report)
    assert "2 partition(s)" in table and "aten.cumsum.default" in table and "CONV2D" in table
    assert table.splitlines()[0].endswith(", 1 CPU op(s)")  # the cumsum; nothing on the CPU to quantize


def test_lowering_is_deterministic(conv_linear):
    _, ep, _ = conv_linear
    first, second = payloads(to_espnn_edge(ep)), payloads(to_espnn_edge(ep))
    assert len(first) == 1 and first == second


def test_parser_rejection_keeps_the_op_on_the_cpu(conv_linear, monkeypatch):
    """A partition the native parser refuses is not an export failure: the op it
    names stays on the CPU with the parser's message, the rest is delegated."""
    from executorch_espnn.xts3_writer import Xts3Writer

    original = Xts3Writer.op

    def bad_conv_stride(self, name, inputs, outputs, **params):
        if name == "CONV2D":
            params["stride_h"] = 0
        return original(self, name, inputs, outputs, **params)

    monkeypatch.setattr(Xts3Writer, "op", bad_conv_stride)
    converted, ep, x = conv_linear
    edge = to_espnn_edge(ep)
    cpu = {c["op"]: c["reason"] for c in delegation_report(edge).to_dict()["forward"]["cpu_ops"]}
    reason = cpu["aten.convolution.default"]
    assert "native parser rejected" in reason and "CONV2D" in reason and "stride_h" in reason
    assert "aten.linear.default" not in cpu  # still delegated (its own partition)
    assert len(delegate_nodes(edge)) == 1
    outputs, _ = run_lowered(edge, list(x))
    compare(outputs, [converted(*x)], output_scales(converted), "conv on CPU")

    # preprocess itself refuses to produce bytes the parser rejects
    monkeypatch.setattr(Xts3Writer, "op", original)
    gm = to_espnn_edge(ep).exported_program().graph_module
    lowered = next(m for name, m in gm.named_children() if name.startswith("lowered_module"))
    monkeypatch.setattr(Xts3Writer, "op", bad_conv_stride)
    with pytest.raises(RuntimeError, match="native parser rejected.*stride_h"):
        EspNNBackend.preprocess(lowered.original_module, lowered.compile_specs)


def test_a_linear_left_on_the_cpu_is_decomposed(conv_linear, monkeypatch):
    """aten.linear is kept whole only where it is delegated; portable kernels have no
    linear, so one that stays on the CPU must reach them decomposed."""
    from executorch_espnn.xts3_writer import Xts3Writer

    original = Xts3Writer.op

    def bad_fc(self, name, inputs, outputs, **params):
        if name == "FULLY_CONNECTED":
            params["act_min"], params["act_max"] = 100, 50  # an empty clamp: the parser refuses it
        return original(self, name, inputs, outputs, **params)

    monkeypatch.setattr(Xts3Writer, "op", bad_fc)
    converted, ep, x = conv_linear
    edge = to_espnn_edge(ep)
    cpu_ops = {n.target.__name__ for n in cpu_nodes(edge)}
    assert "aten.linear.default" not in cpu_ops and "aten.addmm.default" in cpu_ops, cpu_ops
    outputs, _ = run_lowered(edge, list(x))
    # The delegated mean may round 1 LSB away from PyTorch's; the float linear after it
    # scales that difference, so this composition is only held to 2 LSB.
    compare(outputs, [converted(*x)], output_scales(converted), "linear on CPU", max_lsb=2.0)


def test_float_ops_stay_on_cpu_with_reason():
    """ESP-NN runs int8 only: a float (unquantized) conv is not delegated, with a reason
    saying so; with fallback the program is unchanged and nothing is delegated."""
    x = (rand(1, 3, 6, 6),)
    torch.manual_seed(0)
    ep = torch.export.export(nn.Sequential(nn.Conv2d(3, 4, 1), nn.ReLU()).eval(), x)
    with pytest.raises(RuntimeError, match=r"aten_convolution_default \(aten.convolution.default\): "
                                           r".*not quantized"):
        to_espnn_edge(ep, allow_cpu_fallback=False)
    edge = to_espnn_edge(ep)
    assert delegate_nodes(edge) == []
    reasons = {c.op: c.reason for c in delegation_report(edge).methods["forward"].cpu_ops}
    assert "not quantized" in reasons["aten.convolution.default"]


def test_methods_and_compile_specs(conv_linear, cumsum_model):
    _, ep, x = conv_linear
    _, ep2, x2 = cumsum_model
    specs = EspNNCompileSpecBuilder().set_target("esp32").build()
    edge = to_espnn_edge({"forward": ep, "other": ep2}, compile_specs=specs)
    report = delegation_report(edge)
    assert set(report.methods) == {"forward", "other"}
    assert len(report.methods["forward"].partitions) == 1 and len(report.methods["other"].partitions) == 2
    gm = edge.exported_program("other").graph_module
    lowered = [m for name, m in gm.named_children() if name.startswith("lowered_module")]
    assert all(m.backend_id == "EspNNBackend" for m in lowered)
    assert all([(s.key, s.value) for s in m.compile_specs] == [("target", b"esp32")] for m in lowered)
    # the same bytes for both targets (format v1 has nothing target-specific)
    assert payloads(edge) == payloads(to_espnn_edge(ep))


def test_compile_spec_builder_and_errors(conv_linear):
    from executorch_espnn.compile_spec import CompileOptions

    assert [(s.key, s.value) for s in EspNNCompileSpecBuilder().build()] == [("target", b"esp32s3")]
    with pytest.raises(ValueError, match="esp32c6"):
        EspNNCompileSpecBuilder().set_target("esp32c6")
    from executorch.exir.backend.compile_spec_schema import CompileSpec

    with pytest.raises(ValueError, match="unknown EspNNBackend compile spec 'speed'"):
        CompileOptions.from_specs([CompileSpec("speed", b"1")])
    with pytest.raises(ValueError, match="unknown EspNNBackend compile spec"):
        EspNNPartitioner([CompileSpec("speed", b"1")])
    converted, _, x = conv_linear
    with pytest.raises(TypeError, match="torch.export.export"):
        to_espnn_edge(converted)
