"""sigmoid, tanh, silu, gelu (both approximations), hardsigmoid, leaky_relu, elu,
selu, celu, mish, softplus, log_sigmoid, prelu with one slope -> LUT; prelu with a
slope per channel -> CHANNEL_LUT (one table per channel).

An int8 input has 256 values, so any elementwise function is a 256-entry
table (quant_params.lut_from_function). The table evaluates PyTorch's own
float32 function on the dequantized input as the quantized model computes it
(float32 (q - zp) * scale), so the device matches PyTorch up to the output
rounding. The output quantization is whatever the graph's quantize says
(sigmoid and tanh have the fixed 1/256, -128 and 1/128, 0 of EspNNQuantizer;
any other is tabulated as well). The table of an op with scalar parameters
(negative_slope, alpha, scale, input_scale, beta, threshold) calls the ATen op itself
with the node's own arguments, so every parameter value is tabulated as PyTorch
computes it; prelu's slopes are read from its constant weight (one table per
channel when there are several). silu,
hardsigmoid, selu, celu, mish, softplus, log_sigmoid and prelu are
kept from decomposition where delegated (the Edge dialect would split them into
several elementwise ops). hardshrink and softshrink are not here: export's first
decomposition pass splits them (abs/le/where) even with an empty table, before a
partitioner can keep them. Elementwise: the op keeps the input's layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ...quant_params import lut_from_function
from ..graph import Unsupported, arg, op_name, static_shape
from ..op_table import OpTableRow
from ..quant import OutputSpec, QParams, input_qparams, output_spec
from ..registry import register
from ..values import layout_perm


def _gelu(node, cc):
    approximate = arg(node, 1, "approximate", "none")
    if approximate not in ("none", "tanh"):
        raise Unsupported(f"gelu with approximate={approximate!r}")
    return lambda x: F.gelu(x, approximate=approximate)


def _prelu_slopes(node, cc) -> torch.Tensor:
    """prelu's constant weight as float32 [slopes]: one slope (nn.PReLU()'s
    default) or one per channel (dimension 1 of the input)."""
    w = node.args[1]
    data = cc.constants.tensor(w) if cc.constants.is_constant(w) else None
    if data is None:
        raise Unsupported("prelu weight is not a constant")
    shape = static_shape(node)
    if data.numel() != 1 and (len(shape) < 2 or data.numel() != shape[1]):
        raise Unsupported(f"prelu with {data.numel()} slopes for input {list(shape)} (expected 1 or one per "
                          f"channel)")
    return data.detach().float().reshape(-1).clone()


def _prelu(node, cc):
    """The function of one slope, tabulated with aten.prelu itself."""
    weight = _prelu_slopes(node, cc)
    if weight.numel() != 1:
        raise AssertionError("per-channel prelu is tabulated per channel (analyze)")
    return lambda x: torch.ops.aten.prelu.default(x, weight)


def _aten(node, cc):
    """The node's own ATen op on a float32 tensor, with the node's scalar arguments."""
    rest, kwargs = node.args[1:], dict(node.kwargs)
    for a in (*rest, *kwargs.values()):
        if not isinstance(a, (bool, int, float)):
            raise Unsupported(f"{op_name(node)} with a non-scalar argument {a!r}")
    ns, name, overload = op_name(node).split(".")
    op = getattr(getattr(getattr(torch.ops, ns), name), overload)
    return lambda x: op(x, *rest, **kwargs)


FUNCTIONS = {
    "aten.sigmoid.default": lambda node, cc: torch.sigmoid,
    "aten.tanh.default": lambda node, cc: torch.tanh,
    "aten.silu.default": lambda node, cc: F.silu,
    "aten.hardsigmoid.default": lambda node, cc: F.hardsigmoid,
    "aten.gelu.default": _gelu,
    "aten.leaky_relu.default": _aten,
    "aten.elu.default": _aten,
    "aten.selu.default": _aten,
    "aten.celu.default": _aten,
    "aten.mish.default": _aten,
    "aten.softplus.default": _aten,
    "aten.log_sigmoid.default": _aten,
    "aten.prelu.default": _prelu,
}
# Ops the Edge dialect decomposes (core ATen has no kernel for them).
PRESERVE = ("aten.silu.default", "aten.hardsigmoid.default", "aten.selu.default", "aten.celu.default",
            "aten.mish.default", "aten.softplus.default", "aten.log_sigmoid.default", "aten.prelu.default")


@dataclass
class LutPlan:
    in_q: QParams
    out: OutputSpec
    table: np.ndarray  # [256], or [channels, 256] for CHANNEL_LUT
    per_channel: bool = False


def _on_dequantized(fn):
    """fn as lut_from_function calls it (float64 reals (q - zp) * scale), evaluated
    the way the quantized PyTorch model does: on the float32 dequantized value (the
    float64 product of an int8 difference and a float32 scale is exact, so rounding
    it to float32 gives PyTorch's float32 product), in float32."""

    def table_fn(real: np.ndarray) -> np.ndarray:
        x = torch.from_numpy(real.astype(np.float32))
        return fn(x).double().numpy()

    return table_fn


def analyze(node, cc) -> LutPlan:
    shape = static_shape(node)
    if len(shape) > cc.limits["max_rank"]:
        raise Unsupported(f"rank {len(shape)} above {cc.limits['max_rank']}")
    in_q = input_qparams(node.args[0], node, cc)
    out = output_spec(node, cc, fuse_activation=False)
    if not out.qparams.full_range:
        raise Unsupported(f"{op_name(node)} to a narrow int8 range [{out.qparams.qmin}, {out.qparams.qmax}]")

    def tabulate(fn):
        return lut_from_function(_on_dequantized(fn), in_q.scale, in_q.zero_point, out.qparams.scale,
                                 out.qparams.zero_point)

    if op_name(node) == "aten.prelu.default":
        slopes = _prelu_slopes(node, cc)
        if slopes.numel() > 1:
            tables = [tabulate(lambda x, w=slopes[c:c + 1]: torch.ops.aten.prelu.default(x, w))
                      for c in range(slopes.numel())]
            return LutPlan(in_q, out, np.stack(tables), per_channel=True)
    return LutPlan(in_q, out, tabulate(FUNCTIONS[op_name(node)](node, cc)))


def lower(node, ctx):
    p = analyze(node, ctx)
    x = ctx.input(node.args[0])
    if x.is_constant:
        raise Unsupported(f"{op_name(node)} of a constant")
    if p.per_channel:
        # The tables follow PyTorch's channel dimension (1) to wherever the
        # value's layout stores it.
        dims = x.physical
        axis = layout_perm(x.layout, x.rank).index(1)
        y = ctx.new_value(x.shape, p.out.qparams, x.layout, dims=dims)
        ctx.emit("CHANNEL_LUT", [ctx.tensor(x, dims), ctx.constant(p.table)], [y.tensor], axis=axis)
    else:
        y = ctx.new_value(x.shape, p.out.qparams, x.layout, dims=x.dims)
        ctx.emit("LUT", [ctx.tensor(x, x.dims), ctx.constant(p.table)], [y.tensor])
    ctx.finish(node, p.out, y)


for _name in FUNCTIONS:
    register(_name, analyze=analyze, lower=lower, preserve=_name in PRESERVE)


# This module's rows of docs/lowering.md's op table (scripts/gen_lowering_table.py writes the table from them).
OP_TABLE_ROWS = (
    OpTableRow(80,
               pytorch=("sigmoid, tanh, silu, gelu, hardsigmoid, leaky_relu, elu, selu, celu, mish, softplus, "
                        "log_sigmoid, prelu with one slope"),
               xts3=("LUT (table from the float function; scalar parameters such as negative_slope, alpha, "
                     "beta, threshold are the node's own, prelu's slope its constant weight)")),
    OpTableRow(90,
               pytorch="prelu with a slope per channel",
               xts3=("CHANNEL_LUT: one table per channel, `axis` = where the value's layout stores PyTorch's "
                     "dimension 1 (last for NHWC, 1 for [N, C, ...])")),
)
