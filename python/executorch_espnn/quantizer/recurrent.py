"""nn.GRU and nn.LSTM: rewritten into espnn::gru / espnn::lstm, then annotated.

``rewrite_recurrent`` (before annotation) replaces each ``aten.gru.input`` /
``aten.lstm.input`` that the delegate can run by the single-output op of
``executorch_espnn.recurrent_ops`` (why: that module's docstring). Taken:
a zero initial state (the module called without ``hx``, or a constant zero
one), unidirectional, no dropout in training mode, no LSTM projection
(``proj_size``), and a final state that nobody reads — or, for one layer,
whose h_n is read: that is the output sequence's last step, so h_n's readers
get ``y.select(time, -1).unsqueeze(0)`` (the LSTM's c_n must be unused).
Anything else stays as it is (float on the CPU).

``annotate_recurrent``: the input sequence and the output sequence get
activation observers of their own; weights and biases stay float (the
lowering quantizes them per gate row, lowering/ops/recurrent.py), and so does
the state inside the op.
"""

from __future__ import annotations

import operator

import torch
from torch.fx import GraphModule, Node

from ..recurrent_ops import GRU, LSTM, RECURRENT_OPS
from .annotation import ConfigResolver, annotate, is_annotated, is_call, is_float_tensor
from .attention import _constant

aten = torch.ops.aten
_ATEN = {aten.gru.input: GRU, aten.lstm.input: LSTM}


def _getitems(node: Node) -> dict[int, list[Node]]:
    """Output index -> the getitem nodes reading it that have readers of their
    own (export writes a getitem for an unused h_n too); {-1: [user]} when
    something reads the tuple otherwise."""
    out: dict[int, list[Node]] = {}
    for u in node.users:
        if u.op != "call_function" or u.target is not operator.getitem:
            return {-1: [u]}
        if u.users:
            out.setdefault(u.args[1], []).append(u)
    return out


def _is_zero_state(gm: GraphModule, hx) -> bool:
    states = hx if isinstance(hx, (list, tuple)) else [hx]
    for s in states:
        value = _constant(gm, s)
        if not isinstance(value, torch.Tensor) or bool(value.any()):
            return False
    return True


def _rewritable(gm: GraphModule, node: Node) -> bool:
    x, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first = node.args[:9]
    per_layer = 4 if has_biases else 2
    if bidirectional or (train and dropout) or len(params) != per_layer * num_layers:
        return False
    if not _is_zero_state(gm, hx) or not is_float_tensor(x) or x.meta["val"].dim() not in (2, 3):
        return False
    items = _getitems(node)
    if -1 in items or not (items.get(0) or items.get(1)):
        return False
    if items.get(2) or (items.get(1) and num_layers != 1):
        return False  # c_n read, or h_n of several layers
    return True


def rewrite_recurrent(gm: GraphModule, resolve: ConfigResolver) -> GraphModule:
    changed = False
    for node in list(gm.graph.nodes):
        if not is_call(node, _ATEN) or resolve(node) is None or not _rewritable(gm, node):
            continue
        x, _, params, has_biases, num_layers, _, _, _, batch_first = node.args[:9]
        items = _getitems(node)
        with gm.graph.inserting_before(node):
            y = gm.graph.call_function(_ATEN[node.target], (x, list(params), has_biases, num_layers, batch_first))
        y.meta.update({k: v for k, v in node.meta.items() if k != "val"})
        y.meta["val"] = node.meta["val"][0]
        for g in items.get(0, ()):
            g.replace_all_uses_with(y)
            gm.graph.erase_node(g)
        if items.get(1):
            # h_n of one layer: [1, (B,) H] = the output's last time step.
            time = 1 if (batch_first and x.meta["val"].dim() == 3) else 0
            with gm.graph.inserting_after(y):
                last = gm.graph.call_function(aten.select.int, (y, time, -1))
            with gm.graph.inserting_after(last):
                h_n = gm.graph.call_function(aten.unsqueeze.default, (last, 0))
            last.meta["val"] = y.meta["val"].select(time, -1)
            h_n.meta["val"] = last.meta["val"].unsqueeze(0)
            for g in items[1]:
                g.replace_all_uses_with(h_n)
                gm.graph.erase_node(g)
        for g in [u for u in node.users]:  # getitems nobody reads
            gm.graph.erase_node(g)
        gm.graph.erase_node(node)
        changed = True
    if changed:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return gm


def annotate_recurrent(gm: GraphModule, resolve: ConfigResolver) -> None:
    for node in gm.graph.nodes:
        if not is_call(node, RECURRENT_OPS) or is_annotated(node):
            continue
        x = node.args[0]
        if not (is_float_tensor(x) and is_float_tensor(node)):
            continue
        config = resolve(node)
        if config is None:
            continue
        annotate(node, {x: config.activation}, output=config.activation)
