"""Which runs of ops may form a fused region is decided once, in the C++ the
chip runs (ops/band_loop.cpp): the planner (memory.fused_regions) asks the
parser's own checks through Program.describe_region. Here random candidate
regions of random graphs go both ways, through the planner's view and
through the parser given a blob with a BAND_LOOP over the same ops, and the
verdicts must agree, refusals with the parser's message."""

from __future__ import annotations

import re

import numpy as np
import pytest

from espnn_dev import band_graphs as bg
from executorch_espnn import _native
from executorch_espnn.memory import ArenaPlan, FusedRegion, RegionLayout, RegionRefused, is_fusable
from executorch_espnn.memory.arena_rule import aligned
from executorch_espnn.memory.fused_regions import refusal


def _blob_with_loop(w, first: int, num: int, band_rows: int) -> bytes:
    """The graph with a BAND_LOOP over ops first .. first+num-1 and the
    outputs of all but the last BANDED (whole, so every capacity holds),
    each arena tensor on bytes of its own (so no arena check interferes)."""
    g = w.arena_graph()
    banded = {g.ops[i].outputs[0]: g.bands.shape(g.ops[i].outputs[0])[1] for i in range(first, first + num - 1)}
    offsets, end = {}, 0
    for t, (n, in_arena) in enumerate(zip(g.nbytes, g.in_arena)):
        if in_arena:
            offsets[t], end = end, end + aligned(n)
    lay = RegionLayout(FusedRegion(first, num, band_rows), banded, None, None, (), num_bands=0)  # writer reads neither
    return w.to_bytes(ArenaPlan(offsets, end, (lay,)))


def _parser_verdict(blob: bytes) -> str | None:
    try:
        _native.parse(blob)
    except ValueError as e:
        return str(e)
    return None


def _shape_of(message: str) -> str:
    return re.sub(r"\d+", "#", message)


def _agree_on_every_candidate(graphs) -> dict[str, int]:
    """Every candidate region of every graph, through the planner and the
    parser: the same verdict, refusals for the same reason."""
    seen = {"accepted": 0, "refused": 0}
    for seed, w in enumerate(graphs):
        g = w.arena_graph()
        rng = np.random.default_rng(seed)
        n = len(g.ops)
        for first in range(n):
            for num in range(1, n - first + 1):
                planner = refusal(g, first, num)
                assert (planner is None) == is_fusable(g, first, num)
                rows = int(rng.integers(1, g.bands.shape(g.ops[first + num - 1].outputs[0])[1] + 1))
                parser = _parser_verdict(_blob_with_loop(w, first, num, rows))
                if planner is None:
                    assert parser is None, (seed, first, num, parser)
                    seen["accepted"] += 1
                else:
                    # The same check refused it (op and tensor numbers differ:
                    # the parser's blob has the BAND_LOOP op in front).
                    assert parser is not None and _shape_of(planner) in _shape_of(parser), (
                        seed, first, num, planner, parser)
                    seen["refused"] += 1
    return seen


def test_planner_and_parser_agree_on_every_candidate_region():
    seen = _agree_on_every_candidate(bg.random_graph(seed) for seed in range(24))
    assert seen["accepted"] >= 100 and seen["refused"] >= 100, seen


def test_planner_and_parser_agree_on_upsampling_regions():
    # Resizes, transposed convs and CONCATs: their windows (a rational
    # stride) and refusals come from the same C++ both ways; the U-Net
    # decoder's runs that cross the max pool are refused.
    graphs = [bg.upsampling_chain(seed)[0] for seed in range(12)] + [bg.unet_decoder()[0]]
    seen = _agree_on_every_candidate(graphs)
    assert seen["accepted"] >= 100 and seen["refused"] >= 5, seen


def test_the_planner_reports_the_parsers_reason():
    w = next(w for w in map(bg.random_graph, range(24)) if any(op.name == "MUL" for op in w.arena_graph().ops))
    g = w.arena_graph()
    mul = next(i for i, op in enumerate(g.ops) if op.name == "MUL")
    assert refusal(g, mul, 1) == f"op {mul} (MUL) cannot run in a fused region"
    with pytest.raises(RegionRefused, match=rf"cannot form a fused region: op {mul} \(MUL\) cannot run"):
        w.plan([FusedRegion(mul, 1, 1)])


def test_describe_region_gives_the_description_the_runtime_keeps():
    w, n = bg.inverted_residual(h=10, wd=6, c=8, expand=24)
    d = w.arena_graph().bands.describe(0, n)
    x, e, dw, p, y = (w._inputs[0], *(w._ops[i].outputs[0] for i in range(n)))
    assert d["tensors"] == [x, e, dw, p, y] and d["heights"] == [10] * 5
    assert d["ops"][1] == (2, [(1, 1, 1, 3)])  # the depthwise 3x3 reads e with stride 1, pad 1
    assert d["in_place_input"] is None
    # 32-byte record + 4 ops x 41 + 5 tensors x 7 bytes, rounded up to 16
    assert d["persistent_bytes"] == 32 + 208
    blob = w.to_bytes(w.plan([FusedRegion(0, n, 2)]))
    assert _native.Program(blob).persistent_bytes == d["persistent_bytes"]
    assert _native.Program(w.to_bytes()).persistent_bytes == 0


def test_planner_and_parser_agree_on_squeeze_excite_regions():
    # MEAN_HW stays global, the channel scale (MUL by a vector written before
    # the region, either operand order) runs on bands: every candidate run
    # both ways.
    for stride, scale_first in ((1, False), (2, False), (1, True)):
        w, at = bg.squeeze_excite(stride=stride, seed=stride, scale_first=scale_first)
        g = w.arena_graph()
        n = len(g.ops)
        accepted = set()
        for first in range(n):
            for num in range(1, n - first + 1):
                planner = refusal(g, first, num)
                parser = _parser_verdict(_blob_with_loop(w, first, num, 1))
                assert (planner is None) == (parser is None), (stride, first, num, planner, parser)
                if planner is None:
                    accepted.add((first, num))
                else:
                    assert _shape_of(planner) in _shape_of(parser), (first, num, planner, parser)
        assert (at["mul"], at["last"] - at["mul"] + 1) in accepted
        assert not any(f <= at["mean"] < f + k for f, k in accepted)
