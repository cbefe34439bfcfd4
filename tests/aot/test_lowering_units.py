"""Unit checks of the lowering framework's pieces that the end-to-end tests
cannot reach with the test quantizer: int32 bias handling, clamp bounds, the
layout algebra."""

import pytest

pytest.importorskip("executorch")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torchao.quantization.pt2e  # noqa: E402,F401  (registers quantized_decomposed ops)

from executorch_espnn.lowering.context import CheckContext  # noqa: E402
from executorch_espnn.lowering.graph import ConstantSource, Unsupported  # noqa: E402
from executorch_espnn.lowering.quant import QParams, bias  # noqa: E402
from executorch_espnn.lowering.values import CHANNELS_LAST, CONTIG, same_bytes, transpose_perm  # noqa: E402
from executorch_espnn.quant_params import ACT_RELU, ACT_RELU6, ACT_RELU_N1_TO_1, activation_range  # noqa: E402

qd = torch.ops.quantized_decomposed


def _bias_node(data, per_channel_scales=None, scale=None):
    """An fx graph holding `data` as a constant behind a dequantize (how a quantizer
    that quantizes the bias to int32 leaves it)."""
    root = torch.nn.Module()
    root.b = data
    g = torch.fx.Graph()
    b = g.get_attr("b")
    if per_channel_scales is None:
        dq = g.call_function(qd.dequantize_per_tensor.default, (b, scale, 0, -(2**31), 2**31 - 1, torch.int32))
    else:
        root.s = per_channel_scales
        root.z = torch.zeros(len(per_channel_scales), dtype=torch.int64)
        dq = g.call_function(qd.dequantize_per_channel.default,
                             (b, g.get_attr("s"), g.get_attr("z"), 0, -(2**31), 2**31 - 1, torch.int32))
    g.output(dq)
    gm = torch.fx.GraphModule(root, g)
    return dq, CheckContext(ConstantSource(graph_module=gm), lambda n: True, limits={})


def test_int32_bias_with_the_espnn_scale_is_used_verbatim():
    s_in, s_w = 0.02, np.array([0.01, 0.005])
    data = torch.tensor([1234567, -7], dtype=torch.int32)
    dq, cc = _bias_node(data, torch.tensor(np.float32(s_in) * s_w.astype(np.float32), dtype=torch.float64))
    s_w32 = s_w.astype(np.float32).astype(np.float64)
    assert bias(dq, dq, cc, s_in, s_w32).tolist() == [1234567, -7]


def test_int32_bias_at_another_scale_is_requantized():
    dq, cc = _bias_node(torch.tensor([100, -50], dtype=torch.int32), scale=0.001)
    # real values 0.1 and -0.05 at s_in * s_w = 0.5 * [0.01, 0.1]
    assert bias(dq, dq, cc, 0.5, np.array([0.01, 0.1], np.float64)).tolist() == [20, -1]


def test_float_bias_is_quantized_and_must_fit_int32():
    root = torch.nn.Module()
    root.b = torch.tensor([0.3, -0.25, 1e9])
    g = torch.fx.Graph()
    node = g.get_attr("b")
    g.output(node)
    gm = torch.fx.GraphModule(root, g)
    cc = CheckContext(ConstantSource(graph_module=gm), lambda n: True, limits={})
    with pytest.raises(Unsupported, match="does not fit int32"):
        bias(node, node, cc, 0.1, np.array([0.01, 0.01, 0.01]))
    gm.b = torch.tensor([0.3, -0.25, 0.0])
    assert bias(node, node, cc, 0.1, np.array([0.01, 0.01, 0.01])).tolist() == [300, -250, 0]


@pytest.mark.parametrize("scale,zp", [(0.05, -128), (0.0235, 3), (1 / 30, -20), (0.1, 127)])
def test_clamp_bounds_follow_tflite_activation_range(scale, zp):
    q = QParams(scale, zp)
    assert (max(-128, q.quantize_bound(0.0)), 127) == activation_range(ACT_RELU, scale, zp)
    assert (max(-128, q.quantize_bound(0.0)), min(127, q.quantize_bound(6.0))) == \
        activation_range(ACT_RELU6, scale, zp)
    assert (max(-128, q.quantize_bound(-1.0)), min(127, q.quantize_bound(1.0))) == \
        activation_range(ACT_RELU_N1_TO_1, scale, zp)


def test_layouts():
    assert transpose_perm(4, CONTIG, CHANNELS_LAST) == (0, 2, 3, 1)
    assert transpose_perm(4, CHANNELS_LAST, CONTIG) == (0, 3, 1, 2)
    assert transpose_perm(3, CONTIG, CHANNELS_LAST) == (0, 2, 1)
    assert same_bytes((2, 8, 1, 1), CONTIG, CHANNELS_LAST)
    assert same_bytes((1, 1, 5, 7), CONTIG, CHANNELS_LAST)
    assert not same_bytes((1, 8, 2, 1), CONTIG, CHANNELS_LAST)


def _strict_error(quantize, model, x):
    from executorch_espnn import to_espnn_edge

    torch.manual_seed(0)
    ep = torch.export.export(quantize(model, x), x)
    with pytest.raises(RuntimeError) as e:
        to_espnn_edge(ep, allow_cpu_fallback=False)
    return str(e.value)


def test_softmax_rows_above_the_runtime_limit_stay_on_cpu(quantize):
    class Wide(torch.nn.Module):
        def forward(self, x):
            return torch.softmax(x, -1)

    msg = _strict_error(quantize, Wide(), (torch.randn(2, 600),))
    assert "softmax row of 600 > 511" in msg


def test_espnn_uint16_geometry_limit_is_checked(quantize, monkeypatch):
    """The partitioner checks ESP-NN's uint16 geometry against LIMITS["max_kernel_dim"]
    (65535; lowered here so that a small model exceeds it)."""
    import executorch_espnn.lowering.limits as limits

    real = limits.runtime_limits()
    monkeypatch.setattr(limits, "runtime_limits", lambda: {**real, "max_kernel_dim": 8})
    msg = _strict_error(quantize, torch.nn.Conv2d(3, 4, 3), (torch.randn(1, 3, 6, 12),))
    assert "input width = 12 exceeds ESP-NN's uint16 limit 8" in msg


@pytest.mark.parametrize("ratio", [0.2917, 0.4431, 0.7129, 1.618])
def test_requantize_rounds_once_like_the_quantize_it_lowers(quantize, ratio):
    """quantize(dequantize(x)) with new parameters (which EspNNQuantizer does not
    emit, other quantizers do) becomes REQUANTIZE, whose output is the convert_pt2e
    graph's quantize of the same int8 input on every element. QuantizeMultiplier's
    normalized multiplier for a scale ratio in [0.25, 0.5) leaves a right shift of
    1, and MBQM then rounded a quarter of the codes twice (one step off)."""
    from executorch_espnn import delegate_payloads, to_espnn_edge
    from executorch_espnn.runtime import run_edge_program
    from aot_harness import op_names

    x = (torch.randn(4, 3, 16, 16),)
    torch.manual_seed(0)
    converted = quantize(torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU()), x)
    out = converted.graph.output_node()
    (dq,) = out.args[0] if isinstance(out.args[0], (tuple, list)) else (out.args[0],)
    s1 = float(dq.args[1])
    s2, zp2 = s1 / ratio, -20
    g = converted.graph
    with g.inserting_after(dq):
        q2 = g.call_function(qd.quantize_per_tensor.default, (dq, s2, zp2, -128, 127, torch.int8))
    with g.inserting_after(q2):
        dq2 = g.call_function(qd.dequantize_per_tensor.default, (q2, s2, zp2, -128, 127, torch.int8))
    out.args = ((dq, dq2),)  # the conv's int8 output too: REQUANTIZE's input as the device has it
    converted.graph._codegen.pytree_info = converted.graph._codegen.pytree_info._replace(out_spec=None)
    converted.recompile()
    edge = to_espnn_edge(torch.export.export(converted, x))
    (blob,) = delegate_payloads(edge)
    assert "REQUANTIZE" in op_names(blob)
    (conv_out, got), _ = run_edge_program(edge, list(x))
    assert len(torch.unique(conv_out)) > 40  # many input codes exercised
    want = qd.quantize_per_tensor.default(conv_out, s2, zp2, -128, 127, torch.int8)
    got = torch.round(got.double() / s2).to(torch.int8) + zp2
    # Within float32's error of a half step PyTorch's rounding may go either way.
    real = (torch.round(conv_out.double() / s1) * s1 / s2).numpy()
    tie = np.abs(np.abs(real - np.trunc(real)) - 0.5) < 1e-5
    assert (torch.from_numpy(~tie) & (got != want)).sum() == 0
