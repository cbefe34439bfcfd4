"""aten.convolution (not transposed): conv2d, conv1d, depthwise, grouped, dilated.

PyTorch weight [O, I/groups, kh, kw] -> XTS3 CONV2D filter OHWI
[O, kh, kw, I/groups]; depthwise (groups == in_channels > 1, O = C*M)
-> DEPTHWISE_CONV2D filter [1, kh, kw, C*M] (output channel c*M+m reads input
channel c, as in PyTorch). conv1d is a height-1 conv2d on the channels-last
[N, W, C] value viewed as [N, 1, W, C]. Per-channel (mult, shift) come from
quant_params.conv_multipliers; padding is PyTorch's symmetric padding (the
runtime infers the bottom/right pad from the output size). ESP-NN needs the
pad below the effective kernel extent (a window must touch the image); an
axis padded further (a 1x1 conv with padding 1) is padded by a PAD op
first, with the input zero point (real 0), and convolved with pad 0.

A convolution from one input channel (a grayscale or audio stem) is a
depthwise convolution with ch_mult = O: the same sums, with the filter
[O, 1, kh, kw] read as [1, kh, kw, O]. It is lowered as one when the
runtime's S3 routing (depthwise_conv.cpp RouteDepthwise, asked through
_native.s3_depthwise_route) gives that depthwise layer a SIMD path: ESP-NN's
general S3 convolution pads one input channel to 16 for its filter rows,
where the depthwise mult-4/mult-8 paths use the channel multiplier as the
vector width (TFLite's converter makes the same substitution).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ... import _native
from ...quant_params import conv_multipliers
from ..graph import Unsupported, arg, check_kernel_dims, int_list, op_name, static_shape
from ..op_table import OpTableRow
from ..quant import OutputSpec, QParams, Weight, bias, input_qparams, output_spec, weight
from ..registry import register
from ..values import CHANNELS_LAST, Value


@dataclass
class ConvPlan:
    depthwise: bool
    in_q: QParams
    out: OutputSpec
    w: Weight
    bias: np.ndarray | None
    mult: np.ndarray
    shift: np.ndarray
    in4: tuple[int, int, int, int]   # N, H, W, C (conv1d: H = 1)
    out4: tuple[int, int, int, int]  # N, OH, OW, O
    kernel: tuple[int, int]
    stride: list[int]
    padding: list[int]      # applied by the conv kernel itself
    dilation: list[int]
    groups: int
    out_shape: tuple[int, ...]
    pre_pad: list[int]      # per spatial axis (H, W), padded by a PAD op before the conv


def _conv_args(node):
    """(x, w, b, stride, padding, dilation, transposed, groups) of aten.convolution
    or of aten.conv1d/conv2d (the ATen program before decomposition)."""
    if op_name(node) == "aten.convolution.default":
        x, w, b, stride, padding, dilation, transposed, _, groups = node.args[:9]
        return x, w, b, stride, padding, dilation, transposed, groups
    return (node.args[0], node.args[1], arg(node, 2, "bias"), arg(node, 3, "stride", 1),
            arg(node, 4, "padding", 0), arg(node, 5, "dilation", 1), False, arg(node, 6, "groups", 1))


def analyze(node, cc) -> ConvPlan:
    x, w_node, b_node, stride, padding, dilation, transposed, groups = _conv_args(node)
    if isinstance(padding, str):
        raise Unsupported(f"padding={padding!r}")
    if transposed:
        raise Unsupported("transposed convolution (lowered by transpose_conv.py)")
    in_shape, out_shape = static_shape(x), static_shape(node)
    if len(in_shape) not in (3, 4):
        raise Unsupported(f"{len(in_shape) - 2}-D convolution; ESP-NN has 1-D and 2-D")
    nsp = len(in_shape) - 2
    stride, padding = int_list(stride, nsp, "stride"), int_list(padding, nsp, "padding")
    dilation = int_list(dilation, nsp, "dilation")
    in_q = input_qparams(x, node, cc)
    w = weight(w_node, node, cc)
    b = bias(b_node, node, cc, in_q.scale, w.scales)
    out = output_spec(node, cc)
    if nsp == 1:  # height-1 conv2d
        stride, padding, dilation = [1] + stride, [0] + padding, [1] + dilation
        n, c, wdt = in_shape
        in4 = (n, 1, wdt, c)
        out4 = (out_shape[0], 1, out_shape[2], out_shape[1])
        kernel = (1, w.data.shape[2])
    else:
        n, c, h, wdt = in_shape
        in4 = (n, h, wdt, c)
        out4 = (out_shape[0], out_shape[2], out_shape[3], out_shape[1])
        kernel = (w.data.shape[2], w.data.shape[3])
    o = w.data.shape[0]
    if not isinstance(groups, int) or groups < 1 or c % groups or o % groups:
        raise Unsupported(f"groups = {groups} does not divide channels {c} -> {o}")
    pre_pad = [0, 0]
    for axis, (k, p, d, s) in enumerate(zip(kernel, padding, dilation, stride)):
        if s < 1 or d < 1 or p < 0:
            raise Unsupported(f"stride {s} / dilation {d} / padding {p}")
        if p >= d * (k - 1) + 1:  # no window may lie wholly in ESP-NN's padding: pad explicitly
            pre_pad[axis], padding[axis] = p, 0
    depthwise = groups == c and groups > 1
    if groups == 1 and c == 1 and o > 1:
        depthwise = _single_channel_as_depthwise(in4, pre_pad, o, out4, kernel, stride, padding, dilation,
                                                 -in_q.zero_point)
    limit = cc.limits["max_kernel_dim"]
    check_kernel_dims({"input height": in4[1] + 2 * pre_pad[0], "input width": in4[2] + 2 * pre_pad[1],
                       "input channels": c,
                       "output height": out4[1], "output width": out4[2], "output channels": o,
                       "kernel height": kernel[0], "kernel width": kernel[1],
                       "stride": max(stride), "padding": max(padding), "dilation": max(dilation)}, limit)
    mult, shift = conv_multipliers(in_q.scale, w.scales, out.qparams.scale)
    if np.any(shift < -31) or np.any(shift > 30):
        raise Unsupported("input x weight / output scale ratio is outside the requantization range (shift)")
    return ConvPlan(depthwise, in_q, out, w, b, mult, shift, in4, out4, kernel, stride, padding, dilation,
                    groups, out_shape, pre_pad)


def _single_channel_as_depthwise(in4, pre_pad, ch_mult, out4, kernel, stride, padding, dilation,
                                 input_offset) -> bool:
    """Whether a one-input-channel convolution is lowered as a depthwise one
    (the module docstring says why): when the runtime routes that depthwise
    layer to a SIMD path on the S3, asked of its own RouteDepthwise, not
    restated."""
    route = _native.s3_depthwise_route(
        in_hwc=(in4[1] + 2 * pre_pad[0], in4[2] + 2 * pre_pad[1], 1), kernel=tuple(kernel), ch_mult=ch_mult,
        out_hw=(out4[1], out4[2]), stride=tuple(stride), padding=tuple(padding), dilation=tuple(dilation),
        input_offset=input_offset)
    return bool(route["simd"])


def _filter(p: ConvPlan) -> np.ndarray:
    o = p.w.data.shape[0]
    w4 = p.w.data.reshape(o, -1, p.kernel[0], p.kernel[1])  # conv1d: [O, I/g, 1, k]
    if p.depthwise:
        return np.ascontiguousarray(w4.reshape(o, p.kernel[0], p.kernel[1]).transpose(1, 2, 0)[None])
    return np.ascontiguousarray(w4.transpose(0, 2, 3, 1))


def lower(node, ctx):
    p = analyze(node, ctx)
    x = ctx.input(node.args[0], layout=CHANNELS_LAST)
    src = ctx.tensor(x, p.in4)
    if any(p.pre_pad):
        n, h, w, c = p.in4
        padded = ctx.new_tensor((n, h + 2 * p.pre_pad[0], w + 2 * p.pre_pad[1], c), "INT8", p.in_q)
        ctx.emit("PAD", [src], [padded], before0=0, before1=p.pre_pad[0], before2=p.pre_pad[1], before3=0,
                 before4=0, pad_value=p.in_q.zero_point)
        src = padded
    o = p.out4[3]
    filt = ctx.constant(_filter(p))
    bias_t = ctx.constant(p.bias) if p.bias is not None else None
    mult_t, shift_t = ctx.constant(p.mult), ctx.constant(p.shift)
    out = Value(ctx.new_tensor(p.out4, "INT8", p.out.qparams), p.out_shape, "INT8", p.out.qparams,
                CHANNELS_LAST, p.out4)
    common = dict(stride_h=p.stride[0], stride_w=p.stride[1], pad_top=p.padding[0], pad_left=p.padding[1],
                  dilation_h=p.dilation[0], dilation_w=p.dilation[1], input_offset=-p.in_q.zero_point,
                  output_offset=p.out.qparams.zero_point, act_min=p.out.act_min, act_max=p.out.act_max)
    if p.depthwise:
        ctx.emit("DEPTHWISE_CONV2D", [src, filt, bias_t, mult_t, shift_t], [out.tensor],
                 ch_mult=o // p.in4[3], **common)
    else:
        ctx.emit("CONV2D", [src, filt, bias_t, mult_t, shift_t], [out.tensor], groups=p.groups, **common)
    ctx.finish(node, p.out, out)


register("aten.convolution.default", "aten.conv1d.default", "aten.conv2d.default", analyze=analyze, lower=lower,
         fuses_activation=True)


# This module's rows of docs/lowering.md's op table (scripts/gen_lowering_table.py writes the table from them).
OP_TABLE_ROWS = (
    OpTableRow(10,
               pytorch=("conv1d/conv2d (strided, depthwise, grouped, dilated; pad >= kernel extent gets an "
                        "explicit PAD)"),
               xts3="CONV2D, DEPTHWISE_CONV2D (+ PAD)"),
)
