"""add / sub / mul (broadcasting, constant and scalar operands) (+ clamp activation);
rsub and division by a Python number are rewritten to sub and mul first.

Every operand gets its own activation observer (ESP-NN's add/mul rescale each input),
the output one more, placed after a fused relu/relu6/hardtanh/clamp when there is one.
Scalar operands were turned into constant tensors by ``scalars_to_constants`` so that
they are observed like any other operand.
"""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.utils import get_new_attr_name_with_prefix

from . import ops
from .annotation import (
    ConfigResolver,
    annotate,
    fusable_activation,
    is_annotated,
    is_call,
    is_float_tensor,
)

# HistogramObserver bins with torch.histc, which fails beyond this magnitude; such a
# constant operand cannot be observed (and would not fit int8 sensibly anyway).
_HISTC_LIMIT = 3.4028235e15


def _nonzero_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v != 0 and abs(v) < float("inf")


def scalars_to_constants(gm: GraphModule) -> GraphModule:
    """Replace Python-number operands of float add/sub/mul with 0-d constant tensors.

    XNNPACK's quantizer has a similar pass; ours only touches float32 ops, so integer
    arithmetic keeps its dtype, and it copies the node's fake mode for the new value.
    A float rsub(x, other) (``other - x``, e.g. ``1.0 - x``) becomes sub(other, x)
    first, and a float division by a nonzero Python number, div(x, c), becomes
    mul(x, 1 / c) (one quantized MUL; its constant is observed like any other).
    """
    changed = False
    for node in list(gm.graph.nodes):
        if is_call(node, ops.RSUB) and is_float_tensor(node) and len(node.args) >= 2:
            alpha = node.args[2] if len(node.args) > 2 else node.kwargs.get("alpha", 1)
            node.target = torch.ops.aten.sub.Tensor
            node.args = (node.args[1], node.args[0])
            node.kwargs = {"alpha": alpha} if alpha != 1 else {}
            changed = True
        if is_call(node, ops.DIV) and is_float_tensor(node) and _nonzero_number(node.args[1]):
            node.target = torch.ops.aten.mul.Tensor
            node.args = (node.args[0], 1.0 / float(node.args[1]))
            changed = True
        if not is_call(node, ops.ADD_MUL) or not is_float_tensor(node):
            continue
        new_args = list(node.args)
        for i, arg in enumerate(node.args[:2]):
            if isinstance(arg, Node) or not isinstance(arg, (int, float)) or isinstance(arg, bool):
                continue
            name = get_new_attr_name_with_prefix("_espnn_scalar_")(gm)
            value = torch.tensor(float(arg), dtype=torch.float32)
            gm.register_buffer(name, value)
            with gm.graph.inserting_before(node):
                const = gm.graph.get_attr(name)
            const.meta["val"] = node.meta["val"].fake_mode.from_tensor(value, static_shapes=True)
            new_args[i] = const
            changed = True
        node.args = tuple(new_args)
    if changed:
        gm.recompile()
    return gm


def _constant_value(gm: GraphModule, node: Node):
    if node.op != "get_attr":
        return None
    owner, _, name = str(node.target).rpartition(".")
    return getattr(gm.get_submodule(owner) if owner else gm, name, None)


def annotate_add_mul(gm: GraphModule, resolve: ConfigResolver) -> None:
    for node in gm.graph.nodes:
        if not is_call(node, ops.ADD_MUL) or is_annotated(node) or not is_float_tensor(node):
            continue
        config = resolve(node)
        if config is None:
            continue
        operands = node.args[:2]
        if not all(is_float_tensor(a) for a in operands):
            continue  # a leftover scalar or an integer tensor: not an int8 op
        too_big = any(
            isinstance(v, torch.Tensor) and v.numel() == 1 and abs(float(v)) > _HISTC_LIMIT
            for v in (_constant_value(gm, a) for a in operands)
        )
        if too_big:
            continue
        act = fusable_activation(node, resolve, ops.FUSABLE_ACTIVATIONS)
        inputs = {a: config.activation for a in operands}
        annotate(node, inputs, output=None if act is not None else config.activation)
        if act is not None:
            annotate(act, output=config.activation)
