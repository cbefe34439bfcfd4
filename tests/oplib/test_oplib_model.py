"""Operator-library mode end to end: int8 models (conv, depthwise conv, add,
linear; conv and pools; EspNNQuantizer) lowered to the delegate and to espnn:: ops, both run
by ExecuTorch's pip runtime: the outputs are identical byte for byte."""

import pytest
import torch

pytest.importorskip("executorch.runtime")

from executorch_espnn import pipeline, to_espnn_edge  # noqa: E402
from executorch_espnn.oplib import OplibError, check_kernels, to_espnn_oplib  # noqa: E402
from executorch_espnn.oplib import lowering as oplib_lowering  # noqa: E402
from executorch_espnn.runtime import run_pte  # noqa: E402
from executorch_espnn.partition.report import pte_program  # noqa: E402


class ConvDwAddLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.dw = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.fc = torch.nn.Linear(6, 5)

    def forward(self, x):
        a = torch.relu(self.conv(x))
        return self.fc(a + self.dw(a))


class ConvPools(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)
        return torch.nn.functional.avg_pool2d(y, 2, stride=1)


class GroupedDilated(torch.nn.Module):
    """Convs the runtime runs through its staged path, which needs scratch."""

    def __init__(self):
        super().__init__()
        self.grouped = torch.nn.Conv2d(4, 8, 3, padding=1, groups=2)
        self.dilated = torch.nn.Conv2d(8, 8, 3, padding=2, dilation=2)

    def forward(self, x):
        return self.dilated(torch.relu(self.grouped(x)))


def _quantized_export(model, shape):
    torch.manual_seed(0)
    example = (torch.randn(*shape),)
    calib = [(torch.randn(*shape),) for _ in range(4)]
    return torch.export.export(pipeline.quantize(model.eval(), example, calib), example)


@pytest.fixture(scope="module")
def exported():
    return _quantized_export(ConvDwAddLinear(), (1, 3, 6, 6))


@pytest.fixture(scope="module")
def lowered(exported):
    delegate = to_espnn_edge(exported, allow_cpu_fallback=False).to_executorch().buffer
    oplib = to_espnn_oplib(exported).to_executorch().buffer
    return delegate, oplib, [(torch.randn(1, 3, 6, 6) * 2,) for _ in range(3)]


def _operators(pte):
    return {op.name for plan in pte_program(pte).execution_plan for op in plan.operators}


def test_oplib_program_uses_espnn_ops_and_no_delegate(lowered):
    _, oplib, _ = lowered
    ops = _operators(oplib)
    assert {"espnn::quantized_conv2d", "espnn::quantized_depthwise_conv2d", "espnn::quantized_add",
            "espnn::quantized_linear", "espnn::quantize_per_tensor", "espnn::dequantize_per_tensor"} <= ops
    assert not any(op.startswith("quantized_decomposed::") for op in ops), ops
    assert all(len(plan.delegates) == 0 for plan in pte_program(oplib).execution_plan)


def test_no_permute_undoes_another(exported):
    """conv -> depthwise conv: the NHWC result feeds the depthwise conv
    directly (the pair of inverse permutes between them is gone)."""
    graph = to_espnn_oplib(exported).exported_program().graph
    dw = next(n for n in graph.nodes if "quantized_depthwise_conv2d" in str(n.target))
    assert "quantized_conv2d" in str(dw.args[0].target)
    permutes = [n for n in graph.nodes if "permute" in str(n.target)]
    assert not any("permute" in str(p.args[0].target) for p in permutes)


def test_oplib_outputs_equal_delegate_byte_for_byte(lowered):
    delegate, oplib, inputs = lowered
    for x in inputs:
        (want,) = run_pte(delegate, x)
        (got,) = run_pte(oplib, x)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.numpy().tobytes() == want.numpy().tobytes()


def test_reference_implementations_equal_the_kernels(exported, lowered):
    """The lowered program run eagerly (the torch.library reference of every
    espnn:: op) gives the .pte's bytes."""
    _, oplib, inputs = lowered
    eager = to_espnn_oplib(exported).exported_program().module()
    for x in inputs:
        (want,) = run_pte(oplib, x)
        assert eager(*x).numpy().tobytes() == want.numpy().tobytes()


def test_a_kernel_refusing_its_parameters_fails_the_run_with_the_runtime_message(exported, capfd):
    """The parameter check is the runtime's (ADD's validate): an empty
    activation range fails execute, and ExecuTorch's log names the op and why."""
    edge = to_espnn_oplib(exported)
    (add,) = [n for n in edge.exported_program().graph.nodes if "quantized_add" in str(n.target)]
    add.args = add.args[:-2] + (127, -128)  # act_min > act_max
    pte = edge.to_executorch().buffer
    with pytest.raises(RuntimeError):
        run_pte(pte, (torch.randn(1, 3, 6, 6),))
    err = capfd.readouterr().err
    assert "espnn::quantized_add.out: " in err and "act_min" in err, err


def test_pools_lowered_both_ways_give_the_same_bytes():
    ep = _quantized_export(ConvPools(), (1, 3, 8, 8))
    delegate = to_espnn_edge(ep, allow_cpu_fallback=False).to_executorch().buffer
    oplib = to_espnn_oplib(ep).to_executorch().buffer
    assert {"espnn::quantized_max_pool2d", "espnn::quantized_avg_pool2d"} <= _operators(oplib)
    for _ in range(3):
        x = (torch.randn(1, 3, 8, 8) * 2,)
        assert run_pte(oplib, x)[0].numpy().tobytes() == run_pte(delegate, x)[0].numpy().tobytes()


def test_scratch_is_a_buffer_executorch_plans():
    """The staged convs get their scratch from ExecuTorch's memory plan (an
    empty tensor sized by the runtime's rule, in the method's arena), and
    still give the delegate's bytes."""
    ep = _quantized_export(GroupedDilated(), (1, 4, 8, 8))
    edge = to_espnn_oplib(ep)
    convs = [n for n in edge.exported_program().graph.nodes if "quantized_conv2d" in str(n.target)]
    scratch = [n.args[-1] for n in convs]
    assert len(convs) == 2 and all(s is not None and "empty" in str(s.target) for s in scratch)
    assert all(s.meta["val"].dtype == torch.uint8 and s.meta["val"].numel() > 0 for s in scratch)
    oplib = edge.to_executorch().buffer
    delegate = to_espnn_edge(ep, allow_cpu_fallback=False).to_executorch().buffer
    for _ in range(3):
        x = (torch.randn(1, 4, 8, 8) * 2,)
        assert run_pte(oplib, x)[0].numpy().tobytes() == run_pte(delegate, x)[0].numpy().tobytes()


def test_a_program_planned_with_too_little_scratch_takes_it_from_the_temp_allocator():
    """A .pte lowered where ESP-NN needs less scratch than the target's (the
    host's ANSI build vs an ESP32-S3's SIMD kernels) still runs: the kernel
    takes what is missing from ExecuTorch's temp allocator, not the heap."""
    ep = _quantized_export(GroupedDilated(), (1, 4, 8, 8))
    edge = to_espnn_oplib(ep)
    graph = edge.exported_program().graph
    for conv in [n for n in graph.nodes if "quantized_conv2d" in str(n.target)]:
        empty = conv.args[-1]
        empty.args = ([16],) + empty.args[1:]  # less than the staged conv needs
        empty.meta["val"] = empty.meta["val"].new_empty((16,))
    oplib = edge.to_executorch().buffer
    delegate = to_espnn_edge(ep, allow_cpu_fallback=False).to_executorch().buffer
    x = (torch.randn(1, 4, 8, 8) * 2,)
    assert run_pte(oplib, x)[0].numpy().tobytes() == run_pte(delegate, x)[0].numpy().tobytes()


class ConvCat(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        return torch.cat((y, y), 1)


def test_a_pattern_without_espnn_op_stays_on_portable_kernels():
    """cat has no espnn:: op: it runs in float on ExecuTorch's portable
    kernels between an espnn dequantize and quantize, and the program runs."""
    ep = _quantized_export(ConvCat(), (1, 3, 6, 6))
    pte = to_espnn_oplib(ep).to_executorch().buffer
    ops = _operators(pte)
    assert "espnn::quantized_conv2d" in ops and "aten::cat" in ops
    x = torch.randn(1, 3, 6, 6)
    (got,) = run_pte(pte, (x,))
    want = ep.module()(x)
    assert got.shape == want.shape and torch.allclose(got, want, atol=0.1 * float(want.abs().max()))


def test_missing_kernel_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(oplib_lowering, "registered_kernels", lambda: frozenset({"espnn::quantized_add.out"}))
    with pytest.raises(OplibError, match=r"no C\+\+ kernel registered for espnn::quantized_linear\.out"):
        check_kernels(["quantized_add", "quantized_linear"])
