"""Fused regions: which runs of ops may execute band by band, and what a
chosen set of them does to the arena.

A fused region (xts3_format.h BAND_LOOP, docs/xts3-format.md section 6, BAND_LOOP) is a
run of consecutive ops that the runtime executes over bands of output rows:
the intermediate tensors exist only as band buffers (BANDED tensors) of a
few rows, so the large feature maps inside the run never exist whole. The
row arithmetic (which rows a band needs of every tensor, hence each band
buffer's rows and an in-place region's staging rows) is the runtime's:
``_native.plan_band_region`` runs espnn/band_geometry.h's PlanRegion, and
how each op reads rows comes from the parser (``Program.band_support``).
Nothing here restates it; this module maps graph tensors to the region
description and turns the answer into arena tensors.

Regions are given on the op indices of the layer-by-layer graph (without
BAND_LOOP ops); ``fuse`` inserts the BAND_LOOP ops and staging tensors, and
``plan_arena(graph, regions)`` plans the fused graph.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Callable, Sequence

from .. import _native
from .arena_rule import ArenaGraph, OpIO, liveness


class RegionRefused(Exception):
    """The runtime would refuse this fused region: its ops cannot run band by
    band (the parser's region rules), its band height is not positive, or it
    cannot be in place. A candidate the schedule search drops, not a bad
    value: deliberately not a ValueError, so that no ``except ValueError``
    meant for malformed input takes it for one (or the other way round)."""


@dataclass(frozen=True)
class FusedRegion:
    """Ops first_op .. first_op + num_ops - 1 of the layer-by-layer graph,
    run over bands of ``band_rows`` output rows of the last op. ``in_place``:
    the region output overwrites its input (input 0 of the first op) row by
    row, staged until no later band reads those input rows."""

    first_op: int
    num_ops: int
    band_rows: int
    in_place: bool = False


class BandGraph:
    """What fusion needs beyond the arena rule's view, read from a parsed
    layer-by-layer blob: tensor shapes, dtypes and flags and each op's row
    windows (``Program.band_support``). ``source`` returns the blob
    (called once, when first needed)."""

    def __init__(self, source: Callable[[], bytes] | bytes):
        self._source = source

    @classmethod
    def from_parsed(cls, summary: dict, windows: list) -> "BandGraph":
        """The view of a program already parsed (summary and band windows), with
        no blob behind it."""
        graph = cls(b"")
        graph.__dict__["_parsed"] = (summary, windows)  # the cached_property's slot
        return graph

    @cached_property
    def _parsed(self) -> tuple[dict, list]:
        blob = self._source() if callable(self._source) else self._source
        program = _native.Program(blob)
        return program.summary(), program.band_support()

    @property
    def summary(self) -> dict:
        return self._parsed[0]

    @property
    def windows(self) -> list:
        """Per op: [(input slot, stride, pad, extent), ...] or None."""
        return self._parsed[1]

    def shape(self, t: int) -> tuple[int, ...]:
        return tuple(self.summary["tensors"][t]["shape"])

    def is_image(self, t: int) -> bool:
        """An int8 [1,H,W,C] arena tensor (what a region reads and writes by rows)."""
        d = self.summary["tensors"][t]
        return d["dtype"] == "INT8" and d["memory"] == "ARENA" and len(d["shape"]) == 4 and d["shape"][0] == 1

    def row_bytes(self, t: int) -> int:
        s = self.shape(t)
        return s[2] * s[3]


def _bands(g: ArenaGraph) -> BandGraph:
    if g.bands is None:
        raise ValueError("this ArenaGraph carries no band geometry (build it with "
                         "ArenaGraph.from_blob or Xts3Writer.arena_graph)")
    return g.bands


# ------------------------------------------------------------------ regions

@dataclass(frozen=True)
class _Described:
    tensors: tuple[int, ...]  # local -> graph tensor
    ops: tuple  # (out, [(in, stride, pad, extent), ...]) on local indices
    heights: tuple[int, ...]


def _describe(g: ArenaGraph, first: int, num: int) -> _Described | None:
    """The region's description for PlanRegion, or None where the parser
    would refuse the run (the same rules as ops/band_loop.cpp)."""
    b = _bands(g)
    if not 1 <= num <= _native.LIMITS["max_region_ops"] or first < 0 or first + num > len(g.ops):
        return None
    local: dict[int, int] = {}
    produced: set[int] = set()
    ops = []
    for i in range(first, first + num):
        op, win = g.ops[i], b.windows[i]
        if win is None or op.name == "BAND_LOOP" or len(op.outputs) != 1:
            return None
        ins = []
        for slot, stride, pad, extent in win:
            t = op.inputs[slot]
            if t is None or not b.is_image(t):
                return None
            ins.append((local.setdefault(t, len(local)), stride, pad, extent))
        out = op.outputs[0]
        if not b.is_image(out) or out in local:
            return None
        local[out] = len(local)
        produced.add(out)
        ops.append((local[out], ins))
    if len(local) > _native.LIMITS["max_region_tensors"]:
        return None
    last_out = g.ops[first + num - 1].outputs[0]
    # Intermediate outputs: read by a later region op, by nothing outside
    # the region, never a graph output.
    for i in range(first, first + num - 1):
        t = g.ops[i].outputs[0]
        if t in g.outputs or t in g.inputs:
            return None
        readers = [j for j, op in enumerate(g.ops) if t in op.inputs]
        if not readers or any(not first + 0 <= j < first + num for j in readers) or max(readers) <= i:
            return None
        # every read must be a row-mapped input (not e.g. a constant slot)
        for j in readers:
            slots = {s for s, *_ in b.windows[j]}
            if any(g.ops[j].inputs[k] == t and k not in slots for k in range(len(g.ops[j].inputs))):
                return None
    del last_out
    tensors = tuple(sorted(local, key=local.get))
    return _Described(tensors, tuple(ops), tuple(b.shape(t)[1] for t in tensors))


def is_fusable(g: ArenaGraph, first_op: int, num_ops: int) -> bool:
    """Whether ops first_op .. first_op + num_ops - 1 may form a fused region."""
    return _describe(g, first_op, num_ops) is not None


def fusable_chains(g: ArenaGraph) -> list[tuple[int, int]]:
    """Maximal (first_op, num_ops) runs of at least two ops the parser
    accepts as a region (every shorter valid run lies inside one; a single
    op may also be a region, e.g. an in-place depthwise)."""
    n, limit = len(g.ops), _native.LIMITS["max_region_ops"]
    found = []
    for s in range(n):
        best = 0
        for k in range(2, min(limit, n - s) + 1):
            if _bands(g).windows[s + k - 1] is None:
                break
            if is_fusable(g, s, k):
                best = k
        if best:
            found.append((s, best))
    return [(s, k) for s, k in found
            if not any(s2 <= s and s + k <= s2 + k2 and (s2, k2) != (s, k) for s2, k2 in found)]


@dataclass(frozen=True)
class RegionLayout:
    """A region as the writer writes it: BANDED tensors with their rows, the
    staging tensor (in place only, appended after the graph's tensors), the
    rows each op computes over all bands (none twice: _check_computed_once)
    and the number of bands the runtime runs."""

    region: FusedRegion
    banded_rows: dict[int, int]
    staging: int | None
    staging_shape: tuple[int, int] | None
    computed_rows: tuple[int, ...]
    num_bands: int


def region_layout(g: ArenaGraph, r: FusedRegion, staging_index: int | None = None) -> RegionLayout:
    """The layout of region ``r`` of ``g``; RegionRefused where the runtime
    would refuse it."""
    d = _describe(g, r.first_op, r.num_ops)
    if d is None:
        raise RegionRefused(f"ops {r.first_op}..{r.first_op + r.num_ops - 1} cannot form a fused region")
    if r.band_rows < 1:
        raise RegionRefused("band_rows must be >= 1")
    x = d.ops[0][1][0][0] if r.in_place else -1
    plan = _native.plan_band_region(list(d.ops), list(d.heights), r.band_rows, x)
    out_local = d.ops[-1][0]
    _check_computed_once(r, plan["computed"], [d.heights[out] for out, _ in d.ops])
    banded = {d.tensors[op[0]]: plan["capacity"][op[0]] for op in d.ops if op[0] != out_local}
    staging_shape = None
    if r.in_place:
        xt, yt = d.tensors[x], d.tensors[out_local]
        if _bands(g).shape(xt) != _bands(g).shape(yt):
            raise RegionRefused(f"in-place region at op {r.first_op}: output shape differs from its input's")
        staging_shape = (plan["staging_rows"], _bands(g).row_bytes(yt))
    return RegionLayout(r, banded, staging_index if r.in_place else None, staging_shape,
                        tuple(plan["computed"]), plan["num_bands"])


def _check_computed_once(r: FusedRegion, computed: Sequence[int], out_rows: Sequence[int]) -> None:
    """No op of a region computes a row twice over all bands (at most its
    output's rows: an inner op may skip trailing rows no later op reads),
    and the region computes every row of its output. band_geometry.h proves
    the first (a band keeps the rows the previous one computed), so fused
    execution does no more MACs than layer-by-layer execution and the
    schedule search has no recomputation to weigh. Checked here, on
    PlanRegion's count, for every region laid out: a failure is a bug in the
    band geometry, not a cost."""
    twice = [i for i, (c, h) in enumerate(zip(computed, out_rows)) if c > h]
    if twice or computed[-1] != out_rows[-1]:
        raise AssertionError(f"fused region at op {r.first_op} x{r.band_rows} rows: its bands compute "
                             f"{list(computed)} rows of its ops' outputs, which have {list(out_rows)}")


def fuse(g: ArenaGraph, regions: Sequence[FusedRegion]) -> tuple[ArenaGraph, tuple[RegionLayout, ...]]:
    """The graph with a BAND_LOOP op before every region, BANDED tensors at
    their band-buffer size and staging tensors appended."""
    regions = sorted(regions, key=lambda r: r.first_op)
    for a, b in zip(regions, regions[1:]):
        if a.first_op + a.num_ops > b.first_op:
            raise ValueError(f"fused regions overlap: {a} and {b}")
    nbytes, in_arena = list(g.nbytes), list(g.in_arena)
    layouts = []
    for r in regions:
        lay = region_layout(g, r, len(nbytes) if r.in_place else None)
        for t, rows in lay.banded_rows.items():
            nbytes[t] = rows * _bands(g).row_bytes(t)
        if lay.staging is not None:
            nbytes.append(lay.staging_shape[0] * lay.staging_shape[1])
            in_arena.append(True)
        layouts.append(lay)
    ops: list[OpIO] = []
    starts = {lay.region.first_op: lay for lay in layouts}
    for i, op in enumerate(g.ops):
        if i in starts:
            lay = starts[i]
            ops.append(OpIO("BAND_LOOP", (), () if lay.staging is None else (lay.staging,),
                            lay.region.num_ops, lay.region.in_place))
        ops.append(op)
    fused = replace(g, nbytes=tuple(nbytes), in_arena=tuple(in_arena), ops=tuple(ops))
    lv = liveness(fused)
    for lay in layouts:
        if lay.region.in_place:
            step = [k for k, op in enumerate(fused.ops) if op.name == "BAND_LOOP"][layouts.index(lay)]
            x, y = fused.ops[step + 1].inputs[0], fused.ops[step + lay.region.num_ops].outputs[0]
            if lv.root.get(x) != lv.root.get(y):
                raise RegionRefused(f"in-place region at op {lay.region.first_op}: its input is still "
                                 "needed after the region (or is a graph output)")
    return fused, tuple(layouts)
