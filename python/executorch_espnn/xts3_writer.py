"""Xts3Writer: an XTS3 graph, planned by executorch_espnn.memory, then
serialized.

The serializer (serialization.Xts3Serializer) only writes the plan it is
given. This is the step before it: the graph as the memory planner sees it
(``arena_graph``: tensor sizes, ops, pinned offsets and the row geometry of
fused regions, which memory.BandGraph asks the native parser for on the
layer-by-layer program), the planner's arena plan (``plan``), and
``to_bytes`` with that plan by default. The lowering, the self-check, the
benchmarks and the tests build programs with it.
"""

from __future__ import annotations

from . import _native as fmt
from .memory import ArenaGraph, ArenaPlan, BandGraph, OpIO, plan_arena
from .memory.arena_rule import aligned
from .serialization import Xts3Serializer

__all__ = ["Xts3Writer"]


class Xts3Writer(Xts3Serializer):
    """Builds an XTS3 graph (Xts3Serializer's tensor/constant/op calls) and
    writes it with the memory planner's arena plan."""

    def arena_graph(self) -> ArenaGraph:
        """The graph as executorch_espnn.memory plans it; tensors with a
        caller-fixed offset are pinned."""
        return ArenaGraph(
            nbytes=tuple(t.nbytes for t in self._tensors),
            in_arena=tuple(t.in_arena for t in self._tensors),
            ops=tuple(OpIO(op.name, tuple(None if t == fmt.NO_TENSOR else t for t in op.inputs),
                           tuple(op.outputs)) for op in self._ops),
            inputs=tuple(self._inputs),
            outputs=tuple(self._outputs),
            pinned=frozenset(self.pinned_offsets()),
            bands=BandGraph(self._layer_by_layer_blob),
        )

    def _layer_by_layer_blob(self) -> bytes:
        """The graph with every arena tensor on bytes of its own (a plan the
        parser always accepts): what BandGraph reads the row geometry from."""
        offsets, end = {}, 0
        for i, t in enumerate(self._tensors):
            if t.in_arena:
                offsets[i] = end
                end += aligned(t.nbytes)
        return super().to_bytes(ArenaPlan(offsets, end))

    def plan(self, regions=()) -> ArenaPlan:
        """The memory planner's arena plan for the ops in their current order,
        with ``regions`` (memory.FusedRegion) run band by band."""
        return plan_arena(self.arena_graph(), regions, self.pinned_offsets())

    def to_bytes(self, plan: ArenaPlan | None = None) -> bytes:
        """The blob with ``plan``'s arena offsets and fused regions (default:
        the memory planner's layer-by-layer plan, ``plan()``)."""
        return super().to_bytes(self.plan() if plan is None else plan)
