"""Fused regions (BAND_LOOP): executing a chain of ops band by band gives
exactly the bytes of executing the same ops one after the other (the
specification of fusion: the layer-by-layer ops have their own oracles in
the other tests/ops modules), the arena shrinks as planned, nothing is
recomputed, and the parser refuses malformed regions."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from espnn_dev import band_graphs as bg
from espnn_dev import xts3_mutations as xm
from executorch_espnn import _native
from executorch_espnn.memory import FusedRegion, RegionRefused, fusable_chains, is_fusable, plan_arena, region_layout
from executorch_espnn.memory.fused_regions import refusal
from executorch_espnn.xts3_writer import Xts3Writer
from espnn_dev.graph_util import expect_rejected


def _run(blob: bytes, x: np.ndarray) -> list[np.ndarray]:
    return _native.run(blob, [x])


def _input(w: Xts3Writer, seed: int) -> np.ndarray:
    shape = _native.parse(w.to_bytes())["tensors"][w._inputs[0]]["shape"]
    return np.random.default_rng(seed).integers(-128, 128, shape, dtype=np.int8)


def _out_rows(w: Xts3Writer, last_op: int) -> int:
    return w.arena_graph().bands.shape(w._ops[last_op].outputs[0])[1]


def _computes_every_row_once(g, r: FusedRegion) -> bool:
    """Over all bands, each op of ``r`` computes as many rows as its output has."""
    heights = [g.bands.shape(g.ops[i].outputs[0])[1] for i in range(r.first_op, r.first_op + r.num_ops)]
    return list(region_layout(g, r).computed_rows) == heights


def _computes_no_row_twice(g, r: FusedRegion) -> bool:
    """Over all bands, no op of ``r`` computes more rows than its output has
    (a downscaling resize may leave rows no later op reads), and the last
    op computes all of them."""
    heights = [g.bands.shape(g.ops[i].outputs[0])[1] for i in range(r.first_op, r.first_op + r.num_ops)]
    computed = region_layout(g, r).computed_rows
    return all(c <= h for c, h in zip(computed, heights)) and computed[-1] == heights[-1]


# ------------------------------------------------------------------ exactness
@pytest.mark.parametrize("seed", range(40))
def test_random_chains_fused_are_bit_identical_for_every_band_height(seed):
    w, n = bg.random_chain(seed)
    g = w.arena_graph()
    assert is_fusable(g, 0, n)
    x = _input(w, seed)
    ref = _run(w.to_bytes(), x)
    in_place_ok = g.bands.shape(w._inputs[0]) == g.bands.shape(w._outputs[0])
    for rows in range(1, _out_rows(w, n - 1) + 1):
        for in_place in (False, True) if in_place_ok else (False,):
            blob = w.to_bytes(w.plan([FusedRegion(0, n, rows, in_place)]))
            assert _native.parse(blob)["version"] == 2
            out = _run(blob, x)
            assert all(np.array_equal(a, b) for a, b in zip(out, ref)), (seed, rows, in_place)


@pytest.mark.parametrize("stride", [1, 2])
def test_inverted_residual_fused_exact_smaller_and_without_recompute(stride):
    w, n = bg.inverted_residual(stride=stride, seed=stride)
    g = w.arena_graph()
    x = _input(w, 3)
    base = w.to_bytes()
    ref = _run(base, x)
    layer = _native.parse(base)["arena_bytes"]
    for rows in (1, 2, 3):
        plan = w.plan([FusedRegion(0, n, rows)])
        blob = w.to_bytes(plan)
        assert _native.parse(blob)["arena_bytes"] == plan.arena_size < layer
        assert all(np.array_equal(a, b) for a, b in zip(_run(blob, x), ref))
        assert _computes_every_row_once(g, FusedRegion(0, n, rows))


def test_band_buffers_hold_the_rows_the_window_needs():
    # expand 1x1 then depthwise 3x3 stride 1, band of 2 output rows: the
    # depthwise needs 2 + 2 halo rows of the expansion, which needs 4 rows of
    # nothing banded; the depthwise output (read by the 1x1 project) 2 rows.
    w, n = bg.inverted_residual(h=10, wd=6, c=8, expand=24)
    lay = region_layout(w.arena_graph(), FusedRegion(0, n, 2))
    e, d = w._ops[0].outputs[0], w._ops[1].outputs[0]
    assert lay.banded_rows == {e: 4, d: 2, w._ops[2].outputs[0]: 2}
    assert lay.computed_rows == (10, 10, 10, 10)  # every row once


def test_in_place_region_stages_only_the_rows_still_needed():
    # A single in-place 3x3 depthwise (pad 1) with one-row bands: output row r
    # may overwrite input row r once band r+1 (reading rows r..r+2) is done,
    # so at most 2 rows wait in the staging buffer.
    w, _ = bg.inverted_residual(h=10, wd=6, c=8, expand=8)
    lay = region_layout(w.arena_graph(), FusedRegion(1, 1, 1, True))
    assert lay.staging_shape == (2, 6 * 8)


def test_invoke_op_inside_a_region_does_nothing_and_the_loop_runs_it():
    w, n = bg.inverted_residual()
    x = _input(w, 1)
    ref = _run(w.to_bytes(), x)
    blob = w.to_bytes(w.plan([FusedRegion(0, n, 2)]))
    ops = _native.parse(blob)["ops"]
    assert [o["op"] for o in ops][:1] == ["BAND_LOOP"] and ops[0]["params"] == {"num_ops": n, "band_rows": 2,
                                                                                  "flags": 0}
    assert np.array_equal(_run(blob, x)[0], ref[0])


# ------------------------------------------------------------------ upsampling
# Dense-prediction decoders: RESIZE_NEAREST / RESIZE_BILINEAR (a table row
# per output row), TRANSPOSE_CONV2D and channel CONCAT run on bands too; an
# upsampling op reads input rows through a window of rational stride
# (band_geometry.h RowWindow.den).

@pytest.mark.parametrize("seed", range(30))
def test_upsampling_chains_fused_are_bit_identical_for_every_band_height(seed):
    w, n = bg.upsampling_chain(seed)
    g = w.arena_graph()
    assert is_fusable(g, 0, n), [op.name for op in g.ops]
    x = _input(w, seed)
    ref = _run(w.to_bytes(), x)
    for rows in range(1, _out_rows(w, n - 1) + 1):
        blob = w.to_bytes(w.plan([FusedRegion(0, n, rows)]))
        assert all(np.array_equal(a, b) for a, b in zip(_run(blob, x), ref)), (seed, rows)
        assert _computes_no_row_twice(g, FusedRegion(0, n, rows))


def test_the_upsampling_chains_cover_every_new_region_op():
    names = {op.name for seed in range(30) for op in bg.upsampling_chain(seed)[0].arena_graph().ops}
    assert {"RESIZE_NEAREST", "RESIZE_BILINEAR", "TRANSPOSE_CONV2D", "CONCAT"} <= names


def test_unet_decoder_fuses_around_its_skip_connection():
    # TRANSPOSE_CONV2D 2x2 stride 2 -> CONCAT with the encoder's map (a
    # region input, whole) -> 3x3 conv: the upsampled map and the
    # concatenation exist only as bands.
    w, first, num = bg.unet_decoder(h=6, wd=5, c=4)
    g = w.arena_graph()
    x = _input(w, 0)
    ref = _run(w.to_bytes(), x)
    layer = _native.parse(w.to_bytes())["arena_bytes"]
    for rows in (1, 2, 5, 12):
        plan = w.plan([FusedRegion(first, num, rows)])
        blob = w.to_bytes(plan)
        assert np.array_equal(_run(blob, x)[0], ref[0]), rows
        assert _computes_every_row_once(g, FusedRegion(first, num, rows))
    plan = w.plan([FusedRegion(first, num, 1)])
    assert plan.arena_size < layer
    up, cat = w._ops[first].outputs[0], w._ops[first + 1].outputs[0]
    # A band of one output row of the 3x3 conv needs 3 rows of the
    # concatenation, and those 3 rows of the upsampled map.
    assert region_layout(g, FusedRegion(first, num, 1)).banded_rows == {up: 3, cat: 3}


def _windows(w, first=0, num=1):
    return w.arena_graph().bands.describe(first, num)["ops"]


def test_upsampling_windows_have_a_rational_stride():
    from executorch_espnn.lowering.ops.resize_tables import aot_bilinear_table, aot_nearest_index_table

    for kind, table, window in (
            # output row r reads row floor(r/2)
            ("RESIZE_NEAREST", aot_nearest_index_table(5, 10), (0, 1, 0, 1, 2)),
            # rows floor((r-1)/2) and the next (source (r+0.5)/2 - 0.5), but
            # row 0's source is clamped to 0, so it reads rows 0 and 1 from
            # lo(0) = -1: extent 3
            ("RESIZE_BILINEAR", aot_bilinear_table(5, 10, False), (0, 1, 1, 3, 2)),
            # align_corners: source r*4/9 (rows floor(4r/9) and the next)
            # falls behind r/2 (row 8 reads row 3): pad 1, and so extent 3
            ("RESIZE_BILINEAR", aot_bilinear_table(5, 10, True), (0, 1, 1, 3, 2))):
        w = Xts3Writer()
        x = w.tensor([1, 5, 3, 2], scale=bg.S, zero_point=bg.Z)
        y = w.tensor([1, 10, 3, 2], scale=bg.S, zero_point=bg.Z)
        columns = np.zeros((3, 3) if kind == "RESIZE_BILINEAR" else 3, np.int32)  # every column from column 0
        w.op(kind, [x, w.constant(table), w.constant(columns)], [y])
        w.set_inputs([x])
        w.set_outputs([y])
        assert _windows(w) == [(1, [window])], kind
    w, first, _ = bg.unet_decoder()
    assert _windows(w, first) == [(1, [(0, 1, 0, 1, 2)])]  # 2x2 stride 2: output row r reads row floor(r/2)
    assert _native.plan_band_region([(1, [(0, 1, 0, 1, 2)])], [5, 10], 2)["capacity"] == [1, 2]


def test_upsampling_ops_a_region_refuses():
    rng = np.random.default_rng(0)
    # CONCAT of three images (a region op reads at most two row-mapped inputs)
    w = Xts3Writer()
    x = w.tensor([1, 4, 3, 2], scale=bg.S, zero_point=bg.Z)
    y = w.tensor([1, 4, 3, 6], scale=bg.S, zero_point=bg.Z)
    w.op("CONCAT", [x, x, x], [y], axis=3)
    w.set_inputs([x])
    w.set_outputs([y])
    assert w.arena_graph().bands.describe(0, 1) == "op 0 (CONCAT) cannot run in a fused region"
    # TRANSPOSE_CONV2D whose last output rows (output_padding) read no input row
    w = Xts3Writer()
    x = w.tensor([1, 4, 3, 2], scale=bg.S, zero_point=bg.Z)
    y, _ = bg.transpose_conv(w, rng, x, (1, 4, 3, 2), k=2, stride=2, pad=0)
    w.set_inputs([x])
    w.set_outputs([y])
    assert isinstance(w.arena_graph().bands.describe(0, 1), dict)
    w = Xts3Writer()
    x = w.tensor([1, 4, 3, 2], scale=bg.S, zero_point=bg.Z)
    y = w.tensor([1, 9, 6, 2], scale=bg.S, zero_point=bg.Z)
    w.op("TRANSPOSE_CONV2D", [x, w.constant(rng.integers(-127, 128, (2, 2, 2, 2), dtype=np.int8)),
                              *bg._requant(w, rng, 2)], [y], stride_h=2, stride_w=2, pad_top=0, pad_left=0,
         dilation_h=1, dilation_w=1, groups=1, input_offset=-bg.Z, output_offset=bg.Z, act_min=-128, act_max=127)
    w.set_inputs([x])
    w.set_outputs([y])
    assert _native.parse(w.to_bytes())  # a valid op (output_padding 1 on rows) ...
    assert w.arena_graph().bands.describe(0, 1) == "op 0 (TRANSPOSE_CONV2D) cannot run in a fused region"


# ------------------------------------------------------------------ zoo
def _zoo_payload(name: str) -> bytes:
    torch = pytest.importorskip("torch")
    pytest.importorskip("executorch")
    from executorch_espnn import EspNNCompileSpecBuilder, delegate_payloads, quantize, to_espnn_edge
    from executorch_espnn import models as M

    make = {"ds_cnn": M.ds_cnn, "mobilenet_v2_96": lambda: M.mobilenet_v2(num_classes=10, resolution=96)}[name]
    model, example = make()
    # The layer-by-layer payload: these tests place the regions themselves.
    specs = EspNNCompileSpecBuilder().set_schedule("layer").build()
    edge = to_espnn_edge(torch.export.export(quantize(model, example, [example]), example), compile_specs=specs)
    (payload,) = delegate_payloads(edge)
    return payload


def _same_outputs(a: bytes, b: bytes) -> bool:
    s = _native.parse(a)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(s["tensors"][t]["shape"]).astype(np.float32) if s["tensors"][t]["dtype"] == "FLOAT32"
          else rng.integers(-128, 128, s["tensors"][t]["shape"], dtype=np.int8) for t in s["inputs"]]
    return all(np.array_equal(p, q) for p, q in zip(_native.run(a, xs), _native.run(b, xs)))


def test_ds_cnn_in_place_regions_fit_9600_bytes_bit_exactly():
    payload = _zoo_payload("ds_cnn")
    w = Xts3Writer.from_blob(payload)
    g = w.arena_graph()
    assert _native.parse(w.to_bytes())["arena_bytes"] == 16000  # the layer-by-layer bound
    convs = [i for i, op in enumerate(g.ops) if op.name in ("CONV2D", "DEPTHWISE_CONV2D")
             and g.bands.shape(op.inputs[0]) == g.bands.shape(op.outputs[0])]
    assert len(convs) == 8  # 4 x (depthwise 3x3, pointwise 1x1) on 25x5x64
    regions = [FusedRegion(i, 1, 1, in_place=True) for i in convs]
    plan = w.plan(regions)
    blob = w.to_bytes(plan)
    assert _native.parse(blob)["arena_bytes"] == plan.arena_size == 8640 <= 9600
    assert _same_outputs(payload, blob)


def test_mobilenet_v2_96_every_block_fused_is_bit_exact():
    payload = _zoo_payload("mobilenet_v2_96")
    w = Xts3Writer.from_blob(payload)
    g = w.arena_graph()
    names = [op.name for op in g.ops]
    # stem conv + first block, then every inverted residual block (+ ADD)
    blocks, i = [], names.index("CONV2D")
    blocks.append((i, 3))
    i += 3
    while names[i:i + 2] == ["CONV2D", "DEPTHWISE_CONV2D"]:
        n = 4 if names[i + 3] == "ADD" else 3
        blocks.append((i, n))
        i += n
    assert len(blocks) == 17 and all(is_fusable(g, a, n) for a, n in blocks)
    for rows in (1, 3):
        regions = [FusedRegion(a, n, rows) for a, n in blocks]
        blob = w.to_bytes(w.plan(regions))
        assert _same_outputs(payload, blob), rows
        assert all(_computes_every_row_once(g, r) for r in regions)
    # every maximal fusable chain at once (as many as do not overlap)
    chosen, end = [], -1
    for a, n in fusable_chains(g):
        if a > end:
            chosen.append(FusedRegion(a, n, 2))
            end = a + n - 1
    assert _same_outputs(payload, w.to_bytes(w.plan(chosen)))


# ------------------------------------------------------------------ parser
def _fused(in_place: bool = False, rows: int = 2):
    w, n = bg.inverted_residual(stride=1, expand=8 if in_place else 24)
    region = FusedRegion(1, 1, rows, True) if in_place else FusedRegion(0, n, rows)
    blob = w.to_bytes(w.plan([region]))
    _native.parse(blob)
    return w, blob


def _tensor_field(blob: bytes, t: int, field: str, code: str, value: int) -> bytes:
    return xm.patch(blob, xm.Layout(blob).tensor(t) + _native.TENSOR_FIELDS[field], code, value)


def _param(blob: bytes, op: int, k: int, value: int) -> bytes:
    lay = xm.Layout(blob)
    rec = lay.sections["OPS"].offset + op * _native.OP_RECORD_SIZE
    start = struct.unpack_from("<I", blob, rec + _native.OP_FIELDS["params_start"])[0]
    return xm.patch(blob, lay.sections["PARAMS"].offset + 4 * (start + k), "i", value)


def _summary(blob):
    return _native.parse(blob)


def test_parser_rejects_a_band_buffer_one_row_short():
    _, blob = _fused()
    s = _summary(blob)
    e = s["ops"][1]["outputs"][0]  # expansion: BANDED
    t = s["tensors"][e]
    row = t["shape"][2] * t["shape"][3]
    expect_rejected(_tensor_field(blob, e, "nbytes", "I", t["nbytes"] - row), "BANDED tensor", "needs")


def test_parser_rejects_banded_flag_errors():
    _, blob = _fused()
    s = _summary(blob)
    e, y = s["ops"][1]["outputs"][0], s["outputs"][0]
    # an intermediate without the flag (its nbytes no longer whole elements either)
    expect_rejected(_tensor_field(blob, e, "flags", "B", 0), "nbytes")
    # the region output flagged
    expect_rejected(_tensor_field(blob, y, "flags", "B", 1), "BANDED")
    # an unknown flag bit
    expect_rejected(_tensor_field(blob, e, "flags", "B", 4), "flags 0x4 not defined")  # bit 1 is EXTERNAL now


def test_parser_rejects_banded_tensors_in_version_1():
    _, blob = _fused()
    expect_rejected(xm.patch(blob, _native.HEADER_FIELDS["version"], "H", 1), "flags 0x1 not defined in format version 1")


@pytest.mark.parametrize("k, value, fragment", [
    (0, 0, "num_ops"), (0, 33, "num_ops"), (0, 30, "runs past the last op"), (1, 0, "band_rows"),
    (2, 4, "unknown bits"), (2, 1, "IN_PLACE: the output"),
])
def test_parser_rejects_bad_band_loop_params(k, value, fragment):
    _, blob = _fused()
    expect_rejected(_param(blob, 0, k, value), fragment)


def test_parser_rejects_a_region_that_ends_inside_the_chain():
    _, blob = _fused()
    # num_ops 2: op 2's BANDED output would be the region output
    expect_rejected(_param(blob, 0, 0, 2), "must not be BANDED")


def test_parser_rejects_a_region_over_an_op_that_cannot_run_on_bands():
    w = Xts3Writer()
    x = w.tensor([1, 6, 6, 4], scale=bg.S, zero_point=bg.Z)
    m = w.tensor([1, 6, 6, 4], scale=bg.S, zero_point=bg.Z)
    y = w.tensor([1, 6, 6, 4], scale=bg.S, zero_point=bg.Z)
    w.op("MUL", [x, x], [m], input1_offset=-bg.Z, input2_offset=-bg.Z, output_offset=bg.Z, output_mult=1 << 30,
         output_shift=-5, act_min=-128, act_max=127)  # MUL does not run on bands
    w.op("LUT", [m, w.constant(np.arange(256, dtype=np.int64).astype(np.int8))], [y])
    w.set_inputs([x])
    w.set_outputs([y])
    assert not is_fusable(w.arena_graph(), 0, 2)
    with pytest.raises(RegionRefused, match="cannot form a fused region"):
        w.plan([FusedRegion(0, 2, 1)])


def test_parser_rejects_overlapping_region_tensors():
    _, blob = _fused()
    s = _summary(blob)
    x, d = s["inputs"][0], s["ops"][2]["outputs"][0]  # the region input and the depthwise band
    expect_rejected(_tensor_field(blob, d, "offset", "I", s["tensors"][x]["offset"]),
                    "another tensor of the same fused region")


def test_parser_rejects_in_place_errors():
    _, blob = _fused(in_place=True)
    s = _summary(blob)
    loop = next(i for i, o in enumerate(s["ops"]) if o["op"] == "BAND_LOOP")
    staging = s["ops"][loop]["outputs"][0]
    st = s["tensors"][staging]
    # staging one row short
    expect_rejected(_tensor_field(_tensor_field(blob, staging, "dims", "I", st["shape"][0] - 1), staging,
                                  "nbytes", "I", st["nbytes"] - st["shape"][1]), "staging", "needs")
    # the output moved off its input (onto bytes of its own)
    y = s["ops"][loop + 1]["outputs"][0]
    moved = xm.patch(_tensor_field(blob, y, "offset", "I", s["arena_bytes"]), _native.HEADER_FIELDS["arena_size"],
                     "I", s["arena_bytes"] + 16 * ((s["tensors"][y]["nbytes"] + 15) // 16))
    expect_rejected(moved, "IN_PLACE: the output", "must sit on the region input")
    # not in place any more: the depthwise would write over its own input
    expect_rejected(_param(blob, loop, 2, 0), "input and output overlap")


def test_parser_rejects_a_banded_tensor_read_outside_its_region():
    w, n = bg.inverted_residual(stride=1)
    e = w._ops[0].outputs[0]
    extra = w.tensor(list(w.arena_graph().bands.shape(e)), scale=bg.S, zero_point=bg.Z)
    w.op("LUT", [e, w.constant(np.zeros(256, np.int8))], [extra])
    w.set_outputs(w._outputs + [extra])
    assert not is_fusable(w.arena_graph(), 0, n)


def test_regions_must_not_overlap_and_must_exist():
    w, n = bg.inverted_residual()
    g = w.arena_graph()
    with pytest.raises(ValueError, match="overlap"):
        plan_arena(g, [FusedRegion(0, 2, 1), FusedRegion(1, 2, 1)])
    assert fusable_chains(g) == [(0, n)]


def test_writer_from_blob_rewrites_a_payload_that_computes_the_same():
    from espnn_dev import op_corpus

    for name, blob in op_corpus.op_graphs():
        if any(o["op"] == "BAND_LOOP" for o in _native.parse(blob)["ops"]):
            with pytest.raises(ValueError, match="already has fused regions"):
                Xts3Writer.from_blob(blob)
            continue
        again = Xts3Writer.from_blob(blob).to_bytes()
        a, b = _native.parse(blob), _native.parse(again)
        assert [o["op"] for o in a["ops"]] == [o["op"] for o in b["ops"]], name
        assert b["arena_bytes"] <= a["arena_bytes"], name
        assert _same_outputs(blob, again), name


# ------------------------------------------------------------------ squeeze-excite
def test_squeeze_excite_scale_projection_and_residual_fuse_in_place_exactly():
    # MUL(x, s) by the channel vector s, project 1x1, residual ADD: a region
    # whose output (C channels) takes the bytes of x (C_exp channels) from
    # their start, in every band height, bit-identical, each row once.
    w, at = bg.squeeze_excite(h=10, wd=6, c=8, expand=24)
    g = w.arena_graph()
    x = _input(w, 5)
    base = w.to_bytes()
    ref = _run(base, x)
    first, num = at["mul"], at["last"] - at["mul"] + 1
    for rows in range(1, 11):
        for in_place in (False, True):
            r = FusedRegion(first, num, rows, in_place)
            plan = w.plan([r])
            blob = w.to_bytes(plan)
            assert _native.parse(blob)["arena_bytes"] == plan.arena_size
            assert all(np.array_equal(a, b) for a, b in zip(_run(blob, x), ref)), (rows, in_place)
            assert _computes_every_row_once(g, r)


def test_squeeze_excite_block_fused_around_its_mean_is_exact_and_smaller():
    # expand -> depthwise (x, read whole by MEAN_HW and MUL), then the scale
    # region in place: two regions around the squeeze.
    w, at = bg.squeeze_excite(h=24, wd=4, c=16, expand=32, seed=2)
    x = _input(w, 7)
    ref = _run(w.to_bytes(), x)
    expand = FusedRegion(0, at["mean"], 1)
    regions = [expand, FusedRegion(at["mul"], at["last"] - at["mul"] + 1, 1, True)]
    plan = w.plan(regions)
    # x (C_exp) + the block input + the projection: the peak once the
    # expansion is banded, unless the projection writes over x
    assert plan.arena_size < w.plan([expand]).arena_size < _native.parse(w.to_bytes())["arena_bytes"]
    assert all(np.array_equal(a, b) for a, b in zip(_run(w.to_bytes(plan), x), ref))


def test_in_place_output_may_be_narrower_but_not_wider_nor_of_other_rows():
    w, at = bg.squeeze_excite(h=10, wd=6, c=8, expand=24)
    g = w.arena_graph()
    assert not isinstance(g.bands.describe(at["mul"], 2, True), str)  # 24 -> 8 channels, 10 rows
    assert "IN_PLACE: the output" in g.bands.describe(0, 1, True)  # expand: 8 -> 24 channels
    w2, at2 = bg.squeeze_excite(h=10, wd=6, c=8, expand=24, stride=2)
    assert not isinstance(w2.arena_graph().bands.describe(at2["mul"], 2, True), str)  # rows 5 -> 5
    assert "IN_PLACE: the output" in w2.arena_graph().bands.describe(0, 4, True)  # rows 10 -> 5


def test_channel_vector_is_read_whole_so_written_before_the_region():
    w, at = bg.squeeze_excite()
    g = w.arena_graph()
    lut_op = at["mul"] - 1  # s = LUT(...) inside the region: no band holds all of it
    assert refusal(g, lut_op, 2) == (f"op {at['mul']} input 1 (tensor {g.ops[lut_op].outputs[0]}) is read whole "
                                     "by every band, so it must be written before the region")
    assert "MEAN_HW" in refusal(g, at["mean"] - 1, 2)  # the mean itself stays global


def test_parser_rejects_a_narrower_in_place_output_off_the_input_start():
    w, at = bg.squeeze_excite(h=10, wd=6, c=8, expand=24)
    blob = w.to_bytes(w.plan([FusedRegion(at["mul"], at["last"] - at["mul"] + 1, 1, True)]))
    s = _summary(blob)
    loop = next(i for i, o in enumerate(s["ops"]) if o["op"] == "BAND_LOOP")
    xt, y = s["ops"][loop + 1]["inputs"][0], s["ops"][loop + 3]["outputs"][0]
    assert s["tensors"][y]["offset"] == s["tensors"][xt]["offset"]
    assert s["tensors"][y]["nbytes"] < s["tensors"][xt]["nbytes"]
    expect_rejected(_tensor_field(blob, y, "offset", "I", s["tensors"][xt]["offset"] + 16), "IN_PLACE: the output",
                    "must sit on the region input")


def test_channel_scale_with_the_vector_first_runs_on_bands_but_is_not_the_in_place_input():
    # torchvision writes scale * input: MUL(s, x). It runs on bands (x is
    # its row input); an in-place region's input is its first op's input 0,
    # here s, so such a region starts at the projection instead.
    w, at = bg.squeeze_excite(h=10, wd=6, c=8, expand=24, scale_first=True)
    g = w.arena_graph()
    x = _input(w, 9)
    ref = _run(w.to_bytes(), x)
    first, num = at["mul"], at["last"] - at["mul"] + 1
    assert "must be input 0 of op" in g.bands.describe(first, num, True)
    for r in (FusedRegion(first, num, 3), FusedRegion(first + 1, num - 1, 3, True)):
        assert all(np.array_equal(a, b) for a, b in zip(_run(w.to_bytes(w.plan([r])), x), ref)), r
        assert _computes_every_row_once(g, r)
