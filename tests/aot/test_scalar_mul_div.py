"""Multiplication and division by a Python number: EspNNQuantizer turns x / c into
x * (1 / c) and the number into a quantized constant, so each is one MUL with a
constant operand. Every int8 input code is checked against the float64 oracle
quantize(dequantize(x) * c) (or / c) in the graph's output quantization."""

import pytest

pytest.importorskip("executorch")

import torch  # noqa: E402

from aot_harness import (  # noqa: E402
    all_codes,
    cpu_nodes,
    input_qparams,
    op_names,
    output_qparams,
    payloads,
    run_lowered,
    lsb_off,
)

CASES = {
    "div_3": (lambda x: x / 3.0, lambda r: r / 3.0),
    "div_neg_half": (lambda x: x / -0.5, lambda r: r / -0.5),
    "div_int": (lambda x: x / 7, lambda r: r / 7.0),
    "mul_neg_2": (lambda x: x * -2.0, lambda r: r * -2.0),
    "mul_0_3": (lambda x: 0.3 * x, lambda r: 0.3 * r),
}


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


@pytest.mark.parametrize("name", list(CASES))
def test_scalar_mul_div_every_code_within_one_lsb(name, quantize):
    from executorch_espnn import to_espnn_edge

    fn, ref = CASES[name]
    calib = (torch.linspace(-3, 5, 256).reshape(1, 1, 16, 16),)
    converted = quantize(Fn(fn), calib)
    assert not any("div" in str(n.target) for n in converted.graph.nodes)
    (qin,), (qout,) = input_qparams(converted), output_qparams(converted)
    edge = to_espnn_edge(torch.export.export(converted, calib), allow_cpu_fallback=False)
    assert not cpu_nodes(edge)
    (blob,) = payloads(edge)
    assert op_names(blob) == ["QUANTIZE", "MUL", "DEQUANTIZE"], op_names(blob)
    x = all_codes(qin, (1, 1, 16, 16))
    (out,), _ = run_lowered(edge, [x])
    err = lsb_off(out, ref(x.double().numpy()), qout)
    print(f"{name}: max {err.max():.0f} LSB, {int((err > 0).sum())} of 256 off")
    assert err.max() <= 1


def test_division_by_zero_or_a_tensor_is_not_rewritten(quantize):
    class Div(torch.nn.Module):
        def forward(self, x, y):
            return x / 0.0, x / y

    x = (torch.rand(1, 4) + 1, torch.rand(1, 4) + 1)
    converted = quantize(Div(), x)
    assert sum("aten.div" in str(n.target) for n in converted.graph.nodes) == 2
