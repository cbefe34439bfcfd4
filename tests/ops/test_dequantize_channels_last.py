"""DEQUANTIZE's channels_last field (format version 5): an int8 [N,
spatial..., C] result dequantized straight into a float [N, C, spatial...],
what TRANSPOSE then DEQUANTIZE wrote before; the per-version parameter
counts; the writer's fold of TRANSPOSE (NHWC -> NCHW) + DEQUANTIZE."""

from __future__ import annotations

import numpy as np
import pytest

from espnn_dev.graph_util import Out, build_op, expect_rejected, run_op
from espnn_dev.xts3_mutations import patch
from executorch_espnn import _native as fmt
from executorch_espnn.xts3_writer import Xts3Writer

torch = pytest.importorskip("torch")

SCALE, ZP = 0.02, -7
SHAPES = [(1, 5, 3), (1, 7, 5, 3), (2, 4, 6, 3), (1, 4, 4, 1), (1, 1, 1, 4), (2, 2, 3, 4, 5)]


def _nchw(shape) -> tuple[int, ...]:
    """[N, spatial..., C] -> [N, C, spatial...]."""
    return (shape[0], shape[-1], *shape[1:-1])


def _int8(shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).integers(-128, 128, shape, dtype=np.int8)


def _one_dequantize(in_shape, out_shape, **channels_last) -> bytes:
    blob, _ = build_op("DEQUANTIZE", [np.zeros(in_shape, np.int8)], [Out(out_shape, "FLOAT32")],
                       scale_f32=SCALE, zero_point=ZP, **channels_last)
    return blob


def _transpose_then_dequantize(shape, *, fold: bool, also_read=False, perm=None) -> Xts3Writer:
    """An int8 NHWC input transposed to NCHW and dequantized to the float
    output, as the lowering writes a model's last NHWC result (``fold``: the
    writer's fold applied). ``also_read``: the NCHW int8 tensor is a graph
    output too; ``perm``: another TRANSPOSE."""
    rank = len(shape)
    perm = perm or (0, rank - 1, *range(1, rank - 1))
    w = Xts3Writer()
    x = w.tensor(shape, scale=SCALE, zero_point=ZP)
    t = w.tensor([shape[p] for p in perm], scale=SCALE, zero_point=ZP)
    w.op("TRANSPOSE", [x], [t], **{f"perm{i}": p for i, p in enumerate(list(perm) + [0] * (5 - rank))})
    y = w.tensor([shape[p] for p in perm], "FLOAT32")
    w.op("DEQUANTIZE", [t], [y], scale_f32=SCALE, zero_point=ZP)
    w.set_inputs([x])
    w.set_outputs([y, t] if also_read else [y])
    w.mark_external_outputs()  # as the lowering does: the float output takes no arena bytes
    if fold:
        w.fold_dequantize_transposes()
    return w


@pytest.mark.parametrize("shape", SHAPES)
def test_channels_last_matches_pytorch_dequantize_then_permute(shape):
    q = _int8(shape)
    got = run_op("DEQUANTIZE", [q], Out(_nchw(shape), "FLOAT32"), scale_f32=SCALE, zero_point=ZP, channels_last=1)
    # PT2E's dequantize_per_tensor in float32, then the NHWC -> NCHW permute.
    deq = (torch.from_numpy(q).to(torch.float32) - ZP) * SCALE
    want = deq.permute(0, len(shape) - 1, *range(1, len(shape) - 1)).contiguous().numpy()
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape", SHAPES)
def test_fold_leaves_one_dequantize_with_the_same_output(shape):
    before = _transpose_then_dequantize(shape, fold=False).to_bytes()
    w = _transpose_then_dequantize(shape, fold=False)
    assert w.fold_dequantize_transposes() == [0]
    after = w.to_bytes()
    ops = fmt.parse(after)["ops"]
    assert [op["op"] for op in ops] == ["DEQUANTIZE"] and ops[0]["params"]["channels_last"] == 1
    assert len(fmt.parse(after)["tensors"]) == len(fmt.parse(before)["tensors"]) - 1
    for seed in range(2):
        q = _int8(shape, seed)
        np.testing.assert_array_equal(fmt.Program(after).run([q])[0], fmt.Program(before).run([q])[0])


def test_fold_drops_the_int8_nchw_copy_from_the_arena():
    shape = (1, 16, 16, 4)
    before, after = (fmt.Program(_transpose_then_dequantize(shape, fold=f).to_bytes()).arena_bytes
                     for f in (False, True))
    image = 16 * 16 * 4
    assert (before, after) == (2 * image, image)


@pytest.mark.parametrize("case", [dict(also_read=True), dict(perm=(0, 2, 1, 3))])
def test_fold_leaves_a_transpose_others_read_or_another_perm(case):
    w = _transpose_then_dequantize((1, 4, 4, 3), fold=False, **case)
    before = w.to_bytes()
    assert w.fold_dequantize_transposes() == []
    assert w.to_bytes() == before


def test_the_writer_writes_version_5_only_for_channels_last():
    shape = (1, 4, 4, 3)
    new = fmt.parse(_transpose_then_dequantize(shape, fold=True).to_bytes())
    assert new["version"] == 5
    old_blob = _one_dequantize(shape, shape)
    assert _one_dequantize(shape, shape, channels_last=0) == old_blob
    old = fmt.parse(old_blob)
    assert old["version"] == fmt.MIN_FORMAT_VERSION
    assert old["ops"][0]["params"]["channels_last"] == 0  # the absent field reads as 0
    assert fmt.OPCODES["DEQUANTIZE"]["param_versions"] == (1, 1, 5)


def test_parameter_words_are_counted_per_version():
    shape = (1, 4, 4, 3)
    version = fmt.HEADER_FIELDS["version"]
    new_blob = _one_dequantize(shape, _nchw(shape), channels_last=1)
    expect_rejected(patch(new_blob, version, "H", 4), "op 0 (DEQUANTIZE): 3 parameter words, expected 2")
    old_blob = _one_dequantize(shape, shape)
    expect_rejected(patch(old_blob, version, "H", 5), "op 0 (DEQUANTIZE): 2 parameter words, expected 3")
    for v in range(1, 5):  # every older version still loads the two-word op
        fmt.Program(patch(old_blob, version, "H", v))


@pytest.mark.parametrize("value", [2, -1])
def test_channels_last_other_than_0_or_1_is_refused(value):
    shape = (1, 4, 4, 3)
    expect_rejected(_one_dequantize(shape, _nchw(shape), channels_last=value), "op 0 (DEQUANTIZE)",
                    f"channels_last = {value} is not in 0..1")


@pytest.mark.parametrize("in_shape, out_shape, message", [
    ((4, 3), (3, 4), "channels_last needs an output of rank 3..5"),
    ((1, 4, 5, 3), (1, 4, 5, 3), "the input's dims must be the output's with dim 1 moved last"),
    ((1, 4, 5, 3), (1, 3, 5, 4), "the input's dims must be the output's with dim 1 moved last"),
    ((2, 4, 5, 3), (1, 3, 4, 5), "the input's dims must be the output's with dim 1 moved last"),
])
def test_channels_last_shapes_are_checked(in_shape, out_shape, message):
    expect_rejected(_one_dequantize(in_shape, out_shape, channels_last=1), "op 0 (DEQUANTIZE)", message)
