"""Constant padding: aten.constant_pad_nd (F.pad in the Edge dialect) and
aten.pad(mode='constant') -> PAD.

The padding runs on the physical axes of the value's layout (a channels-last
value is padded in H and W without a TRANSPOSE). The pad value is written as
raw int8 in the input's quantization, quantized exactly as PyTorch's
quantize_per_tensor does (float32 product with 1/scale, round half to even,
clamp), so a zero pad is the zero point. Negative pads (cropping) stay on the
CPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..graph import Unsupported, arg, op_name, static_shape
from ..quant import OutputSpec, QParams, input_qparams, output_spec
from ..registry import register
from .movement import per_axis, physical_axis


@dataclass
class PadPlan:
    in_q: QParams
    out: OutputSpec
    before: dict[int, int]  # logical dim -> elements before it
    pad_value: int
    out_shape: tuple[int, ...]


def quantized_value(value: float, qp: QParams) -> int:
    """quantize_per_tensor of one real number (torch's formula, in float32)."""
    q = np.round(np.float32(value) * np.float32(1.0 / qp.scale))
    return int(np.clip(q + qp.zero_point, qp.qmin, qp.qmax))


def analyze(node, cc) -> PadPlan:
    x = node.args[0]
    in_shape, out_shape = static_shape(x), static_shape(node)
    rank = len(in_shape)
    if rank == 0 or rank > cc.limits["max_rank"]:
        raise Unsupported(f"padding of a rank-{rank} tensor")
    pad = list(node.args[1])
    if op_name(node) == "aten.pad.default":
        mode = arg(node, 2, "mode", "constant")
        if mode != "constant":
            raise Unsupported(f"{mode} padding (only constant padding)")
        value = arg(node, 3, "value")
    else:
        value = arg(node, 2, "value", 0)
    value = 0.0 if value is None else value
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        raise Unsupported(f"pad value {value!r} is not a finite number")
    if len(pad) % 2 or len(pad) > 2 * rank or not all(isinstance(p, int) for p in pad):
        raise Unsupported(f"pad {pad} for a rank-{rank} tensor")
    if any(p < 0 for p in pad):
        raise Unsupported(f"negative padding {pad} (cropping)")
    before = {rank - 1 - i: pad[2 * i] for i in range(len(pad) // 2)}
    expected = list(in_shape)
    for i in range(len(pad) // 2):
        expected[rank - 1 - i] += pad[2 * i] + pad[2 * i + 1]
    if tuple(expected) != out_shape:
        raise Unsupported(f"output shape {out_shape} != padded shape {tuple(expected)}")
    in_q = input_qparams(x, node, cc)
    out = output_spec(node, cc, fuse_activation=False)
    return PadPlan(in_q, out, before, quantized_value(value, in_q), out_shape)


def lower(node, ctx):
    p = analyze(node, ctx)
    v = ctx.input(node.args[0])
    if v.is_constant:
        raise Unsupported("padding of a constant")
    if p.out_shape == v.shape:
        ctx.finish(node, p.out, ctx.requantize(v, p.out.qparams))
        return
    out = ctx.new_value(p.out_shape, v.qparams, v.layout)
    before = per_axis({physical_axis(v, d): n for d, n in p.before.items()}, v.rank, 0)
    ctx.emit("PAD", [ctx.tensor(v)], [out.tensor], **{f"before{i}": b for i, b in enumerate(before)},
             pad_value=p.pad_value)
    ctx.finish(node, p.out, ctx.requantize(out, p.out.qparams))


register("aten.constant_pad_nd.default", "aten.pad.default", analyze=analyze, lower=lower, compute=False)
