"""Dilated and grouped convolutions as people write them (a TCN of dilated
causal nn.Conv1d, RegNetX-style X blocks with group width 16, a grouped 3x3
stack) are on ESP32-S3's SIMD conv kernels by construction: the runtime
stages each dilation phase / each group through the dense ESP-NN kernel
(components/espnn_runtime/src/ops/conv.cpp). The compile report's S3 SIMD
share (analysis/s3_dispatch.py, the documented dispatch rules) is >= 95 % of
the MACs, the .pte matches the convert_pt2e model, and the delegate is
bit-exact with the device runtime (the staged calls compute what the direct
loop and ESP-NN's grouped ANSI routine computed before: tests/ops/test_conv.py).

Before: 83 % of a TCN's MACs ran the interpreter's direct loop ("dilation !=
1"), and grouped convs ESP-NN's ANSI routine. Measured on silicon or under
emulation: not here (no tool chain); the share is the static rule."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from executorch_espnn import output_scales, runtime
from executorch_espnn.partition.report import delegation_report
from executorch_espnn.runtime import run_edge_program
from pte_harness import quantize_and_lower

SIMD_SHARE = 0.95


class Tcn(nn.Module):
    """Temporal blocks of dilated causal convs (dilation 1, 2, 4, 8) with residuals."""

    def __init__(self, channels=32, dilations=(1, 2, 4, 8)):
        super().__init__()
        self.inp = nn.Conv1d(8, channels, 1)
        self.blocks = nn.ModuleList(nn.Conv1d(channels, channels, 3, dilation=d) for d in dilations)
        self.dilations = dilations
        self.head = nn.Linear(channels, 5)

    def forward(self, x):
        x = torch.relu(self.inp(x))
        for conv, d in zip(self.blocks, self.dilations):
            x = x + torch.relu(conv(F.pad(x, (2 * d, 0))))  # causal: pad on the left only
        return self.head(x.mean(-1))


class XBlock(nn.Module):
    """RegNetX's block: 1x1 -> 3x3 grouped (group width 16) -> 1x1, residual."""

    def __init__(self, w_in, w_out, stride, group_width=16):
        super().__init__()
        self.a = nn.Sequential(nn.Conv2d(w_in, w_out, 1, bias=False), nn.BatchNorm2d(w_out), nn.ReLU())
        self.b = nn.Sequential(nn.Conv2d(w_out, w_out, 3, stride, 1, groups=w_out // group_width, bias=False),
                               nn.BatchNorm2d(w_out), nn.ReLU())
        self.c = nn.Sequential(nn.Conv2d(w_out, w_out, 1, bias=False), nn.BatchNorm2d(w_out))
        self.proj = (nn.Sequential(nn.Conv2d(w_in, w_out, 1, stride, bias=False), nn.BatchNorm2d(w_out))
                     if stride != 1 or w_in != w_out else nn.Identity())

    def forward(self, x):
        return torch.relu(self.proj(x) + self.c(self.b(self.a(x))))


class RegNetXLike(nn.Module):
    """RegNetX-400MF's stem and first two stages (widths 32, 64; depths 1, 2; group width 16) at 64x64."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.stages = nn.Sequential(XBlock(32, 32, 2), XBlock(32, 64, 2), XBlock(64, 64, 1))
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        return self.head(self.stages(self.stem(x)).mean((2, 3)))


class GroupedStack(nn.Module):
    def __init__(self):
        super().__init__()
        self.convs = nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                                   nn.Conv2d(32, 32, 3, padding=1, groups=4), nn.ReLU(),
                                   nn.Conv2d(32, 64, 3, stride=2, padding=1, groups=2), nn.ReLU(),
                                   nn.Conv2d(64, 64, 3, padding=1, groups=8))

    def forward(self, x):
        return self.convs(x)


MODELS = {
    "tcn_dilations_1_to_8": (Tcn, (1, 8, 64)),
    "regnetx_400mf_stages": (RegNetXLike, (1, 3, 64, 64)),
    "grouped_3x3_stack": (GroupedStack, (1, 16, 16, 16)),
}


@pytest.fixture(scope="module", params=sorted(MODELS))
def lowered(request):
    build, shape = MODELS[request.param]
    q, edge, gen = quantize_and_lower(build, shape)
    report = delegation_report(edge).methods["forward"]
    x = torch.randn(shape, generator=gen)
    device = run_edge_program(edge, [x])[0][0]  # every delegate on the native device runtime
    pte = edge.to_executorch().buffer
    return request.param, q, report, pte, x, device


def test_s3_simd_share_of_macs(lowered):
    name, _, report, _, _, _ = lowered
    assert len(report.partitions) == 1 and report.cpu_ops == [], name
    ops = report.partitions[0].payload.op_metrics
    macs = sum(o["macs"] for o in ops)
    simd = sum(o["s3_simd_macs"] for o in ops)
    off = [(o["opcode"], o["reason"]) for o in ops if o["macs"] and not o["s3_simd"]]
    assert macs and simd / macs >= SIMD_SHARE, f"{name}: {100 * simd / macs:.1f}% SIMD; off the path: {off}"
    staged = [o for o in ops if "staged" in (o["reason"] or "")]
    assert staged, f"{name}: no conv took a staged route"


def test_pte_is_the_device_runtime_and_near_convert_pt2e(lowered):
    name, q, _, pte, x, device = lowered
    got = runtime.run_pte(None, [x], program=runtime.load_program(pte))[0]
    assert torch.equal(got, device), name
    with torch.no_grad():
        want = q(x)
    steps = float(((got - want).abs() / output_scales(q)[0]).max())
    assert steps <= 3.0 + 1e-3, f"{name}: {steps:.2f} LSB"
