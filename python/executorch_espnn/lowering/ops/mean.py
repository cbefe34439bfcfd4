"""Mean over H and W -> MEAN_HW: aten.mean.dim over dims {2, 3} of a rank-4
tensor (what adaptive_avg_pool2d(x, 1) becomes in the Edge dialect) and
aten.adaptive_avg_pool2d with output size 1. 1/(H*W) is folded into the
multiplier (quant_params.mean_params)."""

from __future__ import annotations

from dataclasses import dataclass

from ...quant_params import mean_params
from ..graph import Unsupported, arg, check_kernel_dims, int_list, op_name, static_shape
from ..quant import OutputSpec, QParams, input_qparams, output_spec
from ..registry import register
from ..values import CHANNELS_LAST, CONTIG


@dataclass
class MeanPlan:
    in_q: QParams
    out: OutputSpec
    mult: int
    shift: int
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    keepdim: bool


def analyze(node, cc) -> MeanPlan:
    x = node.args[0]
    in_shape = static_shape(x)
    if len(in_shape) != 4:
        raise Unsupported(f"mean of a rank-{len(in_shape)} tensor (needs [N,C,H,W])")
    if op_name(node).startswith("aten.mean"):
        dims = arg(node, 1, "dim")
        if dims is None or sorted(d % 4 for d in dims) != [2, 3]:
            raise Unsupported(f"mean over dims {dims}; ESP-NN averages over H and W")
        keepdim = bool(arg(node, 2, "keepdim", False))
        if arg(node, 3, "dtype") is not None:
            raise Unsupported("mean with a dtype")
    else:
        if int_list(node.args[1], 2, "output_size") != [1, 1]:
            raise Unsupported(f"adaptive average pool to {node.args[1]} (only 1x1)")
        keepdim = True
    in_q = input_qparams(x, node, cc)
    out = output_spec(node, cc, fuse_activation=False)
    if not out.qparams.full_range:
        raise Unsupported("mean to a narrow int8 range")
    check_kernel_dims({"input height": in_shape[2], "input width": in_shape[3], "channels": in_shape[1]},
                      cc.limits["max_kernel_dim"])
    mult, shift = mean_params(in_q.scale, out.qparams.scale, in_shape[2] * in_shape[3])
    return MeanPlan(in_q, out, mult, shift, in_shape, static_shape(node), keepdim)


def lower(node, ctx):
    p = analyze(node, ctx)
    x = ctx.input(node.args[0], layout=CHANNELS_LAST)
    if p.keepdim:
        out = ctx.new_value(p.out_shape, p.out.qparams, CHANNELS_LAST)  # [N,1,1,C]
    else:
        out = ctx.new_value(p.out_shape, p.out.qparams, CONTIG)  # [N,C]
    ctx.emit("MEAN_HW", [ctx.tensor(x)], [out.tensor], input_zero_point=p.in_q.zero_point,
             output_zero_point=p.out.qparams.zero_point, mult=p.mult, shift=p.shift)
    ctx.finish(node, p.out, out)


register("aten.mean.dim", "aten.adaptive_avg_pool2d.default", "aten._adaptive_avg_pool2d.default",
         analyze=analyze, lower=lower)
