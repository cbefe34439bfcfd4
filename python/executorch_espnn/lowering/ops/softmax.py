"""Softmax over the last physical dim -> SOFTMAX (TFLite int8 softmax);
attention's masked softmax -> MASKED_SOFTMAX.

``_safe_softmax`` (kept whole: the Edge dialect would expand it into
float-only ops) is SOFTMAX when it reads an int8 value directly (its input is
finite, so no row is -inf everywhere and it equals softmax), and
MASKED_SOFTMAX when it reads ``masked_fill(x, constant mask, -inf)``, the
pair EspNNQuantizer writes for masked attention (quantizer/attention.py):
the mask becomes the op's constant 0/1 input, flattened to [rows, width].

The output quantization is fixed by the kernel (1/256, -128); a REQUANTIZE
follows when the graph's quantize uses other parameters. Softmax over dim 1
of a rank-3/4 tensor runs on the channels-last value, where it is the last
dim; other dims must be the last one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...quant_params import softmax_params
from ..graph import Unsupported, arg, op_name, static_shape
from ..op_table import OpTableRow
from ..quant import OutputSpec, QParams, input_qparams, output_spec
from ..registry import register
from ..values import CHANNELS_LAST, CONTIG

SOFTMAX_OUT = QParams(1.0 / 256.0, -128)


SAFE_SOFTMAX = "aten._safe_softmax.default"
MASKED_FILL = "aten.masked_fill.Scalar"


@dataclass
class SoftmaxPlan:
    in_q: QParams
    out: OutputSpec
    params: dict
    layout: str
    shape: tuple[int, ...]
    allow: np.ndarray | None = None  # MASKED_SOFTMAX: int8 [rows, width], 1 = attended
    fill: object = None  # the masked_fill node it absorbs


def _masked_fill(node):
    """The masked_fill(x, mask, -inf) a _safe_softmax reads, else None."""
    src = node.args[0]
    if op_name(node) == SAFE_SOFTMAX and op_name(src) == MASKED_FILL:
        return src
    return None


def analyze(node, cc) -> SoftmaxPlan:
    fill = _masked_fill(node)
    if fill is not None:
        return _analyze_masked(node, fill, cc)
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


def _analyze_masked(node, fill, cc) -> SoftmaxPlan:
    x, mask_node, value = fill.args[:3]
    if value != float("-inf") or len(fill.users) != 1:
        raise Unsupported(f"{fill.name}: masked_fill with {value} (MASKED_SOFTMAX needs -inf) or another reader")
    dim = arg(node, 1, "dim", -1)
    shape = static_shape(x)
    if dim % len(shape) != len(shape) - 1:
        raise Unsupported(f"masked softmax over dim {dim} (needs the last dim)")
    if shape[-1] > cc.limits["max_softmax_width"]:
        raise Unsupported(f"softmax row of {shape[-1]} > {cc.limits['max_softmax_width']}")
    if not cc.constants.is_constant(mask_node):
        raise Unsupported(f"{fill.name}: the mask is not a constant")
    masked = cc.constants.tensor(mask_node)
    if masked is None or masked.dtype != torch.bool:
        raise Unsupported(f"{fill.name}: the mask is not a boolean constant")
    masked = masked.detach()
    while masked.dim() > 2 and masked.shape[0] == 1:
        masked = masked[0]
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    if masked.dim() != 2 or masked.shape[1] != shape[-1] or rows % masked.shape[0]:
        raise Unsupported(f"{fill.name}: a mask of shape {tuple(masked.shape)} for scores {shape} (needs "
                          "[rows, width] repeating over the leading dims)")
    # Row r of the scores must meet mask row r % mask rows: true when the mask's rows are the scores'
    # second-to-last dim (the mask broadcasts over batch and heads).
    if len(shape) >= 2 and masked.shape[0] != shape[-2] and masked.shape[0] != 1:
        raise Unsupported(f"{fill.name}: mask rows {masked.shape[0]} are not the scores' {shape[-2]} rows")
    in_q = input_qparams(x, fill, cc)
    out = output_spec(node, cc, fuse_activation=False)
    if not out.qparams.full_range:
        raise Unsupported("softmax to a narrow int8 range")
    allow = (~masked).numpy().astype(np.int8)
    return SoftmaxPlan(in_q, out, softmax_params(in_q.scale), CONTIG, shape, allow, fill)


def lower(node, ctx):
    p = analyze(node, ctx)
    src = p.fill.args[0] if p.fill is not None else node.args[0]
    x = ctx.input(src, layout=p.layout)
    y = ctx.new_value(p.shape, SOFTMAX_OUT, x.layout)
    if p.allow is None:
        ctx.emit("SOFTMAX", [ctx.tensor(x)], [y.tensor], **p.params)
    else:
        ctx.emit("MASKED_SOFTMAX", [ctx.tensor(x), ctx.constant(p.allow)], [y.tensor], **p.params)
        ctx.done.add(p.fill)
    ctx.finish(node, p.out, ctx.requantize(y, p.out.qparams))


def analyze_masked_fill(node, cc):
    """masked_fill(x, mask, -inf) is lowered with the _safe_softmax that reads it."""
    user = next(iter(node.users)) if len(node.users) == 1 else None
    if user is None or op_name(user) != SAFE_SOFTMAX or _masked_fill(user) is not node:
        raise Unsupported(f"{node.name}: a masked_fill that is not attention's mask before _safe_softmax")
    return analyze(user, cc)


def lower_masked_fill(node, ctx):
    """Nothing of its own: the _safe_softmax lowering emits MASKED_SOFTMAX and marks this node done."""


register("aten._softmax.default", "aten.softmax.int", analyze=analyze, lower=lower)
register(SAFE_SOFTMAX, analyze=analyze, lower=lower, preserve=True)
register(MASKED_FILL, analyze=analyze_masked_fill, lower=lower_masked_fill, compute=False, preserve=True)


# This module's rows of docs/lowering.md's op table (scripts/gen_lowering_table.py writes the table from them).
OP_TABLE_ROWS = (
    OpTableRow(130,
               pytorch="softmax (last dim, <= 511)",
               xts3="SOFTMAX"),
)
