"""Schedule search: per partition, layer-by-layer or fused (band) execution.

A *fused region* (memory.band_schedule.FusedRegion) runs a contiguous run of
ops band by band, so the tensors inside it exist only as a few rows. It
lowers the arena where those tensors are large, at the price of halo rows
that neighbouring bands compute twice (recomputed MACs). This module picks
the regions of one XTS3 graph:

* ``mode="layer"``: no regions (every op runs on whole tensors);
* ``mode="auto"`` (default): the smallest peak arena any schedule reaches,
  and among the schedules that reach it the least recomputation; a chain is
  fused only where that lowers the peak, so a graph whose peak is set
  elsewhere (e.g. by its input and output) stays layer by layer;
* ``mode="fused"``: every fusable chain runs fused, whole, even where the
  peak does not need it (at the tallest band that keeps the peak of auto or
  the budget): the same arithmetic band by band, so the exactness tests use
  it to run every region;
* ``budget``: instead of the smallest peak, the least recomputation whose
  peak fits in ``budget`` bytes (with auto: no regions at all when the
  layer-by-layer arena already fits); ``ScheduleError`` names the smallest
  peak reachable when none fits.

How: the peak arena is the largest number of bytes live at one op step, and
a region only changes the bytes live at its own steps (its banded tensors
live nowhere else). So each maximal fusable chain (band_schedule.
fusable_chains) is chosen on its own: first the smallest peak reachable,
P* = every chain fused whole at one row per band (chains whose fusion does
not help left out); then, for a target T (P*, or the budget), for each chain
the candidate with the least recomputed MACs whose peak, with the other
chains at their smallest, is <= T (layer by layer first, then every sub-run
of the chain x band height x in-place, in order of recomputed MACs). Each
peak is the planned arena (plan_arena(graph, regions).arena_size), so what
is compared is what the writer will write, not an estimate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

from .arena_plan import plan_arena
from .arena_rule import ArenaGraph, liveness

SCHEDULE_MODES = ("auto", "layer", "fused")

# Output rows per band the search tries (of the region's last op; the rows
# each earlier op needs follow from the band geometry). Dense at the small
# end, where the peak changes most per row; a height past the tensor's rows
# is one band (the parser-side geometry clamps it).
BAND_HEIGHTS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128)


class ScheduleError(ValueError):
    """No schedule of the requested mode fits the arena budget.
    ``smallest_peak``: the least arena (bytes) the mode reaches."""

    def __init__(self, message: str, *, budget: int, smallest_peak: int):
        super().__init__(message)
        self.budget = budget
        self.smallest_peak = smallest_peak


@dataclass(frozen=True)
class Schedule:
    """The regions chosen for one graph and what they cost."""

    mode: str  # the mode asked for (SCHEDULE_MODES)
    regions: tuple  # memory.band_schedule.FusedRegion, in op order; () = layer by layer
    peak: int  # planned arena with these regions, bytes
    layer_peak: int  # planned arena layer by layer, bytes
    layer_bound: int  # least arena of any layer-by-layer plan (the lower bound), bytes
    recomputed_macs: int  # halo MACs computed more than once
    total_macs: int  # MACs of the graph layer by layer (0 when there are no regions: nothing to compare)
    budget: int | None = None

    @property
    def recompute_pct(self) -> float:
        return 100.0 * self.recomputed_macs / self.total_macs if self.total_macs else 0.0

    @property
    def description(self) -> str:
        """One line: what runs how, and what it costs."""
        if not self.regions:
            return f"layer-by-layer, peak {self.peak:,} B"
        return (f"{regions_text(self.regions)}, peak {self.peak:,} B (layer-by-layer {self.layer_peak:,} B), "
                f"recompute {self.recompute_pct:.2f}% of MACs")


def regions_text(regions) -> str:
    """``fused 2 region(s) [ops 0-4 x8 rows, ops 5-7 x4 rows in place]`` or ``layer-by-layer``."""
    if not regions:
        return "layer-by-layer"
    spans = ", ".join(f"ops {r.first_op}-{r.first_op + r.num_ops - 1} x{r.band_rows} row{'s' * (r.band_rows > 1)}"
                      + (" in place" if r.in_place else "") for r in regions)
    return f"fused {len(regions)} region(s) [{spans}]"


class BandCosts(Protocol):
    """What the search needs to know about a graph (``GraphCosts`` asks
    memory.band_schedule; the unit tests give synthetic costs)."""

    def chains(self) -> Sequence[tuple[int, int]]: ...  # maximal (first_op, num_ops) fusable runs
    def peak(self, regions: tuple) -> int: ...  # planned arena; ValueError for a region the rule refuses
    def recomputed(self, regions: tuple) -> int: ...  # recomputed halo MACs
    def total_macs(self) -> int: ...
    def layer_bound(self) -> int: ...
    def region(self, first_op: int, num_ops: int, band_rows: int, in_place: bool): ...  # a FusedRegion
    def may_be_in_place(self, first_op: int, num_ops: int) -> bool: ...


@dataclass
class GraphCosts:
    """BandCosts of an ArenaGraph, from memory.band_schedule (the band
    geometry of the C++ parser, through the binding) and plan_arena."""

    graph: ArenaGraph
    _peaks: dict = field(default_factory=dict)

    def chains(self):
        try:
            from .band_schedule import fusable_chains
        except ImportError:  # TRANSITIONAL (i14-plan before merging i14-runtime): no fused execution yet
            return []
        return fusable_chains(self.graph)

    def peak(self, regions):
        key = tuple(sorted(regions, key=lambda r: r.first_op))
        if key not in self._peaks:
            try:
                plan = plan_arena(self.graph, regions=key) if key else plan_arena(self.graph)
                self._peaks[key] = plan.arena_size
            except ValueError as e:
                self._peaks[key] = e
        result = self._peaks[key]
        if isinstance(result, ValueError):
            raise result
        return result

    def recomputed(self, regions):
        from .band_schedule import recomputed_macs

        return recomputed_macs(self.graph, tuple(regions))[0]

    def total_macs(self):
        from .band_schedule import recomputed_macs

        return recomputed_macs(self.graph, ())[1]

    def layer_bound(self):
        return liveness(self.graph).lower_bound()

    def region(self, first_op, num_ops, band_rows, in_place):
        from .band_schedule import FusedRegion

        return FusedRegion(first_op, num_ops, band_rows, in_place)

    def may_be_in_place(self, first_op, num_ops):
        # The region's output takes exactly its input's bytes: same size.
        ops = self.graph.ops
        first_in = self.graph.arena_inputs(ops[first_op])
        last_out = ops[first_op + num_ops - 1].outputs
        return bool(first_in) and self.graph.nbytes[first_in[0]] == self.graph.nbytes[last_out[0]]


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
        if graph.pinned:  # a hand-made plan (tests) is only valid as given
            mode = "layer"
        costs = GraphCosts(graph)
    layer_peak = costs.peak(())
    if mode == "layer" or (mode == "auto" and budget is not None and layer_peak <= budget):
        return _check_budget(_schedule(costs, mode, (), layer_peak, budget), budget)
    return _search(costs, mode, budget, layer_peak)


def _schedule(costs: BandCosts, mode: str, regions: tuple, layer_peak: int, budget: int | None) -> Schedule:
    regions = tuple(sorted(regions, key=lambda r: r.first_op))
    return Schedule(mode=mode, regions=regions, peak=costs.peak(regions), layer_peak=layer_peak,
                    layer_bound=costs.layer_bound(), recomputed_macs=costs.recomputed(regions) if regions else 0,
                    total_macs=costs.total_macs() if regions else 0, budget=budget)


def _check_budget(s: Schedule, budget: int | None, smallest: int | None = None) -> Schedule:
    if budget is None or s.peak <= budget:
        return s
    smallest = s.peak if smallest is None else smallest
    how = " layer by layer (schedule 'layer'; fused execution may reach less)" if s.mode == "layer" else ""
    raise ScheduleError(f"no schedule fits the arena budget of {budget:,} B: the smallest peak arena this "
                        f"partition reaches{how} is {smallest:,} B", budget=budget, smallest_peak=smallest)


def _search(costs: BandCosts, mode: str, budget: int | None, layer_peak: int) -> Schedule:
    chains = [c for c in costs.chains() if c[1] >= 1]
    if not chains:
        return _check_budget(_schedule(costs, mode, (), layer_peak, budget), budget)
    smallest = _smallest_per_chain(costs, chains)
    floor = costs.peak(tuple(r for r in smallest.values() if r is not None))
    if floor >= layer_peak and mode == "auto":  # fusion does not lower this graph's peak
        return _check_budget(_schedule(costs, mode, (), layer_peak, budget), budget, min(floor, layer_peak))
    if budget is not None and floor > budget:
        raise ScheduleError(f"no schedule fits the arena budget of {budget:,} B: the smallest peak arena this "
                            f"partition reaches is {min(floor, layer_peak):,} B (layer by layer {layer_peak:,} B)",
                            budget=budget, smallest_peak=min(floor, layer_peak))
    target = floor if budget is None else budget
    chosen = dict(smallest)
    for chain in chains:
        others = tuple(r for c, r in chosen.items() if c != chain and r is not None)
        fallback = chosen[chain] if chosen[chain] is not None or mode != "fused" else costs.region(*chain, 1, False)
        chosen[chain] = _cheapest_fit(costs, chain, others, target, force=(mode == "fused"), fallback=fallback)
    regions = tuple(r for r in chosen.values() if r is not None)
    if costs.peak(regions) > target:  # the planner packed the chosen regions worse together: take the floor
        regions = tuple(r for r in smallest.values() if r is not None)
    return _check_budget(_schedule(costs, mode, regions, layer_peak, budget), budget)


def _smallest_per_chain(costs: BandCosts, chains) -> dict:
    """chain -> the region with its smallest peak: the whole chain at one row
    per band (no banded tensor bigger), in place where the rule allows it
    (the output then takes no bytes of its own); None where leaving the chain
    layer by layer is no worse. (Options of one chain cannot be compared by
    the planned arena alone: another chain's larger peak hides them.)"""
    smallest = {}
    for first, n in chains:
        options = ([costs.region(first, n, 1, True)] if costs.may_be_in_place(first, n) else []) + \
            [costs.region(first, n, 1, False)]
        smallest[(first, n)] = None
        for r in options:
            try:
                costs.peak((r,))
            except ValueError:
                continue
            smallest[(first, n)] = r
            break
    # Drop a chain's region where the peak with every region is no higher without it.
    everything = costs.peak(tuple(r for r in smallest.values() if r is not None))
    for chain, r in list(smallest.items()):
        if r is None:
            continue
        without = tuple(x for c, x in smallest.items() if c != chain and x is not None)
        if costs.peak(without) <= everything:
            smallest[chain] = None
    return smallest


def _candidates(costs: BandCosts, chain: tuple[int, int], *, whole: bool = False):
    """Every region inside ``chain`` (sub-run x band height x in place; with
    ``whole`` only the whole chain), least recomputation first (ties: the
    taller band, then the shorter run)."""
    first, n = chain
    found = []
    for a in ((first,) if whole else range(first, first + n)):
        for length in ((n,) if whole else range(1, first + n - a + 1)):
            in_place = (False, True) if costs.may_be_in_place(a, length) else (False,)
            for rows in BAND_HEIGHTS:
                for ip in in_place:
                    r = costs.region(a, length, rows, ip)
                    try:
                        cost = costs.recomputed((r,))
                    except ValueError:
                        continue
                    found.append((cost, -rows, length, a, ip, r))
    found.sort(key=lambda c: c[:5])
    return [c[0:1] + (c[-1],) for c in found]


def _cheapest_fit(costs: BandCosts, chain, others: tuple, target: int, *, force: bool, fallback):
    """The chain's region with the least recomputation whose peak (with
    ``others``) fits ``target``; None (layer by layer) when that already fits
    and ``force`` is off; with ``force``, the whole chain fused (at the
    tallest band that fits); ``fallback`` when no single region fits."""
    if not force and costs.peak(others) <= target:
        return None
    for _, r in _candidates(costs, chain, whole=force):
        try:
            if costs.peak(others + (r,)) <= target:
                return r
        except ValueError:
            continue
    return fallback


def payload_schedule(summary: dict) -> dict:
    """What a payload's schedule is and costs, from the native parser's
    summary (``_native.parse``): the report's per-partition figures
    (docs/report-schema.json, payload): ``arena_layer_bound`` (least arena
    of any layer-by-layer plan of this op order), ``recomputed_macs`` and
    ``recompute_percent`` (halo MACs of the fused regions), ``schedule``
    (one line) and ``fused_regions``."""
    graph, regions = _graph_and_regions(summary)
    bound = liveness(graph).lower_bound()
    recomputed = total = 0
    if regions:
        from .band_schedule import recomputed_macs

        recomputed, total = recomputed_macs(graph, regions)
    return {"arena_layer_bound": bound, "recomputed_macs": recomputed,
            "recompute_percent": round(100.0 * recomputed / total, 4) if total else 0.0,
            "schedule": regions_text(regions),
            "fused_regions": [{"first_op": r.first_op, "num_ops": r.num_ops, "band_rows": r.band_rows,
                               "in_place": bool(r.in_place)} for r in regions]}


def _graph_and_regions(summary: dict) -> tuple[ArenaGraph, tuple]:
    """The payload's graph with every tensor whole (layer by layer) and its
    fused regions."""
    return ArenaGraph.from_summary(summary), ()  # TRANSITIONAL: regions read once i14-runtime's encoding lands
