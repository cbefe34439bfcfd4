"""Operator-library mode, the ops beyond conv/linear/add/pools: a small model
of standard PyTorch modules per op, quantized with EspNNQuantizer, lowered to
the delegate and to espnn:: ops: the op is in the oplib program (the pattern
did not stay on portable kernels) and both programs, and the oplib program
run eagerly on the ops' reference implementations, give the same bytes."""

import pytest
import torch

pytest.importorskip("executorch.runtime")

from executorch_espnn import output_scales, pipeline, to_espnn_edge  # noqa: E402
from executorch_espnn.oplib import to_espnn_oplib  # noqa: E402
from executorch_espnn.partition.report import pte_program  # noqa: E402
from executorch_espnn.runtime import run_pte  # noqa: E402


class Unary(torch.nn.Module):
    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, x):
        return self.module(x)


class Mean(torch.nn.Module):
    def forward(self, x):
        return torch.mean(x, dim=(2, 3))


class MeanKeepdim(torch.nn.Module):
    def forward(self, x):
        return torch.mean(x, dim=(2, 3), keepdim=True)


class MeanLastDim(torch.nn.Module):
    def forward(self, x):
        return torch.mean(x, dim=-1, keepdim=True)


class Matmul(torch.nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


class Bmm(torch.nn.Module):
    def forward(self, a, b):
        return torch.bmm(a, b)


class Mul(torch.nn.Module):
    def forward(self, a, b):
        return a * b


class MulByScalarTensor(torch.nn.Module):
    """x times a 0-dim tensor (a learned scale): the 0-dim constant is folded
    into the op's constants, the pattern is still lowered."""

    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor(0.75))

    def forward(self, x):
        return x * self.scale


class Sequence(torch.nn.Module):
    """nn.GRU / nn.LSTM as users write them: the output sequence, the state unused."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, x):
        return self.module(x)[0]


# (model, input shapes, espnn ops the oplib program must contain)
CASES = {
    "transpose_conv2d": (Unary(torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1)), [(1, 4, 5, 5)],
                         {"quantized_transpose_conv2d"}),
    "matmul": (Matmul(), [(2, 3, 4), (2, 4, 5)], {"quantized_batch_matmul"}),
    "bmm": (Bmm(), [(2, 3, 4), (2, 4, 5)], {"quantized_batch_matmul"}),
    "mul": (Mul(), [(1, 4, 5, 5), (1, 4, 5, 5)], {"quantized_mul"}),
    "mul_by_0_dim_tensor": (MulByScalarTensor(), [(1, 4, 5, 5)], {"quantized_mul"}),
    "softmax": (Unary(torch.nn.Softmax(dim=-1)), [(1, 4, 10)], {"quantized_softmax"}),
    "mean": (Mean(), [(1, 4, 5, 5)], {"quantized_mean_hw"}),
    "mean_keepdim": (MeanKeepdim(), [(1, 4, 5, 5)], {"quantized_mean_hw"}),
    "mean_last_dim": (MeanLastDim(), [(1, 6, 10)], {"quantized_mean_hw"}),
    "adaptive_avg_pool": (Unary(torch.nn.AdaptiveAvgPool2d(1)), [(1, 4, 5, 5)], {"quantized_mean_hw"}),
    "silu": (Unary(torch.nn.SiLU()), [(1, 4, 5, 5)], {"quantized_lut"}),
    "hardswish": (Unary(torch.nn.Hardswish()), [(1, 4, 5, 5)], {"quantized_hardswish"}),
    "sigmoid": (Unary(torch.nn.Sigmoid()), [(1, 4, 5, 5)], {"quantized_lut"}),
    "tanh": (Unary(torch.nn.Tanh()), [(1, 4, 5, 5)], {"quantized_lut"}),
    # two layers: the int8 sequence between them is a tensor ExecuTorch plans
    "gru": (Sequence(torch.nn.GRU(8, 12, num_layers=2, batch_first=True)), [(2, 5, 8)], {"quantized_gru"}),
    "gru_unbatched": (Sequence(torch.nn.GRU(8, 12)), [(5, 8)], {"quantized_gru"}),
    "lstm": (Sequence(torch.nn.LSTM(8, 12)), [(5, 2, 8)], {"quantized_lstm"}),
}


# Layout moves and planned scratch (nn.GRU's unbatched input is unsqueezed
# and its output squeezed by PyTorch's own module, around the op).
NOT_COMPUTE = {"aten::permute_copy", "aten::view_copy", "aten::squeeze_copy", "aten::unsqueeze_copy",
               "dim_order_ops::_empty_dim_order"}


def _inputs(shapes):
    return tuple(torch.randn(*s) * 2 for s in shapes)


def _operators(pte):
    return {op.name for plan in pte_program(pte).execution_plan for op in plan.operators}


@pytest.mark.parametrize("case", sorted(CASES))
def test_op_lowered_both_ways_gives_the_same_bytes(case):
    model, shapes, ops = CASES[case]
    torch.manual_seed(0)
    example = _inputs(shapes)
    calib = [_inputs(shapes) for _ in range(4)]
    ep = torch.export.export(pipeline.quantize(model.eval(), example, calib), example)
    delegate = to_espnn_edge(ep, allow_cpu_fallback=False).to_executorch().buffer
    edge = to_espnn_oplib(ep)
    eager = edge.exported_program().module()  # the torch.library references of the espnn:: ops
    oplib = edge.to_executorch().buffer
    used = _operators(oplib)
    assert {f"espnn::{op}" for op in ops} <= used, used
    # besides espnn:: ops only layout moves and planned scratch: no computation left on portable kernels
    assert {op for op in used if not op.startswith("espnn::")} <= NOT_COMPUTE, used
    for _ in range(3):
        x = _inputs(shapes)
        (want,) = run_pte(delegate, x)
        (got,) = run_pte(oplib, x)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.numpy().tobytes() == want.numpy().tobytes()
        assert eager(*x).numpy().tobytes() == want.numpy().tobytes()


class Requantize(torch.nn.Module):
    """An int8 value quantized again with other parameters (what a quantizer
    leaves where two observers meet): the delegate's integer REQUANTIZE, not a
    float round trip."""

    def forward(self, x):
        qd = torch.ops.quantized_decomposed
        q = qd.quantize_per_tensor.default(x, 0.05, 3, -128, 127, torch.int8)
        h = torch.nn.functional.hardswish(qd.dequantize_per_tensor.default(q, 0.05, 3, -128, 127, torch.int8))
        q = qd.quantize_per_tensor.default(h, 0.04, -20, -128, 127, torch.int8)
        r = qd.quantize_per_tensor.default(qd.dequantize_per_tensor.default(q, 0.04, -20, -128, 127, torch.int8),
                                           0.07, -5, -128, 127, torch.int8)
        return qd.dequantize_per_tensor.default(r, 0.07, -5, -128, 127, torch.int8)


def test_requantize_lowered_both_ways_gives_the_same_bytes():
    torch.manual_seed(0)
    x = (torch.linspace(-6, 6, 4 * 64).reshape(1, 4, 8, 8),)
    ep = torch.export.export(Requantize(), x)
    delegate = to_espnn_edge(ep, allow_cpu_fallback=False).to_executorch().buffer
    oplib = to_espnn_oplib(ep).to_executorch().buffer
    assert "espnn::requantize" in _operators(oplib)
    assert run_pte(oplib, x)[0].numpy().tobytes() == run_pte(delegate, x)[0].numpy().tobytes()


def test_transposed_conv_with_output_padding_stays_on_portable_kernels():
    """output_padding is no TRANSPOSE_CONV2D parameter (the output size implies
    it), so the op's shape rule cannot give that size: the pattern stays in
    float on portable kernels, and the program still runs."""
    model = Unary(torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1))
    torch.manual_seed(0)
    example = _inputs([(1, 4, 5, 5)])
    ep = torch.export.export(pipeline.quantize(model.eval(), example, [_inputs([(1, 4, 5, 5)])]), example)
    pte = to_espnn_oplib(ep).to_executorch().buffer
    used = _operators(pte)
    assert "espnn::quantized_transpose_conv2d" not in used and "aten::convolution" in used, used
    (got,) = run_pte(pte, example)
    assert got.shape == (1, 6, 10, 10)


class MeanAll(torch.nn.Module):
    def forward(self, x):
        return torch.mean(x, dim=(0, 1, 2, 3))


def test_a_pattern_with_a_0_dim_value_stays_on_portable_kernels_and_runs():
    """ExecuTorch's operator suite (test_mean_multi_dim): a mean over every
    dim is a 0-dim tensor, which no XTS3 tensor and no espnn:: kernel
    argument can be. It was lowered to quantized_mean_hw and the program
    failed at run time (error 0x12); it stays on portable kernels, as the
    delegate's partitioner leaves it, and gives PyTorch's result."""
    torch.manual_seed(0)
    example = _inputs([(2, 3, 4, 5)])
    ep = torch.export.export(pipeline.quantize(MeanAll().eval(), example, [_inputs([(2, 3, 4, 5)])]), example)
    pte = to_espnn_oplib(ep).to_executorch().buffer
    used = _operators(pte)
    assert "espnn::quantized_mean_hw" not in used and "aten::mean" in used, used
    for _ in range(2):
        x = _inputs([(2, 3, 4, 5)])
        (got,) = run_pte(pte, x)
        want = ep.module()(*x)
        assert got.shape == want.shape == ()
        assert torch.allclose(got, want, atol=1e-6)


def test_a_gru_the_lowering_cannot_take_runs_decomposed_on_portable_kernels():
    """Weights so small that the biases do not fit int32 in units of the
    weight x input scale: the GRU's lowering refuses it (as the delegate's
    does), the op is PyTorch's GRU again, decomposed into portable ops, and
    the program computes what the quantized model does (it failed with
    "Missing out variants: espnn::gru")."""
    gru = torch.nn.GRU(10, 16, batch_first=True)
    with torch.no_grad():
        gru.weight_ih_l0.mul_(1e-9)
    model = Sequence(gru).eval()
    torch.manual_seed(0)
    example = _inputs([(1, 6, 10)])
    q = pipeline.quantize(model, example, [_inputs([(1, 6, 10)]) for _ in range(4)])
    pte = to_espnn_oplib(torch.export.export(q, example)).to_executorch().buffer
    used = _operators(pte)
    assert "espnn::quantized_gru" not in used and "aten::sigmoid" in used, used
    x = _inputs([(1, 6, 10)])
    (got,) = run_pte(pte, x)
    with torch.no_grad():
        want = q(*x)
    assert float((got - want).abs().max()) <= output_scales(q)[0] + 1e-6  # one int8 step, at most
