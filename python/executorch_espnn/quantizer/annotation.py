"""Small helpers shared by the annotators.

Annotations live where torchao reads them: ``node.meta["quantization_annotation"]``
(a ``QuantizationAnnotation``); ``_annotated=True`` marks a node as taken so that a
later annotator leaves it alone. No other node metadata is written.
"""

from __future__ import annotations

from typing import Callable, Optional

import torch
from torch.fx import Node
from torchao.quantization.pt2e.quantizer import QuantizationAnnotation, QuantizationSpecBase
from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY

from .config import EspNNQuantizationConfig

# node -> the config that governs it (None = keep it float)
ConfigResolver = Callable[[Node], Optional[EspNNQuantizationConfig]]


def is_call(node, targets) -> bool:
    return isinstance(node, Node) and node.op == "call_function" and node.target in targets


def is_float_tensor(node) -> bool:
    """True for a node producing one float32 tensor (what observers can watch)."""
    if not isinstance(node, Node):
        return False
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and val.dtype == torch.float32


def is_annotated(node: Node) -> bool:
    ann = node.meta.get(Q_ANNOTATION_KEY)
    return ann is not None and ann._annotated


def get_annotation(node: Node) -> Optional[QuantizationAnnotation]:
    return node.meta.get(Q_ANNOTATION_KEY)


def annotate(
    node: Node,
    inputs: Optional[dict[Node, QuantizationSpecBase]] = None,
    output: Optional[QuantizationSpecBase] = None,
) -> None:
    node.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(
        input_qspec_map=dict(inputs or {}), output_qspec=output, _annotated=True
    )


def has_quantized_output(node) -> bool:
    """True when the value ``node`` produces will be observed (int8 in the converted graph)."""
    if not isinstance(node, Node):
        return False
    ann = get_annotation(node)
    return ann is not None and ann._annotated and ann.output_qspec is not None


def single_user(node: Node) -> Optional[Node]:
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def fusable_activation(producer: Node, resolve: ConfigResolver, targets) -> Optional[Node]:
    """The clamp-like activation that consumes ``producer`` alone, if it may be fused:
    the producer has no other user, the activation is not taken yet and its own config
    does not keep it float (a ``None`` module config on the activation must win)."""
    act = single_user(producer)
    if act is None or not is_call(act, targets) or act.args[0] is not producer:
        return None
    if is_annotated(act) or resolve(act) is None or not is_float_tensor(act):
        return None
    return act
