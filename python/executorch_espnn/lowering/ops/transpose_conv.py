"""Transposed convolution (aten.convolution with transposed=True) -> TRANSPOSE_CONV2D.

PyTorch's weight [Cin, Cout/groups, kh, kw] becomes the XTS3 filter
[Cout, kh, kw, Cin/groups]: output channel g*Og + j, input channel i of group
g reads W[g*Cg + i, j] (a permutation per group, no spatial flip; the runtime
scatters like PyTorch). The weight is quantized per channel along axis 1,
which has Cout/groups entries shared by every group, so the per-output-channel
scales are those entries tiled `groups` times (the bias scale is derived the
same way by the quantizer). output_padding is implied by the output size.
conv_transpose1d is a height-1 TRANSPOSE_CONV2D on the channels-last [N, W, C]
value viewed as [N, 1, W, C].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...quant_params import conv_multipliers
from ..graph import Unsupported, arg, check_kernel_dims, int_list, op_name, static_shape
from ..op_table import OpTableRow
from ..quant import OutputSpec, QParams, Weight, bias, input_qparams, output_spec, weight
from ..registry import register
from ..values import CHANNELS_LAST, Value


@dataclass
class TransposeConvPlan:
    in_q: QParams
    out: OutputSpec
    filter: np.ndarray
    bias: np.ndarray | None
    mult: np.ndarray
    shift: np.ndarray
    in4: tuple[int, int, int, int]
    out4: tuple[int, int, int, int]
    stride: list[int]
    padding: list[int]
    dilation: list[int]
    groups: int
    out_shape: tuple[int, ...]


def _args(node):
    """(x, w, b, stride, padding, dilation, output_padding, groups) of
    aten.convolution (transposed) or aten.conv_transpose{1,2}d (before decomposition)."""
    if op_name(node) == "aten.convolution.default":
        x, w, b, stride, padding, dilation, _, output_padding, groups = node.args[:9]
        return x, w, b, stride, padding, dilation, output_padding, groups
    return (node.args[0], node.args[1], arg(node, 2, "bias"), arg(node, 3, "stride", 1),
            arg(node, 4, "padding", 0), arg(node, 7, "dilation", 1), arg(node, 5, "output_padding", 0),
            arg(node, 6, "groups", 1))


def is_transposed(node) -> bool:
    return op_name(node) != "aten.convolution.default" or bool(node.args[6])


def xts3_filter(w_pt: np.ndarray, groups: int) -> np.ndarray:
    """[Cin, Cout/g, kh, kw] -> [Cout, kh, kw, Cin/g]: W'[g*Og + j, ky, kx, i] = W[g*Cg + i, j, ky, kx]."""
    cin, og, kh, kw = w_pt.shape
    cg = cin // groups
    w = w_pt.reshape(groups, cg, og, kh, kw).transpose(0, 2, 3, 4, 1)  # [g, j, ky, kx, i]
    return np.ascontiguousarray(w.reshape(groups * og, kh, kw, cg))


def analyze(node, cc) -> TransposeConvPlan:
    x, w_node, b_node, stride, padding, dilation, output_padding, groups = _args(node)
    in_shape, out_shape = static_shape(x), static_shape(node)
    if len(in_shape) not in (3, 4):
        raise Unsupported(f"{len(in_shape) - 2}-D transposed convolution; ESP-NN has 1-D and 2-D")
    nsp = len(in_shape) - 2
    stride, padding = int_list(stride, nsp, "stride"), int_list(padding, nsp, "padding")
    dilation = int_list(dilation, nsp, "dilation")
    output_padding = int_list(output_padding, nsp, "output_padding")
    in_q = input_qparams(x, node, cc)
    w: Weight = weight(w_node, node, cc, channel_axis=1)
    if not isinstance(groups, int) or groups < 1 or in_shape[1] % groups or w.data.shape[0] != in_shape[1]:
        raise Unsupported(f"groups = {groups} with weight {tuple(w.data.shape)} and {in_shape[1]} input channels")
    w4 = w.data.reshape(w.data.shape[0], w.data.shape[1], 1, -1) if nsp == 1 else w.data
    cout = w4.shape[1] * groups
    scales = np.tile(w.scales, groups)  # axis-1 scales are shared by every group
    b = bias(b_node, node, cc, in_q.scale, scales)
    out = output_spec(node, cc)
    if nsp == 1:  # height-1 transposed conv2d
        stride, padding, dilation, output_padding = [1] + stride, [0] + padding, [1] + dilation, [0] + output_padding
        n, c, wdt = in_shape
        in4, out4 = (n, 1, wdt, c), (out_shape[0], 1, out_shape[2], out_shape[1])
    else:
        n, c, h, wdt = in_shape
        in4, out4 = (n, h, wdt, c), (out_shape[0], out_shape[2], out_shape[3], out_shape[1])
    if out4[3] != cout:
        raise Unsupported(f"output channels {out4[3]} != {cout}")
    kernel = w4.shape[2:]
    for i, k, s, p, d, op, o in zip(in4[1:3], kernel, stride, padding, dilation, output_padding, out4[1:3]):
        if s < 1 or d < 1 or p < 0:
            raise Unsupported(f"stride {s} / dilation {d} / padding {p}")
        if not 0 <= op < max(s, d):
            raise Unsupported(f"output_padding {op} is not below max(stride {s}, dilation {d})")
        if o != (i - 1) * s - 2 * p + d * (k - 1) + 1 + op:
            raise Unsupported(f"output size {o} does not follow from input {i}, kernel {k}, stride {s}, "
                              f"padding {p}, dilation {d}, output_padding {op}")
    check_kernel_dims({"input height": in4[1], "input width": in4[2], "input channels": c,
                       "output height": out4[1], "output width": out4[2], "output channels": cout,
                       "kernel height": kernel[0], "kernel width": kernel[1],
                       "stride": max(stride), "padding": max(padding), "dilation": max(dilation)},
                      cc.limits["max_kernel_dim"])
    mult, shift = conv_multipliers(in_q.scale, scales, out.qparams.scale)
    if np.any(shift < -31) or np.any(shift > 30):
        raise Unsupported("input x weight / output scale ratio is outside the requantization range (shift)")
    return TransposeConvPlan(in_q, out, xts3_filter(w4, groups), b, mult, shift, in4, out4, stride, padding,
                             dilation, groups, out_shape)


def lower(node, ctx):
    p = analyze(node, ctx)
    x = ctx.input(node.args[0], layout=CHANNELS_LAST)
    out = Value(ctx.new_tensor(p.out4, "INT8", p.out.qparams), p.out_shape, "INT8", p.out.qparams,
                CHANNELS_LAST, p.out4)
    ctx.emit("TRANSPOSE_CONV2D",
             [ctx.tensor(x, p.in4), ctx.constant(p.filter), ctx.constant(p.bias) if p.bias is not None else None,
              ctx.constant(p.mult), ctx.constant(p.shift)], [out.tensor],
             stride_h=p.stride[0], stride_w=p.stride[1], pad_top=p.padding[0], pad_left=p.padding[1],
             dilation_h=p.dilation[0], dilation_w=p.dilation[1], groups=p.groups,
             input_offset=-p.in_q.zero_point, output_offset=p.out.qparams.zero_point,
             act_min=p.out.act_min, act_max=p.out.act_max)
    ctx.finish(node, p.out, out)


register("aten.convolution.default", analyze=analyze, lower=lower, fuses_activation=True, when=is_transposed)
register("aten.conv_transpose2d.input", "aten.conv_transpose1d.default", analyze=analyze, lower=lower,
         fuses_activation=True)


# This module's rows of docs/lowering.md's op table (scripts/gen_lowering_table.py writes the table from them).
OP_TABLE_ROWS = (
    OpTableRow(20,
               pytorch="conv_transpose1d/2d",
               xts3="TRANSPOSE_CONV2D"),
)
