"""The format constants reach Python from the C++ header, and the writer uses only them."""

import re
import struct
from pathlib import Path

import numpy as np
import pytest

from executorch_espnn import _native
from executorch_espnn.xts3_writer import Xts3Writer

REPO = Path(__file__).resolve().parents[1]
HEADER = REPO / "components/espnn_runtime/include/espnn/xts3_format.h"


def test_constants_match_the_cpp_header():
    text = HEADER.read_text()
    # Opcodes: every X(NAME, code, version, ...) row of the header is exported with its code.
    rows = re.findall(r"X\((\w+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(0x[0-9a-fA-F]+)\)", text)
    assert rows, "no opcode rows found in the header"
    assert {name: int(code) for name, code, *_ in rows} == {n: d["opcode"] for n, d in _native.OPCODES.items()}
    for name, code, ver, imin, imax, omin, omax, opt in rows:
        spec = _native.OPCODES[name]
        assert (spec["min_version"], spec["min_inputs"], spec["max_inputs"], spec["min_outputs"],
                spec["max_outputs"], spec["optional_inputs"]) == (int(ver), int(imin), int(imax), int(omin),
                                                                   int(omax), int(opt, 16))
    assert _native.FORMAT_MAGIC == int(re.search(r"kMagic = (0x[0-9a-fA-F]+)u", text).group(1), 16)
    assert _native.FORMAT_VERSION == int(re.search(r"kFormatVersion = (\d+);", text).group(1))
    assert _native.LIMITS["max_tensors"] == int(re.search(r"kMaxTensors = (\d+);", text).group(1))


def test_param_fields_are_exported_per_opcode():
    assert _native.OPCODES["CONV2D"]["params"] == (
        "stride_h", "stride_w", "pad_top", "pad_left", "dilation_h", "dilation_w", "groups",
        "input_offset", "output_offset", "act_min", "act_max")
    assert _native.OPCODES["QUANTIZE"]["params"] == ("inv_scale_f32", "zero_point", "channels_last")
    assert _native.OPCODES["LUT"]["params"] == ()


def test_kernel_source_is_reported():
    src = _native.KERNEL_SOURCE
    assert src.startswith("stand-in") or src.startswith("esp-nn"), src


def test_magic_spells_xts3():
    assert struct.pack("<I", _native.FORMAT_MAGIC) == b"XTS3"


def _tiny_graph() -> Xts3Writer:
    w = Xts3Writer()
    x = w.tensor([1, 4], "FLOAT32")
    q = w.tensor([1, 4], "INT8", scale=0.5, zero_point=1)
    y = w.tensor([1, 4], "FLOAT32")
    w.op("QUANTIZE", [x], [q], inv_scale_f32=2.0, zero_point=1)
    w.op("DEQUANTIZE", [q], [y], scale_f32=0.5, zero_point=1)
    w.set_inputs([x])
    w.set_outputs([y])
    return w


def test_writer_output_parses_and_runs():
    blob = _tiny_graph().to_bytes()
    assert blob[:4] == b"XTS3"
    summary = _native.parse(blob)
    assert [op["op"] for op in summary["ops"]] == ["QUANTIZE", "DEQUANTIZE"]
    assert summary["arena_bytes"] % _native.ARENA_ALIGNMENT == 0
    (y,) = _native.run(blob, [np.array([[0.0, 0.5, -3.0, 100.0]], np.float32)])
    np.testing.assert_array_equal(y, np.array([[0.0, 0.5, -3.0, 63.0]], np.float32))


def test_writer_is_deterministic():
    assert _tiny_graph().to_bytes() == _tiny_graph().to_bytes()


def test_arena_plan_reuses_dead_tensors_and_never_overlaps_live_ones():
    w = Xts3Writer()
    x = w.tensor([1, 4, 4, 4], "INT8")
    a = w.tensor([1, 4, 4, 4], "INT8")
    b = w.tensor([1, 4, 4, 4], "INT8")
    c = w.tensor([1, 4, 4, 4], "INT8")
    for src, dst in ((x, a), (a, b), (b, c)):  # 1x1 pooling: not an IN_PLACE op
        w.op("AVG_POOL2D", [src], [dst], kernel_h=1, kernel_w=1, stride_h=1, stride_w=1, pad_top=0, pad_left=0,
             act_min=-128, act_max=127)
    w.set_inputs([x])
    w.set_outputs([c])
    plan = w.plan()
    offsets, arena = plan.offsets, plan.arena_size
    # x dies when a is written... but a step reads its input while writing its
    # output, so input and output of one step never share bytes (in-place
    # elementwise ops excepted: tests/hardening/test_arena_plan.py).
    for src, dst in ((x, a), (a, b), (b, c)):
        assert offsets[src] != offsets[dst]
    assert arena == 128  # two 64-byte slots suffice for the chain
    prog = _native.Program(w.to_bytes())
    (out,) = prog.run([np.arange(-32, 32, dtype=np.int8).reshape(1, 4, 4, 4)])
    np.testing.assert_array_equal(out.ravel(), np.arange(-32, 32, dtype=np.int8))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda w: w.op("NOPE", [], []), "unknown op 'NOPE'"),
        (lambda w: w.op("QUANTIZE", [0], [0], zero_point=0), "missing params ['inv_scale_f32']"),
        (lambda w: w.op("QUANTIZE", [0], [0], inv_scale_f32=1.0, zero_point=0, bogus=1), "unknown params ['bogus']"),
        (lambda w: w.op("QUANTIZE", [7], [0], inv_scale_f32=1.0, zero_point=0), "tensor index 7 does not exist"),
        (lambda w: w.op("REQUANTIZE", [0], [0], input_zero_point=0, output_zero_point=0, mult=2**31, shift=0),
         "is not an int32"),
        (lambda w: w.tensor([1], "FLOAT16"), "unknown dtype 'FLOAT16'"),
        (lambda w: w.constant(np.zeros(3, np.float16)), "constants must be int8, int32 or float32"),
    ],
)
def test_writer_rejects_mistakes_with_a_clear_error(call, message):
    w = Xts3Writer()
    w.tensor([1], "FLOAT32")
    with pytest.raises(ValueError, match=re.escape(message)):
        call(w)


def test_run_checks_input_dtype_and_shape():
    prog = _native.Program(_tiny_graph().to_bytes())
    with pytest.raises(ValueError, match="input 0: dtype int8, the graph expects FLOAT32"):
        prog.run([np.zeros((1, 4), np.int8)])
    with pytest.raises(ValueError, match=r"input 0: shape \[4\], the graph expects \[1, 4\]"):
        prog.run([np.zeros(4, np.float32)])
    with pytest.raises(ValueError, match="expected 1 inputs, got 2"):
        prog.run([np.zeros((1, 4), np.float32)] * 2)


def test_run_accepts_equal_dtype_objects_from_pickled_arrays():
    # numpy dtypes compare by value; an unpickled array carries an equal but
    # distinct dtype object, which must be accepted.
    import pickle

    x = pickle.loads(pickle.dumps(np.array([[0.0, 0.5, -3.0, 100.0]], np.float32)))
    (y,) = _native.Program(_tiny_graph().to_bytes()).run([x])
    np.testing.assert_array_equal(y, np.array([[0.0, 0.5, -3.0, 63.0]], np.float32))


# ------------------------------------------------------------ test-rig containers
BUNDLE_HEADER = REPO / "components/espnn_test_runner/include/espnn/bundle.h"
SUITE_HEADER = REPO / "components/espnn_test_runner/include/espnn/pte_suite.h"


@pytest.mark.parametrize("fmt, header, magic", [(_native.BUNDLE_FORMAT, BUNDLE_HEADER, b"XTSB"),
                                               (_native.PTE_SUITE_FORMAT, SUITE_HEADER, b"XTSP")])
def test_container_constants_come_from_the_parser_headers(fmt, header, magic):
    """XTSB bundles and XTSP suites: the binding exports the device parser's
    constants (magic, record sizes, every field offset)."""
    text = header.read_text()
    assert struct.pack("<I", fmt["MAGIC"]) == magic
    assert fmt["MAGIC"] == int(re.search(r"kMagic = (0x[0-9a-fA-F]+)u", text).group(1), 16)
    assert fmt["HEADER_SIZE"] == int(re.search(r"kHeaderSize = (\d+);", text).group(1))
    assert fmt["CASE_RECORD_SIZE"] == int(re.search(r"kCaseRecordSize = (\d+);", text).group(1))
    assert fmt["HEADER_FIELDS"]["crc32"] == int(re.search(r"kHdrCrc32 = (\d+);", text).group(1))
    assert fmt["MAX_RUNS"] == int(re.search(r"kMaxRuns = (\d+);", text).group(1))


def test_python_containers_restate_no_constant():
    """bundle.py and pte_suite.py hold the binding's values, and their record
    layouts are derived from the exported field offsets."""
    from executorch_espnn import bundle as B
    from executorch_espnn import pte_suite as S

    for mod, fmt in ((B, _native.BUNDLE_FORMAT), (S, _native.PTE_SUITE_FORMAT)):
        for name, value in fmt.items():
            if name != "DTYPES":
                assert getattr(mod, name) == value, name
    assert B._HEADER.size == B.HEADER_SIZE and B._CASE.size == B.CASE_RECORD_SIZE
    assert S._TENSOR.size == S.TENSOR_RECORD_SIZE and S._TENSOR.format == "<IIIIIIII8I"
    assert {np.dtype(k): v[0] for k, v in _native.PTE_SUITE_FORMAT["DTYPES"].items()} == S.DTYPE_CODES
    assert S.DTYPE_CODES[np.dtype(np.float32)] == 6 and S.DTYPE_CODES[np.dtype(np.bool_)] == 11
    for path in ("python/executorch_espnn/bundle.py", "python/executorch_espnn/pte_suite.py"):
        source = (REPO / path).read_text()
        assert "0x42535458" not in source and "0x50535458" not in source and "HEADER_SIZE = 4" not in source


def test_resize_tables_take_the_fraction_bits_from_the_binding():
    from executorch_espnn.lowering.ops import resize_tables

    assert resize_tables.FRAC_BITS == _native.BILINEAR_FRAC_BITS
    assert "FRAC_BITS = 10" not in (REPO / "python/executorch_espnn/lowering/ops/resize_tables.py").read_text()


def test_record_layout_is_derived_from_offsets():
    from executorch_espnn.record_layout import record_struct

    assert record_struct({"a": 0, "b": 4, "c": 6, "d": 8}, 12).format == "<IHHI"
    assert record_struct({"n": 0, "dims": 4}, 36).format == "<I8I"
    with pytest.raises(ValueError):
        record_struct({"a": 0, "b": 3}, 8)  # a 3-byte field
    with pytest.raises(ValueError):
        record_struct({"a": 4}, 8)  # does not start at byte 0
