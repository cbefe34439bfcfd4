"""EXTERNAL graph inputs (tensor flag, format version 2): a FLOAT32 graph input
whose bytes the caller binds at Invoke instead of copying them into the arena.

Oracle: the same graph without the flag (the input copied into the arena) —
the flag changes where the bytes are read from, never the arithmetic — and
the parser rules of docs/xts3-format.md (T3, T13, G6, G7, A1)."""

import struct

import numpy as np
import pytest

from executorch_espnn import _native
from executorch_espnn import _native as fmt  # the format constants, from xts3_format.h
from executorch_espnn.xts3_writer import Xts3Writer
from espnn_dev.graph_util import expect_rejected
from espnn_dev.xts3_mutations import Layout, patch

EXTERNAL = fmt.TENSOR_FLAGS["EXTERNAL"]


def float_input_graph(external: bool, shape=(1, 3, 8, 8)) -> Xts3Writer:
    """QUANTIZE a float image, then TRANSPOSE NCHW -> NHWC: the first steps of
    every float-input model."""
    w = Xts3Writer()
    x = w.tensor(shape, "FLOAT32", external=external)
    q = w.tensor(shape, "INT8", scale=0.02, zero_point=-3)
    n, c, h, wd = shape
    y = w.tensor((n, h, wd, c), "INT8", scale=0.02, zero_point=-3)
    w.op("QUANTIZE", [x], [q], inv_scale_f32=struct.unpack("<i", struct.pack("<f", 50.0))[0], zero_point=-3)
    w.op("TRANSPOSE", [q], [y], perm0=0, perm1=2, perm2=3, perm3=1, perm4=0)
    w.set_inputs([x])
    w.set_outputs([y])
    return w


def feed(shape=(1, 3, 8, 8)) -> np.ndarray:
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(shape) * 2).astype(np.float32)
    x.flat[:4] = [np.nan, np.inf, -np.inf, 0.01]
    return x


def test_external_input_runs_bit_identically_to_the_copied_input():
    plain, ext = float_input_graph(False).to_bytes(), float_input_graph(True).to_bytes()
    x = feed()
    want = _native.Program(plain).run([x])
    got = _native.Program(ext).run([x])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    # and the caller's array is read, not written
    np.testing.assert_array_equal(x, feed())


def test_external_input_takes_no_arena_bytes_and_needs_version_2():
    plain, ext = float_input_graph(False).to_bytes(), float_input_graph(True).to_bytes()
    sp, se = _native.parse(plain), _native.parse(ext)
    assert se["tensors"][0]["flags"] == EXTERNAL and se["tensors"][0]["offset"] == 0
    assert se["version"] == 2 == fmt.TENSOR_FLAG_MIN_VERSION
    # The float input (768 B) was the arena's largest tensor; without it the
    # arena holds only the two int8 tensors (192 B each).
    assert sp["arena_bytes"] == 3 * 8 * 8 * 4 + 3 * 8 * 8
    assert se["arena_bytes"] == 2 * 3 * 8 * 8


def test_misaligned_feed_is_realigned_by_the_binding():
    ext = float_input_graph(True).to_bytes()
    x = feed()
    raw = np.zeros(x.nbytes + 1, np.uint8)
    buf = np.frombuffer(raw.data, dtype=np.uint8, count=x.nbytes, offset=1)
    buf[:] = x.view(np.uint8).ravel()
    unaligned = np.ndarray(x.shape, np.float32, buffer=raw.data, offset=1)
    assert unaligned.ctypes.data % 4 != 0
    np.testing.assert_array_equal(_native.Program(ext).run([unaligned])[0],
                                  _native.Program(ext).run([x])[0])


def _flag(blob: bytes, tensor: int, flags: int) -> bytes:
    return patch(blob, Layout(blob).tensor(tensor) + fmt.TENSOR_FIELDS["flags"], "B", flags)


def test_parser_rejects_external_on_a_non_float_tensor():
    blob = float_input_graph(True).to_bytes()
    expect_rejected(_flag(blob, 1, EXTERNAL), "tensor 1: an EXTERNAL tensor must be a FLOAT32")


def test_parser_rejects_external_at_a_nonzero_offset():
    blob = float_input_graph(True).to_bytes()
    rec = Layout(blob).tensor(0)
    expect_rejected(patch(blob, rec + fmt.TENSOR_FIELDS["offset"], "I", 16), "tensor 0: an EXTERNAL tensor")


def test_parser_rejects_external_and_banded():
    blob = float_input_graph(True).to_bytes()
    expect_rejected(_flag(blob, 0, EXTERNAL | fmt.TENSOR_FLAGS["BANDED"]), "tensor 0:")


def test_parser_rejects_external_in_version_1():
    blob = float_input_graph(True).to_bytes()
    expect_rejected(patch(blob, fmt.HEADER_FIELDS["version"], "H", 1), "tensor 0: flags 0x2 not defined in format version 1")


def test_parser_rejects_external_on_a_tensor_that_is_not_a_graph_input():
    w = Xts3Writer()
    x = w.tensor((4,), "FLOAT32")
    y = w.tensor((4,), "FLOAT32")
    q = w.tensor((4,), "INT8", scale=0.5)
    w.op("QUANTIZE", [x], [q], inv_scale_f32=struct.unpack("<i", struct.pack("<f", 2.0))[0], zero_point=0)
    w.set_inputs([x])
    w.set_outputs([q])
    blob = patch(w.to_bytes(), fmt.HEADER_FIELDS["version"], "H", 2)
    # y is an unused float arena tensor: EXTERNAL on it is refused (G6).
    expect_rejected(_flag(blob, y, EXTERNAL), f"tensor {y}: EXTERNAL but not a graph input")


def test_parser_rejects_an_external_graph_output():
    w = Xts3Writer()
    x = w.tensor((4,), "FLOAT32", external=True)
    q = w.tensor((4,), "INT8", scale=0.5)
    w.op("QUANTIZE", [x], [q], inv_scale_f32=struct.unpack("<i", struct.pack("<f", 2.0))[0], zero_point=0)
    w.set_inputs([x])
    w.set_outputs([q, x])
    expect_rejected(w.to_bytes(), "graph output 1 (tensor 0) is EXTERNAL")


def test_parser_rejects_an_op_writing_an_external_tensor():
    # An EXTERNAL tensor is a graph input, so an op writing it breaks O7.
    w = Xts3Writer()
    x = w.tensor((4,), "FLOAT32", external=True)
    q = w.tensor((4,), "INT8", scale=0.5)
    w.op("QUANTIZE", [x], [q], inv_scale_f32=struct.unpack("<i", struct.pack("<f", 2.0))[0], zero_point=0)
    w.op("DEQUANTIZE", [q], [x], scale_f32=struct.unpack("<i", struct.pack("<f", 0.5))[0], zero_point=0)
    w.set_inputs([x])
    w.set_outputs([q])
    expect_rejected(w.to_bytes(), "is already written by a graph input")
