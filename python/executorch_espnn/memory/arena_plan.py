"""Arena planning: an offset for every arena tensor of an XTS3 graph.

Tensors that are live at the same step never share bytes, except the alias
classes of the arena rule (memory.arena_rule), each planned as one block
over the union of its members' lifetimes (a block that shrinks where an
in-place region's narrower output outlives its input: Liveness.segments;
the search for a plan at the bound, pack_at, takes each block at its
largest). Liveness.lower_bound(), the most
bytes live at one step, is what a plan is measured against: none is smaller.

Two stages. Greedy first-fit, tried in a few orders (largest first, then by
first use, then by size x lifetime), the smallest arena kept: cheap, and at
the bound on most graphs. First-fit can leave a hole no later block fits (a
dilated TCN: each residual is live over a whole block, the padded maps
beside it grow with the dilation, and first-fit puts the residual wherever
the previous block left room); where its arena is above the bound, a search
for a plan at the bound (``pack_at``). The bound is not guaranteed: placing
blocks of fixed lifetimes is NP-hard, and the search tries only offsets
flush with an edge, within a budget. When it finds no plan, the first-fit
plan stays and the arena is above the bound (the reports print both).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .arena_rule import ArenaGraph, Liveness, aligned, liveness
from .fused_regions import fuse


@dataclass(frozen=True)
class ArenaPlan:
    offsets: dict[int, int]  # arena tensor -> byte offset (staging tensors of regions included)
    arena_size: int  # bytes, ARENA_ALIGNMENT-aligned; the peak arena
    # Fused regions (memory.fused_regions.RegionLayout), in op order; the
    # writer writes them (BAND_LOOP ops, BANDED tensors, staging tensors).
    regions: tuple = ()


def plan_arena(g: ArenaGraph, regions: Sequence = (), pinned_offsets: dict[int, int] | None = None,
               lv: Liveness | None = None) -> ArenaPlan:
    """Offsets for every arena tensor of ``g``.

    ``regions``: memory.fused_regions.FusedRegion's to run band by band (op
    indices of ``g``, which has no BAND_LOOP ops); the plan is then for the
    fused graph (fused_regions.fuse). ``pinned_offsets``: offsets the caller
    fixed (tests that build a plan by hand); they must name ``g.pinned``.
    ``lv``: the liveness to plan by (default: the rule's); tests pass a
    different one to check the parser.
    """
    if regions:
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
            segments = lv.segments[r]
            if len(segments) > 1:
                offsets[r] = _lowest_fit(segments, placed)
            else:
                lo, hi, size = blocks[r]
                offset = 0
                for o, e, f, l in sorted(p for p in placed if not (p[3] < lo or hi < p[2])):
                    if offset + size <= o:
                        break
                    offset = max(offset, aligned(e))
                offsets[r] = offset
            placed += [(offsets[r], offsets[r] + size, lo, hi) for lo, hi, size in segments]
        return offsets, max((p[1] for p in placed), default=0)

    orders = [
        sorted(blocks, key=lambda r: (-blocks[r][2], blocks[r][0], r)),
        sorted(blocks, key=lambda r: (blocks[r][0], -blocks[r][2], r)),
        sorted(blocks, key=lambda r: (-blocks[r][2] * (blocks[r][1] - blocks[r][0] + 1), r)),
    ]
    block_offsets, arena = min((place(o) for o in orders), key=lambda p: p[1])
    bound = lv.lower_bound()
    if arena > bound:
        at_bound = pack_at(bound, {r: lv.segments[r] for r in blocks}, pinned)
        block_offsets = block_offsets if at_bound is None else at_bound
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


def _lowest_fit(segments, placed) -> int:
    """The lowest offset, 0 or the end of a placed span, at which every
    (first, last, bytes) segment of a class is clear of the ``placed``
    (offset, end, first, last) spans live at its steps."""
    near = [(o, e, size) for lo, hi, size in segments for o, e, f, l in placed if not (l < lo or hi < f)]
    for c in sorted({0} | {aligned(e) for _, e, _ in near}):
        if all(c + size <= o or e <= c for o, e, size in near):
            return c
    raise AssertionError("unreachable: the highest end clears every span")


# pack_at gives up after this many partial plans per block to place: the
# search is exponential in the worst case, and plan_arena runs for every
# candidate op order and fused schedule. The TCNs of
# tests/memory/test_arena_bound.py needed at most 8 per block.
SEARCH_NODES_PER_BLOCK = 64


def pack_at(cap: int, blocks: dict[int, tuple[tuple[int, int, int], ...]],
            fixed: Sequence[tuple[int, int, int, int]] = ()) -> dict[int, int] | None:
    """Offsets for ``blocks`` (root -> its (first step, last step, bytes)
    segments, Liveness.segments) with every byte below ``cap``, clear of
    each other where their lifetimes overlap and of the ``fixed`` spans
    ((offset, end, first, last)), or None when the search finds none within
    its budget.

    Depth-first over the blocks in order of first step, so that a block
    meets, when it is placed, every block placed before it that it must
    avoid (those still live; later ones avoid it in turn), each at an offset
    flush with an edge (_candidates), lowest first: first-fit is the first
    path tried. A dead end is remembered by all it depends on, the offsets
    of the blocks still live, so no state is searched twice.
    """
    first = {r: segs[0][0] for r, segs in blocks.items()}
    last = {r: segs[-1][1] for r, segs in blocks.items()}
    order = sorted(blocks, key=lambda r: (first[r], -max(b for _, _, b in blocks[r]), r))
    offsets: dict[int, int] = {}
    dead: set = set()
    frames: list = []  # per block being placed: (state, iterator over the offsets left to try)
    budget = SEARCH_NODES_PER_BLOCK * len(order)
    advance = True
    while True:
        if advance:  # every open frame's block is placed: open the next block's
            if len(frames) == len(order):
                return offsets
            budget -= 1
            if budget < 0:
                return None
            r = order[len(frames)]
            state = (len(frames), frozenset((q, o) for q, o in offsets.items() if last[q] >= first[r]))
            tries = [] if state in dead else _candidates(cap, _obstacles(blocks[r], blocks, offsets, fixed))
            frames.append((state, iter(tries)))
        state, tries = frames[-1]
        r = order[len(frames) - 1]
        offsets.pop(r, None)
        offset = next(tries, None)
        advance = offset is not None
        if advance:
            offsets[r] = offset
            continue
        dead.add(state)  # no offset of this block leads to a plan from here
        frames.pop()
        if not frames:
            return None


def _obstacles(segments, blocks: dict, offsets: dict[int, int],
               fixed: Sequence[tuple[int, int, int, int]]) -> list[tuple[int, list[tuple[int, int]]]]:
    """Per segment of a block: (its bytes, the (offset, end) of the placed
    and fixed spans live at some step of it)."""
    out = []
    for first, last, size in segments:
        spans = [(o, o + b) for q, o in offsets.items() for f, l, b in blocks[q] if not (l < first or last < f)]
        out.append((size, spans + [(o, e) for o, e, f, l in fixed if not (l < first or last < f)]))
    return out


def _candidates(cap: int, obstacles: list[tuple[int, list[tuple[int, int]]]]) -> list[int]:
    """Offsets, lowest first, where every segment (its bytes, its spans to
    avoid) fits below ``cap`` clear of its spans, flush against an edge: 0,
    ``cap``, a span's end or start. Only these: a block that must rest on
    one placed after it (neither flush with anything live when it starts)
    is missed, but trying every offset would let the search spend its
    budget on the last blocks' offsets before it revisits an early choice."""
    edges = {0} | {cap - size for size, _ in obstacles}
    for size, spans in obstacles:
        edges |= {e for _, e in spans} | {o - size for o, _ in spans}
    return [c for c in sorted(edges)
            if all(0 <= c <= cap - size and all(c + size <= o or e <= c for o, e in spans)
                   for size, spans in obstacles)]
