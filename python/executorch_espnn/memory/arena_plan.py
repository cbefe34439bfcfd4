"""Arena planning: an offset for every arena tensor of an XTS3 graph.

Tensors that are live at the same step never share bytes, except the alias
classes of the arena rule (memory.arena_rule), each planned as one block
over the union of its members' lifetimes. Greedy first-fit, tried in a few
orders (largest first, then by first use, then by size x lifetime); the
smallest arena wins. Liveness.lower_bound() is what these plans are measured
against; on the op corpus and the zoo they reach it (tests/memory).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .arena_rule import ArenaGraph, Liveness, aligned, liveness


@dataclass(frozen=True)
class ArenaPlan:
    offsets: dict[int, int]  # arena tensor -> byte offset (staging tensors of regions included)
    arena_size: int  # bytes, ARENA_ALIGNMENT-aligned; the peak arena
    # Fused regions (memory.band_schedule.RegionLayout), in op order; the
    # writer writes them (BAND_LOOP ops, BANDED tensors, staging tensors).
    regions: tuple = ()

    @property
    def size(self) -> int:
        return self.arena_size


def plan_arena(g: ArenaGraph, regions: Sequence = (), pinned_offsets: dict[int, int] | None = None,
               lv: Liveness | None = None) -> ArenaPlan:
    """Offsets for every arena tensor of ``g``.

    ``regions``: memory.band_schedule.FusedRegion's to run band by band (op
    indices of ``g``, which has no BAND_LOOP ops); the plan is then for the
    fused graph (band_schedule.fuse). ``pinned_offsets``: offsets the caller
    fixed (tests that build a plan by hand); they must name ``g.pinned``.
    ``lv``: the liveness to plan by (default: the rule's); tests pass a
    different one to check the parser.
    """
    if regions:
        from .band_schedule import fuse

        fused, layouts = fuse(g, regions)
        plan = plan_arena(fused, (), pinned_offsets, lv)
        return ArenaPlan(plan.offsets, plan.arena_size, layouts)
    pinned_offsets = dict(pinned_offsets or {})
    if set(pinned_offsets) != set(g.pinned):
        raise ValueError("pinned_offsets must give an offset for exactly the graph's pinned tensors")
    lv = lv or liveness(g)
    blocks = {r: b for r, b in lv.classes.items() if r not in g.pinned}
    pinned = [(o, o + aligned(g.nbytes[t]), lv.first.get(t, -1), lv.last.get(t, len(g.ops)))
              for t, o in pinned_offsets.items()]

    def place(order: list[int]) -> tuple[dict[int, int], int]:
        offsets: dict[int, int] = {}
        placed = list(pinned)  # (offset, end, first, last)
        for r in order:
            lo, hi, size = blocks[r]
            offset = 0
            for o, e, f, l in sorted(p for p in placed if not (p[3] < lo or hi < p[2])):
                if offset + size <= o:
                    break
                offset = max(offset, aligned(e))
            offsets[r] = offset
            placed.append((offset, offset + size, lo, hi))
        return offsets, max((p[1] for p in placed), default=0)

    orders = [
        sorted(blocks, key=lambda r: (-blocks[r][2], blocks[r][0], r)),
        sorted(blocks, key=lambda r: (blocks[r][0], -blocks[r][2], r)),
        sorted(blocks, key=lambda r: (-blocks[r][2] * (blocks[r][1] - blocks[r][0] + 1), r)),
    ]
    block_offsets, _ = min((place(o) for o in orders), key=lambda p: p[1])
    offsets = dict(pinned_offsets)
    for t, r in lv.root.items():
        if t not in g.pinned:
            offsets[t] = block_offsets[r]
    # Arena tensors that are never live (declared, never read or written)
    # need a valid offset but no bytes of their own.
    for t, in_arena in enumerate(g.in_arena):
        if in_arena and t not in offsets:
            offsets[t] = 0
    end = max((offsets[t] + g.nbytes[t] for t in offsets), default=0)
    return ArenaPlan(offsets, aligned(end))
