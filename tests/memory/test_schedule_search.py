"""memory.schedule_search on synthetic costs: the decomposed search finds
what an exhaustive search over the same choices finds (smallest peak, then
least recomputation; or least recomputation under a budget), and the modes
and the budget error behave as documented.

The synthetic graph is a chain of ops with given layer-by-layer live bytes
per step; a region (first, n, rows, in_place) replaces the bytes of its steps
by its input + output (input only, in place) + rows x the row bytes of its
intermediates, and recomputes halo MACs that fall as the band grows. These
are not the runtime's figures (tests/memory/test_band_plans.py checks those
on real graphs); they exercise the search's logic only.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

from executorch_espnn.memory.schedule_search import (BAND_HEIGHTS, SCHEDULE_MODES, ScheduleError,
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
    op i's output; ``halo[i]``: MACs op i recomputes per band when it is not
    the region's first op; ``chains``: maximal fusable runs; ``inputs``:
    bytes live before op 0."""

    def __init__(self, live, io, row, halo, chains, rows=8, inputs=0):
        self.live, self.io, self.row, self.halo, self._chains = live, io, row, halo, chains
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
            raise ValueError("region outside a fusable chain")
        if r.in_place and not self.may_be_in_place(r.first_op, r.num_ops):
            raise ValueError("in place needs equal input and output")

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

    def recomputed(self, regions):
        total = 0
        for r in regions:
            self._check(r)
            bands = -(-self.rows // r.band_rows)
            total += sum(self.halo[i] * (bands - 1) for i in range(r.first_op, r.first_op + r.num_ops - 1))
        return total

    def total_macs(self):
        return 1_000_000

    def layer_bound(self):
        return max([self.inputs] + self.live)

    def region(self, first_op, num_ops, band_rows, in_place):
        return Region(first_op, num_ops, band_rows, in_place)


def two_blocks():
    """Ops 0-2 and 4-6 are fusable (an expand/depthwise/project-like run with
    a large middle); op 3 sits between them."""
    live = [3000, 9000, 5000, 1500, 2000, 6000, 2500]
    io = [(1000, 4000), (4000, 4000), (4000, 500), (500, 1000), (1000, 3000), (3000, 3000), (3000, 1000)]
    row = [64, 64, 8, 16, 48, 48, 16]
    halo = [500, 300, 0, 0, 400, 200, 0]
    return Synthetic(live, io, row, halo, chains=[(0, 3), (4, 3)])


def splits(costs, first, n):
    """Every split of the chain into layer steps and regions (any band
    height below the rows, in place or not): (steps' busiest bytes,
    recomputed MACs, regions)."""
    heights = [h for h in BAND_HEIGHTS if h < costs.rows]
    out = []

    def walk(p, busiest, regions):
        if p == n:
            out.append((busiest, costs.recomputed(regions), regions))
            return
        walk(p + 1, max(busiest, costs.live[first + p]), regions)
        for k in range(1, n - p + 1):
            for rows in heights:
                for ip in (False, True):
                    r = Region(first + p, k, rows, ip)
                    try:
                        peak = costs.region_peak(r)
                    except ValueError:
                        continue
                    walk(p + k, max(busiest, peak), regions + (r,))

    walk(0, 0, ())
    return out


def exhaustive(costs, *, budget=None):
    """(peak, recomputed MACs) of the best schedule by enumerating every
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
    cost = sum(min(s[1] for s in options if s[0] <= target) for options in per_chain)
    return floor, cost


def test_auto_reaches_the_exhaustive_smallest_peak_with_its_least_recomputation():
    costs = two_blocks()
    s = choose_schedule(None, costs=costs)
    peak, cost = exhaustive(costs)
    assert (s.peak, s.recomputed_macs) == (peak, cost)
    assert s.peak < s.layer_peak == 9000
    assert s.regions and s.mode == "auto"


@pytest.mark.parametrize("budget", [3000, 4000, 5000, 6000, 8000])
def test_budget_gets_the_exhaustive_least_recomputation_that_fits(budget):
    costs = two_blocks()
    s = choose_schedule(None, budget=budget, costs=costs)
    _, cost = exhaustive(costs, budget=budget)
    assert s.peak <= budget
    assert s.recomputed_macs == cost


def test_budget_the_layer_schedule_meets_needs_no_regions():
    s = choose_schedule(None, budget=9000, costs=two_blocks())
    assert s.regions == () and s.peak == 9000 and s.recompute_pct == 0.0


def test_too_small_a_budget_names_the_smallest_peak():
    costs = two_blocks()
    smallest = exhaustive(costs)[0]
    with pytest.raises(ScheduleError) as e:
        choose_schedule(None, budget=smallest - 1, costs=costs)
    assert e.value.smallest_peak == smallest and e.value.budget == smallest - 1
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
    costs = Synthetic(live, io, row=[320, 320], halo=[100, 0], chains=[(0, 2)], rows=25, inputs=490)
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
