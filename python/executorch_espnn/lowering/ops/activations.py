"""relu / relu6 / hardtanh / clamp.

Normally absorbed: the producing conv/linear/add/mul/pool writes the clamp
as act_min/act_max (quant.output_spec), and this node only has to be in the
same partition. A clamp that no producer absorbs is lowered standalone as a
1x1 MAX_POOL2D whose act_min/act_max do the clamping (in the input's
quantization; a REQUANTIZE follows when the output's differs) (ESP-NN has no int8
clamp kernel; its relu6 clamps raw int8 values, not real 0 and 6).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..graph import Unsupported, op_name, static_shape
from ..op_table import OpTableRow
from ..quant import CLAMP_OPS, OutputSpec, QParams, absorbing_producer, clamp_bounds, input_qparams, output_spec
from ..registry import lookup, register


@dataclass
class ClampPlan:
    fused_into: object | None
    in_q: QParams | None = None
    out: OutputSpec | None = None
    act_min: int = -128
    act_max: int = 127


def analyze(node, cc) -> ClampPlan:
    producer = absorbing_producer(node)
    entry = lookup(producer) if producer is not None else None
    if entry is not None and entry.fuses_activation:
        try:
            absorbed = output_spec(producer, cc).absorbed
        except Unsupported:
            absorbed = []
        if node in absorbed:
            if not cc.in_partition(producer):
                raise Unsupported(f"fused into {producer.name} ({op_name(producer)}), which is not delegated")
            return ClampPlan(producer)
    in_q = input_qparams(node.args[0], node, cc)
    out = output_spec(node, cc)
    lo, hi = clamp_bounds(node)
    if in_q.same(out.qparams):
        act_min, act_max = out.act_min, out.act_max
    elif out.qparams.full_range and (out.act_min, out.act_max) == (-128, 127):
        act_min, act_max = in_q.qmin, in_q.qmax  # clamp in the input's quantization, then REQUANTIZE
    else:
        raise Unsupported(f"standalone {op_name(node)} with further clamps and a change of quantization")
    if lo is not None:
        act_min = max(act_min, in_q.quantize_bound(lo))
    if hi is not None:
        act_max = min(act_max, in_q.quantize_bound(hi))
    if act_min > act_max:
        raise Unsupported(f"clamp [{lo}, {hi}] is empty at scale {in_q.scale}")
    shape = static_shape(node)
    last = shape[-1] if shape else 1
    total = 1
    for d in shape:
        total *= d
    if max(last, total // max(last, 1)) > cc.limits["max_kernel_dim"]:
        raise Unsupported("tensor too large for the 1x1 pool that implements a standalone clamp")
    return ClampPlan(None, in_q, out, act_min, act_max)


def lower(node, ctx):
    p = analyze(node, ctx)
    if p.fused_into is not None:
        raise Unsupported(f"{node.name} should have been absorbed by {p.fused_into.name}")
    v = ctx.input(node.args[0])
    last = v.physical[-1] if v.physical else 1
    if v.rank == 4 and max(v.physical[1:]) <= ctx.limits["max_kernel_dim"]:
        dims4 = v.physical  # an image already: no RESHAPE around the pool
    else:
        dims4 = (1, 1, v_numel(v) // last, last)
    out = ctx.new_value(v.shape, p.in_q, v.layout, dims=dims4)
    ctx.emit("MAX_POOL2D", [ctx.tensor(v, dims4)], [out.tensor], kernel_h=1, kernel_w=1, stride_h=1, stride_w=1,
             pad_top=0, pad_left=0, act_min=p.act_min, act_max=p.act_max)
    ctx.finish(node, p.out, ctx.requantize(out, p.out.qparams))


def v_numel(v) -> int:
    n = 1
    for d in v.shape:
        n *= d
    return n


register(*sorted(CLAMP_OPS), analyze=analyze, lower=lower, compute=True)


# This module's rows of docs/lowering.md's op table (scripts/gen_lowering_table.py writes the table from them).
OP_TABLE_ROWS = (
    OpTableRow(60,
               pytorch="relu/relu6/hardtanh/clamp (fused into the producer, else a 1x1 MAX_POOL2D)",
               xts3="act_min/act_max"),
)
