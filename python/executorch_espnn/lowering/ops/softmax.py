"""Softmax over the last physical dim -> SOFTMAX (TFLite int8 softmax).

The output quantization is fixed by the kernel (1/256, -128); a REQUANTIZE
follows when the graph's quantize uses other parameters. Softmax over dim 1
of a rank-3/4 tensor runs on the channels-last value, where it is the last
dim; other dims must be the last one.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...quant_params import softmax_params
from ..graph import Unsupported, arg, op_name, static_shape
from ..quant import OutputSpec, QParams, input_qparams, output_spec
from ..registry import register
from ..values import CHANNELS_LAST, CONTIG

SOFTMAX_OUT = QParams(1.0 / 256.0, -128)


@dataclass
class SoftmaxPlan:
    in_q: QParams
    out: OutputSpec
    params: dict
    layout: str
    shape: tuple[int, ...]


def analyze(node, cc) -> SoftmaxPlan:
    x, dim = node.args[0], node.args[1]
    if op_name(node) == "aten._softmax.default" and arg(node, 2, "half_to_float", False):
        raise Unsupported("softmax with half_to_float")
    if op_name(node) == "aten.softmax.int" and arg(node, 2, "dtype") is not None:
        raise Unsupported("softmax with a dtype")
    shape = static_shape(x)
    rank = len(shape)
    dim %= rank
    if dim == rank - 1:
        layout = CONTIG
    elif dim == 1 and rank in (3, 4):
        layout = CHANNELS_LAST
    else:
        raise Unsupported(f"softmax over dim {dim} of a rank-{rank} tensor (needs the last dim)")
    if shape[dim] > cc.limits["max_softmax_width"]:
        raise Unsupported(f"softmax row of {shape[dim]} > {cc.limits['max_softmax_width']} "
                          "(TFLite's int8 softmax arithmetic is undefined there)")
    in_q = input_qparams(x, node, cc)
    out = output_spec(node, cc, fuse_activation=False)
    if not out.qparams.full_range:
        raise Unsupported("softmax to a narrow int8 range")
    return SoftmaxPlan(in_q, out, softmax_params(in_q.scale), layout, shape)


def lower(node, ctx):
    p = analyze(node, ctx)
    x = ctx.input(node.args[0], layout=p.layout)
    y = ctx.new_value(p.shape, SOFTMAX_OUT, x.layout)
    ctx.emit("SOFTMAX", [ctx.tensor(x)], [y.tensor], **p.params)
    ctx.finish(node, p.out, ctx.requantize(y, p.out.qparams))


register("aten._softmax.default", "aten.softmax.int", analyze=analyze, lower=lower)
