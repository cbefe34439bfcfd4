"""RESHAPE, TRANSPOSE, SLICE, PAD, CONCAT, SPLIT on the native interpreter.

Oracle: numpy's own reshape/transpose/slicing/pad/concatenate/split, exact, for
every XTS3 dtype and ranks 1..5. Rejection tests check that the parser names
the offending field.
"""

from __future__ import annotations

import itertools
import struct

import numpy as np
import pytest

from executorch_espnn import _native
from executorch_espnn.xts3_writer import Xts3Writer
from espnn_dev.graph_util import Const, Input, Out, build_op, run_op

MAX_RANK = _native.LIMITS["max_rank"]

# Shapes per rank, small but with distinct dims so a wrong axis shows.
SHAPES = {1: (7,), 2: (3, 5), 3: (2, 3, 4), 4: (2, 3, 4, 5), 5: (2, 3, 2, 4, 3)}
DTYPES = ["INT8", "INT32", "FLOAT32"]
# int8 data carries a quantization that must pass through unchanged.
QUANT = {"INT8": (0.05, -7), "INT32": (0.0, 0), "FLOAT32": (0.0, 0)}


def _data(shape, dtype: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "INT8":
        return rng.integers(-128, 128, size=shape, dtype=np.int8)
    if dtype == "INT32":
        # Full int32 range: a byte-wise copy bug (wrong element size) shows.
        return rng.integers(-(2**31), 2**31, size=shape, dtype=np.int64).astype(np.int32)
    x = rng.standard_normal(shape).astype(np.float32) * 100
    return x


def _inp(arr: np.ndarray, dtype: str) -> Input:
    scale, zp = QUANT[dtype]
    return Input(arr, scale=scale, zero_point=zp)


def _out(shape, dtype: str) -> Out:
    scale, zp = QUANT[dtype]
    return Out(tuple(shape), dtype, scale=scale, zero_point=zp)


def _per_dim(prefix: str, values, fill: int = 0) -> dict:
    vals = list(values) + [fill] * (MAX_RANK - len(values))
    return {f"{prefix}{i}": int(v) for i, v in enumerate(vals)}


def _exact(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    # Bit patterns, so float NaN/-0.0 would count too.
    assert got.tobytes() == np.ascontiguousarray(want).tobytes()


def _reject(op: str, inputs, outputs, match: str, **params) -> None:
    blob, _ = build_op(op, inputs, outputs if isinstance(outputs, list) else [outputs], **params)
    with pytest.raises(ValueError, match=match):
        _native.Program(blob)


# ------------------------------------------------------------------ RESHAPE

RESHAPES = [((7,), (7, 1)), ((3, 5), (15,)), ((2, 3, 4), (4, 6)), ((2, 3, 4, 5), (6, 2, 10)),
            ((2, 3, 2, 4, 3), (1, 4, 3, 2, 6)), ((6, 4), (2, 3, 1, 2, 2))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("src,dst", RESHAPES)
def test_reshape_matches_numpy(dtype, src, dst):
    x = _data(src, dtype)
    _exact(run_op("RESHAPE", [_inp(x, dtype)], _out(dst, dtype)), x.reshape(dst))


def test_reshape_same_arena_offset_is_a_view():
    # Input and output share their arena bytes: nothing needs to move and the
    # result must still be the input's bytes.
    w = Xts3Writer()
    t_in = w.tensor((4, 6), "INT8", scale=0.1, zero_point=2, offset=0)
    t_out = w.tensor((2, 12), "INT8", scale=0.1, zero_point=2, offset=0)
    w.op("RESHAPE", [t_in], [t_out])
    w.set_inputs([t_in])
    w.set_outputs([t_out])
    x = _data((4, 6), "INT8", seed=3)
    _exact(_native.Program(w.to_bytes()).run([x])[0], x.reshape(2, 12))


def test_reshape_of_constant_at_offset_zero_copies():
    # A constant's offset is in the CONSTANTS section, not the arena: an equal
    # number must not be mistaken for a view.
    w = Xts3Writer()
    c = _data((3, 4), "INT32", seed=4)
    t_c = w.constant(c)
    t_out = w.tensor((12,), "INT32", offset=0)
    t_unused = w.tensor((4,), "INT32", offset=64)  # a graph needs >= 1 input
    w.op("RESHAPE", [t_c], [t_out])
    w.set_inputs([t_unused])
    w.set_outputs([t_out])
    _exact(_native.Program(w.to_bytes()).run([np.zeros(4, np.int32)])[0], c.reshape(12))


def test_reshape_rejects_element_count_mismatch():
    x = _data((3, 5), "INT8")
    _reject("RESHAPE", [_inp(x, "INT8")], _out((4, 4), "INT8"), r"output dims \[4,4\] have 16 elements.*15")


def test_reshape_rejects_dtype_mismatch():
    x = _data((3, 5), "INT32")
    _reject("RESHAPE", [Input(x)], Out((15,), "FLOAT32"), r"output has dtype FLOAT32 but input has INT32")


def test_int8_requires_same_quantization():
    x = _data((3, 5), "INT8")
    _reject("RESHAPE", [Input(x, scale=0.05, zero_point=1)], Out((15,), "INT8", scale=0.05, zero_point=2),
            r"must share quantization")
    _reject("TRANSPOSE", [Input(x, scale=0.05, zero_point=1)], Out((5, 3), "INT8", scale=0.1, zero_point=1),
            r"must share quantization", **_per_dim("perm", [1, 0]))


# ------------------------------------------------------------------ TRANSPOSE

def _perms(rank: int):
    perms = list(itertools.permutations(range(rank)))
    if len(perms) > 8:  # ranks 4, 5: a fixed sample, always incl. identity and reversal
        rng = np.random.default_rng(rank)
        pick = rng.choice(len(perms), size=6, replace=False)
        perms = [perms[0], perms[-1]] + [perms[i] for i in pick]
    return perms


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
def test_transpose_matches_numpy(dtype, rank):
    x = _data(SHAPES[rank], dtype, seed=rank)
    for perm in _perms(rank):
        want = np.transpose(x, perm)
        got = run_op("TRANSPOSE", [_inp(x, dtype)], _out(want.shape, dtype), **_per_dim("perm", perm))
        _exact(got, want)


def test_transpose_nhwc_nchw_wide_channels():
    # The layout change the lowering emits most, with a row long enough to
    # exercise the contiguous inner copy when the last axis stays.
    x = _data((2, 5, 7, 33), "INT8", seed=9)
    for perm in [(0, 3, 1, 2), (0, 2, 1, 3)]:
        want = np.transpose(x, perm)
        _exact(run_op("TRANSPOSE", [_inp(x, "INT8")], _out(want.shape, "INT8"), **_per_dim("perm", perm)), want)


def test_transpose_rejects_non_permutation():
    x = _data((2, 3, 4), "INT8")
    _reject("TRANSPOSE", [_inp(x, "INT8")], _out((2, 2, 4), "INT8"), r"perm1 = 0 repeats an axis",
            **_per_dim("perm", [0, 0, 2]))


def test_transpose_rejects_axis_out_of_range():
    x = _data((2, 3, 4), "INT8")
    _reject("TRANSPOSE", [_inp(x, "INT8")], _out((2, 3, 4), "INT8"), r"perm2 = 3 is not in 0..2",
            **_per_dim("perm", [0, 1, 3]))
    _reject("TRANSPOSE", [_inp(x, "INT8")], _out((2, 3, 4), "INT8"), r"perm0 = -1 is not in 0..2",
            **_per_dim("perm", [-1, 1, 2]))


def test_transpose_rejects_nonzero_perm_beyond_rank():
    x = _data((2, 3), "INT8")
    _reject("TRANSPOSE", [_inp(x, "INT8")], _out((3, 2), "INT8"), r"perm3 = 3 must be 0 beyond rank 2",
            **_per_dim("perm", [1, 0, 0, 3]))


def test_transpose_rejects_wrong_output_dims():
    x = _data((2, 3, 4), "INT8")
    _reject("TRANSPOSE", [_inp(x, "INT8")], _out((4, 2, 3), "INT8"),
            r"output dims\[1\] = 2, expected input dims\[perm1 = 1\] = 3", **_per_dim("perm", [2, 1, 0]))


def test_transpose_rejects_output_overlapping_input():
    w = Xts3Writer()
    t_in = w.tensor((4, 8), "INT8", offset=0)
    t_out = w.tensor((8, 4), "INT8", offset=16)  # bytes 16..31 are still the input's
    w.op("TRANSPOSE", [t_in], [t_out], **_per_dim("perm", [1, 0]))
    w.set_inputs([t_in])
    w.set_outputs([t_out])
    with pytest.raises(ValueError, match=r"output \(arena \[16, \+32\)\) overlaps input"):
        _native.Program(w.to_bytes())


# ------------------------------------------------------------------ SLICE

def _slice_case(shape, rng):
    begin, step, count = [], [], []
    for n in shape:
        s = int(rng.choice([1, 2, 3]))
        b = int(rng.integers(0, n))
        c = int(rng.integers(1, (n - 1 - b) // s + 2))  # begin + (c-1)*s <= n-1
        begin.append(b)
        step.append(s)
        count.append(c)
    return begin, step, count


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
def test_slice_matches_numpy(dtype, rank):
    shape = tuple(d + 4 for d in SHAPES[rank])  # room for steps 2 and 3
    x = _data(shape, dtype, seed=10 + rank)
    rng = np.random.default_rng(rank)
    for _ in range(6):
        begin, step, count = _slice_case(shape, rng)
        want = x[tuple(slice(b, b + (c - 1) * s + 1, s) for b, s, c in zip(begin, step, count))]
        got = run_op("SLICE", [_inp(x, dtype)], _out(want.shape, dtype),
                     **_per_dim("begin", begin), **_per_dim("step", step))
        _exact(got, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_slice_steps_2_and_3_to_the_last_element(dtype):
    x = _data((10, 9), dtype, seed=5)
    want = x[1::3, ::2]  # rows 1,4,7 ; cols 0,2,4,6,8 (last index reached exactly)
    got = run_op("SLICE", [_inp(x, dtype)], _out(want.shape, dtype),
                 **_per_dim("begin", [1, 0]), **_per_dim("step", [3, 2]))
    _exact(got, want)


def test_slice_step_is_irrelevant_for_a_single_element():
    # Any step >= 1 is valid when only `begin` is read: a huge step must
    # neither be rejected nor corrupt the addressing.
    x = _data((4, 6), "INT32", seed=6)
    got = run_op("SLICE", [Input(x)], Out((1, 3), "INT32"),
                 **_per_dim("begin", [3, 1]), **_per_dim("step", [2**31 - 1, 2]))
    _exact(got, x[3:4, 1:6:2])


def test_slice_rejects_out_of_bounds():
    x = _data((10, 9), "INT8")
    # rows 4, 7, 10: one past the end.
    _reject("SLICE", [_inp(x, "INT8")], _out((3, 9), "INT8"),
            r"begin0 = 4 \+ \(output dims\[0\] = 3 - 1\) \* step0 = 3 reaches index 10, beyond input dims\[0\] = 10",
            **_per_dim("begin", [4, 0]), **_per_dim("step", [3, 1]))
    _reject("SLICE", [_inp(x, "INT8")], _out((1, 9), "INT8"), r"begin0 = 10 is not in 0..9",
            **_per_dim("begin", [10, 0]), **_per_dim("step", [1, 1]))
    _reject("SLICE", [_inp(x, "INT8")], _out((1, 9), "INT8"), r"begin1 = -1 is not in 0..8",
            **_per_dim("begin", [0, -1]), **_per_dim("step", [1, 1]))


def test_slice_rejects_end_that_overflows_32_bits():
    # 2 + 2 * (2^31 - 1) = 2^32 wraps to 0 in uint32 and would pass a 32-bit check.
    x = _data((10,), "INT8")
    _reject("SLICE", [_inp(x, "INT8")], _out((3,), "INT8"), r"step0 = 2147483647 reaches index 4294967296",
            **_per_dim("begin", [2]), **_per_dim("step", [2**31 - 1]))


def test_slice_rejects_bad_steps():
    x = _data((10, 9), "INT8")
    _reject("SLICE", [_inp(x, "INT8")], _out((2, 9), "INT8"), r"step0 = 0 must be >= 1",
            **_per_dim("begin", [0, 0]), **_per_dim("step", [0, 1]))
    # Unused entries (beyond rank) must be 0, for steps as for begins.
    _reject("SLICE", [_inp(x, "INT8")], _out((2, 9), "INT8"), r"step2 = 1 must be 0 beyond rank 2",
            **_per_dim("begin", [0, 0]), **_per_dim("step", [1, 1, 1]))
    _reject("SLICE", [_inp(x, "INT8")], _out((2, 9), "INT8"), r"begin4 = 1 must be 0 beyond rank 2",
            **_per_dim("begin", [0, 0, 0, 0, 1]), **_per_dim("step", [1, 1]))


def test_slice_rejects_rank_change():
    x = _data((10, 9), "INT8")
    _reject("SLICE", [_inp(x, "INT8")], _out((9,), "INT8"), r"output has rank 1, input has rank 2",
            **_per_dim("begin", [0, 0]), **_per_dim("step", [1, 1]))


# ------------------------------------------------------------------ PAD

def _f32_bits(v: float) -> int:
    return struct.unpack("<i", struct.pack("<f", v))[0]


PAD_VALUES = {"INT8": (-7, -7), "INT32": (-(2**31), -(2**31)), "FLOAT32": (_f32_bits(-2.5), -2.5)}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
def test_pad_matches_numpy(dtype, rank):
    shape = SHAPES[rank]
    x = _data(shape, dtype, seed=20 + rank)
    rng = np.random.default_rng(100 + rank)
    word, value = PAD_VALUES[dtype]
    for _ in range(4):
        before = [int(v) for v in rng.integers(0, 3, size=rank)]
        after = [int(v) for v in rng.integers(0, 3, size=rank)]
        want = np.pad(x, list(zip(before, after)), mode="constant", constant_values=np.array(value, x.dtype))
        got = run_op("PAD", [_inp(x, dtype)], _out(want.shape, dtype), **_per_dim("before", before),
                     pad_value=word)
        _exact(got, want)


def test_pad_float_value_is_a_bit_pattern():
    # pad_value carries the float's bits: NaN and -0.0 survive exactly.
    x = np.ones((2, 2), np.float32)
    for bits in [_f32_bits(-0.0), 0x7FC00001]:
        got = run_op("PAD", [Input(x)], Out((3, 4), "FLOAT32"), **_per_dim("before", [1, 1]), pad_value=bits)
        border = np.frombuffer(struct.pack("<i", bits), np.float32)[0]
        want = np.full((3, 4), border, np.float32)
        want[1:3, 1:3] = 1
        _exact(got, want)


def test_pad_int8_nhwc_spatial_with_zero_point():
    # The conv-padding use: pad H and W with the quantized zero.
    x = _data((1, 4, 5, 3), "INT8", seed=7)
    want = np.pad(x, [(0, 0), (2, 1), (0, 3), (0, 0)], constant_values=np.int8(-7))
    got = run_op("PAD", [_inp(x, "INT8")], _out(want.shape, "INT8"), **_per_dim("before", [0, 2, 0, 0]),
                 pad_value=-7)
    _exact(got, want)


def test_pad_rejects_negative_after():
    x = _data((4, 5), "INT8")
    _reject("PAD", [_inp(x, "INT8")], _out((6, 6), "INT8"),
            r"after1 = output dims\[1\] \(6\) - input dims\[1\] \(5\) - before1 \(2\) = -1 must be >= 0",
            **_per_dim("before", [1, 2]), pad_value=0)


def test_pad_rejects_negative_before_and_bad_values():
    x = _data((4, 5), "INT8")
    _reject("PAD", [_inp(x, "INT8")], _out((4, 5), "INT8"), r"before0 = -1 must be >= 0",
            **_per_dim("before", [-1, 0]), pad_value=0)
    _reject("PAD", [_inp(x, "INT8")], _out((4, 5), "INT8"), r"before2 = 1 must be 0 beyond rank 2",
            **_per_dim("before", [0, 0, 1]), pad_value=0)
    _reject("PAD", [_inp(x, "INT8")], _out((5, 5), "INT8"), r"pad_value = 128 is not in -128..127",
            **_per_dim("before", [1, 0]), pad_value=128)


# ------------------------------------------------------------------ CONCAT / SPLIT

def _three_parts(shape, axis):
    """Three shapes differing only on `axis`, with sizes 1, 2 and 3 times a base."""
    out = []
    for k in (1, 2, 3):
        s = list(shape)
        s[axis] = shape[axis] * k
        out.append(tuple(s))
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
def test_concat_three_inputs_each_axis(dtype, rank):
    for axis in range(rank):
        parts = [_data(s, dtype, seed=30 + k) for k, s in enumerate(_three_parts(SHAPES[rank], axis))]
        want = np.concatenate(parts, axis=axis)
        got = run_op("CONCAT", [_inp(p, dtype) for p in parts], _out(want.shape, dtype), axis=axis)
        _exact(got, want)


def test_concat_with_a_constant_and_sixteen_inputs():
    parts = [_data((2, k + 1, 3), "INT32", seed=k) for k in range(16)]
    inputs = [Const(p) if k % 3 == 0 else Input(p) for k, p in enumerate(parts)]
    want = np.concatenate(parts, axis=1)
    _exact(run_op("CONCAT", inputs, Out(want.shape, "INT32"), axis=1), want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
def test_split_in_three_each_axis(dtype, rank):
    for axis in range(rank):
        shapes = _three_parts(SHAPES[rank], axis)
        x = _data(tuple(sum(s[axis] for s in shapes) if d == axis else SHAPES[rank][d] for d in range(rank)),
                  dtype, seed=40 + axis)
        cuts = np.cumsum([s[axis] for s in shapes])[:-1]
        want = np.split(x, cuts, axis=axis)
        got = run_op("SPLIT", [_inp(x, dtype)], [_out(w.shape, dtype) for w in want], axis=axis)
        assert len(got) == 3
        for g, w in zip(got, want):
            _exact(g, w)


def test_split_single_output_is_a_copy():
    x = _data((3, 4), "FLOAT32")
    _exact(run_op("SPLIT", [Input(x)], [Out((3, 4), "FLOAT32")], axis=1)[0], x)


def test_concat_rejects_dims_mismatch():
    a, b = _data((2, 3, 4), "INT8"), _data((2, 5, 4), "INT8")
    _reject("CONCAT", [_inp(a, "INT8"), _inp(b, "INT8")], _out((2, 3, 8), "INT8"),
            r"input 1 dims\[1\] = 5 differs from output dims\[1\] = 3 \(only axis 2 may differ\)", axis=2)


def test_concat_rejects_wrong_sum_axis_rank_and_dtype():
    a, b = _data((2, 3), "INT8"), _data((2, 4), "INT8")
    _reject("CONCAT", [_inp(a, "INT8"), _inp(b, "INT8")], _out((2, 8), "INT8"),
            r"inputs' dims\[axis=1\] sum to 7, output dims\[1\] = 8", axis=1)
    _reject("CONCAT", [_inp(a, "INT8"), _inp(b, "INT8")], _out((2, 7), "INT8"), r"axis = 2 is not in 0..1",
            axis=2)
    _reject("CONCAT", [_inp(a, "INT8"), _inp(b, "INT8")], _out((2, 7), "INT8"), r"axis = -1 is not in 0..1",
            axis=-1)
    _reject("CONCAT", [_inp(a, "INT8"), _inp(b[None], "INT8")], _out((2, 7), "INT8"),
            r"input 1 has rank 3, output has rank 2", axis=1)
    _reject("CONCAT", [_inp(a, "INT8"), Input(b.astype(np.int32))], _out((2, 7), "INT8"),
            r"input 1 has dtype INT32 but output has INT8", axis=1)
    _reject("CONCAT", [_inp(a, "INT8"), Input(b, scale=0.05, zero_point=0)], _out((2, 7), "INT8"),
            r"output .* and input 1 .* must share quantization", axis=1)


def test_split_rejects_sizes_not_summing():
    x = _data((2, 9), "INT8")
    _reject("SPLIT", [_inp(x, "INT8")], [_out((2, 3), "INT8"), _out((2, 3), "INT8"), _out((2, 4), "INT8")],
            r"outputs' dims\[axis=1\] sum to 10, input dims\[1\] = 9", axis=1)


def test_split_rejects_dims_mismatch():
    x = _data((2, 9), "INT8")
    _reject("SPLIT", [_inp(x, "INT8")], [_out((2, 4), "INT8"), _out((3, 5), "INT8")],
            r"output 1 dims\[0\] = 3 differs from input dims\[0\] = 2", axis=1)


def test_concat_rejects_output_overlapping_an_input():
    w = Xts3Writer()
    a = w.tensor((16,), "INT8", offset=0)
    b = w.tensor((16,), "INT8", offset=16)
    out = w.tensor((32,), "INT8", offset=16)
    w.op("CONCAT", [a, b], [out], axis=0)
    w.set_inputs([a, b])
    w.set_outputs([out])
    with pytest.raises(ValueError, match=r"output \(arena \[16, \+32\)\) overlaps input 1"):
        _native.Program(w.to_bytes())
