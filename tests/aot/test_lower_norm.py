"""nn.LayerNorm / nn.RMSNorm (and F.layer_norm / F.rms_norm) lowered end to end to
LAYER_NORM: EspNNQuantizer annotates the input and output, the ops are kept whole
(preserve), gamma/beta/eps are folded by quant_params.layer_norm_params, and the
delegate runs natively. Bound against the convert_pt2e model: 1 LSB for one norm
(the kernel is the correctly rounded value up to < 0.005 LSB, docs/xts3-format.md),
CHAIN_LSB (2) for the transformer-like chain."""

import pytest

pytest.importorskip("executorch")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from aot_harness import CHAIN_LSB, cpu_nodes, delegate_nodes, lower_and_check, op_names, payloads  # noqa: E402


class Norm(torch.nn.Module):
    def __init__(self, norm):
        super().__init__()
        self.norm = norm

    def forward(self, x):
        return self.norm(x)


def _affine(norm, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        if getattr(norm, "weight", None) is not None:
            norm.weight.copy_(1 + 0.5 * torch.randn(norm.weight.shape, generator=g))
        if getattr(norm, "bias", None) is not None:
            norm.bias.copy_(0.3 * torch.randn(norm.bias.shape, generator=g))
    return norm


CASES = {
    "layer_norm": lambda: torch.nn.LayerNorm(32),
    "layer_norm_no_affine": lambda: torch.nn.LayerNorm(32, elementwise_affine=False),
    "layer_norm_no_bias": lambda: torch.nn.LayerNorm(32, bias=False),
    "layer_norm_eps": lambda: torch.nn.LayerNorm(32, eps=0.05),
    "rms_norm": lambda: torch.nn.RMSNorm(32),
    "rms_norm_eps": lambda: torch.nn.RMSNorm(32, eps=1e-3),
    "rms_norm_no_affine": lambda: torch.nn.RMSNorm(32, elementwise_affine=False),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("shape", [(2, 5, 32), (3, 32)])
def test_norm_lowers_to_one_layer_norm_within_one_lsb(name, shape, quantize):
    model = Norm(_affine(CASES[name](), len(name))).eval()
    x = (torch.randn(*shape, generator=torch.Generator().manual_seed(3)) * 2 + 0.5,)
    calib = [(torch.randn(*shape, generator=torch.Generator().manual_seed(s)) * 2 + 0.5,) for s in range(4)]
    edge, _, fractions = lower_and_check(model, x, quantize, label=name, calibration=calib + [x])
    assert not cpu_nodes(edge)
    (blob,) = payloads(edge)
    assert [op for op in op_names(blob) if op not in ("QUANTIZE", "DEQUANTIZE")] == ["LAYER_NORM"]
    assert min(fractions) >= 0.98  # measured 1.0 here; a wrong eps/gamma/beta fold drops this


class Functional(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        g = torch.Generator().manual_seed(9)
        self.w = torch.nn.Parameter(1 + 0.3 * torch.randn(width, generator=g))
        self.b = torch.nn.Parameter(0.2 * torch.randn(width, generator=g))

    def forward(self, x):
        return F.rms_norm(F.layer_norm(x, (x.shape[-1],), self.w, self.b, 1e-4), (x.shape[-1],), self.w)


def test_functional_forms(quantize):
    x = (torch.randn(4, 24, generator=torch.Generator().manual_seed(1)),)
    edge, _, _ = lower_and_check(Functional(24), x, quantize, max_lsb=CHAIN_LSB)
    (blob,) = payloads(edge)
    assert op_names(blob).count("LAYER_NORM") == 2


class Block(torch.nn.Module):
    """Pre-norm MLP block of a small transformer: x + fc2(gelu(fc1(ln(x)))), then an RMS norm."""

    def __init__(self, d=32):
        super().__init__()
        self.ln = _affine(torch.nn.LayerNorm(d), 1)
        self.fc1 = torch.nn.Linear(d, 2 * d)
        self.fc2 = torch.nn.Linear(2 * d, d)
        self.out = _affine(torch.nn.RMSNorm(d), 2)

    def forward(self, x):
        return self.out(x + self.fc2(F.relu(self.fc1(self.ln(x)))))


def test_transformer_mlp_block_runs_in_one_partition(quantize):
    x = (torch.randn(1, 6, 32, generator=torch.Generator().manual_seed(5)),)
    calib = [(torch.randn(1, 6, 32, generator=torch.Generator().manual_seed(s)),) for s in range(6)]
    edge, _, _ = lower_and_check(Block().eval(), x, quantize, calibration=calib + [x], max_lsb=CHAIN_LSB)
    assert len(delegate_nodes(edge)) == 1 and not cpu_nodes(edge)
    ops = op_names(payloads(edge)[0])
    assert ops.count("LAYER_NORM") == 2 and ops.count("FULLY_CONNECTED") == 2


def test_normalising_more_than_the_last_dim_stays_float_on_the_cpu(quantize):
    """The quantizer leaves such a norm float (no observers around it), and it runs
    on the CPU, decomposed for the portable kernels."""
    from executorch_espnn import to_espnn_edge

    model = Norm(torch.nn.LayerNorm((4, 8))).eval()
    x = (torch.randn(2, 4, 8),)
    converted = quantize(model, x)
    (ln,) = [n for n in converted.graph.nodes if n.target == torch.ops.aten.layer_norm.default]
    assert "dequantize" not in str(ln.args[0].target)
    edge = to_espnn_edge(torch.export.export(converted, x))
    assert not delegate_nodes(edge)


def test_lowering_names_a_norm_over_more_than_the_last_dim():
    """Should such a norm reach the partitioner quantized (another quantizer), the
    reason says what LAYER_NORM lacks."""
    from executorch_espnn.lowering.graph import Unsupported
    from executorch_espnn.lowering.ops import norm

    ep = torch.export.export(Norm(torch.nn.LayerNorm((4, 8))).eval(), (torch.randn(2, 4, 8),))
    (ln,) = [n for n in ep.graph.nodes if n.target == torch.ops.aten.layer_norm.default]
    with pytest.raises(Unsupported, match=r"normalisation over \[4, 8\] of a \[2, 4, 8\] tensor \(only the last"):
        norm.analyze(ln, None)


def test_quantizer_annotates_the_norms_and_keeps_gamma_beta_float(quantize):
    converted = quantize(Norm(_affine(torch.nn.LayerNorm(16), 4)).eval(), (torch.randn(3, 16),))
    (ln,) = [n for n in converted.graph.nodes if n.target == torch.ops.aten.layer_norm.default]
    assert "dequantize_per_tensor" in str(ln.args[0].target)
    assert all(a.op == "get_attr" for a in ln.args[2:4])  # float weight and bias
    (user,) = ln.users
    assert "quantize_per_tensor" in str(user.target)
