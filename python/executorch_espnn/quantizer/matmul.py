"""matmul / bmm of two float tensors (attention's q @ k^T and attn @ v) (+ clamp activation).

Both operands are activations: each gets an int8 per-tensor activation observer
(``share_producer_qparams`` then reuses a producer's qparams where the operand already
is quantized, e.g. softmax's fixed 1/256), the output one more, placed after a fused
relu/relu6/hardtanh/clamp when there is one. ESP-NN's FC kernel, which runs the
lowered BATCH_MATMUL, takes one offset per operand, so per-tensor is exact.
A 1-D operand (a vector product) is left float: the lowering does not take it.
"""

from __future__ import annotations

from torch.fx import GraphModule

from . import ops
from .annotation import ConfigResolver, annotate, fusable_activation, is_annotated, is_call, is_float_tensor


def annotate_matmul(gm: GraphModule, resolve: ConfigResolver) -> None:
    for node in gm.graph.nodes:
        if not is_call(node, ops.MATMUL) or is_annotated(node) or not is_float_tensor(node):
            continue
        config = resolve(node)
        operands = node.args[:2]
        if config is None or not all(is_float_tensor(a) and a.meta["val"].dim() >= 2 for a in operands):
            continue
        act = fusable_activation(node, resolve, ops.FUSABLE_ACTIVATIONS)
        annotate(node, {a: config.activation for a in operands},
                 output=None if act is not None else config.activation)
        if act is not None:
            annotate(act, output=config.activation)
