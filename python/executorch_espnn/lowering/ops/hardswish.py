"""aten.hardswish -> HARD_SWISH (TFLite's int8 hard-swish, any input and
output quantization; parameters from quant_params.hard_swish_params).

Kept from decomposition (the Edge dialect would turn it into add/clamp/
mul/div) where it is delegated. Elementwise: the op runs on the input's bytes
in whatever layout they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...quant_params import hard_swish_params
from ..graph import Unsupported, static_shape
from ..op_table import OpTableRow
from ..quant import OutputSpec, QParams, input_qparams, output_spec
from ..registry import register


@dataclass
class HardSwishPlan:
    in_q: QParams
    out: OutputSpec
    params: dict
    shape: tuple[int, ...]


def analyze(node, cc) -> HardSwishPlan:
    shape = static_shape(node)
    if len(shape) > cc.limits["max_rank"]:
        raise Unsupported(f"rank {len(shape)} above {cc.limits['max_rank']}")
    in_q = input_qparams(node.args[0], node, cc)
    out = output_spec(node, cc, fuse_activation=False)
    if not out.qparams.full_range:
        raise Unsupported("hardswish to a narrow int8 range (HARD_SWISH has no output clamp)")
    try:
        params = hard_swish_params(in_q.scale, out.qparams.scale)
    except ValueError as e:
        raise Unsupported(f"hardswish scales {in_q.scale} -> {out.qparams.scale}: {e}") from None
    return HardSwishPlan(in_q, out, params, shape)


def lower(node, ctx):
    p = analyze(node, ctx)
    x = ctx.input(node.args[0])
    if x.is_constant:
        raise Unsupported("hardswish of a constant")
    y = ctx.new_value(x.shape, p.out.qparams, x.layout, dims=x.dims)
    ctx.emit("HARD_SWISH", [ctx.tensor(x, x.dims)], [y.tensor], input_zero_point=p.in_q.zero_point,
             output_zero_point=p.out.qparams.zero_point, **p.params)
    ctx.finish(node, p.out, y)


register("aten.hardswish.default", analyze=analyze, lower=lower, preserve=True)


# This module's rows of docs/lowering.md's op table (scripts/gen_lowering_table.py writes the table from them).
OP_TABLE_ROWS = (
    OpTableRow(70,
               pytorch="hardswish",
               xts3="HARD_SWISH"),
)
