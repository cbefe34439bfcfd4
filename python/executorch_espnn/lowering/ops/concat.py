"""aten.cat -> CONCAT along the physical axis of the parts' common layout.

The parts are joined in channels-last order when a rank-3/4 part already is
(so concatenating the channels of NHWC feature maps costs no TRANSPOSE),
otherwise in PyTorch order. Every part is brought to the output's
quantization first (EspNNQuantizer gives all parts one observer, so normally
no REQUANTIZE); a part may be a quantized constant.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..graph import Unsupported, arg, static_shape
from ..quant import OutputSpec, input_qparams, output_spec
from ..registry import register
from ..values import CHANNELS_LAST, CONTIG
from .movement import physical_axis


@dataclass
class ConcatPlan:
    out: OutputSpec
    dim: int
    out_shape: tuple[int, ...]


def analyze(node, cc) -> ConcatPlan:
    parts = list(node.args[0])
    out_shape = static_shape(node)
    rank = len(out_shape)
    if rank == 0 or rank > cc.limits["max_rank"]:
        raise Unsupported(f"concatenation of rank-{rank} tensors")
    if len(parts) > cc.limits["max_op_inputs"]:
        raise Unsupported(f"{len(parts)} parts; CONCAT takes at most {cc.limits['max_op_inputs']}")
    dim = arg(node, 1, "dim", 0) % rank
    for p in parts:
        shape = static_shape(p)
        if len(shape) != rank or 0 in shape:
            raise Unsupported(f"part {p.name} has shape {shape}")
        input_qparams(p, node, cc, allow_constant=True)
    if all(cc.constants.is_constant(p.args[0]) for p in parts):
        raise Unsupported("every part is a constant")
    out = output_spec(node, cc, fuse_activation=False)
    if not out.qparams.full_range and any(not input_qparams(p, node, cc, allow_constant=True).same(out.qparams)
                                          for p in parts):
        raise Unsupported("requantizing a part to a narrow int8 range")
    return ConcatPlan(out, dim, out_shape)


def lower(node, ctx):
    p = analyze(node, ctx)
    values = [ctx.input(n) for n in node.args[0]]
    rank = len(p.out_shape)
    layout = CONTIG
    if rank in (3, 4) and any(v.layout == CHANNELS_LAST and not v.is_constant for v in values):
        layout = CHANNELS_LAST
    values = [ctx.requantize(ctx.as_layout(v, layout), p.out.qparams) for v in values]
    out = ctx.new_value(p.out_shape, p.out.qparams, layout)
    ctx.emit("CONCAT", [ctx.tensor(v) for v in values], [out.tensor], axis=physical_axis(out, p.dim))
    ctx.finish(node, p.out, out)


register("aten.cat.default", "aten.concat.default", analyze=analyze, lower=lower, compute=False)
