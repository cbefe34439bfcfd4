"""QUANTIZE's channels_last field (format version 4): a float [N, C, spatial...]
input quantized straight into [N, spatial..., C], what QUANTIZE then TRANSPOSE
wrote before (and still writes for blobs that leave the field 0); the parser's
per-version parameter counts; the writer's fold of QUANTIZE + TRANSPOSE."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from espnn_dev.graph_util import Out, build_op, expect_rejected, run_op
from espnn_dev.xts3_mutations import patch
from executorch_espnn import _native as fmt
from executorch_espnn.xts3_writer import Xts3Writer

SCALE, ZP = 0.02, -7
SHAPES = [(1, 3, 5), (1, 3, 7, 5), (2, 3, 4, 6), (1, 1, 4, 4), (1, 4, 1, 1), (2, 5, 2, 3, 4)]


def _floats(shape, seed=0) -> np.ndarray:
    """Random values with exact ties (k + 0.5 steps), saturation and a NaN."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 100 * SCALE).astype(np.float32)
    flat = x.reshape(-1)
    k = min(8, flat.size)
    flat[:k] = ((np.arange(k) - 4 + 0.5) * SCALE).astype(np.float32)
    if flat.size > 11:
        flat[8:12] = np.array([1e9, -1e9, np.nan, 300 * SCALE], np.float32)
    return x


def _channels_last(shape) -> tuple[int, ...]:
    return (shape[0], *shape[2:], shape[1])


def _one_quantize(in_shape, out_shape, **channels_last) -> bytes:
    """A one-QUANTIZE blob (``channels_last=`` given or left out)."""
    blob, _ = build_op("QUANTIZE", [np.zeros(in_shape, np.float32)], [Out(out_shape, "INT8", SCALE, ZP)],
                       inv_scale_f32=1 / SCALE, zero_point=ZP, **channels_last)
    return blob


def _quantize_then_transpose(shape, channels_last_op: bool) -> bytes:
    """The float input quantized into [N, spatial..., C]: by one QUANTIZE with
    channels_last, or by QUANTIZE then TRANSPOSE as the lowering wrote it before."""
    rank = len(shape)
    w = Xts3Writer()
    x = w.tensor(shape, "FLOAT32")
    out = w.tensor(_channels_last(shape), scale=SCALE, zero_point=ZP)
    if channels_last_op:
        w.op("QUANTIZE", [x], [out], inv_scale_f32=1 / SCALE, zero_point=ZP, channels_last=1)
    else:
        q = w.tensor(shape, scale=SCALE, zero_point=ZP)
        w.op("QUANTIZE", [x], [q], inv_scale_f32=1 / SCALE, zero_point=ZP)
        perm = [0, *range(2, rank), 1] + [0] * (fmt.LIMITS["max_rank"] - rank)
        w.op("TRANSPOSE", [q], [out], **{f"perm{i}": p for i, p in enumerate(perm)})
    w.set_inputs([x])
    w.set_outputs([out])
    w.mark_external_inputs()  # as the lowering does: the float input takes no arena bytes
    return w.to_bytes()


@pytest.mark.parametrize("shape", SHAPES)
def test_channels_last_equals_quantize_then_transpose(shape):
    x = _floats(shape)
    folded = fmt.Program(_quantize_then_transpose(shape, True)).run([x])[0]
    before = fmt.Program(_quantize_then_transpose(shape, False)).run([x])[0]
    assert folded.shape == _channels_last(shape)
    np.testing.assert_array_equal(folded, before)
    # ... which is the plain QUANTIZE's output with dim 1 moved last.
    plain = run_op("QUANTIZE", [x], Out(shape, "INT8", SCALE, ZP), inv_scale_f32=1 / SCALE, zero_point=ZP)
    np.testing.assert_array_equal(folded, np.moveaxis(plain, 1, -1))


def test_channels_last_needs_only_one_int8_copy_in_the_arena():
    shape = (1, 3, 16, 16)
    folded, before = (fmt.Program(_quantize_then_transpose(shape, f)).arena_bytes for f in (True, False))
    assert folded == 3 * 16 * 16 and before == 2 * 3 * 16 * 16


def test_the_writer_writes_version_4_only_for_channels_last():
    shape = (1, 3, 4, 4)
    new = fmt.parse(_quantize_then_transpose(shape, True))
    assert new["version"] == 4
    assert [op["params"]["channels_last"] for op in new["ops"]] == [1]
    # channels_last 0 (or left out): the bytes of before the field, 2 words, version 1.
    old_blob = _one_quantize(shape, shape)
    assert _one_quantize(shape, shape, channels_last=0) == old_blob
    old = fmt.parse(old_blob)
    assert old["version"] == fmt.MIN_FORMAT_VERSION
    assert _params_count(old_blob, 0) == 2
    assert old["ops"][0]["params"]["channels_last"] == 0  # what the runtime reads for the absent field


def test_param_versions_come_from_the_header():
    assert fmt.OPCODES["QUANTIZE"]["param_versions"] == (1, 1, 4)
    assert fmt.OPCODES["CONV2D"]["param_versions"] == (1,) * len(fmt.OPCODES["CONV2D"]["params"])
    assert fmt.OPCODES["GRU"]["param_versions"] == (3, 3, 3)


def _op_record(blob: bytes, i: int) -> int:
    """Byte offset of op record i."""
    table = struct.unpack_from("<I", blob, fmt.HEADER_FIELDS["section_table"])[0]
    for k in range(len(fmt.SECTIONS)):
        kind, offset = struct.unpack_from("<II", blob, table + k * fmt.SECTION_ENTRY_SIZE)
        if kind == fmt.SECTIONS["OPS"][0]:
            return offset + i * fmt.OP_RECORD_SIZE
    raise AssertionError("no OPS section")


def _params_count(blob: bytes, i: int) -> int:
    return struct.unpack_from("<I", blob, _op_record(blob, i) + fmt.OP_FIELDS["params_count"])[0]


def test_parameter_words_are_counted_per_version():
    shape = (1, 3, 4, 4)
    version = fmt.HEADER_FIELDS["version"]
    # Version 4 has three QUANTIZE words: a version-1 blob's two are refused there ...
    old_blob = _one_quantize(shape, shape)
    expect_rejected(patch(old_blob, version, "H", 4), "op 0 (QUANTIZE): 2 parameter words, expected 3")
    # ... and version 3 has two: a channels_last blob relabelled 3 is refused.
    new_blob = _quantize_then_transpose(shape, True)
    expect_rejected(patch(new_blob, version, "H", 3), "op 0 (QUANTIZE): 3 parameter words, expected 2")
    # The same two-word blob labelled 2 or 3 still loads (the field did not exist then).
    for v in (2, 3):
        fmt.Program(patch(old_blob, version, "H", v))


@pytest.mark.parametrize("value", [2, -1])
def test_channels_last_other_than_0_or_1_is_refused(value):
    shape = (1, 3, 4, 4)
    expect_rejected(_one_quantize(shape, _channels_last(shape), channels_last=value), "op 0 (QUANTIZE)", f"channels_last = {value} is not in 0..1")


@pytest.mark.parametrize("in_shape, out_shape, message", [
    ((3, 4), (4, 3), "channels_last needs an input of rank 3..5"),
    ((1, 3, 4, 5), (1, 3, 4, 5), "the output's dims must be the input's with dim 1 moved last"),
    ((1, 3, 4, 5), (1, 5, 4, 3), "the output's dims must be the input's with dim 1 moved last"),
    ((1, 3, 4, 5), (1, 4, 5, 3, 1), "the output's dims must be the input's with dim 1 moved last"),
    ((2, 3, 4, 5), (1, 4, 5, 3), "the output's dims must be the input's with dim 1 moved last"),
])
def test_channels_last_shapes_are_checked(in_shape, out_shape, message):
    expect_rejected(_one_quantize(in_shape, out_shape, channels_last=1), "op 0 (QUANTIZE)", message)


# ---------------------------------------------------------------- the fold
def _conv_after_transpose(shape, *, also_read=False, output_too=False, perm=None):
    """QUANTIZE -> TRANSPOSE -> a 1x1 CONV2D, as the lowering writes a float
    NCHW input read by a conv; optionally the int8 NCHW tensor also read by a
    LUT or also a graph output, or another TRANSPOSE perm."""
    n, c, h, wd = shape
    rng = np.random.default_rng(1)
    w = Xts3Writer()
    x = w.tensor(shape, "FLOAT32")
    q = w.tensor(shape, scale=SCALE, zero_point=ZP)
    w.op("QUANTIZE", [x], [q], inv_scale_f32=1 / SCALE, zero_point=ZP)
    perm = perm or (0, 2, 3, 1)
    nhwc = w.tensor([shape[p] for p in perm], scale=SCALE, zero_point=ZP)
    w.op("TRANSPOSE", [q], [nhwc], perm0=perm[0], perm1=perm[1], perm2=perm[2], perm3=perm[3], perm4=0)
    y = w.tensor([n, h, wd, 4], scale=0.05, zero_point=3)
    conv_in = nhwc if perm == (0, 2, 3, 1) else w.tensor([n, h, wd, c], scale=SCALE, zero_point=ZP)
    if conv_in != nhwc:
        w.op("RESHAPE", [nhwc], [conv_in])
    w.op("CONV2D", [conv_in, w.constant(rng.integers(-127, 128, (4, 1, 1, c), dtype=np.int8)),
                    w.constant(rng.integers(-500, 500, 4, dtype=np.int32)),
                    w.constant(np.full(4, 1 << 30, np.int32)), w.constant(np.full(4, -6, np.int32))], [y],
         stride_h=1, stride_w=1, pad_top=0, pad_left=0, dilation_h=1, dilation_w=1, groups=1,
         input_offset=-ZP, output_offset=3, act_min=-128, act_max=127)
    outputs = [y]
    if also_read:
        lut = w.tensor(shape, scale=SCALE, zero_point=ZP)
        w.op("LUT", [q, w.constant(np.arange(-128, 128, dtype=np.int8)[::-1].copy())], [lut])
        outputs.append(lut)
    if output_too:
        outputs.append(q)
    w.set_inputs([x])
    w.set_outputs(outputs)
    w.mark_external_inputs()
    return w


def test_fold_makes_one_quantize_with_the_same_outputs_and_one_int8_copy():
    shape = (1, 8, 4, 4)  # more input channels than the conv's 4 outputs: the TRANSPOSE step was the peak
    before = _conv_after_transpose(shape).to_bytes()
    w = _conv_after_transpose(shape)
    assert w.fold_quantize_transposes() == [1]
    after = w.to_bytes()
    ops = fmt.parse(after)["ops"]
    assert [op["op"] for op in ops] == ["QUANTIZE", "CONV2D"]
    assert ops[0]["params"]["channels_last"] == 1
    assert len(fmt.parse(after)["tensors"]) == len(fmt.parse(before)["tensors"]) - 1
    for seed in range(3):
        x = _floats(shape, seed)
        np.testing.assert_array_equal(fmt.Program(after).run([x])[0], fmt.Program(before).run([x])[0])
    # The peak is now the conv's input and output; before, it was the
    # QUANTIZE's NCHW output next to the TRANSPOSE's NHWC one.
    image = 8 * 4 * 4  # (sizes that need no alignment padding)
    assert fmt.Program(before).arena_bytes == 2 * image
    assert fmt.Program(after).arena_bytes == image + 4 * 4 * 4


@pytest.mark.parametrize("case", [dict(also_read=True), dict(output_too=True), dict(perm=(0, 3, 2, 1))])
def test_fold_leaves_a_quantize_output_others_read_or_another_perm(case):
    w = _conv_after_transpose((1, 3, 4, 4), **case)
    before = w.to_bytes()
    assert w.fold_quantize_transposes() == []
    assert w.to_bytes() == before
