"""aten.add.Tensor / aten.sub.Tensor / aten.mul.Tensor -> ADD / MUL with numpy broadcasting.

sub is an ADD of the negated second operand. XTS3's ADD validates its input
multipliers as non-negative, so the sign is not folded into a multiplier; the
negation is exact int8 work instead: a constant operand is negated at compile
time, an activation by a LUT (code q -> -1 - q in QParams.negated(), which
holds -x exactly for every code; LowerContext.negate).

Both operands are int8 (an operand may be a quantized constant: it is written
as an XTS3 constant in the layout of the other operand). The op runs in
channels-last when a rank-4/3 operand already is channels-last (a
[1,C,1,1]-style operand then costs no transpose), otherwise in PyTorch order.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from torch.fx import Node

from ...quant_params import add_params, mul_multiplier
from ..graph import Unsupported, op_name, static_shape
from ..op_table import OpTableRow
from ..quant import OutputSpec, QParams, input_qparams, output_spec
from ..registry import register
from ..values import CHANNELS_LAST, CONTIG, Value


@dataclass
class ElementwisePlan:
    kind: str
    qa: QParams
    qb: QParams
    out: OutputSpec
    params: dict
    out_shape: tuple[int, ...]


def analyze(node, cc) -> ElementwisePlan:
    name = op_name(node)
    kind = "MUL" if name.startswith("aten.mul") else "ADD"
    a, b = node.args[0], node.args[1]
    if kind == "ADD" and node.kwargs.get("alpha", 1) != 1:
        raise Unsupported(f"{name} with alpha = {node.kwargs['alpha']}")
    if not isinstance(a, Node) or not isinstance(b, Node):
        raise Unsupported("an operand is a Python scalar, not a quantized tensor")
    qa = input_qparams(a, node, cc, allow_constant=True)
    qb = input_qparams(b, node, cc, allow_constant=True)
    if name.startswith("aten.sub"):
        qb = qb.negated()
    if cc.constants.is_constant(a.args[0]) and cc.constants.is_constant(b.args[0]):
        raise Unsupported("both operands are constants")
    out = output_spec(node, cc)
    out_shape = static_shape(node)
    if len(out_shape) > cc.limits["max_rank"]:
        raise Unsupported(f"rank {len(out_shape)}")
    try:
        if kind == "ADD":
            params = add_params(qa.scale, qb.scale, out.qparams.scale)
        else:
            m, e = mul_multiplier(qa.scale, qb.scale, out.qparams.scale)
            params = dict(output_mult=m, output_shift=e)
    except ValueError as e:
        raise Unsupported(f"scales {qa.scale}, {qb.scale} -> {out.qparams.scale}: {e}") from None
    return ElementwisePlan(kind, qa, qb, out, params, out_shape)


def expand_rank(ctx, v: Value, rank: int) -> Value:
    """The same value with leading 1-dims (numpy broadcasting's alignment)."""
    if v.rank == rank:
        return v
    v = ctx.as_layout(v, CONTIG)
    shape = (1,) * (rank - v.rank) + v.shape
    if v.is_constant:
        return replace(v, shape=shape, const=v.const.reshape(shape))
    return replace(v, shape=shape)


def lower(node, ctx):
    p = analyze(node, ctx)
    rank = len(p.out_shape)
    values = [ctx.input(n) for n in node.args[:2]]
    if op_name(node).startswith("aten.sub"):
        values[1] = ctx.negate(values[1])
    values = [expand_rank(ctx, v, rank) for v in values]
    layout = CONTIG
    if rank in (3, 4) and any(v.layout == CHANNELS_LAST and not v.is_constant for v in values):
        layout = CHANNELS_LAST
    ins = [ctx.tensor(ctx.as_layout(v, layout)) for v in values]
    out = ctx.new_value(p.out_shape, p.out.qparams, layout)
    common = dict(input1_offset=-p.qa.zero_point, input2_offset=-p.qb.zero_point,
                  output_offset=p.out.qparams.zero_point, act_min=p.out.act_min, act_max=p.out.act_max)
    ctx.emit(p.kind, ins, [out.tensor], **common, **p.params)
    ctx.finish(node, p.out, out)


register("aten.add.Tensor", "aten.sub.Tensor", "aten.mul.Tensor", analyze=analyze, lower=lower, fuses_activation=True)


# This module's rows of docs/lowering.md's op table (scripts/gen_lowering_table.py writes the table from them).
OP_TABLE_ROWS = (
    OpTableRow(40,
               pytorch=("add, mul (broadcasting, constant operands); div by a Python number (EspNNQuantizer "
                        "rewrites x / c to x * (1 / c))"),
               xts3="ADD, MUL"),
    OpTableRow(50,
               pytorch="sub, rsub (`c - x`, rewritten to sub by EspNNQuantizer)",
               xts3=("ADD of the negated second operand: a constant negated at compile time, an activation by "
                     "a LUT (q -> -1 - q, zero point -1 - zp: exact)")),
)
