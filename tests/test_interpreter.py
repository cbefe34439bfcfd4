"""Whole-graph behaviour of the interpreter: several inputs and outputs, arena plans, repeated runs."""

import numpy as np
import pytest

from executorch_espnn import _native
from executorch_espnn import quant_params as qp
from executorch_espnn.xts3_writer import Xts3Writer

S, ZP = 0.05, -3


def _graph(offsets=None):
    """x1, x2 (int8 [2,3,4]) and f (float [2,4]) -> sum = x1 + x2, halves = split(x1, axis 1), q = quantize(f)."""
    offsets = offsets or {}
    w = Xts3Writer()
    x1 = w.tensor([2, 3, 4], "INT8", scale=S, zero_point=ZP, offset=offsets.get("x1"))
    x2 = w.tensor([2, 3, 4], "INT8", scale=S, zero_point=ZP, offset=offsets.get("x2"))
    f = w.tensor([2, 4], "FLOAT32", offset=offsets.get("f"))
    total = w.tensor([2, 3, 4], "INT8", scale=2 * S, zero_point=0, offset=offsets.get("total"))
    a = w.tensor([2, 1, 4], "INT8", scale=S, zero_point=ZP, offset=offsets.get("a"))
    b = w.tensor([2, 2, 4], "INT8", scale=S, zero_point=ZP, offset=offsets.get("b"))
    q = w.tensor([2, 4], "INT8", scale=S, zero_point=ZP, offset=offsets.get("q"))
    w.op("ADD", [x1, x2], [total], input1_offset=-ZP, input2_offset=-ZP, output_offset=0, act_min=-128,
         act_max=127, **qp.add_params(S, S, 2 * S))
    w.op("SPLIT", [x1], [a, b], axis=1)
    w.op("QUANTIZE", [f], [q], inv_scale_f32=1 / S, zero_point=ZP)
    w.set_inputs([x1, x2, f])
    w.set_outputs([total, a, b, q])
    return w.to_bytes()


def _inputs(seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(-128, 128, (2, 3, 4), dtype=np.int8), rng.integers(-128, 128, (2, 3, 4), dtype=np.int8),
            rng.standard_normal((2, 4)).astype(np.float32)]


def _expected(x1, x2, f):
    # (x1 - zp) * S + (x2 - zp) * S in units of 2S: exact halves round away from zero in TFLite's add.
    v = (x1.astype(np.int64) - ZP) + (x2.astype(np.int64) - ZP)
    total = np.clip(np.where(v >= 0, (v + 1) // 2, -((-v + 1) // 2)), -128, 127).astype(np.int8)
    q = np.clip(np.round(f * np.float32(1 / S)) + ZP, -128, 127).astype(np.int8)
    return [total, x1[:, :1], x1[:, 1:], q]


@pytest.mark.smoke
def test_several_inputs_and_outputs():
    prog = _native.Program(_graph())
    s = prog.summary()
    assert len(s["inputs"]) == 3 and len(s["outputs"]) == 4
    for seed in range(3):
        ins = _inputs(seed)
        for got, want in zip(prog.run(ins), _expected(*ins)):
            np.testing.assert_array_equal(got, want)


def test_results_do_not_depend_on_the_arena_plan_or_on_earlier_runs():
    ins = _inputs(7)
    want = _expected(*ins)
    # A plan of our own: every tensor in its own slot, at offsets far apart.
    spaced = {name: 256 * i for i, name in enumerate(["x1", "x2", "f", "total", "a", "b", "q"])}
    for blob in (_graph(), _graph(spaced)):
        prog = _native.Program(blob)
        prog.run(_inputs(99))  # leave other values in the arena first
        for got, w in zip(prog.run(ins), want):
            np.testing.assert_array_equal(got, w)
    # The last tensor (q, 8 bytes at 1536) ends the arena, rounded up to 16.
    assert _native.Program(_graph(spaced)).arena_bytes == 256 * 6 + 16


def test_a_graph_input_can_also_be_a_graph_output():
    w = Xts3Writer()
    x = w.tensor([4], "INT8")
    y = w.tensor([4], "INT8")
    w.op("RESHAPE", [x], [y])
    w.set_inputs([x])
    w.set_outputs([x, y])
    got = _native.Program(w.to_bytes()).run([np.arange(4, dtype=np.int8)])
    for g in got:
        np.testing.assert_array_equal(g, np.arange(4, dtype=np.int8))


def test_runtime_errors_name_the_input():
    prog = _native.Program(_graph())
    x1, x2, f = _inputs(0)
    with pytest.raises(ValueError, match="input 2: dtype float64, the graph expects FLOAT32"):
        prog.run([x1, x2, f.astype(np.float64)])
