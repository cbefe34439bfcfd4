"""Valid graphs that together use every XTS3 opcode and the interpreter's
routes (ESP-NN and its own kernels). The -m32/sanitizer test runs them
through the native tool, which also checks that Invoke allocates nothing."""

from __future__ import annotations

from typing import Iterator

import numpy as np

from executorch_espnn import _native
from executorch_espnn import quant_params as qp
from executorch_espnn import selfcheck
from executorch_espnn.serialization import Xts3Writer

S, Z = 0.05, -3


def _conv_inputs(w: Xts3Writer, rng, cout: int, kh: int, kw: int, cin_g: int):
    weights = rng.integers(-127, 128, (cout, kh, kw, cin_g), dtype=np.int8)
    mult, shift = qp.conv_multipliers(S, np.full(cout, 0.01, np.float32), S)
    return [w.constant(weights), w.constant(rng.integers(-500, 500, cout, dtype=np.int32)),
            w.constant(mult), w.constant(shift)]


def _conv_params(**over):
    p = dict(stride_h=1, stride_w=1, pad_top=1, pad_left=1, dilation_h=1, dilation_w=1, input_offset=-Z,
             output_offset=Z, act_min=-128, act_max=127)
    p.update(over)
    return p


def _everything_else() -> bytes:
    rng = np.random.default_rng(5)
    w = Xts3Writer()
    x = w.tensor([1, 6, 6, 8], scale=S, zero_point=Z)

    def t(shape, scale=S, zp=Z):
        return w.tensor(shape, scale=scale, zero_point=zp)

    grouped = t([1, 6, 6, 8])
    w.op("CONV2D", [x, *_conv_inputs(w, rng, 8, 3, 3, 2)], [grouped], **_conv_params(groups=4))
    dilated = t([1, 6, 6, 8])
    w.op("CONV2D", [grouped, *_conv_inputs(w, rng, 8, 3, 3, 8)], [dilated],
         **_conv_params(groups=1, dilation_h=2, dilation_w=2, pad_top=2, pad_left=2))
    dw = t([1, 6, 6, 16])
    w.op("DEPTHWISE_CONV2D", [dilated, *_conv_inputs(w, rng, 1, 3, 3, 16)[:1],
                              *_conv_inputs(w, rng, 16, 1, 1, 1)[1:]], [dw],
         **_conv_params(ch_mult=2, dilation_h=2, dilation_w=2, pad_top=2, pad_left=2))
    up = t([1, 12, 12, 16])
    w.op("TRANSPOSE_CONV2D", [dw, *_conv_inputs(w, rng, 16, 2, 2, 16)], [up],
         **_conv_params(groups=1, stride_h=2, stride_w=2, pad_top=0, pad_left=0))
    avg = t([1, 6, 6, 16])
    w.op("AVG_POOL2D", [up], [avg], kernel_h=2, kernel_w=2, stride_h=2, stride_w=2, pad_top=0, pad_left=0,
         act_min=-128, act_max=127)
    odd = t([1, 6, 6, 3])
    w.op("SLICE", [avg], [odd], begin0=0, begin1=0, begin2=0, begin3=1, begin4=0, step0=1, step1=1, step2=1,
         step3=5, step4=0)
    mx = t([1, 5, 5, 3])
    w.op("MAX_POOL2D", [odd], [mx], kernel_h=2, kernel_w=2, stride_h=1, stride_w=1, pad_top=0, pad_left=0,
         act_min=-128, act_max=127)
    hs = t([1, 5, 5, 3], 0.04, 7)
    w.op("HARD_SWISH", [mx], [hs], input_zero_point=Z, output_zero_point=7, **qp.hard_swish_params(S, 0.04))
    sig = t([1, 5, 5, 3], 1 / 256, -128)
    lut = qp.lut_from_function(lambda v: 1 / (1 + np.exp(-v)), 0.04, 7, 1 / 256, -128)
    w.op("LUT", [hs, w.constant(lut)], [sig])
    nearest = t([1, 10, 7, 3], 1 / 256, -128)
    w.op("RESIZE_NEAREST", [sig, w.constant(np.array([i // 2 for i in range(10)], np.int32)),
                            w.constant(np.array([i * 5 // 7 for i in range(7)], np.int32))], [nearest])
    ytab = np.array([[i // 2, min(i // 2 + 1, 4), (i % 2) * 512] for i in range(10)], np.int32)
    xtab = np.array([[i * 4 // 6, min(i * 4 // 6 + 1, 4), (i * 4 % 6) * 1024 // 6] for i in range(7)], np.int32)
    bil = t([1, 10, 7, 3], 1 / 256, -128)
    w.op("RESIZE_BILINEAR", [sig, w.constant(ytab), w.constant(xtab)], [bil])
    prod = t([1, 10, 7, 3], 1 / 128, 0)
    w.op("MUL", [nearest, bil], [prod], input1_offset=128, input2_offset=128, output_offset=0,
         output_mult=qp.mul_multiplier(1 / 256, 1 / 256, 1 / 128)[0],
         output_shift=qp.mul_multiplier(1 / 256, 1 / 256, 1 / 128)[1], act_min=-128, act_max=127)
    bias = w.constant(rng.integers(-128, 128, (7, 1), dtype=np.int8), scale=1 / 128, zero_point=0)
    summed = t([1, 10, 7, 3], 1 / 64, 0)
    w.op("ADD", [prod, bias], [summed], input1_offset=0, input2_offset=0, output_offset=0, act_min=-128,
         act_max=127, **qp.add_params(1 / 128, 1 / 128, 1 / 64))
    perm = t([1, 3, 10, 7], 1 / 64, 0)
    w.op("TRANSPOSE", [summed], [perm], perm0=0, perm1=3, perm2=1, perm3=2, perm4=0)
    padded = t([1, 3, 12, 8], 1 / 64, 0)
    w.op("PAD", [perm], [padded], before0=0, before1=0, before2=1, before3=0, before4=0, pad_value=0)
    a, b = t([1, 1, 12, 8], 1 / 64, 0), t([1, 2, 12, 8], 1 / 64, 0)
    w.op("SPLIT", [padded], [a, b], axis=1)
    cat = t([1, 3, 12, 8], 1 / 64, 0)
    w.op("CONCAT", [b, a], [cat], axis=1)
    flat = t([36, 8], 1 / 64, 0)
    w.op("RESHAPE", [cat], [flat])
    req = t([36, 8], 0.1, 5)
    m, s = qp.quantize_multiplier((1 / 64) / 0.1)
    w.op("REQUANTIZE", [flat], [req], input_zero_point=0, output_zero_point=5, mult=m, shift=s)
    w.set_inputs([x])
    w.set_outputs([req, odd])
    return w.to_bytes()


def _fused_graphs() -> Iterator[tuple[str, bytes]]:
    """Fused regions (BAND_LOOP): an inverted residual block (stride 1 with
    its residual ADD, and stride 2), an in-place depthwise, and random chains
    (stride 2, dilation, pads at the borders) at a few band heights."""
    import band_graphs as bg
    from executorch_espnn.memory import FusedRegion

    for stride in (1, 2):
        w, n = bg.inverted_residual(stride=stride, seed=stride)
        yield f"fused_inverted_residual_s{stride}", w.to_bytes(w.plan([FusedRegion(0, n, 2)]))
    w, _ = bg.inverted_residual(expand=8)
    yield "fused_in_place_depthwise", w.to_bytes(w.plan([FusedRegion(1, 1, 1, in_place=True)]))
    for seed in range(4):
        w, n = bg.random_chain(seed)
        for rows in (1, 3):
            yield f"fused_chain{seed}_rows{rows}", w.to_bytes(w.plan([FusedRegion(0, n, rows)]))


def op_graphs() -> Iterator[tuple[str, bytes]]:
    yield "selfcheck_cnn", selfcheck.build(np.random.default_rng(2026))[0]
    yield "every_other_op", _everything_else()
    yield from _fused_graphs()


def opcodes_used() -> set[str]:
    return {op["op"] for _, blob in op_graphs() for op in _native.parse(blob)["ops"]}


def bundle_cases(runs: int = 0) -> list:
    """The op corpus (every XTS3 opcode) and the parser tests' valid blobs as
    bundle cases with the host runtime's expected outputs: what every runner
    (host, lx106, ESP-IDF linux, a board) must reproduce bit-exactly."""
    import xts3_mutations as xm

    from executorch_espnn import bundle

    cases = [bundle.make_case(name, blob, seed=i, runs=runs) for i, (name, blob) in enumerate(op_graphs())]
    cases += [bundle.make_case(v.name, v.blob, v.feeds, runs=runs) for v in xm.valid_blobs()]
    return cases
