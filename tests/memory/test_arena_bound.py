"""The planner reaches the arena's lower bound where greedy first-fit does not.

The bound (Liveness.lower_bound) is the most bytes live at one op step.
First-fit packing, in any of the planner's orders, can leave a hole that no
later tensor fits: a dilated TCN does (issue 29), because each block's
residual is live over the whole block while the padded maps beside it grow
with the dilation, and first-fit puts the residual wherever the previous
block left room. The planner then searches for a plan at the bound
(memory.arena_plan.pack_at).

The TCN here is Bai, Kolter and Koltun's (2018) temporal block in plain
torch.nn: two dilated causal Conv1d, each after F.pad on the left and
followed by ReLU, a 1x1 Conv1d on the residual where the channel count
changes, ReLU(out + residual); dilations 1, 2, 4, ...; the last time step
into a Linear.
"""

from __future__ import annotations

import pytest

from executorch_espnn import _native
from executorch_espnn.analysis import arena_lower_bound
from executorch_espnn.memory import ArenaGraph, OpIO, liveness, plan_arena


def _graph(lifetimes: list[tuple[int, int, int]]) -> ArenaGraph:
    """Tensors with the given (first step, last step, bytes): op s writes
    the tensors whose life starts at s and reads those whose life ends at s."""
    steps = max(last for _, last, _ in lifetimes) + 1
    ops = tuple(OpIO("CONV2D", tuple(t for t, (f, last, _) in enumerate(lifetimes) if f < s == last),
                     tuple(t for t, (f, _, _) in enumerate(lifetimes) if f == s)) for s in range(steps))
    return ArenaGraph(tuple(n for _, _, n in lifetimes), (True,) * len(lifetimes), ops, (), ())


def _assert_disjoint_while_live(g: ArenaGraph, offsets: dict[int, int]) -> None:
    lv = liveness(g)
    for a in lv.first:
        for b in lv.first:
            if a < b and not (lv.last[a] < lv.first[b] or lv.last[b] < lv.first[a]):
                assert (offsets[a] + g.nbytes[a] <= offsets[b] or offsets[b] + g.nbytes[b] <= offsets[a]), (a, b)


def test_a_plan_at_the_bound_where_first_fit_leaves_a_hole():
    # Busiest steps 0 and 5, 64 + 16 B each. The two 16 B tensors meet at
    # steps 2-3, so at 80 B one of them is at 0 and the 64 B tensor beside
    # it at 16. The planner's first-fit orders end at 96 B.
    g = _graph([(0, 0, 64), (2, 4, 32), (5, 5, 64), (0, 3, 16), (2, 5, 16)])
    plan = plan_arena(g)
    assert liveness(g).lower_bound() == 80
    assert plan.arena_size == 80
    _assert_disjoint_while_live(g, plan.offsets)


def test_a_bound_no_plan_reaches():
    """The bound is not always reachable (docs/memory.md, section 2):
    64 B live at every step, yet no 64 B plan exists. Steps 0 and 4 (two
    32 B tensors each) put b (32 B, steps 0-1) and g (32 B, steps 3-4) each
    on one half of the arena. At step 1, c and d (16 B, steps 1-2 and 1-3)
    fill the half b leaves; at step 3, d and f (16 B, steps 2-3) fill the
    half g leaves. d is in both, so b and g share a half, and at step 2 c, d
    and f are all in the other: 48 B in 32. The planner makes the least
    arena there is, 80 B."""
    # a to h, in this order
    g = _graph([(0, 0, 32), (0, 1, 32), (1, 2, 16), (1, 3, 16), (2, 2, 16), (2, 3, 16), (3, 4, 32), (4, 4, 32)])
    plan = plan_arena(g)
    assert liveness(g).lower_bound() == 64
    assert plan.arena_size == 80
    _assert_disjoint_while_live(g, plan.offsets)


def _tcn(in_channels: int, blocks: int, channels: int = 32, steps: int = 64):
    torch = pytest.importorskip("torch")
    nn, F = torch.nn, torch.nn.functional

    class TemporalBlock(nn.Module):
        def __init__(self, cin: int, cout: int, dilation: int, k: int = 3):
            super().__init__()
            self.pad = (k - 1) * dilation
            self.conv1 = nn.Conv1d(cin, cout, k, dilation=dilation)
            self.conv2 = nn.Conv1d(cout, cout, k, dilation=dilation)
            self.down = nn.Conv1d(cin, cout, 1) if cin != cout else None

        def forward(self, x):
            y = F.relu(self.conv1(F.pad(x, (self.pad, 0))))
            y = F.relu(self.conv2(F.pad(y, (self.pad, 0))))
            return F.relu(y + (x if self.down is None else self.down(x)))

    class TCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.Sequential(*[TemporalBlock(in_channels if i == 0 else channels, channels, 2 ** i)
                                          for i in range(blocks)])
            self.fc = nn.Linear(channels, 10)

        def forward(self, x):
            return self.fc(self.blocks(x)[:, :, -1])

    torch.manual_seed(0)
    return TCN().eval(), (torch.randn(1, in_channels, steps),)


# 32 channels, 64 time steps; before the search: 6,784 B vs 6,400 B at 3
# blocks from 8 input channels, 7,744 B vs 6,400 B (21 % over) from 24.
@pytest.mark.parametrize("blocks", range(1, 7))
@pytest.mark.parametrize("in_channels", [8, 16, 24])
def test_dilated_tcn_arena_is_its_lower_bound(in_channels, blocks):
    torch = pytest.importorskip("torch")
    pytest.importorskip("executorch")
    from executorch_espnn import delegate_payloads, quantize, to_espnn_edge

    model, example = _tcn(in_channels, blocks)
    edge = to_espnn_edge(torch.export.export(quantize(model, example, [example]), example))
    payloads = delegate_payloads(edge)
    assert payloads
    for blob in payloads:
        # parse runs the parser's arena-plan check: the plan is one it accepts
        assert _native.parse(blob)["arena_bytes"] == arena_lower_bound(blob)
