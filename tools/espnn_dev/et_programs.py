"""Small real .pte programs for the native ExecuTorch delegate checks.

Each builder quantizes a tiny model with EspNNQuantizer, lowers it with
to_espnn_edge and returns an EtProgram: the .pte bytes (EspNNBackend
delegates plus, for the fallback programs, CPU operators of the wheel) and
the XTS3 payloads of its delegates. Used by tests/hardening/
test_execute_allocates_nothing.py, test_et_threads_tsan.py and by
host/fuzz/make_glue_corpus.py (the glue fuzzer's seeds).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class EtProgram:
    name: str
    pte: bytes
    payloads: list[bytes]


def _lower(name: str, make_model, shape, seed: int = 0) -> EtProgram:
    from executorch_espnn import delegate_payloads, quantize, to_espnn_edge

    torch.manual_seed(seed)  # the weights: same program, same payload bytes, every time
    model = make_model()
    g = torch.Generator().manual_seed(seed)
    example = (torch.randn(*shape, generator=g),)
    q = quantize(model, example, [(torch.randn(*shape, generator=g),) for _ in range(4)])
    edge = to_espnn_edge(torch.export.export(q, example))
    payloads = delegate_payloads(edge)
    return EtProgram(name, edge.to_executorch().buffer, payloads)


class _Cnn(nn.Module):  # fully delegated: conv, relu, pool, conv, mean, linear
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.c1(x)), 2)
        x = torch.relu(self.c2(x)).mean(dim=(2, 3))
        return self.fc(x)


class _Mlp(nn.Module):  # fully delegated: linear, relu, add
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.b = nn.Linear(16, 8)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)) + x)


class _CumsumIsland(nn.Module):  # conv | cumsum on the CPU | conv: two delegates
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 4, 3, padding=1)
        self.c2 = nn.Conv2d(4, 4, 1)

    def forward(self, x):
        return self.c2(torch.cumsum(torch.relu(self.c1(x)), dim=1))


def cnn() -> EtProgram:
    return _lower("cnn", _Cnn, (1, 3, 8, 8))


def mlp() -> EtProgram:
    return _lower("mlp", _Mlp, (1, 16))


def cumsum_island() -> EtProgram:
    return _lower("cumsum_island", _CumsumIsland, (1, 3, 6, 6))


ALL = (cnn, mlp, cumsum_island)
