"""memory.schedule_search: the search finds what an exhaustive search over
the same choices finds -- the smallest peak arena, then the fewest op
invocations (each op once, a region's BAND_LOOP once and its ops once per
band); or the fewest invocations under a budget -- on synthetic costs and,
by brute force over every schedule, on small real graphs
(tests/band_graphs.py); ties in the arena go to fewer invocations; the
modes and the budget error behave as documented.

The synthetic graph is a chain of ops with given layer-by-layer live bytes
per step; a region (first, n, rows, in_place) replaces the bytes of its steps
by its input + output (input only, in place) + rows x the row bytes of its
intermediates, and runs in ceil(rows / band rows) bands. These are not the
runtime's byte figures (the brute-force tests below and
tests/ops/test_band_loop.py use real graphs); they exercise the search's
logic only.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from espnn_dev import band_graphs as bg
from executorch_espnn.memory import FusedRegion, RegionRefused, plan_arena
from executorch_espnn.memory.schedule_search import (BAND_HEIGHTS, SCHEDULE_MODES, GraphCosts, ScheduleError,
                                                     choose_schedule)


@dataclass(frozen=True)
class Region:
    first_op: int
    num_ops: int
    band_rows: int
    in_place: bool = False


class Synthetic:
    """``live[i]``: bytes live at step i layer by layer; ``io[i]``: bytes of
    op i's input and output tensors (in, out); ``row[i]``: bytes of one row of
    op i's output; ``rows``: output rows of every op; ``chains``: maximal
    fusable runs; ``inputs``: bytes live before op 0."""

    def __init__(self, live, io, row, chains, rows=8, inputs=0):
        self.live, self.io, self.row, self._chains = live, io, row, chains
        self.rows, self.inputs = rows, inputs

    def chains(self):
        return self._chains

    def fusable(self, first_op, num_ops):
        return any(a <= first_op and first_op + num_ops <= a + n for a, n in self._chains)

    def output_rows(self, first_op, num_ops):
        return self.rows

    def may_be_in_place(self, first_op, num_ops):
        return self.io[first_op][0] == self.io[first_op + num_ops - 1][1]

    def _check(self, r):
        if not self.fusable(r.first_op, r.num_ops):
            raise RegionRefused("region outside a fusable chain")
        if r.in_place and not self.may_be_in_place(r.first_op, r.num_ops):
            raise RegionRefused("in place needs equal input and output")

    def region_peak(self, r):
        self._check(r)
        span = range(r.first_op, r.first_op + r.num_ops)
        inp, out = self.io[r.first_op][0], self.io[r.first_op + r.num_ops - 1][1]
        band = sum(self.row[i] * min(self.rows, r.band_rows + 2) for i in span[:-1])
        staging = self.row[span[-1]] * r.band_rows if r.in_place else 0
        return (inp if r.in_place else inp + out) + band + staging

    def step_bytes(self):
        return list(self.live)

    def input_bytes(self):
        return self.inputs

    def peak(self, regions):
        steps = list(self.live)
        covered = set()
        for r in regions:
            span = set(range(r.first_op, r.first_op + r.num_ops))
            if covered & span:
                raise ValueError("regions overlap")
            covered |= span
            for i in span:
                steps[i] = self.region_peak(r)
        return max([self.inputs] + steps)

    def num_bands(self, r):
        self._check(r)
        return -(-self.rows // r.band_rows)

    def layer_bound(self):
        return max([self.inputs] + self.live)

    def region(self, first_op, num_ops, band_rows, in_place):
        return Region(first_op, num_ops, band_rows, in_place)


def calls(num_ops: int, regions, bands) -> int:
    """Op invocations per inference, from the definition: an op outside the
    regions once; a region's BAND_LOOP once and each of its ops once per
    band (``bands(region)``)."""
    fused = sum(r.num_ops for r in regions)
    return (num_ops - fused) + sum(1 + r.num_ops * bands(r) for r in regions)


def two_blocks():
    """Ops 0-2 and 4-6 are fusable (an expand/depthwise/project-like run with
    a large middle); op 3 sits between them."""
    live = [3000, 9000, 5000, 1500, 2000, 6000, 2500]
    io = [(1000, 4000), (4000, 4000), (4000, 500), (500, 1000), (1000, 3000), (3000, 3000), (3000, 1000)]
    row = [64, 64, 8, 16, 48, 48, 16]
    return Synthetic(live, io, row, chains=[(0, 3), (4, 3)])


def splits(costs, first, n):
    """Every split of the chain into layer steps and regions (any band
    height below the rows, in place or not): (steps' busiest bytes,
    the chain's op invocations, regions)."""
    heights = [h for h in BAND_HEIGHTS if h < costs.rows]
    out = []

    def walk(p, busiest, regions):
        if p == n:
            out.append((busiest, calls(n, regions, costs.num_bands), regions))
            return
        walk(p + 1, max(busiest, costs.live[first + p]), regions)
        for k in range(1, n - p + 1):
            for rows in heights:
                for ip in (False, True):
                    r = Region(first + p, k, rows, ip)
                    try:
                        peak = costs.region_peak(r)
                    except RegionRefused:
                        continue
                    walk(p + k, max(busiest, peak), regions + (r,))

    walk(0, 0, ())
    return out


def exhaustive(costs, *, budget=None):
    """(peak, op invocations) of the best schedule by enumerating every
    split of every chain: the chains are independent in the synthetic
    model (each region changes only its own steps), so the best schedule is
    the best split per chain for the common target."""
    outside = max([costs.inputs] + [b for i, b in enumerate(costs.live)
                                    if not any(a <= i < a + n for a, n in costs.chains())])
    per_chain = [splits(costs, a, n) for a, n in costs.chains()]
    floor = max([outside] + [min(s[0] for s in options) for options in per_chain])
    target = floor if budget is None else budget
    if target < floor:
        return None
    in_chains = sum(n for _, n in costs.chains())
    fewest = sum(min(s[1] for s in options if s[0] <= target) for options in per_chain)
    return floor, len(costs.live) - in_chains + fewest


def test_auto_reaches_the_exhaustive_smallest_peak_with_its_fewest_invocations():
    costs = two_blocks()
    s = choose_schedule(None, costs=costs)
    peak, fewest = exhaustive(costs)
    assert (s.peak, s.invocations) == (peak, fewest)
    assert s.peak < s.layer_peak == 9000
    assert s.regions and s.mode == "auto"


@pytest.mark.parametrize("budget", [3000, 4000, 5000, 6000, 8000])
def test_budget_gets_the_exhaustive_fewest_invocations_that_fit(budget):
    costs = two_blocks()
    s = choose_schedule(None, budget=budget, costs=costs)
    _, fewest = exhaustive(costs, budget=budget)
    assert s.peak <= budget
    assert s.invocations == fewest == calls(7, s.regions, costs.num_bands)


def test_budget_the_layer_schedule_meets_needs_no_regions():
    s = choose_schedule(None, budget=9000, costs=two_blocks())
    assert s.regions == () and s.peak == 9000 and s.invocations == 7


def test_too_small_a_budget_names_the_smallest_peak():
    costs = two_blocks()
    smallest = exhaustive(costs)[0]
    with pytest.raises(ScheduleError) as e:
        choose_schedule(None, budget=smallest - 1, costs=costs)
    assert e.value.smallest_peak == smallest and e.value.budget == smallest - 1
    assert not isinstance(e.value, ValueError)  # not a refused value: lower.py lets it through to the user
    assert f"{smallest:,} B" in str(e.value)
    assert choose_schedule(None, budget=smallest, costs=costs).peak == smallest


def test_layer_mode_has_no_regions_and_refuses_a_budget_it_misses():
    s = choose_schedule(None, mode="layer", costs=two_blocks())
    assert s.regions == () and s.peak == s.layer_peak == 9000
    assert "layer-by-layer" in s.description
    with pytest.raises(ScheduleError, match="layer by layer.* 9,000 B"):
        choose_schedule(None, mode="layer", budget=8999, costs=two_blocks())


def test_auto_stays_layer_by_layer_where_fusion_does_not_lower_the_peak():
    costs = two_blocks()
    costs.inputs = 9000  # e.g. a large graph input, live before every chain
    s = choose_schedule(None, costs=costs)
    assert s.regions == () and s.peak == 9000


def test_auto_fuses_only_the_chain_that_sets_the_peak():
    costs = two_blocks()
    costs.live[4:7] = [500, 500, 500]  # the second chain is small everywhere: fusing it cannot help
    s = choose_schedule(None, costs=costs)
    assert s.regions and all(r.first_op + r.num_ops <= 3 for r in s.regions)


def test_fused_mode_puts_every_chain_op_in_a_region_without_raising_the_peak():
    costs = two_blocks()
    auto, fused = choose_schedule(None, costs=costs), choose_schedule(None, mode="fused", costs=costs)
    covered = sorted(i for r in fused.regions for i in range(r.first_op, r.first_op + r.num_ops))
    assert covered == [0, 1, 2, 4, 5, 6]
    assert fused.peak <= auto.peak


def test_in_place_region_when_input_and_output_are_the_same_size():
    # DS-CNN-like: 8,000 B maps, depthwise + pointwise in place over the input.
    live = [16000, 16000]
    io = [(8000, 8000), (8000, 8000)]
    costs = Synthetic(live, io, row=[320, 320], chains=[(0, 2)], rows=25, inputs=490)
    s = choose_schedule(None, costs=costs)
    assert s.peak < 9600 and any(r.in_place for r in s.regions)


def test_bad_arguments():
    with pytest.raises(ValueError, match="schedule 'fast'"):
        choose_schedule(None, mode="fast", costs=two_blocks())
    with pytest.raises(ValueError, match="positive"):
        choose_schedule(None, budget=0, costs=two_blocks())
    assert SCHEDULE_MODES == ("auto", "layer", "fused")


def test_fused_floor_names_what_bounds_the_peak():
    from executorch_espnn.memory.schedule_search import fused_floor

    costs = two_blocks()
    outside, runs = fused_floor(None, costs)
    assert outside == 1500  # op 3, outside both runs
    assert runs == exhaustive(costs)[0]  # the runs' own least bound sets the peak here
    costs.inputs = 9000
    assert fused_floor(None, costs)[0] == 9000
    assert choose_schedule(None, costs=costs).peak == 9000


def one_hot_op():
    """Op 1 alone is large; the graph input (3,000 B, live before op 0) sets
    the floor, so every schedule that fuses op 1 has the same peak."""
    return Synthetic(live=[2000, 9000, 2000], io=[(500, 1000), (1000, 1500), (1500, 600)], row=[40, 40, 40],
                     chains=[(0, 3)], rows=8, inputs=3000)


def test_ties_in_the_arena_go_to_fewer_band_invocations():
    costs = one_hot_op()
    s = choose_schedule(None, costs=costs)
    # Op 1 alone in one region of two bands (6 + 2 rows): its BAND_LOOP and
    # op 1 twice, ops 0 and 2 once: 5 invocations.
    assert s.regions == (Region(1, 1, 6),) and s.peak == 3000 and s.invocations == 5
    # Same arena, more invocations: the whole chain fused, or op 1 in shorter bands.
    for other in [(Region(0, 3, 6),), (Region(1, 1, 2),), (Region(0, 2, 6),)]:
        assert costs.peak(other) == s.peak
        assert calls(3, other, costs.num_bands) > s.invocations
    # mode fused still fuses every op it can, in the fewest bands that fit.
    assert choose_schedule(None, mode="fused", costs=costs).regions == (Region(0, 3, 6),)


def test_budget_ties_go_to_fewer_band_invocations():
    costs = one_hot_op()
    s = choose_schedule(None, budget=4000, costs=costs)
    assert s.regions == (Region(1, 1, 6),) and s.invocations == 5


# ------------------------------------------------------------------ real graphs, brute force
def every_schedule(g, n):
    """Every set of regions over ops 0..n-1 of ``g`` (any split, any band
    height the search tries, in place or not), with its planned arena and
    op invocations; the ones the runtime refuses left out."""
    def out_rows(first, k):
        return g.bands.shape(g.ops[first + k - 1].outputs[0])[1]

    def bands(r):
        return -(-out_rows(r.first_op, r.num_ops) // r.band_rows)

    def walk(p, regions):
        if p == n:
            yield regions
            return
        yield from walk(p + 1, regions)
        for k in range(1, n - p + 1):
            for h in [h for h in BAND_HEIGHTS if h < out_rows(p, k)] or [1]:
                for ip in (False, True):
                    yield from walk(p + k, regions + (FusedRegion(p, k, h, ip),))

    found = {}
    for regions in walk(0, ()):
        try:
            found[regions] = (plan_arena(g, regions).arena_size, calls(len(g.ops), regions, bands))
        except RegionRefused:
            continue
    return found


# Chains of 2 to 5 ops whose every schedule plans in seconds; they fuse in
# place and not, one op and all, or not at all (layer by layer is smallest).
BRUTE_FORCE_SEEDS = (2, 3, 10, 11, 13, 14, 16, 17)


@pytest.fixture(scope="module")
def enumerated():
    out = {}
    for seed in BRUTE_FORCE_SEEDS:
        w, n = bg.random_chain(seed)
        g = w.arena_graph()
        out[seed] = (g, every_schedule(g, n))
    return out


@pytest.mark.parametrize("seed", BRUTE_FORCE_SEEDS)
def test_auto_has_the_least_arena_of_every_schedule_then_the_fewest_invocations(seed, enumerated):
    g, found = enumerated[seed]
    least = min(a for a, _ in found.values())
    fewest = min(c for a, c in found.values() if a == least)
    s = choose_schedule(g)
    assert (s.peak, s.invocations) == (least, fewest)
    assert found[s.regions] == (s.peak, s.invocations)  # the figures are the schedule's own


@pytest.mark.parametrize("seed", (3, 10, 16))
def test_a_budget_gets_the_fewest_invocations_of_every_schedule_that_fits(seed, enumerated):
    g, found = enumerated[seed]
    for budget in sorted({a for a, _ in found.values()})[:6]:
        s = choose_schedule(g, budget=budget)
        assert s.peak <= budget
        assert s.invocations == min(c for a, c in found.values() if a <= budget), budget


def test_graph_costs_raise_region_refused_each_time_it_is_asked():
    w, n = bg.inverted_residual()
    costs = GraphCosts(w.arena_graph())
    # Op 0 (1x1, 8 -> 24 channels) cannot write its output over its input.
    refused = (FusedRegion(0, 1, 2, in_place=True),)
    for _ in range(2):  # not remembered as an answer
        with pytest.raises(RegionRefused):
            costs.peak(refused)
    assert costs.peak((FusedRegion(0, n, 2),)) < costs.peak(())


def test_auto_projects_a_squeeze_excite_map_in_place_onto_its_narrower_output():
    # The scaled map (32 channels) is read whole by MEAN_HW and MUL; its 1x1
    # projection (16 channels) may take its bytes row by row (the parser's
    # rule, asked for in-place candidates), which lowers the peak.
    import numpy as np

    from executorch_espnn import _native
    from executorch_espnn.memory.arena_rule import liveness

    w, _ = bg.squeeze_excite(h=24, wd=4, c=16, expand=32)
    g = w.arena_graph()
    s = choose_schedule(g)

    def narrower(r):
        x, y = g.ops[r.first_op].inputs[0], g.ops[r.first_op + r.num_ops - 1].outputs[0]
        return r.in_place and g.nbytes[y] < g.nbytes[x]

    assert any(narrower(r) for r in s.regions) and s.peak < liveness(g).lower_bound()
    x = np.random.default_rng(0).integers(-128, 128, g.bands.shape(g.inputs[0]), dtype=np.int8)
    ref, out = _native.run(w.to_bytes(), [x]), _native.run(w.to_bytes(w.plan(s.regions)), [x])
    assert all(np.array_equal(a, b) for a, b in zip(ref, out))


def test_schedules_with_narrower_in_place_outputs_compete_with_those_without(monkeypatch):
    # Where the planner packs the schedules with a shrinking alias class above
    # their bound (EfficientNet-B0: 639,744 B for a bound of 566,272 B), the
    # schedule searched without narrower in-place regions is kept.
    w, _ = bg.squeeze_excite(h=24, wd=4, c=16, expand=32)
    g = w.arena_graph()

    def narrower(r):
        return r.in_place and g.nbytes[g.ops[r.first_op].inputs[0]] != g.nbytes[g.ops[r.first_op + r.num_ops - 1].outputs[0]]

    same_size_only = choose_schedule(None, costs=GraphCosts(g).without_narrower_in_place())
    real = GraphCosts.peak
    monkeypatch.setattr(GraphCosts, "peak", lambda self, regions: real(self, regions) + (
        10_000 if any(narrower(r) for r in regions) else 0))
    s = choose_schedule(g)
    assert s.peak == same_size_only.peak < s.layer_peak and not any(narrower(r) for r in s.regions)
