"""memory.fused_regions: a region the runtime would refuse raises
RegionRefused (not a ValueError), and a region whose bands would compute a
row twice is a bug that laying it out stops at."""

from __future__ import annotations

import pytest

from espnn_dev import band_graphs as bg
from executorch_espnn.memory import FusedRegion, RegionRefused, fuse, plan_arena, region_layout
from executorch_espnn import _native
from executorch_espnn.memory import fused_regions
from executorch_espnn.memory.arena_rule import aligned, liveness


def test_a_run_the_parser_refuses_raises_region_refused():
    w, n = bg.inverted_residual()
    g = w.arena_graph()
    with pytest.raises(RegionRefused, match=r"ops 0\.\.4 cannot form a fused region"):
        region_layout(g, FusedRegion(0, n + 1, 2))  # one op past the graph's last
    with pytest.raises(RegionRefused, match="band_rows"):
        region_layout(g, FusedRegion(0, n, 0))
    assert not issubclass(RegionRefused, ValueError)


def test_a_region_that_cannot_be_in_place_raises_region_refused():
    w, _ = bg.inverted_residual(expand=8)  # 1x1 8 -> 8 channels; the residual ADD reads the block input last
    with pytest.raises(RegionRefused, match="still needed after the region"):
        fuse(w.arena_graph(), [FusedRegion(0, 1, 2, in_place=True)])
    w, _ = bg.inverted_residual(expand=24)
    with pytest.raises(RegionRefused, match="must have the shape of the region input"):
        plan_arena(w.arena_graph(), [FusedRegion(0, 1, 2, in_place=True)])


def test_overlapping_regions_stay_a_value_error():
    w, _ = bg.inverted_residual()
    with pytest.raises(ValueError, match="overlap"):
        fuse(w.arena_graph(), [FusedRegion(0, 2, 1), FusedRegion(1, 2, 1)])


def test_rows_computed_twice_stop_the_layout(monkeypatch):
    w, n = bg.inverted_residual(h=10)
    g = w.arena_graph()
    real = fused_regions._native.plan_band_region

    def one_row_twice(ops, heights, band_rows, in_place_input=-1):
        plan = real(ops, heights, band_rows, in_place_input)
        plan["computed"][1] += 1  # the depthwise recomputes one halo row
        return plan

    monkeypatch.setattr(fused_regions._native, "plan_band_region", one_row_twice)
    with pytest.raises(AssertionError, match=r"compute \[10, 11, 10, 10\] rows .* which have \[10, 10, 10, 10\]"):
        region_layout(g, FusedRegion(0, n, 2))


def test_the_region_output_must_be_computed_whole():
    with pytest.raises(AssertionError, match="which have"):
        fused_regions._check_computed_once(FusedRegion(0, 2, 3), [10, 9], [10, 10])
    # An inner op may skip trailing rows no later op reads (a stride-2 window
    # that stops short of its input's last row): that is not a recomputation.
    fused_regions._check_computed_once(FusedRegion(0, 2, 3), [9, 5], [10, 5])


def test_the_geometry_computes_no_row_twice_on_random_chains():
    for seed in range(40):
        w, n = bg.random_chain(seed)
        g = w.arena_graph()
        heights = [g.bands.shape(g.ops[i].outputs[0])[1] for i in range(n)]
        for rows in range(1, heights[-1] + 1):
            computed = region_layout(g, FusedRegion(0, n, rows)).computed_rows
            assert computed[-1] == heights[-1] and all(c <= h for c, h in zip(computed, heights)), (seed, rows)


def test_band_plans_take_windows_of_rational_stride():
    # A 2x nearest upsample: output row r reads row floor(r/2), the window
    # (in, stride 1, pad 0, extent 1, den 2). Bands of 3 output rows need 2
    # input rows (1 for the last band, rows 9..10).
    plan = fused_regions._native.plan_band_region([(1, [(0, 1, 0, 1, 2)])], [5, 10], 3)
    assert plan["capacity"] == [2, 3] and plan["computed"] == [10] and plan["num_bands"] == 4
    # A negative pad is only for a rational stride (a window over the input
    # starts at or after row -pad of a padded image); den is at least 1.
    assert fused_regions._native.plan_band_region([(1, [(0, 1, -1, 2, 2)])], [5, 10], 3)["capacity"] == [3, 3]
    for bad in ((0, 1, 0, 1, 0), (0, 1, -1, 1), (0, 1, 0, 1, 2, 7)):
        with pytest.raises(ValueError, match="bad window"):
            fused_regions._native.plan_band_region([(1, [bad])], [5, 10], 3)


def test_a_narrower_in_place_output_joins_the_class_of_its_input():
    # The squeeze-excite projection (24 -> 8 channels, 10 rows) in place: its
    # output starts on the scaled map's first byte, and once the map is dead
    # the class holds only the output's bytes: the next block's expansion
    # and depthwise use the rest (the parser accepts the plan).
    w, at = bg.squeeze_excite(h=10, wd=6, c=8, expand=24, out=4, then_expand=16)
    g = w.arena_graph()
    r = FusedRegion(at["mul"], at["last"] - at["mul"] + 1, 2, in_place=True)
    fused = fuse(g, [r])[0]
    lv = liveness(fused)
    x, y = g.ops[r.first_op].inputs[0], g.ops[at["last"]].outputs[0]
    assert g.nbytes[y] < g.nbytes[x] and lv.root[y] == lv.root[x]
    end = at["last"] + 1  # the region's last step in the fused graph (its BAND_LOOP is one step)
    assert lv.segments[lv.root[x]] == ((lv.classes[lv.root[x]][0], end, aligned(g.nbytes[x])),
                                       (end + 1, lv.last[y], aligned(g.nbytes[y])))
    plan = plan_arena(g, [r])
    assert plan.arena_size == lv.lower_bound()
    summary = _native.parse(w.to_bytes(plan))
    assert summary["tensors"][y]["offset"] == summary["tensors"][x]["offset"]
    e = g.ops[at["last"] + 1].outputs[0]  # the next expansion: beside the output, over the dead map's tail
    assert summary["tensors"][e]["offset"] < summary["tensors"][x]["offset"] + g.nbytes[x]
