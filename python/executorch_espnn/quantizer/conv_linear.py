"""conv1d / conv2d / conv_transpose / linear (+ batch norm in QAT) (+ clamp activation).

ESP-NN applies the activation as the output clamp of the conv/FC kernel, so the
pattern has ONE output observer, on the last node: conv -> [bn] -> relu gets no
observer between conv and relu. Inputs: activation (per tensor), weight (int8
symmetric, per channel on the output-channel axis), bias (int32, scale s_in * s_w).
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
    single_user,
)
from .config import bias_qspec


def _bias_arg(node: Node):
    if len(node.args) > 2:
        return node.args[2]
    return node.kwargs.get("bias")


def _transposed_groups(node: Node) -> int:
    # conv_transpose{1,2}d(input, weight, bias, stride, padding, output_padding, groups, dilation)
    if len(node.args) > 6:
        return int(node.args[6])
    return int(node.kwargs.get("groups", 1))


def annotate_conv_linear(gm: GraphModule, resolve: ConfigResolver) -> None:
    targets = ops.CONV | ops.CONV_TRANSPOSE | ops.LINEAR
    for node in gm.graph.nodes:
        if not is_call(node, targets) or is_annotated(node):
            continue
        config = resolve(node)
        if config is None:
            continue
        x, weight = node.args[0], node.args[1]
        bias = _bias_arg(node)
        # Only constant float weights can become ESP-NN filters (a weight computed at
        # run time, e.g. x @ y, stays float).
        if not (is_float_tensor(x) and is_float_tensor(weight) and weight.op == "get_attr"):
            continue
        ch_axis = 1 if node.target in ops.CONV_TRANSPOSE else 0
        inputs = {x: config.activation, weight: config.weight_spec(ch_axis)}
        if isinstance(bias, Node) and is_float_tensor(bias):
            repeats = _transposed_groups(node) if ch_axis == 1 else 1
            inputs[bias] = bias_qspec(config, x, weight, node, weight_scale_repeats=repeats)

        # QAT keeps the batch norm until after annotation; it belongs to the pattern.
        tail = node
        bn = single_user(node)
        if (
            is_call(bn, ops.BATCH_NORM)
            and bn.args[0] is node
            and is_float_tensor(bn)
            and not is_annotated(bn)
        ):
            tail = bn
        act = fusable_activation(tail, resolve, ops.FUSABLE_ACTIVATIONS)
        last = act if act is not None else tail

        annotate(node, inputs, output=config.activation if last is node else None)
        if tail is not node:
            annotate(tail, output=config.activation if last is tail else None)
        if act is not None:
            annotate(act, output=config.activation)


def add_zero_bias_before_qat_batch_norm(gm: GraphModule) -> GraphModule:
    """Give a bias-less conv that feeds a batch norm a zero bias constant (QAT only).

    prepare_pt2e folds the batch norm before annotation, so the folded bias exists
    and is annotated as int32. prepare_qat_pt2e folds it at convert time, after
    annotation: without a bias node to annotate, the folded bias would stay float,
    which ESP-NN cannot take. A zero bias changes nothing numerically.
    """
    changed = False
    for node in list(gm.graph.nodes):
        if not is_call(node, ops.CONV | ops.CONV_TRANSPOSE) or _bias_arg(node) is not None:
            continue
        bn = single_user(node)
        if not (is_call(bn, ops.BATCH_NORM) and bn.args[0] is node and is_float_tensor(node)):
            continue
        out_channels = node.meta["val"].shape[1]
        name = get_new_attr_name_with_prefix("_espnn_zero_bias_")(gm)
        value = torch.zeros(int(out_channels), dtype=torch.float32)
        # A parameter (not a buffer): the convert-time fold re-assigns it as one.
        gm.register_parameter(name, torch.nn.Parameter(value, requires_grad=False))
        with gm.graph.inserting_before(node):
            bias = gm.graph.get_attr(name)
        bias.meta["val"] = node.meta["val"].fake_mode.from_tensor(value, static_shapes=True)
        node.args = (node.args[0], node.args[1], bias, *node.args[3:])
        node.kwargs = {k: v for k, v in node.kwargs.items() if k != "bias"}
        changed = True
    if changed:
        gm.recompile()
    return gm
