"""PyTorch's own attention modules through the public API (``quantize`` ->
``to_espnn_edge`` -> ``.pte`` -> ``executorch.runtime``): nn.MultiheadAttention
(packed and separate in-projections, batch_first both ways, need_weights
False and True, a boolean attn_mask), nn.TransformerEncoder(
nn.TransformerEncoderLayer) (norm_first both ways, relu and gelu, a causal
mask) and F.scaled_dot_product_attention without a mask, with is_causal=True
and with a constant boolean or additive mask lower into one delegate with no
op on the CPU, within the zoo's bar of the convert_pt2e model (3 LSB, most
elements exact). A row that is masked everywhere gives what PyTorch gives (0).

Before: 44 ops of one MultiheadAttention and 88 of a two-layer encoder ran on
the CPU (the head split after the in-projection, the q*scale, both bmm's and
the safe softmax), in two or three delegates; masked attention failed in
to_executorch (quantize/dequantize nodes left on the CPU)."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from executorch_espnn import output_scales, runtime
from executorch_espnn.partition.report import delegation_report, pte_report
from pte_harness import deviation, quantize_and_lower

ACCURACY_LSB = 3.0
D, HEADS, T = 64, 4, 16


class Mha(nn.Module):
    def __init__(self, batch_first=True, need_weights=False, kdim=None):
        super().__init__()
        self.need_weights = need_weights
        self.attn = nn.MultiheadAttention(D, HEADS, batch_first=batch_first, kdim=kdim, vdim=kdim)
        self.kv = nn.Linear(D, kdim) if kdim else None  # separate k/v inputs of another width

    def forward(self, x):
        kv = self.kv(x) if self.kv is not None else x
        out, weights = self.attn(x, kv, kv, need_weights=self.need_weights)
        return out if weights is None else (out, weights)


class Encoder(nn.Module):
    def __init__(self, norm_first, activation, batch_first=True):
        super().__init__()
        layer = nn.TransformerEncoderLayer(D, HEADS, 2 * D, dropout=0.0, activation=activation,
                                           batch_first=batch_first, norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, x):
        return self.encoder(x)


class MhaMasked(nn.Module):
    """nn.MultiheadAttention with a constant boolean attn_mask (True = not attended), as its docs say."""

    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(D, HEADS, batch_first=True)
        self.register_buffer("mask", torch.triu(torch.ones(T, T, dtype=torch.bool), 1))

    def forward(self, x):
        return self.attn(x, x, x, attn_mask=self.mask, need_weights=False)[0]


class CausalEncoder(nn.Module):
    """A decoder-style stack: nn.TransformerEncoder with the square subsequent mask and is_causal=True."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(D, HEADS, 2 * D, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(T))

    def forward(self, x):
        return self.encoder(x, mask=self.mask, is_causal=True)


class Sdpa(nn.Module):
    """q, k, v from one projection, split with `q, k, v = qkv` (unbind), 2 heads."""

    def __init__(self, mask=None):
        super().__init__()
        self.mask = mask
        self.proj = nn.Linear(32, 96)
        g = torch.Generator().manual_seed(7)
        bool_mask = torch.rand(T, T, generator=g) > 0.3
        bool_mask[4] = False  # a query that attends nothing: PyTorch's SDPA gives 0 there
        self.register_buffer("bool_mask", bool_mask)
        add_mask = torch.randn(T, T, generator=g)
        add_mask[torch.rand(T, T, generator=g) > 0.7] = float("-inf")
        self.register_buffer("add_mask", add_mask)

    def forward(self, x):
        q, k, v = self.proj(x).view(1, T, 3, 2, 16).permute(2, 0, 3, 1, 4)
        kwargs = {"causal": {"is_causal": True}, "bool": {"attn_mask": self.bool_mask},
                  "additive": {"attn_mask": self.add_mask}}.get(self.mask, {})
        return F.scaled_dot_product_attention(q, k, v, **kwargs)


DELEGATED = {
    "mha_batch_first": (lambda: Mha(), (1, T, D)),
    "mha_sequence_first": (lambda: Mha(batch_first=False), (T, 1, D)),
    "mha_need_weights": (lambda: Mha(need_weights=True), (1, T, D)),
    "mha_separate_in_proj": (lambda: Mha(kdim=32), (1, T, D)),
    "encoder_post_norm_relu": (lambda: Encoder(False, "relu"), (1, T, D)),
    "encoder_pre_norm_gelu": (lambda: Encoder(True, "gelu"), (1, T, D)),
    "encoder_sequence_first": (lambda: Encoder(False, "gelu", batch_first=False), (T, 1, D)),
    "mha_bool_attn_mask": (lambda: MhaMasked(), (1, T, D)),
    "encoder_causal": (lambda: CausalEncoder(), (1, T, D)),
    "sdpa_no_mask": (lambda: Sdpa(), (1, T, 32)),
    "sdpa_is_causal": (lambda: Sdpa("causal"), (1, T, 32)),
    "sdpa_bool_mask": (lambda: Sdpa("bool"), (1, T, 32)),
    "sdpa_additive_mask": (lambda: Sdpa("additive"), (1, T, 32)),
}
MASKED = {"mha_bool_attn_mask", "encoder_causal", "sdpa_is_causal", "sdpa_bool_mask", "sdpa_additive_mask"}


def _lower(build, shape):
    q, edge, _ = quantize_and_lower(build, shape)
    report = delegation_report(edge).methods["forward"]  # before to_executorch() rewrites the program
    return q, report, edge.to_executorch().buffer


@pytest.fixture(scope="module", params=sorted(DELEGATED))
def delegated(request):
    build, shape = DELEGATED[request.param]
    return (request.param, shape, *_lower(build, shape))


def test_attention_is_one_delegate_with_nothing_on_the_cpu(delegated):
    name, _, _, report, _ = delegated
    assert len(report.partitions) == 1, f"{name}: {len(report.partitions)} partitions"
    assert report.cpu_ops == [], f"{name}: {[(c.op, c.reason) for c in report.cpu_ops][:8]}"
    ops = report.partitions[0].ops
    assert any("matmul" in op or "bmm" in op for op in ops) and any("softmax" in op for op in ops), ops


def test_attention_matches_convert_pt2e_within_the_bar(delegated):
    name, shape, q, _, pte = delegated
    worst, exact = deviation(q, pte, lambda g: torch.randn(shape, generator=g), runs=20)
    assert worst <= ACCURACY_LSB + 1e-3, f"{name}: {worst:.2f} LSB"
    assert exact > 0.5, f"{name}: only {100 * exact:.0f}% of elements exact"


def test_masked_attention_runs_on_masked_softmax(delegated):
    name, _, _, _, pte = delegated
    ops = pte_report(pte).methods["forward"].partitions[0].ops
    masked = name in MASKED
    assert ("MASKED_SOFTMAX" in ops) == masked and ("SOFTMAX" in ops) != masked, (name, ops)


def test_a_fully_masked_query_gives_what_pytorch_gives():
    """Row 4 of Sdpa's boolean mask attends nothing: PyTorch's SDPA (safe
    softmax) returns 0 for that query, not NaN; so must the program."""
    model = Sdpa("bool").eval()
    x = torch.randn(1, T, 32)
    with torch.no_grad():
        want = model(x)
    assert torch.equal(want[:, :, 4], torch.zeros_like(want[:, :, 4]))
    q, _, pte = _lower(lambda: Sdpa("bool"), (1, T, 32))
    got = runtime.run_pte(None, [x], program=runtime.load_program(pte))[0]
    assert torch.isfinite(got).all()
    scale = output_scales(q)[0]
    assert float(got[:, :, 4].abs().max()) <= scale / 2, got[:, :, 4]  # 0 up to rounding to the int8 grid
