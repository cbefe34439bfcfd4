"""aten.slice (slice_copy in the Edge dialect), any dim and positive step -> SLICE;
aten.select (select_copy: one index, the dim dropped, as qkv[0] of attention) -> SLICE
of one element along the dim, read as the shape without it.

PyTorch's start/end are normalized as PyTorch does (None, negative, past the
end); the slice runs along the physical axis of the value's layout and the
output keeps that layout. A slice that keeps the whole tensor writes no op.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..graph import Unsupported, arg, static_shape
from ..op_table import OpTableRow
from ..quant import OutputSpec, QParams, input_qparams, output_spec
from ..registry import register
from ..values import CONTIG, Value
from .movement import per_axis, physical_axis


@dataclass
class SlicePlan:
    in_q: QParams
    out: OutputSpec
    dim: int
    start: int
    step: int
    out_shape: tuple[int, ...]


def _normalize(index, size: int, default: int) -> int:
    if index is None:
        return default
    if index < 0:
        index += size
    return min(max(index, 0), size)


def analyze(node, cc) -> SlicePlan:
    x = node.args[0]
    in_shape, out_shape = static_shape(x), static_shape(node)
    rank = len(in_shape)
    if rank == 0 or rank > cc.limits["max_rank"]:
        raise Unsupported(f"slice of a rank-{rank} tensor")
    dim, start, end, step = arg(node, 1, "dim", 0), arg(node, 2, "start"), arg(node, 3, "end"), arg(node, 4, "step", 1)
    if not all(v is None or isinstance(v, int) for v in (dim, start, end, step)):
        raise Unsupported(f"slice bounds {start}:{end}:{step} on dim {dim} are not static integers")
    dim %= rank
    if step < 1:
        raise Unsupported(f"slice step {step}")
    size = in_shape[dim]
    start, end = _normalize(start, size, 0), _normalize(end, size, size)
    count = max(0, -(-(end - start) // step))
    if count == 0 or 0 in out_shape:
        raise Unsupported("empty slice (no elements)")
    if out_shape[dim] != count:
        raise Unsupported(f"output dim {out_shape[dim]} != {count} elements of {start}:{end}:{step}")
    in_q = input_qparams(x, node, cc)
    out = output_spec(node, cc, fuse_activation=False)
    return SlicePlan(in_q, out, dim, start, step, out_shape)


def lower(node, ctx):
    p = analyze(node, ctx)
    v = ctx.input(node.args[0])
    if v.is_constant:
        raise Unsupported("slice of a constant")
    if p.out_shape == v.shape:  # the whole tensor: same bytes
        ctx.finish(node, p.out, ctx.requantize(v, p.out.qparams))
        return
    axis = physical_axis(v, p.dim)
    out = ctx.new_value(p.out_shape, v.qparams, v.layout)
    params = dict(zip([f"begin{i}" for i in range(5)], per_axis({axis: p.start}, v.rank, 0)))
    params.update(zip([f"step{i}" for i in range(5)], per_axis({axis: p.step}, v.rank, 1)))
    ctx.emit("SLICE", [ctx.tensor(v)], [out.tensor], **params)
    ctx.finish(node, p.out, ctx.requantize(out, p.out.qparams))


def analyze_select(node, cc) -> SlicePlan:
    x = node.args[0]
    in_shape, out_shape = static_shape(x), static_shape(node)
    rank = len(in_shape)
    if rank < 2 or rank > cc.limits["max_rank"]:
        raise Unsupported(f"select from a rank-{rank} tensor")
    dim, index = arg(node, 1, "dim"), arg(node, 2, "index")
    if not (isinstance(dim, int) and isinstance(index, int)):
        raise Unsupported(f"select index {index} on dim {dim} is not a static integer")
    dim %= rank
    size = in_shape[dim]
    if not -size <= index < size:
        raise Unsupported(f"select index {index} out of range for size {size}")
    in_q = input_qparams(x, node, cc)
    out = output_spec(node, cc, fuse_activation=False)
    return SlicePlan(in_q, out, dim, index % size, 1, out_shape)


def lower_select(node, ctx):
    p = analyze_select(node, ctx)
    v = ctx.input(node.args[0])
    if v.is_constant:
        raise Unsupported("select from a constant")
    keep_shape = v.shape[:p.dim] + (1,) + v.shape[p.dim + 1:]
    axis = physical_axis(v, p.dim)
    kept = ctx.new_value(keep_shape, v.qparams, v.layout)
    params = dict(zip([f"begin{i}" for i in range(5)], per_axis({axis: p.start}, v.rank, 0)))
    params.update(zip([f"step{i}" for i in range(5)], per_axis({axis: 1}, v.rank, 1)))
    ctx.emit("SLICE", [ctx.tensor(v)], [kept.tensor], **params)
    contig = ctx.as_layout(kept, CONTIG)  # dropping the size-1 dim is then a relabel
    out = Value(contig.tensor, p.out_shape, "INT8", contig.qparams, CONTIG, contig.dims)
    ctx.finish(node, p.out, ctx.requantize(out, p.out.qparams))


register("aten.select.int", "aten.select_copy.int", analyze=analyze_select, lower=lower_select, compute=False)
register("aten.slice.Tensor", "aten.slice_copy.Tensor", analyze=analyze, lower=lower, compute=False)


# This module's rows of docs/lowering.md's op table (scripts/gen_lowering_table.py writes the table from them).
OP_TABLE_ROWS = (
    OpTableRow(190,
               pytorch="slice, select (`qkv[0]`), constant pad, cat, split/chunk",
               xts3="SLICE, PAD, CONCAT, SPLIT (dims mapped through the layout)",
               also_in=("pad", "concat", "split")),
)
