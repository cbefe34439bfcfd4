"""Quantize/dequantize pairs inside chains of shape ops that ExecuTorch's
decomposition wrote between one dequantize and one quantize.

The quantizer sees ``q, k, v = qkv`` (unbind), ``x.unflatten(...)`` or a
squeeze as one op with one int8 input and output; ExecuTorch's Edge
decomposition then spells it as two or more shape ops (unbind: slice_copy +
squeeze_copy per part), and only the chain's ends carry a dequantize and a
quantize. Every op of ESP-NN's lowering reads an int8 input (a dequantize)
and writes an int8 output (a quantize), so such a chain stayed on the CPU —
in float, with quantize/dequantize nodes that ExecuTorch's portable
runtime cannot even run.

A shape op moves int8 values without changing them, so inserting
``quantize -> dequantize`` with the chain's own parameters after each inner
op is exact (the values already lie on that grid). The pass does that when
the chain's start (a dequantize) and its end (the quantize) have the same
parameters, and only then.
"""

from __future__ import annotations

from executorch.exir.pass_base import PassResult
import torch
from torch.fx import GraphModule, Node

from ..lowering.graph import op_name
from ..lowering.quant import dq_params, is_dq, is_q, q_params

# Ops that only move or view values (Edge dialect names and their ATen forms).
SHAPE_OPS = frozenset({
    "aten.view_copy.default", "aten.view.default", "aten.reshape.default", "aten._unsafe_view.default",
    "aten.unsqueeze_copy.default", "aten.unsqueeze.default",
    "aten.squeeze_copy.dims", "aten.squeeze_copy.dim", "aten.squeeze_copy.default",
    "aten.squeeze.dims", "aten.squeeze.dim", "aten.squeeze.default",
    "aten.permute_copy.default", "aten.permute.default", "aten.transpose_copy.int", "aten.transpose.int",
    "aten.slice_copy.Tensor", "aten.slice.Tensor", "aten.select_copy.int", "aten.select.int",
    "dim_order_ops._clone_dim_order.default", "aten.clone.default", "aten.alias_copy.default",
})


def _is_shape_op(node) -> bool:
    return isinstance(node, Node) and node.op == "call_function" and op_name(node) in SHAPE_OPS


def _chain_start(node: Node):
    """The dequantize a shape op's value comes from through other shape ops (None if none)."""
    cur = node
    while _is_shape_op(cur):
        cur = cur.args[0]
    return cur if is_dq(cur) else None


def _ends_in_quantize(node: Node, qp) -> bool:
    """Every path from `node` through shape ops ends in a quantize with parameters `qp`."""
    if not node.users:
        return False
    for user in node.users:
        if is_q(user):
            if not q_params(user).same(qp):
                return False
        elif not (_is_shape_op(user) and user.args[0] is node and _ends_in_quantize(user, qp)):
            return False
    return True


def requantize_shape_chains(gm: GraphModule) -> int:
    """Inserts quantize -> dequantize after every shape op whose input is
    another shape op of such a chain (see the module docstring); returns how
    many pairs were inserted."""
    inserted = 0
    for node in list(gm.graph.nodes):
        if not _is_shape_op(node) or not _is_shape_op(node.args[0]):
            continue
        src = node.args[0]
        start = _chain_start(src)
        if start is None:
            continue
        qp = dq_params(start)
        if not _ends_in_quantize(src, qp):
            continue
        q_end = _a_quantize_after(src)
        with gm.graph.inserting_after(src):
            q = gm.graph.call_function(q_end.target, (src, *q_end.args[1:]), dict(q_end.kwargs))
        with gm.graph.inserting_after(q):
            dq = gm.graph.call_function(start.target, (q, *start.args[1:]), dict(start.kwargs))
        val = src.meta.get("val")
        if isinstance(val, torch.Tensor):
            with val.fake_mode if hasattr(val, "fake_mode") else _null():
                q.meta["val"] = torch.empty_like(val, dtype=q_end.meta["val"].dtype)
                dq.meta["val"] = torch.empty_like(val)
        for key in ("nn_module_stack", "stack_trace", "from_node"):
            if key in src.meta:
                q.meta[key] = dq.meta[key] = src.meta[key]
        for user in list(src.users):
            if user is not q:
                user.replace_input_with(src, dq)
        inserted += 1
    if inserted:
        gm.graph.lint()
        gm.recompile()
    return inserted


def _a_quantize_after(node: Node) -> Node:
    """One of the quantize nodes that end the chain after `node`."""
    for user in node.users:
        if is_q(user):
            return user
        found = _a_quantize_after(user)
        if found is not None:
            return found
    return None


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def requantize_shape_chains_pass(gm: GraphModule):
    """The pass form (``to_edge_transform_and_lower(transform_passes=[...])``,
    as ``to_espnn_edge`` runs it: it must run on the Edge program before the
    partitioner, which may not change the graph)."""

    return PassResult(gm, requantize_shape_chains(gm) > 0)
