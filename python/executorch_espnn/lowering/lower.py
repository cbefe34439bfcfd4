"""Subgraph -> XTS3 bytes, validated by the native parser."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .. import _native
from ..compile_spec import CompileOptions
from ..memory import memory_order
from ..memory.schedule_search import Schedule, choose_schedule
from .context import LowerContext
from .graph import Subgraph, Unsupported, op_name
from .registry import lookup


class LoweringError(RuntimeError):
    """A subgraph could not be lowered; `node` names the fx node at fault (or None)."""

    def __init__(self, message: str, node: str | None = None):
        super().__init__(message)
        self.node = node


class ParserRejection(LoweringError):
    """The native XTS3 parser refused the serialized bytes (message = the parser's)."""


class TooLarge(LoweringError):
    """The program exceeds a runtime limit (tensors, ops, graph inputs/outputs)."""


@dataclass
class LoweredProgram:
    blob: bytes
    op_nodes: list[str]  # fx node name that produced each XTS3 op
    num_tensors: int
    num_ops: int
    num_inputs: int
    num_outputs: int
    schedule: Schedule | None = None  # layer-by-layer or fused, as chosen (memory.schedule_search)


def build(sub: Subgraph, options: CompileOptions | None = None) -> LowerContext:
    """Runs every node's lowering in topological order; returns the filled context."""
    ctx = LowerContext(sub, options)
    node = None
    try:
        for node in sub.inputs:
            ctx.current = node
            ctx.add_input(node)
        for node in sub.nodes:
            if node in ctx.done:
                continue
            entry = lookup(node)
            if entry is None:
                raise Unsupported(f"no ESP-NN lowering for {op_name(node)}")
            ctx.current = node
            entry.lower(node, ctx)
            ctx.done.add(node)
        node = None
        ctx.writer.set_inputs([ctx.values[n].tensor for n in sub.inputs])
        ctx.writer.set_outputs([ctx.output_tensor(n) for n in sub.outputs])
        # Float images are read where the caller holds them (EXTERNAL), not
        # copied into the arena: on a 224x224 RGB input that is 602 KB.
        ctx.writer.mark_external_inputs()
        # Float results are written where the caller wants them (EXTERNAL):
        # LR-ASPP's 224x224x21 logits are 4.2 MB of float32.
        ctx.writer.mark_external_outputs()
    except (Unsupported, ValueError) as e:  # ValueError: the writer refused a value
        where = node if node is not None else ctx.current
        name = where.name if where is not None else None
        what = f"{name} ({op_name(where) if where.op == 'call_function' else where.op}): " if where is not None else ""
        raise LoweringError(f"{what}{e}", name) from None
    return ctx


def lower_subgraph(sub: Subgraph, options: CompileOptions | None = None, *, limits: dict | None = None
                   ) -> LoweredProgram:
    """Lowers a subgraph to XTS3 bytes and checks them with the native parser.

    Raises LoweringError (a node cannot be lowered), TooLarge (a runtime
    limit is exceeded) or ParserRejection (the parser refused the bytes).
    """
    ctx = build(sub, options)
    # A float NCHW input quantized and then transposed for the convs is
    # quantized straight into NHWC: one int8 copy in the arena, not two.
    folded = ctx.writer.fold_quantize_transposes()
    # Its mirror at the output: an NHWC int8 result transposed back to NCHW
    # for the float output is dequantized straight into NCHW.
    folded = _renumbered_union(folded, ctx.writer.fold_dequantize_transposes())
    ctx.op_nodes = [name for i, name in enumerate(ctx.op_nodes) if i not in folded]
    ctx.num_tensors -= len(folded)  # each fold drops the int8 NCHW tensor too
    lim = limits or ctx.limits
    counts = {"max_tensors": ctx.num_tensors, "max_ops": len(ctx.op_nodes),
              "max_graph_inputs": len(sub.inputs), "max_graph_outputs": len(sub.outputs)}
    over = {k: v for k, v in counts.items() if v > lim[k]}
    if over:
        raise TooLarge("exceeds the runtime limits: " + ", ".join(f"{v} > {k} {lim[k]}" for k, v in over.items()))
    # Same graph, an op order with a smaller arena when there is one
    # (parallel branches); op_nodes follows the ops.
    order = memory_order(ctx.writer.arena_graph())
    ctx.writer.reorder_ops(order)
    ctx.op_nodes = [ctx.op_nodes[i] for i in order]
    # Layer by layer or fused band by band (compile specs "schedule" and
    # "arena_budget"). A budget no schedule meets raises ScheduleError, which
    # is neither a LoweringError nor a ValueError and passes through: the
    # partitioner must not quietly move the ops to the CPU instead of telling
    # the user the smallest arena reachable.
    try:
        schedule = choose_schedule(ctx.writer.arena_graph(), budget=ctx.options.arena_budget,
                                   mode=ctx.options.schedule)
    except ValueError:
        # The search parses the layer-by-layer program for its row geometry:
        # a program the parser refuses is a ParserRejection naming the node.
        validate(ctx.writer.to_bytes(), ctx.op_nodes)
        raise
    try:
        blob = ctx.writer.to_bytes(ctx.writer.plan(schedule.regions))
    except ValueError as e:
        raise LoweringError(f"serialization failed: {e}") from None
    validate(blob, _with_band_loops(ctx.op_nodes, schedule.regions))
    return LoweredProgram(blob, list(ctx.op_nodes), ctx.num_tensors, len(ctx.op_nodes), len(sub.inputs),
                          len(sub.outputs), schedule)


def _renumbered_union(first: list[int], second: list[int]) -> list[int]:
    """Original op indices removed by two folds run in turn: ``second``
    indexes the ops left after ``first`` removed its own."""
    kept = [i for i in range(max(first + second, default=-1) + len(first) + 1) if i not in set(first)]
    return sorted(set(first) | {kept[i] for i in second})


def _with_band_loops(op_nodes: list[str], regions) -> list[str]:
    """The fx node of each op of the blob, whose fused regions each start
    with a BAND_LOOP op: named after the region's first op's node."""
    starts = {r.first_op for r in regions}
    out = []
    for i, name in enumerate(op_nodes):
        if i in starts:
            out.append(name)
        out.append(name)
    return out


_OP_RE = re.compile(r"\bop (\d+)\b")


def validate(blob: bytes, op_nodes: list[str]) -> None:
    """The native parser's verdict; a rejection names the fx node of the failing op."""
    try:
        _native.Program(blob)
    except ValueError as e:
        msg = str(e)
        m = _OP_RE.search(msg)
        node = op_nodes[int(m.group(1))] if m and int(m.group(1)) < len(op_nodes) else None
        raise ParserRejection(f"the native parser rejected the program: {msg}", node or None) from None
