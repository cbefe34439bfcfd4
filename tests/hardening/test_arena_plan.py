"""The parser rejects an arena plan in which a tensor is written over bytes
that another tensor still needs (parser.cpp, CheckArenaPlan).

Lifetimes are in execution order: a graph input is live from the start, an
op's output from its op, and every tensor until the last op that reads it;
graph outputs are live to the end. Two tensors whose lifetimes intersect
must not share arena bytes, with two exceptions (xts3_format.h,
ESPNN_XTS3_ALIASING): RESHAPE's output may occupy exactly its input's bytes
(a view), and an IN_PLACE op's output (the elementwise ops, ELEMENTWISE
below) exactly the bytes of an input that dies at that op. The blobs are built by hand with fixed
offsets (Xts3Writer.tensor(..., offset=...)); the arena-plan mutations of
tests/xts3_mutations.py check the rule against an independent Python
statement of it and also run through the -m32 and sanitizer builds.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import xts3_mutations as xm
from executorch_espnn import _native
from executorch_espnn import quant_params as qp
from executorch_espnn.serialization import Xts3Writer

MULT, SHIFT = 1 << 30, 1  # REQUANTIZE that is exactly the identity


def requant(w: Xts3Writer, a: int, b: int, out_zp: int = 0) -> int:
    return w.op("REQUANTIZE", [a], [b], input_zero_point=0, output_zero_point=out_zp, mult=MULT, shift=SHIFT)


def add(w: Xts3Writer, a: int, b: int, out: int) -> int:
    """out = a + b (zero points 0, all scales equal)."""
    return w.op("ADD", [a, b], [out], input1_offset=0, input2_offset=0, output_offset=0, act_min=-128,
                act_max=127, **qp.add_params(0.1, 0.1, 0.1))


def rejected(blob: bytes) -> str:
    with pytest.raises(ValueError) as e:
        _native.Program(blob)
    return str(e.value)


X = np.array([1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12, 13, -14, 15, -16], np.int8)


# ---------------------------------------------------------------- accepted plans
def test_bytes_are_reused_once_a_tensor_is_dead():
    """a -> b -> c -> d with a and c sharing bytes (a is dead once b exists)."""
    w = Xts3Writer()
    a, b, c, d = (w.tensor((16,), offset=o) for o in (0, 16, 0, 16))
    requant(w, a, b, 1)
    requant(w, b, c, 2)
    requant(w, c, d, 3)
    w.set_inputs([a])
    w.set_outputs([d])
    (out,) = _native.Program(w.to_bytes()).run([X])
    np.testing.assert_array_equal(out, X + 6)


def test_reshape_may_alias_its_input_exactly():
    w = Xts3Writer()
    a = w.tensor((4, 4), offset=0)
    v1 = w.tensor((16,), offset=0)
    v2 = w.tensor((2, 8), offset=0)  # a second view of the same bytes, live together with v1
    s = w.tensor((16,), offset=16)
    b = w.tensor((2, 8), offset=32)
    w.op("RESHAPE", [a], [v1])
    w.op("RESHAPE", [a], [v2])
    add(w, v1, v1, s)
    requant(w, v2, b)
    w.set_inputs([a])
    w.set_outputs([s, b, v1])
    s_out, b_out, v1_out = _native.Program(w.to_bytes()).run([X.reshape(4, 4)])
    np.testing.assert_array_equal(s_out, np.clip(2 * X.astype(int), -128, 127))
    np.testing.assert_array_equal(b_out, X.reshape(2, 8))
    np.testing.assert_array_equal(v1_out, X)


def test_an_unread_graph_input_may_be_overwritten():
    """Its value is never used after the caller wrote it."""
    w = Xts3Writer()
    a, unused = w.tensor((16,), offset=0), w.tensor((16,), offset=16)
    b = w.tensor((16,), offset=16)
    requant(w, a, b, 1)
    w.set_inputs([a, unused])
    w.set_outputs([b])
    (out,) = _native.Program(w.to_bytes()).run([X, np.zeros(16, np.int8)])
    np.testing.assert_array_equal(out, X + 1)


# ---------------------------------------------------------------- rejected plans
def test_output_over_a_tensor_a_later_op_reads():
    w = Xts3Writer()
    a, b = w.tensor((16,), offset=0), w.tensor((16,), offset=16)
    c = w.tensor((16,), offset=0)  # over a, which the ADD still reads
    d = w.tensor((16,), offset=32)
    requant(w, a, b)
    requant(w, b, c)
    add(w, a, c, d)
    w.set_inputs([a])
    w.set_outputs([d])
    assert rejected(w.to_bytes()) == (
        f"arena plan: op 1 (REQUANTIZE) output 0 (tensor {c}, arena [0, +16)) overlaps tensor {a} "
        "(arena [0, +16)), still live (read by a later op or a graph output)")


def test_partial_overlap_is_an_overlap():
    w = Xts3Writer()
    a, b = w.tensor((32,), offset=0), w.tensor((16,), offset=32)
    c = w.tensor((16,), offset=16)  # the upper half of a
    d = w.tensor((32,), offset=48)
    requant(w, b, c)
    requant(w, a, d)
    w.set_inputs([a, b])
    w.set_outputs([c, d])
    assert re.fullmatch(rf"arena plan: op 0 \(REQUANTIZE\) output 0 \(tensor {c}, arena \[16, \+16\)\) overlaps "
                        rf"tensor {a} \(arena \[0, \+32\)\), still live .*", rejected(w.to_bytes()))


IN_PLACE_OPS = sorted(n for n, d in _native.OPCODES.items() if d["aliasing"] == "IN_PLACE")


def _mul(w: Xts3Writer, a: int, other: int, out: int) -> None:
    w.op("MUL", [a, other], [out], input1_offset=0, input2_offset=0, output_offset=0,
         output_mult=1 << 30, output_shift=-3, act_min=-128, act_max=127)


def _channel_lut(w: Xts3Writer, a: int, out: int) -> None:
    tables = np.arange(256 * 4, dtype=np.int64).reshape(4, 256).astype(np.uint8).astype(np.int8)
    w.op("CHANNEL_LUT", [a, w.constant(tables)], [out], axis=1)


# One graph per IN_PLACE op of the format, reading `a` (and `other` for the
# binary ops) into `out`: (w, a, other, out) -> None.
ELEMENTWISE = {
    "ADD": lambda w, a, other, out: add(w, a, other, out),
    "MUL": _mul,
    "REQUANTIZE": lambda w, a, other, out: w.op("REQUANTIZE", [a], [out], input_zero_point=0, output_zero_point=3,
                                                mult=1 << 30, shift=0),
    "LUT": lambda w, a, other, out: w.op(
        "LUT", [a, w.constant(np.arange(256, dtype=np.uint8).astype(np.int8)[::-1].copy())], [out]),
    "CHANNEL_LUT": lambda w, a, other, out: _channel_lut(w, a, out),
    "HARD_SWISH": lambda w, a, other, out: w.op("HARD_SWISH", [a], [out], input_zero_point=0, output_zero_point=0,
                                                **qp.hard_swish_params(0.1, 0.1)),
}


def test_the_in_place_ops_are_the_elementwise_ones():
    """The in-place ops are the IN_PLACE rows of ESPNN_XTS3_ALIASING
    (xts3_format.h, through the binding); the tests below run each one in
    place, so each needs its graph in ELEMENTWISE."""
    missing, extra = sorted(set(IN_PLACE_OPS) - set(ELEMENTWISE)), sorted(set(ELEMENTWISE) - set(IN_PLACE_OPS))
    assert not missing, (f"IN_PLACE in ESPNN_XTS3_ALIASING but no graph in ELEMENTWISE "
                         f"(tests/hardening/test_arena_plan.py): {missing}")
    assert not extra, f"ELEMENTWISE has graphs for ops that are not IN_PLACE in ESPNN_XTS3_ALIASING: {extra}"
    assert _native.OPCODES["RESHAPE"]["aliasing"] == "VIEW"


def elementwise(w: Xts3Writer, name: str, a: int, out: int, other: int | None = None) -> None:
    """One IN_PLACE op reading `a` (and `other` for ADD/MUL) into `out`."""
    ELEMENTWISE[name](w, a, a if other is None else other, out)


def in_place_graph(name: str, in_place: bool, shape=(4, 4), other_shape=None) -> tuple[bytes, list]:
    """x -> REQUANTIZE -> a -> op -> out, with out on a's bytes or beside them."""
    w = Xts3Writer()
    x, a = w.tensor(shape, offset=0), w.tensor(shape, offset=16)
    ins = [x]
    other = None
    if other_shape is not None:
        other = w.tensor(other_shape, offset=48)
        ins.append(other)
    out = w.tensor(shape, offset=16 if in_place else 32)
    requant(w, x, a)
    elementwise(w, name, a, out, other)
    w.set_inputs(ins)
    w.set_outputs([out])
    data = [X.reshape(shape)] + ([np.arange(other_shape[-1], dtype=np.int8) - 2] if other_shape else [])
    return w.to_bytes(), data


@pytest.mark.parametrize("name", IN_PLACE_OPS)
def test_in_place_elementwise_is_allowed_when_the_input_dies(name):
    """Output exactly on the dying input: accepted, and the kernel computes
    the same numbers as with disjoint bytes (it reads element i before it
    writes element i)."""
    blob, data = in_place_graph(name, True)
    ref_blob, _ = in_place_graph(name, False)
    (got,) = _native.Program(blob).run(data)
    (want,) = _native.Program(ref_blob).run(data)
    np.testing.assert_array_equal(got, want)
    assert _native.Program(blob).arena_bytes < _native.Program(ref_blob).arena_bytes


@pytest.mark.parametrize("name", ["ADD", "MUL"])
def test_in_place_over_the_full_operand_of_a_broadcast(name):
    """[4,4] (+|*) [4]: the output may take the [4,4] operand's bytes."""
    blob, data = in_place_graph(name, True, other_shape=(4,))
    ref_blob, _ = in_place_graph(name, False, other_shape=(4,))
    np.testing.assert_array_equal(_native.Program(blob).run(data)[0], _native.Program(ref_blob).run(data)[0])


def test_in_place_over_an_input_read_later_is_rejected():
    w = Xts3Writer()
    a, b = w.tensor((16,), offset=0), w.tensor((16,), offset=0)
    c = w.tensor((16,), offset=16)
    requant(w, a, b)  # over a ...
    add(w, a, b, c)  # ... which this ADD still reads
    w.set_inputs([a])
    w.set_outputs([c])
    assert rejected(w.to_bytes()) == (f"arena plan: op 0 (REQUANTIZE) output 0 (tensor {b}, arena [0, +16)) "
                                      f"overlaps tensor {a} (arena [0, +16)), an input of the same op that is "
                                      "still live after it")


def test_in_place_over_a_graph_output_is_rejected():
    w = Xts3Writer()
    a, b = w.tensor((16,), offset=0), w.tensor((16,), offset=0)
    requant(w, a, b)
    w.set_inputs([a])
    w.set_outputs([a, b])
    assert "an input of the same op that is still live after it" in rejected(w.to_bytes())


def test_in_place_needs_an_exact_overlap():
    w = Xts3Writer()
    a, b = w.tensor((32,), offset=0), w.tensor((32,), offset=16)
    requant(w, a, b)
    w.set_inputs([a])
    w.set_outputs([b])
    assert rejected(w.to_bytes()).endswith(f"overlaps tensor {a} (arena [0, +32)), an input of the same op")


def test_other_ops_may_not_run_in_place():
    """A same-size pooling over its dying input: not in the format's IN_PLACE list."""
    w = Xts3Writer()
    a, b = w.tensor((1, 2, 2, 4), offset=0), w.tensor((1, 2, 2, 4), offset=0)
    w.op("AVG_POOL2D", [a], [b], kernel_h=1, kernel_w=1, stride_h=1, stride_w=1, pad_top=0, pad_left=0,
         act_min=-128, act_max=127)
    w.set_inputs([a])
    w.set_outputs([b])
    assert rejected(w.to_bytes()) == (f"arena plan: op 0 (AVG_POOL2D) output 0 (tensor {b}, arena [0, +16)) "
                                      f"overlaps tensor {a} (arena [0, +16)), an input of the same op")


def test_in_place_over_a_view_whose_base_is_live_is_rejected():
    w = Xts3Writer()
    a, v = w.tensor((16,), offset=0), w.tensor((4, 4), offset=0)
    b, c = w.tensor((4, 4), offset=0), w.tensor((16,), offset=16)
    w.op("RESHAPE", [a], [v])
    requant(w, v, b)  # v dies here, but a (same bytes) is read below
    requant(w, a, c)
    w.set_inputs([a])
    w.set_outputs([b, c])
    assert rejected(w.to_bytes()).endswith(f"overlaps tensor {a} (arena [0, +16)), still live (read by a later op "
                                           "or a graph output)")


def test_writer_plans_elementwise_chains_in_place():
    """requant -> hard-swish -> LUT -> add(x, x) on 64 bytes: one block."""
    w = Xts3Writer()
    x = w.tensor((64,))
    a, b, c, d = (w.tensor((64,)) for _ in range(4))
    requant(w, x, a)
    elementwise(w, "HARD_SWISH", a, b)
    elementwise(w, "LUT", b, c)
    add(w, c, c, d)
    w.set_inputs([x])
    w.set_outputs([d])
    plan = w.plan()
    offsets, arena = plan.offsets, plan.arena_size
    assert arena == 64 and len({offsets[t] for t in (x, a, b, c, d)}) == 1
    _native.Program(w.to_bytes())


def test_writer_keeps_an_input_that_is_read_later_apart():
    w = Xts3Writer()
    x, a, b = w.tensor((64,)), w.tensor((64,)), w.tensor((64,))
    requant(w, x, a)
    add(w, x, a, b)  # x is read again: a may not take its bytes; b may take a's or x's
    w.set_inputs([x])
    w.set_outputs([b])
    plan = w.plan()
    offsets, arena = plan.offsets, plan.arena_size
    assert offsets[a] != offsets[x] and arena == 128
    _native.Program(w.to_bytes())


def test_reshape_may_not_overlap_its_input_partially():
    w = Xts3Writer()
    a, b = w.tensor((32,), offset=0), w.tensor((32,), offset=16)
    w.op("RESHAPE", [a], [b])
    w.set_inputs([a])
    w.set_outputs([b])
    assert "an input of the same op" in rejected(w.to_bytes())


def test_reshape_view_may_not_be_overwritten_while_live():
    w = Xts3Writer()
    a, v = w.tensor((16,), offset=0), w.tensor((4, 4), offset=0)
    c, d = w.tensor((16,), offset=16), w.tensor((4, 4), offset=0)
    w.op("RESHAPE", [a], [v])
    requant(w, a, c)
    w.op("RESHAPE", [c], [d])  # d over v, which is a graph output
    w.set_inputs([a])
    w.set_outputs([v, d])
    msg = rejected(w.to_bytes())
    assert msg.startswith(f"arena plan: op 2 (RESHAPE) output 0 (tensor {d}, arena [0, +16)) overlaps tensor ")
    assert msg.endswith("still live (read by a later op or a graph output)")


def test_graph_output_is_live_to_the_end():
    w = Xts3Writer()
    a, b = w.tensor((16,), offset=0), w.tensor((16,), offset=16)
    c = w.tensor((16,), offset=16)  # over b, a graph output nobody reads
    requant(w, a, b)
    requant(w, a, c)
    w.set_inputs([a])
    w.set_outputs([b, c])
    assert rejected(w.to_bytes()).startswith(f"arena plan: op 1 (REQUANTIZE) output 0 (tensor {c}, arena [16, +16)) "
                                             f"overlaps tensor {b} ")


def test_graph_input_that_is_a_graph_output_is_live_to_the_end():
    w = Xts3Writer()
    a, b = w.tensor((16,), offset=0), w.tensor((16,), offset=0)
    w2 = w.tensor((16,), offset=16)
    requant(w, a, w2)
    requant(w, w2, b)  # over a, returned as an output
    w.set_inputs([a])
    w.set_outputs([a, b])
    assert f"overlaps tensor {a} (arena [0, +16)), still live" in rejected(w.to_bytes())


def test_graph_inputs_are_live_together_from_the_start():
    w = Xts3Writer()
    a, b = w.tensor((16,), offset=0), w.tensor((8,), offset=0)
    c = w.tensor((16,), offset=16)
    add(w, a, a, c)
    w.set_inputs([a, b])
    w.set_outputs([c])
    assert rejected(w.to_bytes()) == (f"arena plan: graph input 0 (tensor {a}, arena [0, +16)) overlaps graph "
                                      f"input 1 (tensor {b}, arena [0, +8))")


def test_outputs_of_one_op_must_be_disjoint():
    w = Xts3Writer()
    a = w.tensor((2, 16), offset=0)
    p, q = w.tensor((1, 16), offset=32), w.tensor((1, 16), offset=32)
    w.op("SPLIT", [a], [p, q], axis=0)
    w.set_inputs([a])
    w.set_outputs([p, q])
    assert rejected(w.to_bytes()) == (f"arena plan: op 0 (SPLIT) output 0 (tensor {p}, arena [32, +16)) overlaps "
                                      f"tensor {q} (arena [32, +16)), another output of the same op")


def test_rule_holds_for_graphs_of_the_writers_planner():
    """The writer's planner (and so the lowering) never produces a plan the
    parser refuses: it is held to the same lifetimes."""
    import op_corpus

    for _name, blob in op_corpus.op_graphs():
        _native.Program(blob)


MUTATIONS = [m for v in xm.valid_blobs() for m in xm.arena_plan_mutations(v)]


@pytest.mark.parametrize("m", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_moving_a_tensor_onto_another(m: xm.Mutation):
    """Against tests/xts3_mutations.py's independent statement of the rule."""
    if m.expect is None:
        _native.Program(m.blob)
    else:
        assert re.search(m.expect, rejected(m.blob))


def test_mutations_cover_both_verdicts():
    assert sum(m.expect is None for m in MUTATIONS) >= 1
    assert sum(m.expect is not None and "arena plan" in m.expect for m in MUTATIONS) >= 10
