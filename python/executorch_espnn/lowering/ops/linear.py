"""aten.linear -> FULLY_CONNECTED.

The partitioner keeps aten.linear from decomposition (ops_to_not_decompose),
so the weight arrives as [out, in] behind its dequantize. Every leading input
dim is a batch row. Per-channel weights use the conv recipe (double product
of the scales), per-tensor weights TFLite's FC recipe (float32 product).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...quant_params import conv_multipliers, fc_per_tensor_multiplier
from ..graph import Unsupported, arg, check_kernel_dims, static_shape
from ..op_table import OpTableRow
from ..quant import OutputSpec, QParams, Weight, bias, input_qparams, output_spec, weight
from ..registry import register
from ..values import CONTIG, Value


@dataclass
class LinearPlan:
    in_q: QParams
    out: OutputSpec
    w: Weight
    bias: np.ndarray | None
    mult: np.ndarray
    shift: np.ndarray
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]


def analyze(node, cc) -> LinearPlan:
    x, w_node, b_node = node.args[0], node.args[1], arg(node, 2, "bias")
    in_shape, out_shape = static_shape(x), static_shape(node)
    in_q = input_qparams(x, node, cc)
    w = weight(w_node, node, cc)
    if w.data.ndim != 2 or w.data.shape[1] != in_shape[-1]:
        raise Unsupported(f"weight shape {tuple(w.data.shape)} does not match input {in_shape}")
    b = bias(b_node, node, cc, in_q.scale, w.scales)
    out = output_spec(node, cc)
    check_kernel_dims({"row length": w.data.shape[1], "output channels": w.data.shape[0]},
                      cc.limits["max_kernel_dim"])
    if len(in_shape) > cc.limits["max_rank"]:
        raise Unsupported(f"input rank {len(in_shape)}")
    if w.per_channel:
        mult, shift = conv_multipliers(in_q.scale, w.scales, out.qparams.scale)
    else:
        m, e = fc_per_tensor_multiplier(in_q.scale, float(w.scales[0]), out.qparams.scale)
        mult, shift = np.array([m], np.int32), np.array([e], np.int32)
    if np.any(shift < -31) or np.any(shift > 30):
        raise Unsupported("input x weight / output scale ratio is outside the requantization range (shift)")
    return LinearPlan(in_q, out, w, b, mult, shift, in_shape, out_shape)


def lower(node, ctx):
    p = analyze(node, ctx)
    x = ctx.input(node.args[0], layout=CONTIG)
    src = ctx.tensor(x, p.in_shape)
    out = Value(ctx.new_tensor(p.out_shape, "INT8", p.out.qparams), p.out_shape, "INT8", p.out.qparams, CONTIG)
    ctx.emit("FULLY_CONNECTED",
             [src, ctx.constant(np.ascontiguousarray(p.w.data)),
              ctx.constant(p.bias) if p.bias is not None else None, ctx.constant(p.mult), ctx.constant(p.shift)],
             [out.tensor], input_offset=-p.in_q.zero_point, filter_offset=0,
             output_offset=p.out.qparams.zero_point, act_min=p.out.act_min, act_max=p.out.act_max)
    ctx.finish(node, p.out, out)


register("aten.linear.default", analyze=analyze, lower=lower, fuses_activation=True, preserve=True)


# This module's rows of docs/lowering.md's op table (scripts/gen_lowering_table.py writes the table from them).
OP_TABLE_ROWS = (
    OpTableRow(30,
               pytorch="linear",
               xts3="FULLY_CONNECTED"),
)
