"""Partitions are split to the runtime's limits (never a failure for size):
each part is within the limits, the parts are chained int8 to int8, nothing
stays on the CPU, and the result matches the convert_pt2e model."""

import pytest

pytest.importorskip("executorch")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from aot_harness import cpu_nodes, lower_and_check, payloads  # noqa: E402
from executorch_espnn import _native  # noqa: E402


class ConvChain(nn.Module):
    def __init__(self, n=5):
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv2d(4, 4, 3, padding=1) for _ in range(n))

    def forward(self, x):
        for c in self.convs:
            x = F.relu(c(x))
        return x


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem, self.a, self.b = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(4, 2, 1), nn.Conv2d(4, 3, 1)

    def forward(self, x):
        y = F.relu(self.stem(x))
        return self.a(y), self.b(y)


class ThreeInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, y, z):
        return self.fc(x + y) * z


def rand(*shape, seed=1):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


CASES = {
    "max_ops": (ConvChain, (rand(1, 4, 6, 6),), 6),
    "max_tensors": (ConvChain, (rand(1, 4, 6, 6),), 14),
    "max_graph_outputs": (TwoHeads, (rand(1, 3, 5, 5),), 1),
    "max_graph_inputs": (ThreeInputs, (rand(2, 4), rand(2, 4, seed=2), rand(2, 4, seed=3)), 2),
}


@pytest.mark.parametrize("limit", list(CASES))
def test_split_to_limit(limit, quantize, monkeypatch):
    import executorch_espnn.lowering.limits as limits

    make_model, inputs, value = CASES[limit]
    real = limits.runtime_limits()
    monkeypatch.setattr(limits, "runtime_limits", lambda: {**real, limit: value})
    torch.manual_seed(0)
    edge, _, _ = lower_and_check(make_model(), inputs, quantize, label=f"split {limit}={value}")
    blobs = payloads(edge)
    assert len(blobs) >= 2 and cpu_nodes(edge) == []
    key = {"max_ops": "ops", "max_tensors": "tensors", "max_graph_outputs": "outputs",
           "max_graph_inputs": "inputs"}[limit]
    assert all(len(_native.Program(b).summary()[key]) <= value for b in blobs)
