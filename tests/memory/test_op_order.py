"""The lowering picks an execution order that lowers the arena's peak.

The order the lowering emits ops in is the exported graph's topological
order. On parallel branches it can keep every branch's large intermediate
live at once; executorch_espnn.memory.memory_order tries memory-aware
topological orders and keeps the one whose planned arena is smallest.
These tests pin: the arena really drops on a branchy graph, the results are
bit-identical to the original order, per-op side tables (debug handles)
follow the ops, and graphs with nothing to gain keep their order.
"""

from __future__ import annotations

import numpy as np
import pytest

from executorch_espnn import _native
from executorch_espnn.analysis import payload_metrics
from executorch_espnn.memory import memory_order
from executorch_espnn.xts3_writer import Xts3Writer


def _slice(begin1: int = 0) -> dict[str, int]:
    return {**{f"begin{i}": 0 for i in range(5)}, "begin1": begin1, **{f"step{i}": int(i < 2) for i in range(5)}}


def _pad(before1: int) -> dict[str, int]:
    return {**{f"before{i}": 0 for i in range(5)}, "before1": before1, "pad_value": 7}


def _pad_slice_branches(writer: Xts3Writer, *, wide: int = 1024, pin: bool = False) -> None:
    """x[1,16] -> two branches, each PAD to [1,wide] then SLICE back to
    [1,16]; CONCAT -> [1,32]. Added in the worst order: both PADs first."""
    x = writer.tensor([1, 16], offset=0 if pin else None)
    big = [writer.tensor([1, wide]) for _ in range(2)]
    small = [writer.tensor([1, 16]) for _ in range(2)]
    out = writer.tensor([1, 32])
    # Branch a puts x at the end of its wide tensor, branch b at the start.
    writer.op("PAD", [x], [big[0]], **_pad(wide - 16))
    writer.op("PAD", [x], [big[1]], **_pad(0))
    writer.op("SLICE", [big[0]], [small[0]], **_slice(wide - 16))
    writer.op("SLICE", [big[1]], [small[1]], **_slice(0))
    writer.op("CONCAT", small, [out], axis=1)
    writer.set_inputs([x])
    writer.set_outputs([out])


def test_parallel_branches_are_scheduled_one_after_the_other():
    w = Xts3Writer()
    _pad_slice_branches(w)
    added_order_arena = w.plan().arena_size
    before = w.to_bytes()

    order = memory_order(w.arena_graph())
    w.reorder_ops(order)
    after = w.to_bytes()

    assert order == [0, 2, 1, 3, 4]  # PAD a, SLICE a, PAD b, SLICE b, CONCAT
    assert [op["op"] for op in _native.Program(after).summary()["ops"]] == ["PAD", "SLICE", "PAD", "SLICE", "CONCAT"]
    assert added_order_arena == 2 * 1024 + 16  # SLICE a runs while both wide tensors are live
    metrics = payload_metrics(after)
    assert metrics.arena_bytes == metrics.arena_lower_bound
    assert metrics.arena_bytes < added_order_arena
    assert metrics.arena_bytes == 1024 + 2 * 16  # one wide tensor, x and a slice

    x = np.arange(-8, 8, dtype=np.int8).reshape(1, 16)
    (ref,) = _native.Program(before).run([x])
    (got,) = _native.Program(after).run([x])
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(got, np.concatenate([x, x], axis=1))


def test_a_chain_keeps_its_order():
    """Nothing to gain: the order the ops were added in is kept (ties too)."""
    w = Xts3Writer()
    x = w.tensor([1, 16])
    prev = x
    for _ in range(4):
        nxt = w.tensor([1, 16])
        w.op("SLICE", [prev], [nxt], **_slice())
        prev = nxt
    w.set_inputs([x])
    w.set_outputs([prev])
    assert memory_order(w.arena_graph()) == [0, 1, 2, 3]


def test_pinned_offsets_disable_reordering():
    """A caller that fixed a tensor offset planned by hand; the order stays."""
    w = Xts3Writer()
    _pad_slice_branches(w, pin=True)
    assert memory_order(w.arena_graph()) == [0, 1, 2, 3, 4]


# -- through the lowering -----------------------------------------------------------------------------------------

torch = pytest.importorskip("torch")
pytest.importorskip("executorch")


class TwoBranch(torch.nn.Module):
    """Two 3x3 convs to 32 channels side by side, each reduced by a stride-2
    conv, then added: torch.export traces a1, b1, a2, b2, so in that order
    both 32x16x16 maps are live at once."""

    def __init__(self):
        super().__init__()
        conv = torch.nn.Conv2d
        self.a1, self.b1 = conv(8, 32, 3, padding=1), conv(8, 32, 3, padding=1)
        self.a2, self.b2 = conv(32, 4, 3, stride=2, padding=1), conv(32, 4, 3, stride=2, padding=1)

    def forward(self, x):
        a = torch.relu(self.a1(x))
        b = torch.relu(self.b1(x))
        return self.a2(a) + self.b2(b)


def _lower(quantized, example):
    from executorch_espnn import EspNNCompileSpecBuilder, to_espnn_edge

    # Layer by layer: what the op order alone gains (fused regions would
    # lower both orders' arenas; memory.schedule_search, tests/perf).
    specs = EspNNCompileSpecBuilder().set_schedule("layer").build()
    edge = to_espnn_edge(torch.export.export(quantized, example), compile_specs=specs, allow_cpu_fallback=False)
    gm = edge.exported_program().graph_module
    (lm,) = [getattr(gm, n.target) for n in gm.graph.nodes
             if n.op == "get_attr" and n.target.startswith("lowered_module")]
    return lm


@pytest.fixture(scope="module")
def quantized_two_branch():
    from executorch_espnn import quantize

    torch.manual_seed(0)
    example = (torch.randn(1, 8, 16, 16),)
    return quantize(TwoBranch(), example, [example]), example


def test_lowering_schedules_branches_for_a_smaller_arena(quantized_two_branch, monkeypatch):
    quantized, example = quantized_two_branch
    chosen = _lower(quantized, example)
    with monkeypatch.context() as m:  # the exported order, as before this feature
        m.setattr("executorch_espnn.lowering.lower.memory_order", lambda g: list(range(len(g.ops))))
        exported = _lower(quantized, example)

    new, old = (payload_metrics(bytes(lm.processed_bytes)) for lm in (chosen, exported))
    print(f"two-branch CNN: arena {new.arena_bytes} B (bound {new.arena_lower_bound} B) "
          f"vs {old.arena_bytes} B in the exported order")
    # Exported order: float input gone, int8 NHWC input (2 KiB) + both 32x16x16 maps (8 KiB each).
    assert old.arena_bytes == 2048 + 2 * 8192
    assert new.arena_bytes == new.arena_lower_bound
    assert new.arena_bytes <= 2048 + 8192 + 256

    x = np.random.default_rng(0).standard_normal((1, 8, 16, 16)).astype(np.float32)
    (got,) = _native.Program(bytes(chosen.processed_bytes)).run([x])
    (ref,) = _native.Program(bytes(exported.processed_bytes)).run([x])
    np.testing.assert_array_equal(got, ref)

    # Each op record's debug handle still belongs to the node that emitted it:
    # the map resolves every op's own handle to a set containing it.
    dmap = chosen.meta["debug_handle_map"]
    for op in _native.Program(bytes(chosen.processed_bytes)).summary()["ops"]:
        assert op["debug_handle"] in dmap[op["debug_handle"]], op
