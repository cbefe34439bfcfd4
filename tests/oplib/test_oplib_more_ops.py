"""Operator-library mode, the ops beyond conv/linear/add/pools: a small model
of standard PyTorch modules per op, quantized with EspNNQuantizer, lowered to
the delegate and to espnn:: ops: the op is in the oplib program (the pattern
did not stay on portable kernels) and both programs give the same bytes."""

import pytest
import torch

pytest.importorskip("executorch.runtime")

from executorch_espnn import pipeline, to_espnn_edge  # noqa: E402
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


class Matmul(torch.nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


class Bmm(torch.nn.Module):
    def forward(self, a, b):
        return torch.bmm(a, b)


class Mul(torch.nn.Module):
    def forward(self, a, b):
        return a * b


# (model, input shapes, espnn ops the oplib program must contain)
CASES = {
    "transpose_conv2d": (Unary(torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1)), [(1, 4, 5, 5)],
                         {"quantized_transpose_conv2d"}),
    "matmul": (Matmul(), [(2, 3, 4), (2, 4, 5)], {"quantized_batch_matmul"}),
    "bmm": (Bmm(), [(2, 3, 4), (2, 4, 5)], {"quantized_batch_matmul"}),
    "mul": (Mul(), [(1, 4, 5, 5), (1, 4, 5, 5)], {"quantized_mul"}),
    "softmax": (Unary(torch.nn.Softmax(dim=-1)), [(1, 4, 10)], {"quantized_softmax"}),
    "mean": (Mean(), [(1, 4, 5, 5)], {"quantized_mean_hw"}),
    "mean_keepdim": (MeanKeepdim(), [(1, 4, 5, 5)], {"quantized_mean_hw"}),
    "hardswish": (Unary(torch.nn.Hardswish()), [(1, 4, 5, 5)], {"quantized_hardswish"}),
    "sigmoid": (Unary(torch.nn.Sigmoid()), [(1, 4, 5, 5)], {"quantized_lut"}),
    "tanh": (Unary(torch.nn.Tanh()), [(1, 4, 5, 5)], {"quantized_lut"}),
}


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
    oplib = to_espnn_oplib(ep).to_executorch().buffer
    used = _operators(oplib)
    assert {f"espnn::{op}" for op in ops} <= used, used
    assert not any(op.startswith(("quantized_decomposed::", "aten::")) and "permute" not in op
                   and "view" not in op and "reshape" not in op and "empty" not in op
                   and "copy" not in op for op in used), used
    for _ in range(3):
        x = _inputs(shapes)
        (want,) = run_pte(delegate, x)
        (got,) = run_pte(oplib, x)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.numpy().tobytes() == want.numpy().tobytes()
