"""The S3 routing is stated once, in the runtime's C++ (src/ops/s3_route.h):
analysis.s3_dispatch passes the native Program's answer through, the
lowering's question (s3_depthwise_route) and a program's op routes are the
same function, and the answer moves with the geometry the C++ predicates
read."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from test_payload_metrics import conv_graph

from executorch_espnn import _native
from executorch_espnn.analysis import S3Path, payload_metrics, s3_dispatch, s3_path
from executorch_espnn.lowering.ops import conv as lower_conv


def dw(in_hw=(8, 8), ch=16, out_hw=(8, 8), k=(3, 3), pads=(1, 1), strides=(1, 1), dil=(1, 1), mult=1, offset=0):
    return conv_graph("DEPTHWISE_CONV2D", (1, *in_hw, ch), (1, *out_hw, ch * mult), k=k, pads=pads, strides=strides,
                      dil=dil, ch_mult=mult, input_offset=offset)


def route_of(blob):
    (route,) = _native.Program(blob).op_routes()
    return route


@pytest.mark.parametrize("pads, out_hw, defect", [((0, 0), (6, 6), False), ((1, 1), (8, 8), False),
                                                  ((1, 0), (8, 6), True), ((0, 1), (6, 8), True),
                                                  ((2, 2), (10, 10), True)])
def test_the_reported_route_follows_the_pads_the_predicate_reads(pads, out_hw, defect):
    # The defect's geometry is staged (padding written into scratch) and stays on the SIMD path.
    route = route_of(dw(pads=pads, out_hw=out_hw))
    assert ("scratch defect" in route["reason"]) is defect, route
    assert ("staged padding" in route["kernel"]) is defect, route
    assert route["simd"]
    # 8 channels: the same pads are not the defect's geometry (ch % 16 != 0)
    assert "scratch defect" not in route_of(conv_graph("DEPTHWISE_CONV2D", (1, 8, 8, 8), (1, *out_hw, 8),
                                                       pads=pads))["reason"]


@pytest.mark.parametrize("geometry", [
    dict(pads=(1, 0), out_hw=(8, 6)),
    dict(pads=(1, 1)),
    dict(ch=12),
    dict(ch=4, mult=4),
    dict(ch=5, mult=3),
    dict(dil=(2, 2), pads=(2, 2)),
    dict(in_hw=(14, 14), out_hw=(14, 14), ch=240, k=(5, 5), pads=(2, 2), offset=112),
    dict(in_hw=(14, 14), out_hw=(14, 14), ch=240, k=(5, 5), pads=(2, 2), offset=0),
])
def test_the_lowerings_question_and_the_programs_routes_are_one_function(geometry):
    g = dict(in_hw=(8, 8), ch=16, out_hw=(8, 8), k=(3, 3), pads=(1, 1), strides=(1, 1), dil=(1, 1), mult=1,
             offset=0) | geometry
    asked = _native.s3_depthwise_route(in_hwc=(*g["in_hw"], g["ch"]), kernel=g["k"], ch_mult=g["mult"],
                                       out_hw=g["out_hw"], stride=g["strides"], padding=g["pads"],
                                       dilation=g["dil"], input_offset=g["offset"])
    assert asked.pop("route") in {"own_kernel", "staged_padding", "ansi_tiled_pad_defect", "espnn"}
    assert asked == route_of(dw(**geometry))


def test_the_route_names_say_which_branch_decided():
    ask = dict(in_hwc=(8, 8, 16), kernel=(3, 3), ch_mult=1, stride=(1, 1), dilation=(1, 1), input_offset=0)
    assert _native.s3_depthwise_route(out_hw=(8, 6), padding=(1, 0), **ask)["route"] == "staged_padding"
    assert _native.s3_depthwise_route(out_hw=(8, 8), padding=(1, 1), **ask)["route"] == "espnn"
    assert _native.s3_depthwise_route(out_hw=(8, 8), padding=(2, 2), **{**ask, "dilation": (2, 2)})["route"] \
        == "own_kernel"
    tiled = dict(in_hwc=(14, 14, 240), kernel=(5, 5), ch_mult=1, out_hw=(14, 14), stride=(1, 1), padding=(2, 2),
                 dilation=(1, 1))
    assert _native.s3_depthwise_route(input_offset=112, **tiled)["route"] == "ansi_tiled_pad_defect"
    assert _native.s3_depthwise_route(input_offset=0, **tiled)["route"] == "espnn"


def test_the_lowering_asks_the_runtime(monkeypatch):
    # Whether a one-channel conv is lowered as a depthwise one is whatever the runtime's
    # RouteDepthwise says of that depthwise layer: with the native answer replaced, the choice
    # follows it (nothing in conv.py decides on its own).
    mult8 = ((1, 8, 8, 1), [0, 0], 8, (1, 8, 8, 8), (3, 3), [1, 1], [1, 1], [1, 1], 0)
    generic = ((1, 8, 8, 1), [0, 0], 3, (1, 8, 8, 3), (3, 3), [1, 1], [1, 1], [1, 1], 0)
    assert lower_conv._single_channel_as_depthwise(*mult8) is True
    assert lower_conv._single_channel_as_depthwise(*generic) is False
    monkeypatch.setattr(lower_conv._native, "s3_depthwise_route", lambda **kw: {"simd": True})
    assert lower_conv._single_channel_as_depthwise(*generic) is True


def test_s3_path_is_the_native_route_of_the_same_blob():
    blob = dw(pads=(1, 0), out_hw=(8, 6))
    summary = _native.parse(blob)
    (op,) = summary["ops"]
    want = S3Path(**route_of(blob))
    assert s3_path(summary, op) == s3_path(blob, op) == s3_path(_native.Program(blob), op) == want
    assert s3_dispatch.RULES["DEPTHWISE_CONV2D"](summary, op) == want
    row = payload_metrics(blob).ops[0]
    assert (row.s3_simd, row.kernel, row.reason) == (want.simd, want.kernel, want.reason)


def test_a_summary_without_the_runtimes_routes_is_refused():
    summary = _native.parse(dw())
    del summary["s3_routes"]
    with pytest.raises(ValueError, match="s3_routes"):
        s3_path(summary, summary["ops"][0])


def test_the_python_side_states_no_rule():
    """A routing rule needs numbers (channels % 4, width >= 32, pads (1, 1), 48 KiB ...): neither
    the analysis nor the lowering's routing question holds one."""
    tree = ast.parse(Path(s3_dispatch.__file__).read_text())
    numbers = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and type(n.value) in (int, float)]
    assert numbers == [], numbers
    conv_tree = ast.parse(Path(lower_conv.__file__).read_text())
    (fn,) = [n for n in ast.walk(conv_tree)
             if isinstance(n, ast.FunctionDef) and n.name == "_single_channel_as_depthwise"]
    compares = [ast.unparse(n) for n in ast.walk(fn) if isinstance(n, ast.Compare)]
    assert compares == [], compares
