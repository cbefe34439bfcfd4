"""Means -> MEAN_HW: aten.mean.dim over dims {2, 3} of a rank-4 tensor (what
adaptive_avg_pool2d(x, 1) becomes in the Edge dialect),
aten.adaptive_avg_pool2d with output size 1 and aten.adaptive_avg_pool1d
with output size 1 (kept whole through decomposition), on the channels-last
value; and
aten.mean.dim over any one run of adjacent dims (a transformer's mean over
its tokens, x.mean(dim=1) of [N, T, D]), on the PyTorch-order bytes viewed as
[outer, reduced, 1, inner] (MEAN_HW's [N, H, W, C]; its [N, C] output is the
result's bytes). 1/(count) is folded into the multiplier
(quant_params.mean_params)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...quant_params import mean_params
from ..graph import Unsupported, arg, check_kernel_dims, int_list, op_name, static_shape
from ..op_table import OpTableRow
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
    # [outer, reduced, 1, inner] for a mean over adjacent dims in PyTorch order; None: H, W of NCHW
    view4: tuple[int, int, int, int] | None = None
    one_d: bool = False  # adaptive_avg_pool1d(x, 1): W of channels-last [N, W, C]


def _adjacent_run(node, in_shape) -> tuple[int, int, int, int] | None:
    """The [outer, reduced, 1, inner] view of a mean over one run of adjacent dims
    (not the NCHW H, W case, which runs channels-last), else None."""
    if not op_name(node).startswith("aten.mean") or arg(node, 3, "dtype") is not None:
        return None
    dims = arg(node, 1, "dim")
    if not dims or not in_shape:
        return None
    rank = len(in_shape)
    dims = sorted({d % rank for d in ([dims] if isinstance(dims, int) else dims)})
    if rank == 4 and dims == [2, 3]:
        return None
    if dims != list(range(dims[0], dims[-1] + 1)):
        return None
    prod = lambda s: int(np.prod(s, dtype=np.int64))  # noqa: E731
    return (prod(in_shape[:dims[0]]), prod(in_shape[dims[0]:dims[-1] + 1]), 1, prod(in_shape[dims[-1] + 1:]))


def _plan(node, cc, in_shape, count: int, kernel_dims: dict, keepdim: bool, view4=None,
          one_d: bool = False) -> MeanPlan:
    """The quantization every MEAN_HW form shares: 1/count folded into the multiplier."""
    in_q = input_qparams(node.args[0], node, cc)
    out = output_spec(node, cc, fuse_activation=False)
    if not out.qparams.full_range:
        raise Unsupported("mean to a narrow int8 range")
    check_kernel_dims(kernel_dims, cc.limits["max_kernel_dim"])
    mult, shift = mean_params(in_q.scale, out.qparams.scale, count)
    return MeanPlan(in_q, out, mult, shift, in_shape, static_shape(node), keepdim, view4, one_d)


def _analyze_run(node, cc, in_shape, view4) -> MeanPlan:
    return _plan(node, cc, in_shape, view4[1], {"reduced extent": view4[1], "inner size": view4[3]},
                 bool(arg(node, 2, "keepdim", False)), view4)


def _analyze_global_1d(node, cc) -> MeanPlan:
    """adaptive_avg_pool1d(x, 1) of [N, C, L]: MEAN_HW of the channels-last
    [N, 1, L, C] bytes (conv1d's output layout, no transpose) to [N, C]."""
    in_shape = static_shape(node.args[0])
    if len(in_shape) != 3:
        raise Unsupported(f"adaptive_avg_pool1d of a rank-{len(in_shape)} tensor")
    return _plan(node, cc, in_shape, in_shape[2], {"input width": in_shape[2], "channels": in_shape[1]}, True,
                 one_d=True)


def analyze(node, cc) -> MeanPlan:
    if op_name(node) == "aten.adaptive_avg_pool1d.default":
        return _analyze_global_1d(node, cc)
    x = node.args[0]
    in_shape = static_shape(x)
    view4 = _adjacent_run(node, in_shape)
    if view4 is not None:
        return _analyze_run(node, cc, in_shape, view4)
    if len(in_shape) != 4:
        raise Unsupported(f"mean of a rank-{len(in_shape)} tensor over dims {arg(node, 1, 'dim')} "
                          "(needs one run of adjacent dims, or H and W of [N,C,H,W])")
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
    return _plan(node, cc, in_shape, in_shape[2] * in_shape[3],
                 {"input height": in_shape[2], "input width": in_shape[3], "channels": in_shape[1]}, keepdim)


def lower(node, ctx):
    p = analyze(node, ctx)
    if p.view4 is not None:
        x = ctx.input(node.args[0], layout=CONTIG)
        out = ctx.new_value(p.out_shape, p.out.qparams, CONTIG, dims=(p.view4[0], p.view4[3]))
        ctx.emit("MEAN_HW", [ctx.tensor(x, p.view4)], [out.tensor], input_zero_point=p.in_q.zero_point,
                 output_zero_point=p.out.qparams.zero_point, mult=p.mult, shift=p.shift)
        ctx.finish(node, p.out, out)
        return
    x = ctx.input(node.args[0], layout=CHANNELS_LAST)
    if p.one_d:  # [N, W, C] bytes as [N, 1, W, C] -> [N, C] bytes, which are [N, C, 1]
        n, c, w = p.in_shape
        out = ctx.new_value(p.out_shape, p.out.qparams, CONTIG, dims=(n, c))
        ctx.emit("MEAN_HW", [ctx.tensor(x, (n, 1, w, c))], [out.tensor], input_zero_point=p.in_q.zero_point,
                 output_zero_point=p.out.qparams.zero_point, mult=p.mult, shift=p.shift)
        ctx.finish(node, p.out, out)
        return
    if p.keepdim:
        out = ctx.new_value(p.out_shape, p.out.qparams, CHANNELS_LAST)  # [N,1,1,C]
    else:
        out = ctx.new_value(p.out_shape, p.out.qparams, CONTIG)  # [N,C]
    ctx.emit("MEAN_HW", [ctx.tensor(x)], [out.tensor], input_zero_point=p.in_q.zero_point,
             output_zero_point=p.out.qparams.zero_point, mult=p.mult, shift=p.shift)
    ctx.finish(node, p.out, out)


register("aten.mean.dim", "aten.adaptive_avg_pool2d.default", "aten._adaptive_avg_pool2d.default",
         analyze=analyze, lower=lower)
# Kept from decomposition where delegated; to other sizes it is an average pool (pooling.py).
register("aten.adaptive_avg_pool1d.default", analyze=analyze, lower=lower, preserve=True,
         when=lambda node: node.args[1] in (1, [1], (1,)))


# This module's rows of docs/lowering.md's op table (scripts/gen_lowering_table.py writes the table from them).
OP_TABLE_ROWS = (
    OpTableRow(110,
               pytorch=("mean over H,W; mean over one run of adjacent dims (a transformer's token mean); "
                        "adaptive_avg_pool1d to 1"),
               xts3=("MEAN_HW (the second on the PyTorch-order bytes viewed as `[outer, reduced, 1, inner]`; "
                     "the 1-D pool on `[N, 1, W, C]`)")),
)
