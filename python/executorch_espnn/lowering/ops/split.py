"""split / split_with_sizes / chunk (split_with_sizes_copy in the Edge dialect) -> SPLIT.

The parts are read through getitem nodes; this lowering registers each
part's Value on its getitem's quantize node and marks the getitem lowered.
The cut runs along the physical axis of the value's layout (splitting the
channels of an NHWC value is one SPLIT, no TRANSPOSE). Parts nobody reads
still get an output tensor (SPLIT writes every part).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..graph import Unsupported, arg, op_name, static_shape
from ..quant import OutputSpec, QParams, input_qparams, output_spec
from ..registry import register
from .movement import physical_axis

SPLIT_WITH_SIZES = ("aten.split_with_sizes_copy.default", "aten.split_with_sizes.default")
SPLIT_BY_SIZE = ("aten.split_copy.Tensor", "aten.split.Tensor")
CHUNK = ("aten.chunk.default",)


@dataclass
class SplitPlan:
    in_q: QParams
    dim: int
    sizes: list[int]
    parts: dict[int, tuple[object, OutputSpec]]  # part index -> (getitem node, its output)


def _sizes(node, size: int) -> list[int]:
    """Part sizes along the dim, as PyTorch computes them."""
    name = op_name(node)
    if name in SPLIT_WITH_SIZES:
        return [int(s) for s in node.args[1]]
    if name in CHUNK:
        chunks = node.args[1]
        if not isinstance(chunks, int) or chunks < 1:
            raise Unsupported(f"chunk into {chunks}")
        each = math.ceil(size / chunks)
    else:
        each = node.args[1]
        if not isinstance(each, int):
            raise Unsupported(f"split into sizes {each}")
    if each < 1:
        raise Unsupported(f"split size {each}")
    n = max(1, math.ceil(size / each))
    return [each] * (n - 1) + [size - each * (n - 1)]


def analyze(node, cc) -> SplitPlan:
    x = node.args[0]
    in_shape = static_shape(x)
    rank = len(in_shape)
    if rank == 0 or rank > cc.limits["max_rank"]:
        raise Unsupported(f"split of a rank-{rank} tensor")
    dim = arg(node, 2, "dim", 0) % rank
    sizes = _sizes(node, in_shape[dim])
    if sum(sizes) != in_shape[dim] or any(s < 1 for s in sizes):
        raise Unsupported(f"part sizes {sizes} along a dim of {in_shape[dim]} (empty parts)")
    if len(sizes) > cc.limits["max_op_outputs"]:
        raise Unsupported(f"{len(sizes)} parts; SPLIT writes at most {cc.limits['max_op_outputs']}")
    in_q = input_qparams(x, node, cc)
    parts = {}
    for user in node.users:
        if op_name(user) != "operator.getitem" or not isinstance(user.args[1], int):
            raise Unsupported(f"{user.name} reads the split result directly, not through getitem")
        index = user.args[1] % len(sizes)
        if index in parts:
            raise Unsupported(f"part {index} is read by two getitem nodes")
        parts[index] = (user, output_spec(user, cc, fuse_activation=False))
    return SplitPlan(in_q, dim, sizes, parts)


def lower(node, ctx):
    p = analyze(node, ctx)
    v = ctx.input(node.args[0])
    if v.is_constant:
        raise Unsupported("split of a constant")
    values = []
    for s in p.sizes:
        shape = list(v.shape)
        shape[p.dim] = s
        values.append(ctx.new_value(shape, v.qparams, v.layout))
    ctx.emit("SPLIT", [ctx.tensor(v)], [val.tensor for val in values], axis=physical_axis(v, p.dim))
    for index, (getitem, spec) in sorted(p.parts.items()):
        if getitem not in ctx.subgraph:
            raise Unsupported(f"{getitem.name} (part {index}) is outside the partition")
        ctx.finish(getitem, spec, ctx.requantize(values[index], spec.qparams))
        ctx.done.add(getitem)


register(*SPLIT_WITH_SIZES, *SPLIT_BY_SIZE, *CHUNK, analyze=analyze, lower=lower, compute=False)
