"""max_pool2d (edge: max_pool2d_with_indices + getitem 0) and avg_pool2d;
max_pool1d, avg_pool1d and adaptive_avg_pool1d (to a size that divides the
length) kept whole through decomposition and run as height-1 pools on the
channels-last [N, W, C] value that conv1d writes (ESP-NN's [N, 1, W, C]), so
a Conv1d/MaxPool1d stack needs no unsqueeze/squeeze and no CPU op.

ESP-NN pools on channels-last tensors without requantizing, clipping each
window to the image (so the bottom/right padding is implicit). That equals
PyTorch's max pooling with any padding, and average pooling when no window
reaches into the padding or count_include_pad=False. The pool writes in the
input's quantization; a REQUANTIZE follows when the output's differs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..graph import Unsupported, arg, check_kernel_dims, int_list, op_name, static_shape
from ..op_table import OpTableRow
from ..quant import OutputSpec, QParams, input_qparams, output_spec
from ..registry import register
from ..values import CHANNELS_LAST

MAXPOOL_WITH_INDICES = "aten.max_pool2d_with_indices.default"
ONE_D = ("aten.max_pool1d.default", "aten.avg_pool1d.default", "aten.adaptive_avg_pool1d.default")


@dataclass
class PoolPlan:
    kind: str
    in_q: QParams
    out: OutputSpec
    out_node: object
    kernel: list[int]
    stride: list[int]
    padding: list[int]
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    act_min: int
    act_max: int
    one_d: bool = False  # a 1-D pool run as height 1 (kernel/stride/padding above are [1, k], [1, s], [0, p])


def _output_node(node):
    """The node carrying the pooled tensor (getitem 0 for the with-indices form)."""
    if op_name(node) != MAXPOOL_WITH_INDICES:
        return node
    values = []
    for user in node.users:
        if op_name(user) != "operator.getitem":
            raise Unsupported(f"{user.name} reads the max-pool tuple directly")
        if user.args[1] == 0:
            values.append(user)
        elif user.users:
            raise Unsupported("the max-pool indices are used; ESP-NN does not compute them")
    if len(values) != 1:
        raise Unsupported(f"max pool has {len(values)} value outputs")
    return values[0]


def _adaptive_1d(node, length: int) -> tuple[list[int], list[int]]:
    """(kernel, stride) of adaptive_avg_pool1d: equal windows, so the size must divide the length
    (output size 1, a mean, is lowered by mean.py)."""
    size = int_list(node.args[1], 1, "output_size")[0]
    if size < 1 or length % size:
        raise Unsupported(f"adaptive average pool of length {length} to {size} (unequal windows)")
    return [length // size], [length // size]


def analyze(node, cc) -> PoolPlan:
    name = op_name(node)
    kind = "AVG_POOL2D" if "avg_pool" in name else "MAX_POOL2D"
    x = node.args[0]
    in_shape = static_shape(x)
    one_d = name in ONE_D
    if len(in_shape) != (3 if one_d else 4):
        raise Unsupported(f"pooling of a rank-{len(in_shape)} tensor (needs [N,C,{'' if one_d else 'H,'}W])")
    if name == "aten.adaptive_avg_pool1d.default":
        kernel, stride = _adaptive_1d(node, in_shape[2])
        padding = [0]
    else:
        nsp = 1 if one_d else 2
        kernel = int_list(node.args[1], nsp, "kernel_size")
        stride = int_list(arg(node, 2, "stride", []) or kernel, nsp, "stride")
        padding = int_list(arg(node, 3, "padding", 0), nsp, "padding")
    if one_d:  # a height-1 pool of [N, C, 1, W]
        kernel, stride, padding = [1] + kernel, [1] + stride, [0] + padding
        if name == "aten.adaptive_avg_pool1d.default":
            return _finish(node, cc, kind, x, kernel, stride, padding, in_shape, ceil_mode=False, one_d=True)
    if kind == "MAX_POOL2D":
        dilation = int_list(arg(node, 4, "dilation", 1), len(kernel) - one_d, "dilation")
        if any(d != 1 for d in dilation):
            raise Unsupported(f"dilated max pool {dilation}")
        ceil_mode = arg(node, 5, "ceil_mode", False)
    else:
        ceil_mode = arg(node, 4, "ceil_mode", False)
        count_include_pad = arg(node, 5, "count_include_pad", True)
        if not one_d and arg(node, 6, "divisor_override") is not None:
            raise Unsupported("avg pool with divisor_override")
        if count_include_pad and any(padding):
            raise Unsupported("avg pool with padding and count_include_pad=True (ESP-NN averages in-image taps)")
    return _finish(node, cc, kind, x, kernel, stride, padding, in_shape, ceil_mode, one_d)


def _finish(node, cc, kind, x, kernel, stride, padding, in_shape, ceil_mode, one_d) -> PoolPlan:
    """The checks and quantization shared by every pool (2-D, or 1-D as height 1)."""
    out_node = _output_node(node)
    out_shape = static_shape(out_node)
    in4 = (in_shape[0], in_shape[1], 1, in_shape[2]) if one_d else in_shape
    out4 = (out_shape[0], out_shape[1], 1, out_shape[2]) if one_d else out_shape
    for k, s, p, i, o in zip(kernel, stride, padding, in4[2:], out4[2:]):
        if not 0 <= p < k:
            raise Unsupported(f"padding {p} is not below the kernel size {k}")
        if ceil_mode and kind == "AVG_POOL2D" and o != (i + 2 * p - k) // s + 1:
            raise Unsupported("avg pool with ceil_mode that adds a partial window")
    check_kernel_dims({"input height": in4[2], "input width": in4[3], "channels": in4[1],
                       "output height": out4[2], "output width": out4[3],
                       "kernel height": kernel[0], "kernel width": kernel[1]}, cc.limits["max_kernel_dim"])
    in_q = input_qparams(x, node, cc)
    out = output_spec(out_node, cc)
    if in_q.same(out.qparams):
        act_min, act_max = out.act_min, out.act_max
    elif (out.act_min, out.act_max) == (out.qparams.qmin, out.qparams.qmax) and out.qparams.full_range:
        act_min, act_max = in_q.qmin, in_q.qmax
    else:
        raise Unsupported("pool with a fused activation and a change of quantization")
    return PoolPlan(kind, in_q, out, out_node, kernel, stride, padding, in_shape, out_shape, act_min, act_max,
                    one_d)


def lower(node, ctx):
    p = analyze(node, ctx)
    x = ctx.input(node.args[0], layout=CHANNELS_LAST)
    if p.one_d:  # [N, W, C] bytes declared as ESP-NN's [N, 1, W, C]
        n, c, w = p.in_shape
        src = ctx.tensor(x, (n, 1, w, c))
        out4 = (p.out_shape[0], 1, p.out_shape[2], p.out_shape[1])
        pooled = ctx.new_value(p.out_shape, p.in_q, CHANNELS_LAST, dims=out4)
    else:
        src = ctx.tensor(x)
        pooled = ctx.new_value(p.out_shape, p.in_q, CHANNELS_LAST)
    ctx.emit(p.kind, [src], [pooled.tensor], kernel_h=p.kernel[0], kernel_w=p.kernel[1],
             stride_h=p.stride[0], stride_w=p.stride[1], pad_top=p.padding[0], pad_left=p.padding[1],
             act_min=p.act_min, act_max=p.act_max)
    if p.out_node is not node:
        ctx.done.add(p.out_node)
    ctx.finish(node, p.out, ctx.requantize(pooled, p.out.qparams))


register("aten.max_pool2d.default", MAXPOOL_WITH_INDICES, "aten.avg_pool2d.default",
         analyze=analyze, lower=lower, fuses_activation=True)
# Kept from decomposition (into unsqueeze + 2-D pool + squeeze) where delegated.
register("aten.max_pool1d.default", "aten.avg_pool1d.default", analyze=analyze, lower=lower,
         fuses_activation=True, preserve=True)
register("aten.adaptive_avg_pool1d.default", analyze=analyze, lower=lower, preserve=True,
         when=lambda node: node.args[1] not in (1, [1], (1,)))


# This module's rows of docs/lowering.md's op table (scripts/gen_lowering_table.py writes the table from them).
OP_TABLE_ROWS = (
    OpTableRow(100,
               pytorch=("max/avg pool, adaptive avg pool; max_pool1d, avg_pool1d, adaptive_avg_pool1d to a "
                        "size dividing the length (kept whole with `preserve=True`, so ExecuTorch's unsqueeze "
                        "+ 2-D pool + squeeze decomposition never splits a Conv1d stack)"),
               xts3=("MAX_POOL2D, AVG_POOL2D (1-D: height 1 over conv1d's channels-last `[N, W, C]` bytes "
                     "declared `[N, 1, W, C]`)")),
)
