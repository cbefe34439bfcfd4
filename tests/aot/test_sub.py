"""sub lowered as ADD of the exactly negated second operand (a LUT q -> -1 - q for
an activation, a compile-time negation for a constant), and rsub (``1.0 - x``)
rewritten to sub by EspNNQuantizer. Oracle: the float64 difference of the
dequantized inputs, quantized to the graph's output quantization."""

import numpy as np
import pytest

pytest.importorskip("executorch")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from aot_harness import (  # noqa: E402
    all_codes,
    cpu_nodes,
    delegate_nodes,
    input_qparams,
    lower_and_check,
    lsb_off,
    op_names,
    output_qparams,
    payloads,
    run_lowered,
)


class Sub(torch.nn.Module):
    def forward(self, a, b):
        return a - b, F.relu(b - a)


def test_sub_of_two_activations_every_code_pair_within_onelsb_off(quantize):
    from executorch_espnn import to_espnn_edge

    g = torch.Generator().manual_seed(0)
    calib = (3 * torch.rand(1, 256, 1, generator=g) - 1, 4 * torch.rand(1, 1, 256, generator=g) - 2)
    converted = quantize(Sub(), calib)
    qa, qb = input_qparams(converted)
    edge = to_espnn_edge(torch.export.export(converted, calib), allow_cpu_fallback=False)
    assert len(delegate_nodes(edge)) == 1 and not cpu_nodes(edge)
    (blob,) = payloads(edge)
    ops = op_names(blob)
    assert ops.count("ADD") == 2 and ops.count("LUT") == 2, ops  # b negated for a - b, a for b - a
    a, b = all_codes(qa, (1, 256, 1)), all_codes(qb, (1, 1, 256))
    (d, r), calls = run_lowered(edge, [a, b])
    assert calls == 1
    real_a, real_b = a.double().numpy(), b.double().numpy()
    (qd, qr) = output_qparams(converted)
    err_d = lsb_off(d, real_a - real_b, qd)
    err_r = lsb_off(r, np.maximum(real_b - real_a, 0.0), qr)
    print(f"a - b: max {err_d.max():.0f} LSB, {int((err_d > 0).sum())} of {err_d.size} off; "
          f"relu(b - a): max {err_r.max():.0f} LSB, {int((err_r > 0).sum())} off")
    assert err_d.max() <= 1 and err_r.max() <= 1


class SubConstants(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.tensor([0.5, -0.25, 1.0]).reshape(1, 3, 1, 1))

    def forward(self, x):
        return x - 0.25, 1.0 - x, x - self.mean, torch.sub(self.mean, x)


def test_sub_and_rsub_with_constants_delegated_within_onelsb_off(quantize):
    x = (2 * torch.randn(1, 3, 5, 5, generator=torch.Generator().manual_seed(2)),)
    edge, converted, _ = lower_and_check(SubConstants(), x, quantize, label="sub const")
    assert not any("rsub" in str(n.target) for n in converted.graph.nodes)
    (blob,) = payloads(edge)
    ops = op_names(blob)
    # x - c and x - mean negate the constant at compile time: no LUT; c - x negates x (once).
    assert ops.count("ADD") == 4 and ops.count("LUT") == 1, ops


def test_negated_quantization_holds_minus_x_for_every_code():
    from executorch_espnn.lowering.quant import QParams

    for zp in (-128, -1, 0, 37, 127):
        qp = QParams(0.05, zp)
        neg = qp.negated()
        q = np.arange(-128, 128, dtype=np.int8)
        nq = np.invert(q)
        assert neg.qmin == -128 and neg.qmax == 127
        np.testing.assert_array_equal((nq.astype(np.int64) - neg.zero_point), -(q.astype(np.int64) - zp))


@pytest.mark.parametrize("form", ["sub", "rsub"])
def test_sub_with_alpha_stays_on_the_cpu_and_keeps_its_value(form, quantize):
    from executorch_espnn import to_espnn_edge

    class SubAlpha(torch.nn.Module):
        def forward(self, a, b):
            return torch.sub(a, b, alpha=2) if form == "sub" else torch.rsub(a, 1.5, 2)

    g = torch.Generator().manual_seed(4)
    x = (torch.randn(1, 4, 4, generator=g), torch.randn(1, 4, 4, generator=g))
    converted = quantize(SubAlpha(), x)
    want = SubAlpha()(*x)
    torch.testing.assert_close(converted(*x), want, atol=0.1, rtol=0)  # rsub rewritten keeps other - alpha * x
    ep = torch.export.export(converted, x)
    with pytest.raises(RuntimeError, match="aten.sub.Tensor with alpha = 2"):
        to_espnn_edge(ep, allow_cpu_fallback=False)
