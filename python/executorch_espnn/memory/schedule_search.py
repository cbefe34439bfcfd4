"""Schedule search: per partition, layer-by-layer or fused (band) execution.

A *fused region* (memory.fused_regions.FusedRegion) runs a contiguous run of
ops band by band, so the tensors inside it exist only as a few rows. It
lowers the arena where those tensors are large; its band buffers and (in
place) staging rows cost bytes of their own. This module picks the regions
of one XTS3 graph by two costs, in this order:

1. the planned arena (bytes), what the runtime allocates at init;
2. the op invocations per inference: every op outside a region runs once, a
   region runs its BAND_LOOP once and each of its ops once per band (the
   number of bands is PlanRegion's, the runtime's band geometry).

Why invocations, and not cycles or MACs: fused execution computes every
output row exactly once (espnn/band_geometry.h proves it; fused_regions
checks it on every region it lays out), so every schedule does the MACs of
the graph and MACs cannot rank schedules. What a region adds is the fixed
cost of an op call -- the interpreter's dispatch, the kernel's set-up, the
band loop's row bookkeeping -- paid by each of its ops for each band. That
cost in cycles depends on the op, the kernel and the chip, and nothing here
measures it; the number of calls that pay it is exact from the band
geometry. So at equal arena the search takes the taller bands and fewer
fused ops.

* ``mode="layer"``: no regions (every op runs on whole tensors);
* ``mode="auto"`` (default): the smallest peak arena any schedule reaches,
  and among the schedules that reach it the fewest op invocations, then the
  fewest regions; so ops are fused only where that lowers the peak, and a
  graph whose peak is set elsewhere (e.g. by its input and output) stays
  layer by layer;
* ``mode="fused"``: the same peak, but every op of a fusable chain that can
  be in a region is (fewest ops left layer by layer, then the fewest
  invocations): the same arithmetic band by band, so exactness tests use it
  to run as many regions as possible;
* ``budget``: instead of the smallest peak, the fewest invocations whose
  peak fits in ``budget`` bytes (with auto: no regions at all when the
  layer-by-layer arena already fits); ``ScheduleError`` names the smallest
  peak reachable when none fits.

How: the arena is at least the bytes live at its busiest op step
(memory.arena_rule). A region changes only the bytes live at its own steps
(its band buffers live nowhere else; the tensors it reads and writes whole
are the same at every other step), so each maximal fusable chain
(fused_regions.fusable_chains) is split on its own, by dynamic programming
over its ops: each op either runs layer by layer (its step's bytes as they
are) or starts a region of the next k ops (the region's busiest step, from
the arena rule on the graph with that region fused, at the tallest band
that fits: the fewest bands). First the smallest reachable bound P*: every
chain split to minimise its busiest step. Then, for the target T (P*, or
the budget), every chain split for the fewest (invocations, regions) whose
steps are all <= T. The planner's arena for the chosen regions (plan_arena)
is what is reported and checked against the budget; where its packing ends
above the bound (memory.arena_plan: not always avoidable), the search
retries with a lower target. A region the runtime would refuse
(fused_regions.RegionRefused) is no candidate; any other error propagates.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Protocol, Sequence

from .. import _native
from .arena_plan import plan_arena
from .arena_rule import ArenaGraph, liveness
from .fused_regions import (BandGraph, FusedRegion, RegionRefused, fusable_chains, fuse, is_fusable,
                            region_layout)

SCHEDULE_MODES = ("auto", "layer", "fused")

# Output rows per band the search tries (of the region's last op; the rows
# each earlier op needs follow from the band geometry). Dense at the small
# end, where the peak changes most per row; a height past the tensor's rows
# is one band (the parser-side geometry clamps it).
BAND_HEIGHTS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128)


class ScheduleError(Exception):
    """No schedule of the requested mode fits the arena budget.
    ``smallest_peak``: the least arena (bytes) the mode reaches. Not a
    ValueError: the arguments were valid and the graph cannot meet them, so
    no ``except ValueError`` meant for a refused value may take it for one."""

    def __init__(self, message: str, *, budget: int, smallest_peak: int):
        super().__init__(message)
        self.budget = budget
        self.smallest_peak = smallest_peak


@dataclass(frozen=True)
class Schedule:
    """The regions chosen for one graph and what they cost."""

    mode: str  # the mode asked for (SCHEDULE_MODES)
    regions: tuple  # memory.fused_regions.FusedRegion, in op order; () = layer by layer
    peak: int  # planned arena with these regions, bytes
    layer_peak: int  # planned arena layer by layer, bytes
    layer_bound: int  # lower bound of any layer-by-layer plan's arena (none is smaller), bytes
    invocations: int  # op invocations per inference (module doc); layer by layer: the number of ops
    budget: int | None = None

    @property
    def description(self) -> str:
        """One line: what runs how, and what it costs."""
        if not self.regions:
            return f"layer-by-layer, peak {self.peak:,} B"
        return (f"{regions_text(self.regions)}, peak {self.peak:,} B (layer-by-layer {self.layer_peak:,} B), "
                f"{self.invocations:,} op invocations")


def regions_text(regions) -> str:
    """``fused 2 region(s) [ops 0-4 x8 rows, ops 5-7 x4 rows in place]`` or ``layer-by-layer``."""
    if not regions:
        return "layer-by-layer"
    spans = ", ".join(f"ops {r.first_op}-{r.first_op + r.num_ops - 1} x{r.band_rows} row{'s' * (r.band_rows > 1)}"
                      + (" in place" if r.in_place else "") for r in regions)
    return f"fused {len(regions)} region(s) [{spans}]"


class BandCosts(Protocol):
    """What the search needs to know about a graph (``GraphCosts`` asks
    memory.fused_regions; the unit tests give synthetic costs)."""

    def chains(self) -> Sequence[tuple[int, int]]: ...  # maximal (first_op, num_ops) fusable runs
    def fusable(self, first_op: int, num_ops: int) -> bool: ...  # may these ops form a region?
    def output_rows(self, first_op: int, num_ops: int) -> int: ...  # output rows of the region's last op
    def step_bytes(self) -> list[int]: ...  # bytes live at each op step, layer by layer
    def input_bytes(self) -> int: ...  # bytes live before op 0 (the graph inputs)
    def region_peak(self, region) -> int: ...  # bytes live at the region's busiest step; RegionRefused
    def peak(self, regions: tuple) -> int: ...  # planned arena; RegionRefused for a region the runtime refuses
    def num_bands(self, region) -> int: ...  # bands the runtime runs the region in
    def layer_bound(self) -> int: ...
    def region(self, first_op: int, num_ops: int, band_rows: int, in_place: bool): ...  # a FusedRegion
    def may_be_in_place(self, first_op: int, num_ops: int) -> bool: ...


@dataclass
class GraphCosts:
    """BandCosts of an ArenaGraph that carries its band geometry
    (Xts3Writer.arena_graph, ArenaGraph.from_blob): memory.fused_regions
    (the C++ parser's region rules and row arithmetic, through the binding)
    and plan_arena."""

    graph: ArenaGraph
    _peaks: dict = field(default_factory=dict)
    _fusable: dict = field(default_factory=dict)
    _num_bands: dict = field(default_factory=dict)
    # Offer in-place regions whose output is narrower than their input (a
    # squeeze-excite projection over its map); _search also searches without.
    narrower_in_place: bool = True

    def chains(self):
        return fusable_chains(self.graph)

    def fusable(self, first_op: int, num_ops: int) -> bool:
        key = (first_op, num_ops)
        if key not in self._fusable:
            self._fusable[key] = is_fusable(self.graph, first_op, num_ops)
        return self._fusable[key]

    def output_rows(self, first_op: int, num_ops: int) -> int:
        """Output rows of the region's last op (a band this tall is the whole tensor)."""
        return self.graph.bands.shape(self.graph.ops[first_op + num_ops - 1].outputs[0])[1]

    def peak(self, regions):
        # Only arenas are remembered: a refused set of regions raises
        # RegionRefused every time it is asked for.
        key = tuple(sorted(regions, key=lambda r: r.first_op))
        if key not in self._peaks:
            self._peaks[key] = plan_arena(self.graph, key).arena_size
        return self._peaks[key]

    def num_bands(self, region):
        if region not in self._num_bands:
            self._num_bands[region] = region_layout(self.graph, region).num_bands
        return self._num_bands[region]

    def step_bytes(self) -> list[int]:
        lv = liveness(self.graph)
        return [lv.class_bytes(lv.live_at(s), s) for s in range(len(self.graph.ops))]

    def input_bytes(self) -> int:
        lv = liveness(self.graph)
        return lv.class_bytes(lv.live_at(-1), -1)

    def region_peak(self, region) -> int:
        """Bytes live at the busiest step of ``region`` (its BAND_LOOP to its
        last op) in the graph with only that region fused (arena rule)."""
        fused, _ = fuse(self.graph, (region,))
        lv = liveness(fused)
        steps = range(region.first_op, region.first_op + region.num_ops + 1)
        return max(lv.class_bytes(lv.live_at(s), s) for s in steps)

    def layer_bound(self):
        return liveness(self.graph).lower_bound()

    def region(self, first_op, num_ops, band_rows, in_place):
        return FusedRegion(first_op, num_ops, band_rows, in_place)

    def may_be_in_place(self, first_op, num_ops):
        # Which outputs may take their input's bytes is the parser's rule
        # (band_loop.cpp CheckInPlaceShape), asked like every region rule.
        if isinstance(self.graph.bands.describe(first_op, num_ops, True), str):
            return False
        if self.narrower_in_place:
            return True
        ops = self.graph.ops
        x, y = ops[first_op].inputs[0], ops[first_op + num_ops - 1].outputs[0]
        return self.graph.nbytes[x] == self.graph.nbytes[y]

    def without_narrower_in_place(self) -> "GraphCosts":
        """These costs offering only in-place regions of one size (the
        caches shared: a region's bytes do not depend on what is offered)."""
        return replace(self, narrower_in_place=False)


def choose_schedule(graph: ArenaGraph, *, budget: int | None = None, mode: str = "auto",
                    costs: BandCosts | None = None) -> Schedule:
    """The schedule of ``graph`` for ``mode`` (SCHEDULE_MODES) and an
    optional arena ``budget`` in bytes (see the module doc). Raises
    ScheduleError when the budget cannot be met, ValueError for a bad mode."""
    if mode not in SCHEDULE_MODES:
        raise ValueError(f"schedule {mode!r} is not one of {list(SCHEDULE_MODES)}")
    if budget is not None and budget <= 0:
        raise ValueError(f"arena budget must be a positive number of bytes, got {budget}")
    if costs is None:
        if graph.pinned or graph.bands is None:  # a hand-made plan (tests), or no row geometry to fuse by
            mode = "layer"
        costs = GraphCosts(graph)
    layer_peak = costs.peak(())
    if mode == "layer" or (mode == "auto" and budget is not None and layer_peak <= budget):
        return _check_budget(_schedule(costs, mode, (), layer_peak, budget), budget)
    return _search(costs, mode, budget, layer_peak)


def _schedule(costs: BandCosts, mode: str, regions: tuple, layer_peak: int, budget: int | None) -> Schedule:
    regions = tuple(sorted(regions, key=lambda r: r.first_op))
    return Schedule(mode=mode, regions=regions, peak=costs.peak(regions), layer_peak=layer_peak,
                    layer_bound=costs.layer_bound(), invocations=invocations(costs, regions), budget=budget)


def invocations(costs: BandCosts, regions) -> int:
    """Op invocations per inference of the graph with ``regions`` fused:
    every op once, and what each region adds (_extra_calls)."""
    return len(costs.step_bytes()) + sum(_extra_calls(costs, r) for r in regions)


def _extra_calls(costs: BandCosts, region) -> int:
    """The invocations ``region`` adds to running its ops layer by layer:
    its BAND_LOOP, and each of its ops once more per band after the first."""
    return 1 + region.num_ops * (costs.num_bands(region) - 1)


def _check_budget(s: Schedule, budget: int | None, smallest: int | None = None) -> Schedule:
    if budget is None or s.peak <= budget:
        return s
    smallest = s.peak if smallest is None else smallest
    how = " layer by layer (schedule 'layer'; fused execution may reach less)" if s.mode == "layer" else ""
    raise ScheduleError(f"no schedule fits the arena budget of {budget:,} B: the smallest peak arena this "
                        f"partition reaches{how} is {smallest:,} B", budget=budget, smallest_peak=smallest)


@dataclass
class _Chains:
    """The DP over every chain, for one cost model."""

    costs: BandCosts
    chains: list  # disjoint spans (_spans)
    max_ops: int  # no region is longer than the longest fusable run

    def __post_init__(self):
        self.live = self.costs.step_bytes()  # op step -> bytes live layer by layer
        inside = {i for a, n in self.chains for i in range(a, a + n)}
        self.outside = max([b for i, b in enumerate(self.live) if i not in inside] + [self.costs.input_bytes()])
        self._peaks: dict = {}

    def region_peak(self, first: int, num: int, rows: int, in_place: bool) -> int | None:
        key = (first, num, rows, in_place)
        if key not in self._peaks:
            try:
                self._peaks[key] = self.costs.region_peak(self.costs.region(first, num, rows, in_place))
            except RegionRefused:
                self._peaks[key] = None  # not a candidate (e.g. in place where its input is read later)
        return self._peaks[key]

    def options(self, first: int, num: int) -> list[bool]:
        """in-place flags a region of these ops may have (none: not fusable)."""
        if not self.costs.fusable(first, num):
            return []
        return [False, True] if self.costs.may_be_in_place(first, num) else [False]

    def heights(self, first: int, num: int) -> list[int]:
        limit = self.costs.output_rows(first, num)
        return [h for h in BAND_HEIGHTS if h < limit] or [1]

    def smallest_region(self, first: int, num: int) -> int | None:
        peaks = [p for ip in self.options(first, num) if (p := self.region_peak(first, num, 1, ip)) is not None]
        return min(peaks) if peaks else None

    def fitting_region(self, first: int, num: int, target: int):
        """(invocations it adds, region) of the tallest band (the fewest
        bands) of these ops whose busiest step is <= target (in place only
        where that is needed), or None."""
        for ip in self.options(first, num):
            hs = self.heights(first, num)
            if (p := self.region_peak(first, num, hs[0], ip)) is None or p > target:
                continue
            lo, hi = 0, len(hs) - 1  # region peaks grow with the band: the tallest that fits
            while lo < hi:
                mid = (lo + hi + 1) // 2
                p = self.region_peak(first, num, hs[mid], ip)
                if p is not None and p <= target:
                    lo = mid
                else:
                    hi = mid - 1
            if ip:  # except an in-place region's staging rows, which depend on where bands end
                lo = next(k for k in range(len(hs) - 1, lo - 1, -1)
                          if k == lo or ((p := self.region_peak(first, num, hs[k], ip)) is not None and p <= target))
            r = self.costs.region(first, num, hs[lo], ip)
            return _extra_calls(self.costs, r), r
        return None

    def min_bottleneck(self, chain) -> int:
        """The least busiest step any split of ``chain`` has."""
        first, n = chain
        best = [0] + [None] * n
        for p in range(n):
            if best[p] is None:
                continue
            cand = [(p + 1, self.live[first + p])]
            for k in range(1, min(n - p, self.max_ops) + 1):
                peak = self.smallest_region(first + p, k)
                if peak is not None:
                    cand.append((p + k, peak))
            for q, peak in cand:
                v = max(best[p], peak)
                if best[q] is None or v < best[q]:
                    best[q] = v
        return best[n]

    def split(self, chain, target: int, *, fuse_all: bool):
        """The regions of the cheapest split of ``chain`` whose steps all fit
        ``target``: least (invocations, regions, ops left layer by layer) --
        with ``fuse_all``, least (ops left layer by layer, invocations,
        regions) -- or None."""
        first, n = chain

        def rank(key):  # key = (invocations added by regions, ops left layer by layer, regions)
            return (key[1], key[0], key[2]) if fuse_all else (key[0], key[2], key[1])

        best: list = [((0, 0, 0), ())] + [None] * n
        for p in range(n):
            if best[p] is None:
                continue
            (cost, layer_ops, count), regions = best[p]
            moves = []
            if self.live[first + p] <= target:
                moves.append((p + 1, (cost, layer_ops + 1, count), regions))
            for k in range(1, min(n - p, self.max_ops) + 1):
                fit = self.fitting_region(first + p, k, target)
                if fit is not None:
                    moves.append((p + k, (cost + fit[0], layer_ops, count + 1), regions + (fit[1],)))
            for q, key, regs in moves:
                if best[q] is None or rank(key) < rank(best[q][0]):
                    best[q] = (key, regs)
        return None if best[n] is None else best[n][1]


# A planned arena above the bound it was chosen for (the packing missed it) is
# retried with the target lowered by the excess, at most this many times.
_RETRIES = 4


def _spans(chains) -> list[tuple[int, int]]:
    """Maximal fusable runs may overlap (a run that is fusable from op a and
    one from op b < a's end): the DP splits their union, any fusable sub-run
    of it being a candidate region, so regions never overlap."""
    spans: list[list[int]] = []
    for first, n in sorted(chains):
        if spans and first < spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], first + n)
        else:
            spans.append([first, first + n])
    return [(a, b - a) for a, b in spans]


def _variants(costs: BandCosts) -> list:
    """The costs to search with. A class that shrinks to a narrower in-place
    output (Liveness.segments) is harder to pack: the planner can place such
    schedules well above their bound (EfficientNet-B0: 639,744 B for
    566,272 B) where the schedules without them pack at theirs. So GraphCosts
    is searched with such regions and without, and the planner's real arena
    judges the schedules of both: none is worse than the search without them
    finds."""
    if isinstance(costs, GraphCosts) and costs.narrower_in_place:
        return [costs, costs.without_narrower_in_place()]
    return [costs]


def _search(costs: BandCosts, mode: str, budget: int | None, layer_peak: int) -> Schedule:
    runs = [c for c in costs.chains() if c[1] >= 1]
    chains = _spans(runs)
    layer = _schedule(costs, mode, (), layer_peak, budget)
    if not chains:
        return _check_budget(layer, budget)
    # Candidates: the cheapest split and the most-fused split of every run,
    # judged by the planner's real arena (its packing can put two
    # schedules with the same bound on different arenas).
    found: dict = {}
    for variant in _variants(costs):
        dp = _Chains(variant, chains, max(n for _, n in runs))
        floor = max([dp.outside] + [dp.min_bottleneck(c) for c in chains])
        if mode == "auto" and floor >= costs.layer_bound():  # fusion does not lower this graph's peak
            continue
        _split_candidates(variant, dp, chains, mode, budget, floor, found)
    if mode == "auto" and not found:
        return _check_budget(layer, budget)
    if budget is None:  # the smallest arena, then the fewest invocations, then the fewest regions
        key = lambda item: (item[1][0], item[1][1], len(item[0]))  # noqa: E731
    else:  # the fewest invocations that fit, then the fewest regions (none fits: the smallest arena)
        def key(item):
            regions, (peak, calls) = item
            fits = peak <= budget
            return (not fits, calls if fits else peak, len(regions), peak)
    regions, (peak, _) = min(found.items(), key=key) if found else ((), (layer_peak, 0))
    best = (peak, regions)
    if mode == "auto" and best[0] >= layer_peak:
        best = (layer_peak, ())
    schedule = _schedule(costs, mode, best[1], layer_peak, budget)
    return _check_budget(schedule, budget, min(schedule.peak, layer_peak))


def _split_candidates(costs: BandCosts, dp: _Chains, chains, mode: str, budget: int | None, floor: int,
                      found: dict) -> None:
    """Adds to ``found`` (regions -> (planned arena, invocations)) the splits
    of every run for the smallest peak ``floor`` (or the budget), the target
    lowered while the planned arena misses it."""
    goal = floor if budget is None else budget
    target = floor if budget is None else max(budget, floor)
    for _ in range(_RETRIES + 1):
        for fuse_all in ((True,) if mode == "fused" else (False, True)):
            splits = [dp.split(c, target, fuse_all=fuse_all) for c in chains]
            if all(s is not None for s in splits):
                regions = tuple(r for s in splits for r in s)
                if regions not in found:
                    found[regions] = (costs.peak(regions), invocations(costs, regions))
        smallest = min((p for p, _ in found.values()), default=None)
        if smallest is None or smallest <= goal or target <= floor:
            break
        target = max(floor, target - (smallest - goal))


def fused_floor(graph: ArenaGraph, costs: BandCosts | None = None) -> tuple[int, int]:
    """What bounds the smallest peak fused execution reaches, as bytes live
    (the arena rule): (the busiest op step outside every fusable run, e.g. a
    float graph input's QUANTIZE, which no region can take; the least
    busiest step the fusable runs reach fused). The peak of mode auto is at
    least the larger of the two."""
    costs = costs or GraphCosts(graph)
    runs = [c for c in costs.chains() if c[1] >= 1]
    if not runs:
        return max(costs.step_bytes() + [costs.input_bytes()]), 0
    dp = _Chains(costs, _spans(runs), max(n for _, n in runs))
    return dp.outside, max(dp.min_bottleneck(c) for c in dp.chains)


def payload_schedule(blob: bytes) -> dict:
    """What a payload's schedule is and costs, read from the payload with
    the native parser: the report's per-partition figures
    (docs/report-schema.json, payload): ``arena_layer_bound`` (no
    layer-by-layer plan of this op order is smaller), ``schedule`` (one
    line) and ``fused_regions``."""
    graph, regions = payload_regions(BandGraph(bytes(blob)))
    bound = liveness(graph).lower_bound()
    return {"arena_layer_bound": bound, "schedule": regions_text(regions),
            "fused_regions": [{"first_op": r.first_op, "num_ops": r.num_ops, "band_rows": r.band_rows,
                               "in_place": bool(r.in_place)} for r in regions]}


def payload_regions(payload: BandGraph) -> tuple[ArenaGraph, tuple]:
    """The payload's layer-by-layer graph (BAND_LOOP ops taken out, BANDED
    tensors at their whole size, the band geometry of the remaining ops) and
    its fused regions on that graph's op indices."""
    summary = payload.summary
    fused = ArenaGraph.from_summary(summary)
    if not any(op.name == "BAND_LOOP" for op in fused.ops):
        return fused, ()
    keep = [i for i, op in enumerate(fused.ops) if op.name != "BAND_LOOP"]
    regions = []
    for i, op in enumerate(fused.ops):
        if op.name == "BAND_LOOP":
            regions.append(FusedRegion(i - len(regions), op.region_ops, summary["ops"][i]["params"]["band_rows"],
                                       op.in_place))
    # The payload's parse without its BAND_LOOP ops.
    layer_view = payload.without_loops()
    whole = tuple(_whole_nbytes(t) for t in summary["tensors"])
    layer = ArenaGraph(whole, fused.in_arena, tuple(fused.ops[i] for i in keep), fused.inputs, fused.outputs,
                       bands=layer_view)
    return layer, tuple(regions)


def _whole_nbytes(tensor: dict) -> int:
    """A tensor's bytes whole (a BANDED tensor's record holds its band buffer's)."""
    n = _native.DTYPES[tensor["dtype"]][1]
    for d in tensor["shape"]:
        n *= d
    return n
