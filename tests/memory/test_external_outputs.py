"""An EXTERNAL graph output (the caller's buffer, Interpreter::BindOutput)
takes no arena bytes: the planner, the lower bound and the op order leave it
out, so a model whose float result is larger than its activations gets an
arena smaller by the output's bytes."""

from __future__ import annotations

import numpy as np

from executorch_espnn import _native
from executorch_espnn import quant_params as qp
from executorch_espnn.analysis import arena_lower_bound
from executorch_espnn.memory import ArenaGraph, liveness, plan_arena
from executorch_espnn.xts3_writer import Xts3Writer

H = W = 16
S, ZP = 0.05, 0


def _conv_then_float_output(*, mark: bool) -> Xts3Writer:
    """int8 [1,H,W,4] -> 1x1 CONV2D to 8 channels -> DEQUANTIZE -> float
    [1,H,W,8]: the float output (4 x 8 bytes a pixel) is the largest tensor."""
    rng = np.random.default_rng(0)
    w = Xts3Writer()
    x = w.tensor((1, H, W, 4), scale=S, zero_point=ZP)
    y = w.tensor((1, H, W, 8), scale=S, zero_point=ZP)
    mult, shift = qp.quantize_multiplier(S * 0.01 / S)
    w.op("CONV2D", [x, w.constant(rng.integers(-127, 128, (8, 1, 1, 4), dtype=np.int8)),
                    w.constant(np.zeros(8, np.int32)), w.constant(np.full(8, mult, np.int32)),
                    w.constant(np.full(8, shift, np.int32))], [y],
         stride_h=1, stride_w=1, pad_top=0, pad_left=0, dilation_h=1, dilation_w=1, groups=1,
         input_offset=-ZP, output_offset=ZP, act_min=-128, act_max=127)
    f = w.tensor((1, H, W, 8), "FLOAT32")
    w.op("DEQUANTIZE", [y], [f], scale_f32=S, zero_point=ZP)
    w.set_inputs([x])
    w.set_outputs([f])
    if mark:
        assert w.mark_external_outputs() == [f]
    return w


def test_float_output_leaves_the_arena():
    plain, ext = _conv_then_float_output(mark=False), _conv_then_float_output(mark=True)
    out_bytes = 4 * H * W * 8
    # Layer by layer: x + y at the conv, y + the float output at the DEQUANTIZE.
    assert plain.plan().arena_size == H * W * 8 + out_bytes
    assert ext.plan().arena_size == H * W * (4 + 8)
    blob_plain, blob_ext = plain.to_bytes(), ext.to_bytes()
    assert _native.Program(blob_plain).arena_bytes - _native.Program(blob_ext).arena_bytes == out_bytes - H * W * 4
    # The bound from the blob (what the analysis reports) agrees with the planner.
    assert arena_lower_bound(blob_ext) == _native.Program(blob_ext).arena_bytes
    x = np.random.default_rng(1).integers(-128, 128, (1, H, W, 4), dtype=np.int8)
    np.testing.assert_array_equal(_native.Program(blob_ext).run([x])[0], _native.Program(blob_plain).run([x])[0])


def test_an_output_outside_the_arena_has_no_lifetime():
    g = ArenaGraph.from_summary(_native.parse(_conv_then_float_output(mark=True).to_bytes()))
    (out,) = g.outputs
    assert not g.in_arena[out]
    lv = liveness(g)
    assert out not in lv.first and out not in lv.last
    assert plan_arena(g).arena_size == H * W * (4 + 8)
