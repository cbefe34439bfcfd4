"""Python misuse: what the AOT flow does with models and
configurations ESP-NN cannot serve.

Every case ends in one of two ways, never in a crash or a silently wrong
delegate:

* fallback (``to_espnn_edge``, the default): the nodes ESP-NN cannot take stay
  on the CPU and ``delegation_report`` gives each one's reason; whatever is
  delegated runs natively (``runtime.run_edge_program``) within 1 LSB of the
  ``convert_pt2e`` model;
* strict mode (``allow_cpu_fallback=False``): a ``RuntimeError`` whose message
  names each such node, its op and the same reason.

Misconfigured quantizers fail at once with a ``TypeError``/``ValueError``
naming the field. Cases that hand-craft a converted graph (extreme scales,
int32 biases) edit the ``convert_pt2e`` GraphModule before ``torch.export``.
"""

from __future__ import annotations

import dataclasses
import re

import pytest

pytest.importorskip("executorch")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torchao.quantization.pt2e import MinMaxObserver  # noqa: E402
from torchao.quantization.pt2e.quantizer import (  # noqa: E402
    QuantizationAnnotation, QuantizationSpec, Quantizer)

from executorch_espnn import delegation_report, output_scales, to_espnn_edge  # noqa: E402
from executorch_espnn import quantize as espnn_quantize  # noqa: E402
from executorch_espnn.runtime import run_edge_program  # noqa: E402
from executorch_espnn.quantizer import (  # noqa: E402
    EspNNQuantizationConfig, EspNNQuantizer, get_espnn_quantization_config)

aten = torch.ops.aten


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)  # module initialisation: the same weights whatever ran before


def rand(*shape, seed=1):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def quantize(model, inputs, quantizer=None):
    torch.manual_seed(0)
    return espnn_quantize(model, inputs, [inputs], quantizer=quantizer)


def float_outputs(converted, inputs):
    out = converted(*inputs)
    return list(out) if isinstance(out, (list, tuple)) else [out]


def quantized_output_scales(converted):
    """output_scales of a convert_pt2e GraphModule; None for a float nn.Module."""
    return output_scales(converted) if isinstance(converted, torch.fx.GraphModule) else None


def runs_like_pytorch(edge, converted, inputs, run_inputs=None):
    """Runs the lowered program (delegates natively) and compares every output with
    the convert_pt2e model: within 1 LSB for quantized outputs, exactly for float
    ones (they are computed by the same PyTorch ops). Returns the delegate calls."""
    run_inputs = list(run_inputs or inputs)
    outputs, calls = run_edge_program(edge, run_inputs)
    refs = float_outputs(converted, run_inputs)
    assert len(outputs) == len(refs)
    scales = quantized_output_scales(converted) or [None] * len(refs)
    for i, (o, r, s) in enumerate(zip(outputs, refs, scales)):
        assert o.shape == r.shape and o.dtype == r.dtype, (i, o.shape, r.shape, o.dtype, r.dtype)
        if s is None:
            torch.testing.assert_close(o, r, rtol=0, atol=0)
        else:
            lsb = float(((o.float() - r.float()).abs() / s).max())
            # a float16 output also carries float16 rounding of the dequantized value
            rounding = float(r.float().abs().max()) * 2.0**-10 / s if r.dtype == torch.float16 else 0.0
            assert lsb <= 1.0 + 1e-3 + rounding, f"output {i}: {lsb:.2f} LSB from convert_pt2e"
    return calls


def cpu_ops(edge) -> dict[str, tuple[str, str]]:
    """node name -> (op, reason) of every op delegation_report puts on the CPU."""
    return {c.node: (c.op, c.reason) for c in delegation_report(edge).methods["forward"].cpu_ops}


def delegated_ops(edge) -> dict[str, int]:
    return delegation_report(edge).methods["forward"].delegated_ops


def strict_message(ep) -> str:
    with pytest.raises(RuntimeError) as e:
        to_espnn_edge(ep, allow_cpu_fallback=False)
    assert type(e.value) is RuntimeError
    msg = str(e.value)
    assert msg.startswith("EspNNPartitioner(allow_cpu_fallback=False):"), msg
    return msg


def check_misuse(converted, inputs, expected, *, export_kw=None, run_inputs=None):
    """The two outcomes of a misuse case.

    expected: node name -> (op, regex of the reason). In fallback mode each of
    these nodes is on the CPU with a matching reason in delegation_report and the
    program still computes what convert_pt2e does (delegates within 1 LSB); in
    strict mode a RuntimeError lists each of them as "name (op): reason", with
    the reason the report gives. Returns (edge manager, cpu_ops, strict message).
    """
    ep = torch.export.export(converted, inputs, **(export_kw or {}))
    edge = to_espnn_edge(ep)
    cpu = cpu_ops(edge)
    for name, (op, pattern) in expected.items():
        assert name in cpu, f"{name} is not on the CPU: {sorted(cpu)}"
        assert cpu[name][0] == op and re.search(pattern, cpu[name][1]), (name, cpu[name])
    calls = runs_like_pytorch(edge, converted, inputs, run_inputs)
    assert calls == len(delegation_report(edge).methods["forward"].partitions)
    msg = strict_message(ep)
    for name, (op, _) in expected.items():
        assert f"  {name} ({op}): {cpu[name][1]}" in msg.splitlines(), f"strict mode does not name {name}:\n{msg}"
    return edge, cpu, msg


def set_output_scale(gm, op_target, scale, *, skip=0):
    """Sets the scale of the quantize node that gives the output of the (skip+1)-th
    `op_target` node its int8 form, and of the dequantize nodes reading it."""
    op = [n for n in gm.graph.nodes if n.op == "call_function" and n.target == op_target][skip]
    q = op
    while q.target != torch.ops.quantized_decomposed.quantize_per_tensor.default:
        (q,) = q.users
    for n in [q, *q.users]:
        n.args = (n.args[0], scale, *n.args[2:])
    gm.recompile()
    return gm


def set_input_scale(gm, op_target, scale):
    """Sets the scale of the quantize/dequantize pair feeding `op_target`'s first input."""
    op = next(n for n in gm.graph.nodes if n.op == "call_function" and n.target == op_target)
    dq = op.args[0]
    q = dq.args[0]
    for n in [q, *q.users]:
        n.args = (n.args[0], scale, *n.args[2:])
    gm.recompile()
    return gm


# ---- unsupported dtypes ----------------------------------------------------------------


class Int8AndHalfBranches(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Conv2d(3, 4, 3)
        self.h = nn.Conv2d(3, 4, 3).half()

    def forward(self, x):
        return self.q(x), F.relu(self.h(x.half())).float()


def test_float16_branch_stays_on_cpu_and_names_the_dtype():
    """EspNNQuantizer leaves float16 ops float; the delegate takes only the int8
    branch, the float16 conv stays on the CPU with its dtype in the reason."""
    x = (rand(1, 3, 6, 6),)
    converted = quantize(Int8AndHalfBranches(), x)
    edge, cpu, _ = check_misuse(converted, x, {
        "aten_convolution_default_1": ("aten.convolution.default",
                                       r"is torch\.float16, not dequantized from int8"),
        "aten_relu_default": ("aten.relu.default", r"is torch\.float16, not dequantized from int8"),
    })
    assert delegated_ops(edge)["aten.convolution.default"] == 1


def test_float16_dequantize_output_stays_on_cpu():
    """A hand-edited graph whose last dequantize produces float16: the convs are
    delegated, that dequantize is not (the delegate returns int8 or float32)."""
    x = (rand(1, 3, 6, 6),)
    converted = quantize(nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Conv2d(4, 4, 1)), x)
    last = [n for n in converted.graph.nodes
            if n.target == torch.ops.quantized_decomposed.dequantize_per_tensor.default][-1]
    last.kwargs = {"out_dtype": torch.float16}
    converted.recompile()
    edge, cpu, _ = check_misuse(converted, x, {
        "quantized_decomposed_dequantize_per_tensor_default_2": (
            "quantized_decomposed.dequantize_per_tensor.default", r"is torch\.float16 but its value is INT8$")})
    assert delegated_ops(edge)["aten.convolution.default"] == 2


class Int16Quantizer(Quantizer):
    """A third-party quantizer that annotates conv with int16 activations."""

    def annotate(self, gm):
        act = QuantizationSpec(dtype=torch.int16, quant_min=-32768, quant_max=32767,
                               qscheme=torch.per_tensor_affine, observer_or_fake_quant_ctr=MinMaxObserver)
        weight = get_espnn_quantization_config().weight
        for n in gm.graph.nodes:
            if n.target == aten.conv2d.default:
                n.meta["quantization_annotation"] = QuantizationAnnotation(
                    input_qspec_map={n.args[0]: act, n.args[1]: weight}, output_qspec=act, _annotated=True)
        return gm

    def validate(self, gm):
        pass


def test_int16_activations_from_another_quantizer_stay_on_cpu():
    x = (rand(1, 3, 6, 6),)
    converted = quantize(nn.Sequential(nn.Conv2d(3, 4, 3, bias=False)), x, Int16Quantizer())
    int16 = r"is torch\.int16; ESP-NN runs int8 only"
    edge, cpu, _ = check_misuse(converted, x, {
        "aten_convolution_default": ("aten.convolution.default", int16),
        "quantized_decomposed_quantize_per_tensor_default": ("quantized_decomposed.quantize_per_tensor.default",
                                                             int16),
    })
    assert delegation_report(edge).methods["forward"].partitions == []


def test_int16_config_rejected_by_the_config():
    good = get_espnn_quantization_config()
    int16 = dataclasses.replace(good.activation, dtype=torch.int16, quant_min=-32768, quant_max=32767)
    with pytest.raises(ValueError, match=r"^activation spec: ESP-NN needs dtype torch\.int8, got torch\.int16$"):
        EspNNQuantizationConfig(activation=int16, weight=good.weight)
    with pytest.raises(ValueError, match=r"^weight spec: ESP-NN needs dtype torch\.int8, got torch\.int16$"):
        EspNNQuantizationConfig(activation=good.activation,
                                weight=dataclasses.replace(good.weight, dtype=torch.int16))


# ---- dynamic shapes and batch ----------------------------------------------------------


def test_dynamic_batch_is_never_claimed_by_the_delegate():
    from torch.export import Dim

    x = (rand(2, 3, 6, 6),)
    converted = quantize(nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()), x)
    edge, cpu, _ = check_misuse(
        converted, x,
        {"aten_convolution_default": ("aten.convolution.default", r"has a dynamic shape \(s\d+, 3, 6, 6\); "
                                                                  r"XTS3 graphs are static")},
        export_kw={"dynamic_shapes": ({0: Dim("batch", min=1, max=8)},)},
        run_inputs=[rand(3, 3, 6, 6, seed=2)])  # a batch the export never saw
    assert delegation_report(edge).methods["forward"].partitions == []


class ConvFlattenLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.fc = nn.Conv2d(3, 4, 3), nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        return self.fc(F.relu(self.conv(x)).flatten(1))


def test_batch_two_conv_and_linear_are_delegated_and_correct():
    x = (rand(2, 3, 6, 6),)
    converted = quantize(ConvFlattenLinear(), x)
    edge = to_espnn_edge(torch.export.export(converted, x), allow_cpu_fallback=False)
    ops = delegated_ops(edge)
    assert ops["aten.convolution.default"] == 1 and ops["aten.linear.default"] == 1
    assert runs_like_pytorch(edge, converted, x) == 1


# ---- ops with parameters ESP-NN does not have ------------------------------------------


class UnsupportedParameters(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x, row):
        y = self.conv(x)
        return (F.avg_pool2d(y, 3, 2, padding=1, ceil_mode=True, count_include_pad=False),
                F.avg_pool2d(y, 3, 2, padding=1),  # count_include_pad=True with padding
                F.max_pool2d(y, 2, dilation=2),
                F.softmax(y, dim=0),
                F.softmax(row, dim=-1))


def test_op_parameters_esp_nn_lacks_stay_on_cpu():
    inputs = (rand(1, 3, 8, 8), rand(2, 600, seed=2))
    converted = quantize(UnsupportedParameters(), inputs)
    edge, cpu, _ = check_misuse(converted, inputs, {
        "aten_avg_pool2d_default": ("aten.avg_pool2d.default",
                                    r"^avg pool with ceil_mode that adds a partial window$"),
        "aten_avg_pool2d_default_1": ("aten.avg_pool2d.default",
                                      r"^avg pool with padding and count_include_pad=True"),
        "aten_max_pool2d_with_indices_default": ("aten.max_pool2d_with_indices.default",
                                                 r"^dilated max pool \[2, 2\]$"),
        "aten__softmax_default": ("aten._softmax.default", r"^softmax over dim 0 of a rank-4 tensor"),
        "aten__softmax_default_1": ("aten._softmax.default", r"^softmax row of 600 > 511"),
    })
    assert delegated_ops(edge)["aten.convolution.default"] == 1


class PaddingModes(nn.Module):
    def __init__(self):
        super().__init__()
        self.reflect = nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect")
        self.circular = nn.Conv2d(3, 4, 3, padding=1, padding_mode="circular")

    def forward(self, x):
        return self.reflect(x), self.circular(x)


def test_reflect_and_circular_padding_run_on_cpu_before_a_delegated_conv():
    """The padding modes become index/slice ops in the edge graph: those stay on
    the CPU (each with a reason), the convolutions after them are delegated."""
    x = (rand(1, 3, 6, 6),)
    converted = quantize(PaddingModes(), x)
    ep = torch.export.export(converted, x)
    edge = to_espnn_edge(ep)
    assert delegated_ops(edge)["aten.convolution.default"] == 2
    cpu = cpu_ops(edge)
    assert cpu and all(reason for _, reason in cpu.values())
    assert {"aten.index.Tensor", "aten.slice_scatter.default"} <= {op for op, _ in cpu.values()}
    assert runs_like_pytorch(edge, converted, x) == len(delegation_report(edge).methods["forward"].partitions)
    msg = strict_message(ep)
    for name, (op, reason) in cpu.items():
        assert f"  {name} ({op}): {reason}" in msg.splitlines()


def test_conv_with_more_than_65535_output_channels_stays_on_cpu():
    x = (rand(1, 1, 1, 1),)
    converted = quantize(nn.Conv2d(1, 65536, 1), x)
    check_misuse(converted, x, {
        "aten_convolution_default": ("aten.convolution.default",
                                     r"^output channels = 65536 exceeds ESP-NN's uint16 limit 65535$")})


def test_linear_with_more_than_65535_output_features_reports_why():
    x = (rand(1, 2),)
    converted = quantize(nn.Linear(2, 65536), x)
    ep = torch.export.export(converted, x)
    reasons = [reason for _, reason in cpu_ops(to_espnn_edge(ep)).values()]
    assert any("65536 exceeds ESP-NN's uint16 limit 65535" in r for r in reasons), reasons


# ---- scales that make a multiplier overflow or underflow -------------------------------


class Elementwise(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.conv2 = nn.Conv2d(3, 4, 1), nn.Conv2d(3, 4, 3)

    def forward(self, a, b, x, row):
        return a + b, a * b, self.conv(x).mean((2, 3)), F.softmax(row, -1), self.conv2(x)


def test_extreme_scales_fall_back_or_compute_exactly():
    """Output scales of 1e-12 make the requantization multipliers of add, mul and
    mean overflow, an input scale of 1e-12 takes softmax's below TFLite's
    QuantizeMultiplierGreaterThanOne; an output scale of 1e12 makes a conv's
    multiplier underflow to 0 (every output is the zero point), which is exact."""
    inputs = (rand(1, 4, 4, 4), rand(1, 4, 4, 4, seed=2), rand(1, 3, 6, 6, seed=3), rand(2, 8, seed=4))
    converted = quantize(Elementwise(), inputs)
    set_output_scale(converted, aten.add.Tensor, 1e-12)
    set_output_scale(converted, aten.mul.Tensor, 1e-12)
    set_output_scale(converted, aten.mean.dim, 1e-12)
    set_input_scale(converted, aten.softmax.int, 1e-12)
    set_output_scale(converted, aten.conv2d.default, 1e12, skip=1)
    edge, cpu, _ = check_misuse(converted, inputs, {
        "aten_add_tensor": ("aten.add.Tensor", r"-> 9\.99\d*e-13: multiplier \d+\.\d+ must be in \(0, 1\)"),
        "aten_mul_tensor": ("aten.mul.Tensor",
                            r"native parser rejected the program: op \d+ \(MUL\): output_shift = \d+ is not in "
                            r"-31\.\.14"),
        "aten_mean_dim": ("aten.mean.dim", r"\(MEAN_HW\): shift = \d+: 255\*H\*W << shift overflows int32"),
        "aten__softmax_default": ("aten._softmax.default",
                                  r"^ESP-NN parameters cannot be derived for this node: ValueError: "),
    })
    assert delegated_ops(edge)["aten.convolution.default"] == 2  # the conv before the mean, and the underflow


class ThreeConvs(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.dw = nn.Conv2d(3, 3, 3, groups=3)
        self.tconv = nn.ConvTranspose2d(3, 2, 3)

    def forward(self, x):
        return self.conv(x), self.dw(x), self.tconv(x)


def test_conv_multiplier_overflow_never_gives_a_wrong_delegate():
    """Output scale 1e-12: s_in * s_w / s_out ~ 2^25, a left shift the int32
    accumulator cannot take. Either the convs stay on the CPU with a reason, or
    they compute what convert_pt2e does."""
    x = (rand(1, 3, 6, 6),)
    converted = quantize(ThreeConvs(), x)
    set_output_scale(converted, aten.conv2d.default, 1e-12)
    set_output_scale(converted, aten.conv2d.default, 1e-12, skip=1)
    set_output_scale(converted, aten.conv_transpose2d.input, 1e-12)
    ep = torch.export.export(converted, x)
    edge = to_espnn_edge(ep)
    cpu = cpu_ops(edge)
    assert all(reason for _, reason in cpu.values())
    runs_like_pytorch(edge, converted, x)


# ---- int32 bias overflow -----------------------------------------------------------------


class FloatBiasQuantizer(Quantizer):
    """Quantizes conv input, weight and output with ESP-NN's specs but leaves the
    bias float (as XNNPACK's quantizer does): the lowering quantizes it."""

    def annotate(self, gm):
        c = get_espnn_quantization_config()
        for n in gm.graph.nodes:
            if n.target == aten.conv2d.default:
                n.meta["quantization_annotation"] = QuantizationAnnotation(
                    input_qspec_map={n.args[0]: c.activation, n.args[1]: c.weight},
                    output_qspec=c.activation, _annotated=True)
        return gm

    def validate(self, gm):
        pass


def conv_with_bias(value):
    conv = nn.Conv2d(3, 4, 3)
    with torch.no_grad():
        conv.bias.fill_(value)
    return conv


TINY_INPUT = (torch.rand(1, 3, 6, 6, generator=torch.Generator().manual_seed(5)) * 1e-4,)


def test_float_bias_overflowing_int32_stays_on_cpu():
    """bias 100 at s_in * s_w ~ 1e-9: 1e11 does not fit int32."""
    converted = quantize(conv_with_bias(100.0), TINY_INPUT, FloatBiasQuantizer())
    check_misuse(converted, TINY_INPUT, {
        "aten_convolution_default": ("aten.convolution.default",
                                     r"^bias of aten_convolution_default does not fit int32 at scale input x "
                                     r"weight$")})


def test_derived_int32_bias_saturated_by_convert_stays_on_cpu():
    """EspNNQuantizer's int32 bias (scale s_in * s_w): convert_pt2e clamps a bias
    that does not fit (here it even wraps +100 to -2^31). Delegated, the int32
    accumulator would overflow too; the conv stays on the CPU instead."""
    converted = quantize(conv_with_bias(100.0), TINY_INPUT)
    edge, cpu, _ = check_misuse(converted, TINY_INPUT, {
        "aten_convolution_default": ("aten.convolution.default",
                                     r"^bias \w+ of aten_convolution_default is at the int32 limit")})
    assert delegation_report(edge).methods["forward"].partitions == []


def test_in_range_bias_that_overflows_the_accumulator_is_not_delegated_wrongly():
    """An int32 bias of 2^31 - 2^16 (inside int32) plus a positive sum of products
    leaves int32 in the accumulator."""
    x = (torch.rand(1, 3, 6, 6, generator=torch.Generator().manual_seed(6)),)
    conv = nn.Conv2d(3, 4, 3)
    with torch.no_grad():
        conv.weight.uniform_(0.5, 1.0)
    converted = quantize(conv, x)
    (bias_dq,) = [n for n in converted.graph.nodes
                  if n.target == torch.ops.quantized_decomposed.dequantize_per_channel.default
                  and n.args[6] == torch.int32]
    holder = bias_dq.args[0]
    setattr(converted, holder.target, torch.full((4,), 2**31 - 2**16, dtype=torch.int32))
    edge = to_espnn_edge(torch.export.export(converted, x))
    runs_like_pytorch(edge, converted, x)


# ---- quantizer misuse --------------------------------------------------------------------


def test_per_tensor_weight_config_lowers():
    x = (rand(2, 3, 6, 6),)
    converted = quantize(ConvFlattenLinear(), x, EspNNQuantizer(get_espnn_quantization_config(per_channel=False)))
    edge = to_espnn_edge(torch.export.export(converted, x))
    assert runs_like_pytorch(edge, converted, x) == 1


def test_unexported_module_rejected_by_the_quantizer():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()).eval()
    x = (rand(1, 3, 6, 6),)
    for hook in ("annotate", "transform_for_annotation"):
        with pytest.raises(TypeError, match=rf"^EspNNQuantizer\.{hook}: expected the torch\.fx\.GraphModule "
                                            r"returned by torch\.export\.export\(model, args\)\.module\(\), "
                                            r"got Sequential$"):
            getattr(EspNNQuantizer(), hook)(model)
    with pytest.raises(TypeError, match=r"^EspNNQuantizer\.annotate: got an ExportedProgram; pass its graph "
                                        r"module"):
        EspNNQuantizer().annotate(torch.export.export(model, x))
    with pytest.raises(TypeError, match=r"node 'input_1' \(input\) has no 'val' metadata: this graph was not "
                                        r"produced by torch\.export"):
        EspNNQuantizer().annotate(torch.fx.symbolic_trace(model))


class FloatNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return F.softmax(F.max_pool2d(F.relu(self.conv(x)), 2), dim=1)


def test_unannotated_float_model_stays_on_cpu_node_by_node():
    """A float model given to to_espnn_edge (no quantizer ran): nothing is
    delegated, every op has a reason; strict mode names the first node first."""
    x = (rand(1, 3, 6, 6),)
    model = FloatNet().eval()
    not_q = r"not dequantized from int8 .*the input is not quantized$"
    edge, cpu, msg = check_misuse(model, x, {
        "aten_convolution_default": ("aten.convolution.default", not_q),
        "aten_relu_default": ("aten.relu.default", not_q),
        "aten_max_pool2d_with_indices_default": ("aten.max_pool2d_with_indices.default", not_q),
        "aten__softmax_default": ("aten._softmax.default", not_q),
    })
    assert delegation_report(edge).methods["forward"].partitions == []
    assert msg.splitlines()[1].startswith("  aten_convolution_default (aten.convolution.default): input x of ")


def test_wrong_observer_or_dtype_rejected_by_the_quantizer():
    good = get_espnn_quantization_config()
    uint8 = dataclasses.replace(good.activation, dtype=torch.uint8, quant_min=0, quant_max=255)
    with pytest.raises(ValueError, match=r"^activation spec: ESP-NN needs dtype torch\.int8, got torch\.uint8$"):
        EspNNQuantizationConfig(activation=uint8, weight=good.weight)
    # prepare_pt2e would silently override an observer's own dtype/range with the spec's
    quint8 = get_espnn_quantization_config(act_observer=MinMaxObserver.with_args(dtype=torch.quint8))
    with pytest.raises(ValueError, match=r"^EspNNQuantizer: the activation observer is bound to "
                                         r"dtype=torch\.quint8, but ESP-NN's activation spec has dtype=torch\.int8"):
        EspNNQuantizer(quint8)
    uint8_range = get_espnn_quantization_config(
        act_observer=MinMaxObserver.with_args(quant_min=0, quant_max=255))
    with pytest.raises(ValueError, match=r"the activation observer is bound to quant_min=0, but ESP-NN's "
                                         r"activation spec has quant_min=-128"):
        EspNNQuantizer().set_module_name("head", uint8_range)
    int32_w = get_espnn_quantization_config(per_channel=False,
                                            weight_observer=MinMaxObserver.with_args(dtype=torch.qint32))
    with pytest.raises(ValueError, match=r"the weight observer is bound to dtype=torch\.qint32"):
        EspNNQuantizer().set_module_type(nn.Conv2d, int32_w)
    # legacy spellings of the spec's own values are fine
    EspNNQuantizer(get_espnn_quantization_config(act_observer=MinMaxObserver.with_args(dtype=torch.qint8)))
    with pytest.raises(TypeError, match=r"^expected an EspNNQuantizationConfig .* got QuantizationSpec$"):
        EspNNQuantizer(good.activation)
