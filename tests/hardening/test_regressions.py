"""One named regression test per defect class the runtime once had or hostile
payloads aim at (the index).

Each test runs the hand-built blobs of tests/hardening/regression_blobs.py
through the 64-bit Python binding: a blob that must be refused is refused
with a message naming the field, and a blob that must be accepted computes
exactly what a numpy oracle says. The same blobs are part of the corpus that
tests/test_native_m32_asan.py runs through the -m32 and ASan/UBSan builds of
the runtime (identical verdicts and outputs required), and seed the parse
fuzzer (host/fuzz/corpus/parse).

Where the defect class has deeper tests elsewhere, they are named in the
test's docstring; this module keeps one entry point per class so that a
reader (or a bisect) finds the guard of each defect in one place.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from executorch_espnn import _native as fmt
from hardening import regression_blobs as rb


def check(defect: str) -> list[rb.Case]:
    cases = rb.cases(defect)
    assert cases, defect
    for c in cases:
        if c.expect is None:
            outs = fmt.Program(c.blob).run(c.feeds)
            want = c.oracle(c.feeds)
            assert len(outs) == len(want), c.name
            for got, exp in zip(outs, want):
                np.testing.assert_array_equal(got, exp, err_msg=c.name)
        else:
            with pytest.raises(ValueError) as e:
                fmt.Program(c.blob)
            assert re.search(c.expect, str(e.value)), f"{c.name}: {e.value!r} does not match {c.expect!r}"
    return cases


def test_size_wrap_32():
    """Region/segment checks where count x record size, offset + size or
    elements x element size wraps 32-bit arithmetic to a small number.
    More: test_parser.py::test_section_count_wrapping_32_bit_multiplication,
    ::test_element_count_wrapping_32_bits, ::test_huge_field_values."""
    cases = check("size_wrap_32")
    kinds = {c.name.rsplit(".", 1)[-1].split("=")[0] for c in cases}
    assert {"count_wraps", "offset_wraps", "size_wraps", "params_start_wraps", "params_start_x4_wraps",
            "elements_wrap_to_0", "bytes_wrap_to_4"} <= kinds
    assert any(k.startswith("io_start_wraps") for k in kinds)


def test_span_overflow():
    """Span/stride sums: begin + (out - 1) * step (up to ~2^55),
    (out - 1) * stride + dilated extent beyond INT32_MAX, before + dims.
    More: tests/ops/test_data_movement.py::test_slice_rejects_end_that_overflows_32_bits."""
    cases = check("span_overflow")
    assert {"slice_end_wraps_32", "slice_end_max", "conv2d_span_over_int32",
            "transpose_conv2d_span_over_int32"} <= {c.name for c in cases}


def test_upsample_table_size_products():
    """Resize tables and outputs whose size products wrap, tables shorter
    than out_h x 3. More: tests/ops/test_resize.py (table checks)."""
    check("upsample_table")


def test_misaligned_typed_constants():
    """INT32/FLOAT32 constants at offsets that are not multiples of 4 are
    refused, used by an op or not. More:
    test_parser.py::test_typed_constant_must_be_naturally_aligned."""
    assert len(check("misaligned_constant")) >= 4


def test_grouped_conv_runs_per_group():
    """1 < groups < in_channels: bit-exact against a per-group numpy conv
    (a dense kernel, or wrong group strides, gives other numbers). More:
    tests/ops/test_conv.py (golden vectors, TFLite formula, PyTorch)."""
    cases = check("grouped_conv")
    for c in cases:
        cin = c.feeds[0].shape[-1]
        groups = fmt.parse(c.blob)["ops"][0]["params"]["groups"]
        assert 1 < groups <= cin and cin % groups == 0
    assert any(1 < fmt.parse(c.blob)["ops"][0]["params"]["groups"] < c.feeds[0].shape[-1] for c in cases)


def test_depthwise_channel_multiplier():
    """ch_mult > 1: output channel c * ch_mult + m reads input channel c.
    More: tests/ops/test_depthwise_conv.py."""
    cases = check("depthwise_multiplier")
    assert all(fmt.parse(c.blob)["ops"][0]["params"]["ch_mult"] > 1 for c in cases)


def test_unknown_opcode_for_the_version():
    """Opcodes the blob's format version does not define are refused before
    dispatch; a newer version is refused as a whole. (Every current opcode is
    in version 1, so the per-opcode min_version gate has no reachable case
    yet: test_parser.py::test_every_opcode_is_known_in_the_current_version.)"""
    check("unknown_opcode")


def test_graph_io_count_above_the_limit():
    """More: test_parser.py::test_graph_input_and_output_limits."""
    check("graph_io_limit")


def test_dims_above_espnn_uint16_limits():
    """Geometry that ESP-NN narrows to uint16 (conv/depthwise width and
    height, pooling, FC channels). More: tests/ops/test_pooling.py,
    test_fully_connected.py, test_conv.py."""
    check("espnn_uint16")


def test_zero_size_and_negative_dims():
    """More: test_parser.py::test_tensor_dims_out_of_range, ::test_rank_out_of_range."""
    check("bad_dims")


def test_every_defect_class_has_a_test():
    names = {n for n in globals() if n.startswith("test_")}
    tested = {"size_wrap_32": "test_size_wrap_32", "span_overflow": "test_span_overflow",
              "upsample_table": "test_upsample_table_size_products",
              "misaligned_constant": "test_misaligned_typed_constants", "grouped_conv": "test_grouped_conv_runs_per_group",
              "depthwise_multiplier": "test_depthwise_channel_multiplier",
              "unknown_opcode": "test_unknown_opcode_for_the_version",
              "graph_io_limit": "test_graph_io_count_above_the_limit",
              "espnn_uint16": "test_dims_above_espnn_uint16_limits", "bad_dims": "test_zero_size_and_negative_dims"}
    assert set(tested) == set(rb.DEFECT_CLASSES)
    assert set(tested.values()) <= names


def test_case_names_are_unique():
    names = [c.name for c in rb.cases()]
    assert len(names) == len(set(names))


def test_recurrent_gate_sums_stay_in_int32():
    """A fuzzer-mutated GRU/RESHAPE/LSTM program whose LSTM bias sits near
    INT32_MIN: the gate sum W (x + offset) + bias left int32 in
    recurrent.cpp (signed overflow, UBSan). The parser now bounds every gate
    row from its constant weights and bias, as it does for convs
    (ops::CheckAccumulatorRows), and refuses the layer."""
    blob = (Path(__file__).parents[2] / "host/fuzz/regressions/run/lstm-gate-sum-overflow.xts3").read_bytes()
    with pytest.raises(ValueError, match=r"op 2 \(LSTM\): w_ih row 13: .* can exceed int32"):
        fmt.Program(blob)
