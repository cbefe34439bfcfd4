"""Shape ops: view/reshape/flatten/squeeze/unsqueeze/clone and permute/transpose.

A reshape is a new logical shape over the same bytes in PyTorch order: the
value is converted to CONTIG (free when the channels-last order already is
that order, e.g. [N,C,1,1] -> [N,C]) and no op is written here; the consumer
asks for the dims it needs and gets one RESHAPE. A permute is a TRANSPOSE
from the value's physical order to the permuted PyTorch order, or nothing
when the bytes already are the result in CONTIG or SWAPPED_LAST2 order (a
relabel: k.transpose(-2, -1) costs nothing, BATCH_MATMUL reads it in place).
An identity copy between two shape ops (the Edge dialect's _clone_dim_order
before the view of a transposed reshape) writes nothing either.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from torch.fx import Node

from ..graph import Unsupported, arg, op_name, static_shape
from ..op_table import OpTableRow
from ..quant import OutputSpec, QParams, input_qparams, is_dq, output_spec
from ..registry import register
from ..values import CONTIG, SWAPPED_LAST2, Value, layout_perm

RESHAPE_OPS = (
    "aten.view_copy.default", "aten.view.default", "aten.reshape.default", "aten._unsafe_view.default",
    "aten.flatten.using_ints", "aten.squeeze_copy.dims", "aten.squeeze_copy.dim", "aten.squeeze_copy.default",
    "aten.squeeze.dims", "aten.squeeze.dim", "aten.squeeze.default", "aten.unsqueeze_copy.default",
    "aten.unsqueeze.default", "aten.clone.default", "dim_order_ops._clone_dim_order.default",
    "aten.alias_copy.default", "aten.alias.default", "aten.dropout.default",
)
PERMUTE_OPS = ("aten.permute_copy.default", "aten.permute.default", "aten.transpose_copy.int",
               "aten.transpose.int", "aten.t_copy.default", "aten.t.default")


@dataclass
class ShapePlan:
    in_q: QParams
    out: OutputSpec
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    perm: tuple[int, ...] | None = None


def _permutation(node, rank: int) -> tuple[int, ...]:
    name = op_name(node)
    if name.startswith("aten.permute"):
        perm = [d % rank for d in node.args[1]]
    elif name.startswith("aten.t"):
        perm = [1, 0] if rank == 2 else list(range(rank))
        if name.startswith("aten.transpose"):
            a, b = node.args[1] % rank, node.args[2] % rank
            perm = list(range(rank))
            perm[a], perm[b] = perm[b], perm[a]
    else:
        raise Unsupported(f"{name} is not a permutation")
    if sorted(perm) != list(range(rank)):
        raise Unsupported(f"{perm} is not a permutation")
    return tuple(perm)


def _is_passthrough(node) -> bool:
    """An identity copy (clone, alias, eval dropout: same shape) whose one user is
    another shape op, with no quantize between them: how the Edge dialect spells
    reshape(x.transpose(1, 2)) (a _clone_dim_order, then view_copy). It writes no
    op; the shape op after it reads its input (see _source)."""
    if not isinstance(node, Node) or op_name(node) not in RESHAPE_OPS:
        return False
    if static_shape(node) != static_shape(node.args[0]):
        return False
    users = list(node.users)
    return len(users) == 1 and op_name(users[0]) in RESHAPE_OPS + PERMUTE_OPS and is_dq(node.args[0])


def _source(node):
    """The int8 input of a shape op, looking through a pass-through copy."""
    x = node.args[0]
    return x.args[0] if _is_passthrough(x) else x


def _common(node, cc) -> ShapePlan:
    x = node.args[0]
    in_shape, out_shape = static_shape(x), static_shape(node)
    if max(len(in_shape), len(out_shape)) > cc.limits["max_rank"]:
        raise Unsupported(f"rank above {cc.limits['max_rank']}")
    if _is_passthrough(x) and not cc.in_partition(x):
        raise Unsupported(f"its input copy {x.name} is not delegated")
    in_q = input_qparams(_source(node), node, cc)
    out = output_spec(node, cc, fuse_activation=False)
    return ShapePlan(in_q, out, in_shape, out_shape)


def analyze_reshape(node, cc) -> ShapePlan | None:
    name = op_name(node)
    if "clone" in name:
        if node.kwargs.get("dim_order") not in (None, list(range(len(static_shape(node))))):
            raise Unsupported(f"clone to dim order {node.kwargs.get('dim_order')}")
        if node.kwargs.get("memory_format") not in (None,) and "contiguous" not in str(node.kwargs["memory_format"]) \
                and "preserve" not in str(node.kwargs["memory_format"]):
            raise Unsupported(f"clone to {node.kwargs['memory_format']}")
    if name == "aten.dropout.default" and arg(node, 2, "train", False):
        raise Unsupported("dropout in training mode")
    if _is_passthrough(node):
        input_qparams(node.args[0], node, cc)
        return None
    return _common(node, cc)


def lower_reshape(node, ctx):
    p = analyze_reshape(node, ctx)
    if p is None:  # a pass-through copy: its consumer reads the same bytes
        ctx.set_value(node, ctx.input(node.args[0]))
        return
    v = ctx.input(node.args[0])
    if p.out_shape != p.in_shape:  # identities (clone, eval dropout) keep the layout: no transpose pair
        v = ctx.as_layout(v, CONTIG)
    if v.is_constant:
        raise Unsupported("reshape of a constant")
    out = replace(v, shape=p.out_shape)  # same bytes; consumers reshape to the dims they need
    ctx.finish(node, p.out, ctx.requantize(out, p.out.qparams))


def analyze_permute(node, cc) -> ShapePlan:
    p = _common(node, cc)
    p.perm = _permutation(node, len(p.in_shape))
    return p


def _relabel_layout(v: Value, out_shape, q) -> str | None:
    """A layout in which the permuted value has exactly `v`'s bytes, else None.
    CONTIG first; then SWAPPED_LAST2 (rank >= 3), which turns k.transpose(-2, -1)
    into a label: a BATCH_MATMUL reads it as its [N, K] rhs, any other consumer
    gets the TRANSPOSE from LowerContext.as_layout when it asks for CONTIG."""
    candidates = [CONTIG] + ([SWAPPED_LAST2] if len(out_shape) >= 3 else [])
    for layout in candidates:
        # physical output axis i holds logical output axis layout_perm[i], read from input axis q[...]
        order = [q[l] for l in layout_perm(layout, len(out_shape))]
        moved = [a for a in order if v.physical[a] != 1]
        if moved == sorted(moved):
            return layout
    return None


def lower_permute(node, ctx):
    p = analyze_permute(node, ctx)
    v = ctx.input(node.args[0])
    if v.is_constant:
        raise Unsupported("permute of a constant")
    rank = len(p.in_shape)
    phys_of = {logical: i for i, logical in enumerate(layout_perm(v.layout, rank))}
    q = [phys_of[l] for l in p.perm]  # output (CONTIG) axis d reads physical input axis q[d]
    relabel = _relabel_layout(v, p.out_shape, q)
    if relabel is not None:  # the bytes already are the output in some layout: no op
        out = Value(v.tensor, p.out_shape, "INT8", v.qparams, relabel, v.dims)
    else:
        out = ctx.new_value(p.out_shape, v.qparams, CONTIG)
        q5 = q + [0] * (5 - rank)
        ctx.emit("TRANSPOSE", [ctx.tensor(v)], [out.tensor], **{f"perm{i}": a for i, a in enumerate(q5)})
    ctx.finish(node, p.out, ctx.requantize(out, p.out.qparams))


register(*RESHAPE_OPS, analyze=analyze_reshape, lower=lower_reshape, compute=False)
register(*PERMUTE_OPS, analyze=analyze_permute, lower=lower_permute, compute=False)


# This module's rows of docs/lowering.md's op table (scripts/gen_lowering_table.py writes the table from them).
OP_TABLE_ROWS = (
    OpTableRow(180,
               pytorch="view/reshape/flatten, permute/transpose, clone",
               xts3=("RESHAPE, TRANSPOSE (a permute whose bytes already are the result in CONTIG or "
                     "SWAPPED_LAST2 writes nothing; a clone between two shape ops, as the Edge dialect spells "
                     "`reshape(x.transpose(1, 2))`, passes through)")),
)
