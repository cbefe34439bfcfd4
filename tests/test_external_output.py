"""EXTERNAL graph outputs (format version 5): a float graph output written by
its op straight into the caller's buffer (Interpreter::BindOutput), with no
arena bytes and no copy; the parser's rules for them (G6, G7) and the
writer's choice of which outputs to mark."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from espnn_dev.graph_util import expect_rejected
from espnn_dev.xts3_mutations import Layout, patch
from executorch_espnn import _native as fmt
from executorch_espnn.xts3_writer import Xts3Writer

EXTERNAL = fmt.TENSOR_FLAGS["EXTERNAL"]
SHAPE = (1, 3, 8, 8)
S, ZP = 0.05, -3


def _f32_bits(x: float) -> int:
    return struct.unpack("<i", struct.pack("<f", x))[0]


def _round_trip(*, mark: bool, output_external: bool = False, read_after: bool = False) -> Xts3Writer:
    """float x -> QUANTIZE -> q -> DEQUANTIZE -> y (graph output); with
    ``read_after`` y is also quantized again into a second output."""
    w = Xts3Writer()
    x = w.tensor(SHAPE, "FLOAT32")
    q = w.tensor(SHAPE, "INT8", scale=S, zero_point=ZP)
    y = w.tensor(SHAPE, "FLOAT32", external=output_external)
    w.op("QUANTIZE", [x], [q], inv_scale_f32=_f32_bits(1 / S), zero_point=ZP)
    w.op("DEQUANTIZE", [q], [y], scale_f32=_f32_bits(S), zero_point=ZP)
    outputs = [y]
    if read_after:
        q2 = w.tensor(SHAPE, "INT8", scale=2 * S, zero_point=0)
        w.op("QUANTIZE", [y], [q2], inv_scale_f32=_f32_bits(1 / (2 * S)), zero_point=0)
        outputs.append(q2)
    w.set_inputs([x])
    w.set_outputs(outputs)
    w.mark_external_inputs()
    if mark:
        w.mark_external_outputs()
    return w


def _feed(seed=0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(SHAPE) * 3).astype(np.float32)


def test_writer_marks_a_dequantize_float_output_and_writes_version_5():
    w = _round_trip(mark=False)
    assert w.mark_external_outputs() == [2]
    s = fmt.parse(w.to_bytes())
    (t,) = s["outputs"]
    assert s["tensors"][t]["flags"] == EXTERNAL and s["tensors"][t]["offset"] == 0
    assert s["version"] == fmt.EXTERNAL_OUTPUT_MIN_VERSION == 5
    # Unmarked, the same graph keeps version 2 (its EXTERNAL input only).
    assert fmt.parse(_round_trip(mark=False).to_bytes())["version"] == 2


def test_bound_output_is_bit_identical_and_takes_no_arena_bytes():
    plain, ext = _round_trip(mark=False).to_bytes(), _round_trip(mark=True).to_bytes()
    prog = fmt.Program(ext)
    for seed in range(3):
        x = _feed(seed)
        (got,) = prog.run([x])
        (want,) = fmt.Program(plain).run([x])
        assert got.dtype == np.float32 and got.shape == SHAPE
        np.testing.assert_array_equal(got, want)
    # The arena holds only the int8 tensor: a float output written there
    # would not fit (and the ASan tools allocate it at its exact size).
    n = int(np.prod(SHAPE))
    assert fmt.Program(plain).arena_bytes == n + 4 * n
    assert prog.arena_bytes == n < 4 * n


def test_an_unbound_external_output_makes_invoke_fail():
    prog = fmt.Program(_round_trip(mark=True).to_bytes())
    prog.run([_feed()])  # bound: runs
    with pytest.raises(RuntimeError, match="invoke: EXTERNAL output 0 is not bound \\(BindOutput\\)"):
        prog.run([_feed()], bind_outputs=False)
    # A graph without EXTERNAL outputs has nothing to bind.
    fmt.Program(_round_trip(mark=False).to_bytes()).run([_feed()], bind_outputs=False)


def test_a_later_op_reads_an_external_output_from_the_callers_buffer():
    plain = _round_trip(mark=False, read_after=True).to_bytes()
    w = _round_trip(mark=False, read_after=True)
    assert w.mark_external_outputs() == []  # the writer marks only outputs no op reads ...
    w._tensors[2].external = True  # ... but the runtime allows it
    ext = w.to_bytes()
    x = _feed(4)
    for got, want in zip(fmt.Program(ext).run([x]), fmt.Program(plain).run([x])):
        np.testing.assert_array_equal(got, want)


def test_writer_leaves_int8_repeated_and_non_dequantize_outputs_in_the_arena():
    w = Xts3Writer()
    x = w.tensor((4,), "FLOAT32")
    q = w.tensor((4,), "INT8", scale=S, zero_point=ZP)
    w.op("QUANTIZE", [x], [q], inv_scale_f32=_f32_bits(1 / S), zero_point=ZP)
    y = w.tensor((4,), "FLOAT32")
    w.op("DEQUANTIZE", [q], [y], scale_f32=_f32_bits(S), zero_point=ZP)
    w.set_inputs([x])
    w.set_outputs([q, y, y, x])  # int8, listed twice, a graph input
    assert w.mark_external_outputs() == []


def _blob(**kw) -> bytes:
    return _round_trip(mark=True, **kw).to_bytes()


def test_parser_refuses_an_external_output_before_version_5():
    blob = _blob()
    expect_rejected(patch(blob, fmt.HEADER_FIELDS["version"], "H", 4),
                    "tensor 2: an EXTERNAL graph output needs format version 5")


def test_parser_refuses_external_on_a_tensor_neither_input_nor_output():
    w = _round_trip(mark=True, read_after=True)
    w.set_outputs([3])  # y (tensor 2) is now only read by the second QUANTIZE
    w._tensors[2].external = True
    expect_rejected(w.to_bytes(), "tensor 2: EXTERNAL but not a graph input or a graph output")


def test_parser_refuses_an_external_output_listed_twice():
    w = _round_trip(mark=True)
    w.set_outputs([2, 2])
    expect_rejected(w.to_bytes(), "graph output 1 (tensor 2) is EXTERNAL and repeats graph output 0")


def test_parser_refuses_an_external_output_that_is_also_a_graph_input():
    w = _round_trip(mark=True)
    w.set_outputs([2, 0])  # x, the EXTERNAL input, also returned
    expect_rejected(w.to_bytes(), "graph output 1 (tensor 0) is EXTERNAL and also a graph input")


def test_parser_refuses_an_external_int8_or_offset_output():
    w = _round_trip(mark=True)
    w.set_outputs([2, 1])  # y and the int8 q
    blob = w.to_bytes()
    q, y = Layout(blob).tensor(1), Layout(blob).tensor(2)
    expect_rejected(patch(patch(blob, q + fmt.TENSOR_FIELDS["flags"], "B", EXTERNAL), q + fmt.TENSOR_FIELDS["offset"], "I", 0),
                    "tensor 1: an EXTERNAL tensor must be a FLOAT32")
    expect_rejected(patch(blob, y + fmt.TENSOR_FIELDS["offset"], "I", 16), "tensor 2: an EXTERNAL tensor")


def test_an_external_output_aliases_no_arena_tensor():
    # Its range is empty: the planner puts the next tensor at offset 0 too,
    # and the parser accepts that (no overlap), which in-place or view
    # aliasing with an arena tensor would need.
    s = fmt.parse(_blob(read_after=True))
    assert s["tensors"][2]["flags"] == 0  # read by an op: the writer leaves it in the arena
    w = _round_trip(mark=False, read_after=True)
    w._tensors[2].external = True
    s = fmt.parse(w.to_bytes())
    assert s["tensors"][2]["flags"] == EXTERNAL and s["tensors"][2]["offset"] == s["tensors"][1]["offset"] == 0
