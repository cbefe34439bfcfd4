"""PyTorch's own 1-D modules through the public API: ``quantize`` ->
``to_espnn_edge`` -> ``.pte`` -> ``executorch.runtime``. Conv1d with
BatchNorm1d, MaxPool1d, AvgPool1d, AdaptiveAvgPool1d and F.pad for causal
padding lower into one delegate with no op on the CPU, within the zoo's
accuracy bar of the ``convert_pt2e`` model (3 LSB; most elements exact).

Before: MaxPool1d/AvgPool1d/AdaptiveAvgPool1d were decomposed by
ExecuTorch into unsqueeze + 2-D pool + squeeze, which stayed on the CPU and
split the graph into three delegates."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from executorch_espnn import output_scales, quantize, runtime, to_espnn_edge
from executorch_espnn.partition.report import delegation_report, pte_report

ACCURACY_LSB = 3.0


class ActivityNet(nn.Module):
    """An activity recogniser as people write it: 3-axis accelerometer windows of 128 samples."""

    def __init__(self, pool: nn.Module, gap: nn.Module, causal: bool = False, classes: int = 6):
        super().__init__()
        self.causal = causal
        self.c1 = nn.Conv1d(3, 16, 5, padding=0 if causal else 2)
        self.b1 = nn.BatchNorm1d(16)
        self.pool = pool
        self.c2 = nn.Conv1d(16, 32, 3, padding=0 if causal else 1)
        self.b2 = nn.BatchNorm1d(32)
        self.gap = gap
        self.fc = nn.Linear(32 * _gap_size(gap), classes)

    def forward(self, x):
        x = F.pad(x, (4, 0)) if self.causal else x
        x = self.pool(torch.relu(self.b1(self.c1(x))))
        x = F.pad(x, (2, 0)) if self.causal else x
        x = torch.relu(self.b2(self.c2(x)))
        return self.fc(self.gap(x).flatten(1))


def _gap_size(gap) -> int:
    return gap.output_size if isinstance(gap, nn.AdaptiveAvgPool1d) and isinstance(gap.output_size, int) else 1


VARIANTS = {
    "maxpool_gap": lambda: ActivityNet(nn.MaxPool1d(2), nn.AdaptiveAvgPool1d(1)),
    "maxpool_stride_pad": lambda: ActivityNet(nn.MaxPool1d(3, stride=2, padding=1), nn.AdaptiveAvgPool1d(1)),
    "avgpool_adaptive4": lambda: ActivityNet(nn.AvgPool1d(2), nn.AdaptiveAvgPool1d(4)),
    "avgpool_no_pad_count": lambda: ActivityNet(nn.AvgPool1d(3, stride=2, padding=1, count_include_pad=False),
                                                nn.AdaptiveAvgPool1d(1)),
    "causal_pad": lambda: ActivityNet(nn.MaxPool1d(2), nn.AdaptiveAvgPool1d(1), causal=True),
}


def _settle(model: nn.Module) -> nn.Module:
    """Non-trivial batch-norm statistics (a trained model's), then eval."""
    model.train()
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(16, 3, 128) * 2 + 0.5)
    return model.eval()


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def lowered(request):
    torch.manual_seed(0)
    model = _settle(VARIANTS[request.param]())
    example = (torch.randn(1, 3, 128),)
    calib = [(torch.randn(1, 3, 128),) for _ in range(8)]
    q = quantize(model, example, calib)
    edge = to_espnn_edge(torch.export.export(q, example))
    report = delegation_report(edge).methods["forward"]  # before to_executorch() rewrites the programs
    return request.param, q, report, edge.to_executorch().buffer


def test_one_delegate_and_nothing_on_the_cpu(lowered):
    name, _, report, pte = lowered
    assert len(report.partitions) == 1, f"{name}: {len(report.partitions)} partitions"
    assert report.cpu_ops == [], f"{name}: {[(c.op, c.reason) for c in report.cpu_ops]}"
    # The pools run on ESP-NN's pool/mean kernels inside the payload (read back from the .pte).
    xts3_ops = pte_report(pte).methods["forward"].partitions[0].ops
    assert {"MAX_POOL2D", "AVG_POOL2D", "MEAN_HW"} & set(xts3_ops), xts3_ops


def test_pte_matches_convert_pt2e_within_the_bar(lowered):
    name, q, _, pte = lowered
    program = runtime.load_program(pte)
    scale = output_scales(q)[0]
    worst, exact, total = 0.0, 0, 0
    gen = torch.Generator().manual_seed(1)
    for _ in range(50):
        x = torch.randn(1, 3, 128, generator=gen)
        got = runtime.run_pte(None, [x], program=program)[0]
        with torch.no_grad():
            want = q(x)
        lsb = (got - want).abs() / scale
        worst = max(worst, float(lsb.max()))
        exact += int((lsb < 0.5).sum())
        total += lsb.numel()
    assert worst <= ACCURACY_LSB + 1e-3, f"{name}: {worst:.2f} LSB"
    # Six logits after a dense layer over the pooled features: a 1-step flip of
    # an average (ESP-NN's integer rounding vs PyTorch's float mean, requantized)
    # moves a logit. The pools alone are exact on 80-99 % of elements.
    assert exact / total > 0.4, f"{name}: only {100 * exact / total:.0f}% of elements exact"


def test_planned_cpu_memory_is_only_the_float_io(lowered):
    """With every op delegated, ExecuTorch plans nothing but the float input
    and output (the int8 activations live in the delegate's arena)."""
    name, _, _, pte = lowered
    planned = pte_report(pte).methods["forward"].planned_memory_bytes
    assert planned <= 2 * (4 * 3 * 128 + 4 * 6) + 64, f"{name}: {planned} B planned on the CPU"
