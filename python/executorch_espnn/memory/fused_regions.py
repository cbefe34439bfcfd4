"""Fused regions: which runs of ops may execute band by band, and what a
chosen set of them does to the arena.

A fused region (xts3_format.h BAND_LOOP, docs/xts3-format.md section 6, BAND_LOOP) is a
run of consecutive ops that the runtime executes over bands of output rows:
the intermediate tensors exist only as band buffers (BANDED tensors) of a
few rows, so the large feature maps inside the run never exist whole.
Everything about a region is the runtime's: whether a run may form one, and
its description, come from ``Program.describe_region`` (the parser's checks
of a BAND_LOOP, ops/band_loop.cpp DescribeCandidate, asked on the
layer-by-layer program), the row arithmetic (band buffer rows, an in-place
region's staging rows) from ``_native.plan_band_region`` (espnn/band_geometry.h
PlanRegion). This module only maps the answers to arena tensors.

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
    layer-by-layer blob: tensor shapes, dtypes and flags, each op's row
    windows (``Program.band_support``) and the parser's verdict on a
    candidate region (``describe``). ``source`` returns the blob (called
    once, when first needed)."""

    def __init__(self, source: Callable[[], bytes] | bytes):
        self._source = source
        self._ops = None  # op index here -> op index in the program (None: the same)

    @cached_property
    def program(self):
        blob = self._source() if callable(self._source) else self._source
        return _native.Program(blob)

    def without_loops(self) -> "BandGraph":
        """The layer-by-layer view of a fused program: its ops without the
        BAND_LOOP ops (op indices renumbered), the same program behind it."""
        view = BandGraph(b"")
        keep = [i for i, op in enumerate(self.summary["ops"]) if op["op"] != "BAND_LOOP"]
        view.__dict__["program"] = self.program  # the cached_properties' slots
        view.__dict__["_parsed"] = (dict(self.summary, ops=[self.summary["ops"][i] for i in keep]),
                                    [self.windows[i] for i in keep])
        view._ops = keep
        return view

    def describe(self, first: int, num: int, in_place: bool = False) -> dict | str:
        """``Program.describe_region`` for ops first .. first+num-1 of this
        view: the region's description, or why the parser would refuse it."""
        if first < 0:
            return f"first_op = {first} is negative"
        num = max(num, 0)
        if self._ops is not None and num >= 1:
            if first + num > len(self._ops):
                first = len(self.program.summary()["ops"])  # past the last op: refused there
            else:
                # A run across a BAND_LOOP op includes it: refused there.
                first, num = self._ops[first], self._ops[first + num - 1] - self._ops[first] + 1
        return self.program.describe_region(first, num, in_place)

    @cached_property
    def _parsed(self) -> tuple[dict, list]:
        return self.program.summary(), self.program.band_support()

    @property
    def summary(self) -> dict:
        return self._parsed[0]

    @property
    def windows(self) -> list:
        """Per op: [(input slot, stride, pad, extent), ...] or None."""
        return self._parsed[1]

    def shape(self, t: int) -> tuple[int, ...]:
        return tuple(self.summary["tensors"][t]["shape"])

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
    in_place_input: int | None  # local index (in-place regions)


def _describe(g: ArenaGraph, first: int, num: int, in_place: bool = False) -> _Described | str:
    """The region's description for PlanRegion, or the parser's reason to
    refuse it (ops/band_loop.cpp DescribeCandidate through the binding)."""
    d = _bands(g).describe(first, num, in_place)
    if isinstance(d, str):
        return d
    return _Described(tuple(d["tensors"]), tuple(d["ops"]), tuple(d["heights"]), d["in_place_input"])


def refusal(g: ArenaGraph, first_op: int, num_ops: int) -> str | None:
    """Why ops first_op .. first_op + num_ops - 1 may not form a fused
    region (the parser's message), or None when they may."""
    d = _describe(g, first_op, num_ops)
    return d if isinstance(d, str) else None


def is_fusable(g: ArenaGraph, first_op: int, num_ops: int) -> bool:
    """Whether ops first_op .. first_op + num_ops - 1 may form a fused region."""
    return refusal(g, first_op, num_ops) is None


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
    """The layout of region ``r`` of ``g``; RegionRefused, with the parser's
    reason, where the runtime would refuse it."""
    d = _describe(g, r.first_op, r.num_ops, r.in_place)
    if isinstance(d, str):
        raise RegionRefused(f"ops {r.first_op}..{r.first_op + r.num_ops - 1} cannot form a fused region: {d}")
    if r.band_rows < 1:
        raise RegionRefused("band_rows must be >= 1")
    x = d.in_place_input if r.in_place else -1
    plan = _native.plan_band_region(list(d.ops), list(d.heights), r.band_rows, x)
    out_local = d.ops[-1][0]
    _check_computed_once(r, plan["computed"], [d.heights[out] for out, _ in d.ops])
    banded = {d.tensors[op[0]]: plan["capacity"][op[0]] for op in d.ops if op[0] != out_local}
    staging_shape = (plan["staging_rows"], _bands(g).row_bytes(d.tensors[out_local])) if r.in_place else None
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
