"""upsample_nearest2d / _upsample_nearest_exact2d / upsample_bilinear2d -> RESIZE_NEAREST / RESIZE_BILINEAR.

The runtime executes coordinate tables built here (resize_tables.py, PyTorch's
index mapping: explicit scale factors, align_corners, nearest-exact), so every
PyTorch mode is one device code path. Both ops run on NHWC and keep the
input's quantization (a REQUANTIZE follows when the graph's output differs;
EspNNQuantizer shares it). Bilinear weights are Q10 and rounded half away
from zero, PyTorch's are float: results may differ by 1 LSB.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import Unsupported, arg, check_kernel_dims, op_name, static_shape
from ..op_table import OpTableRow
from ..quant import OutputSpec, QParams, input_qparams, output_spec
from ..registry import register
from ..values import CHANNELS_LAST
from .resize_tables import aot_bilinear_table, aot_nearest_index_table

NEAREST = ("aten.upsample_nearest2d.vec", "aten.upsample_nearest2d.default")
NEAREST_EXACT = ("aten._upsample_nearest_exact2d.vec", "aten._upsample_nearest_exact2d.default")
BILINEAR = ("aten.upsample_bilinear2d.vec", "aten.upsample_bilinear2d.default")


@dataclass
class ResizePlan:
    kind: str
    in_q: QParams
    out: OutputSpec
    y_table: np.ndarray
    x_table: np.ndarray
    out_shape: tuple[int, ...]


def _scale_factors(node, name: str) -> list:
    """PyTorch's (scale_h, scale_w): given scale factors change the index mapping
    (1/scale instead of in/out) unless recompute_scale_factor dropped them."""
    bilinear = name in BILINEAR
    if name.endswith(".vec"):
        scales = arg(node, 3 if bilinear else 2, "scale_factors")
        if scales is None:
            return [None, None]
        scales = list(scales)
        return scales * 2 if len(scales) == 1 else scales
    first = 3 if bilinear else 2
    return [arg(node, first, "scales_h"), arg(node, first + 1, "scales_w")]


def analyze(node, cc) -> ResizePlan:
    name = op_name(node)
    x = node.args[0]
    in_shape, out_shape = static_shape(x), static_shape(node)
    if len(in_shape) != 4:
        raise Unsupported(f"resize of a rank-{len(in_shape)} tensor (needs [N,C,H,W])")
    scales = _scale_factors(node, name)
    if not all(s is None or (isinstance(s, (int, float)) and s > 0) for s in scales):
        raise Unsupported(f"scale factors {scales}")
    (ih, iw), (oh, ow) = in_shape[2:], out_shape[2:]
    check_kernel_dims({"input height": ih, "input width": iw, "output height": oh, "output width": ow,
                       "channels": in_shape[1]}, cc.limits["max_kernel_dim"])
    if name in BILINEAR:
        align = bool(arg(node, 2, "align_corners", False))
        kind = "RESIZE_BILINEAR"
        ytab = aot_bilinear_table(ih, oh, align, scales[0])
        xtab = aot_bilinear_table(iw, ow, align, scales[1])
    else:
        mode = "nearest-exact" if name in NEAREST_EXACT else "nearest"
        kind = "RESIZE_NEAREST"
        ytab = aot_nearest_index_table(ih, oh, mode, scales[0])
        xtab = aot_nearest_index_table(iw, ow, mode, scales[1])
    in_q = input_qparams(x, node, cc)
    out = output_spec(node, cc, fuse_activation=False)
    return ResizePlan(kind, in_q, out, ytab, xtab, out_shape)


def lower(node, ctx):
    p = analyze(node, ctx)
    x = ctx.input(node.args[0], layout=CHANNELS_LAST)
    if x.is_constant:
        raise Unsupported("resize of a constant")
    y = ctx.new_value(p.out_shape, p.in_q, CHANNELS_LAST)
    ctx.emit(p.kind, [ctx.tensor(x), ctx.constant(p.y_table), ctx.constant(p.x_table)], [y.tensor])
    ctx.finish(node, p.out, ctx.requantize(y, p.out.qparams))


register(*NEAREST, *NEAREST_EXACT, analyze=analyze, lower=lower, compute=False)
register(*BILINEAR, analyze=analyze, lower=lower)


# This module's rows of docs/lowering.md's op table (scripts/gen_lowering_table.py writes the table from them).
OP_TABLE_ROWS = (
    OpTableRow(170,
               pytorch="upsample nearest / bilinear",
               xts3="RESIZE_NEAREST, RESIZE_BILINEAR (tables in `ops/resize_tables.py`)"),
)
