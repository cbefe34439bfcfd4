"""Single-input ops that requantize: non-linear activations, softmax, H×W means.

* softmax, sigmoid, tanh: the int8 kernels fix the output quantization
  (FixedQParamsQuantizationSpec), the input gets an activation observer;
* hardswish, silu, gelu, hardsigmoid, elu, leaky_relu, selu, celu, mish, softplus,
  log_sigmoid, and prelu with one slope or one per channel (its weight stays float): own input and
  output observers
  (the lowering emits a LUT or HARD_SWISH, which map any input quantization to any
  output quantization); relu/relu6/hardtanh/clamp are fused (conv_linear.py,
  elementwise.py) or share their input's qparams (shared.py);
* mean over H and W of an NCHW tensor, a mean over one run of adjacent dims (a
  transformer's token mean) and adaptive_avg_pool2d to 1×1 (MEAN_HW): own input and
  output observers;
* layer_norm and rms_norm over the last dim (LAYER_NORM): own input and output
  observers; the weight and bias arguments stay float (the lowering folds them
  into the kernel's integer constants). A norm over more dims stays float.
"""

from __future__ import annotations

from torch.fx import GraphModule, Node

from . import ops
from .annotation import ConfigResolver, annotate, is_annotated, is_call, is_float_tensor
from .config import SOFTMAX_SIGMOID_OUTPUT, TANH_OUTPUT


def _fixed_output(node: Node):
    if node.target in ops.SOFTMAX or node.target in ops.SIGMOID:
        return SOFTMAX_SIGMOID_OUTPUT
    if node.target in ops.TANH:
        return TANH_OUTPUT
    return None


def _tabulable_prelu(node: Node) -> bool:
    """prelu whose weight is one slope, or one slope per channel (dimension 1):
    the lowering tabulates one LUT, or one per channel (CHANNEL_LUT)."""
    w = node.args[1] if len(node.args) > 1 else None
    val = w.meta.get("val") if isinstance(w, Node) else None
    x = node.args[0].meta.get("val") if isinstance(node.args[0], Node) else None
    if val is None:
        return False
    return val.numel() == 1 or (x is not None and x.dim() >= 2 and val.numel() == x.shape[1])


def annotate_unary(gm: GraphModule, resolve: ConfigResolver) -> None:
    targets = ops.SOFTMAX | ops.SIGMOID | ops.TANH | ops.UNARY_OWN_OUTPUT | ops.PRELU
    for node in gm.graph.nodes:
        if not is_call(node, targets) or is_annotated(node):
            continue
        if node.target in ops.PRELU and not _tabulable_prelu(node):
            continue
        x = node.args[0]
        if not (is_float_tensor(node) and is_float_tensor(x)):
            continue
        config = resolve(node)
        if config is None:
            continue
        fixed = _fixed_output(node)
        annotate(node, {x: config.activation}, output=fixed if fixed is not None else config.activation)


def is_global_average(node: Node) -> bool:
    """mean over dims {2, 3} of a 4-D tensor, adaptive_avg_pool2d to 1×1 (1-D: to 1), or a mean
    over one run of adjacent dims (a transformer's mean over its tokens): what
    MEAN_HW runs (lowering/ops/mean.py)."""
    x = node.args[0]
    if not is_float_tensor(x):
        return False
    if node.target in ops.ADAPTIVE_AVG_POOL:
        rank = 3 if node.target == ops.aten.adaptive_avg_pool1d.default else 4
        if x.meta["val"].dim() != rank:
            return False
        size = node.args[1]
        size = [size] * (rank - 2) if isinstance(size, int) else list(size)
        return size == [1] * (rank - 2)
    if node.target in ops.MEAN:
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        dtype = node.args[3] if len(node.args) > 3 else node.kwargs.get("dtype")
        if dims is None or dtype is not None:
            return False
        dims = [dims] if isinstance(dims, int) else list(dims)
        rank = x.meta["val"].dim()
        if rank == 4 and len(dims) == 2 and sorted(d % 4 for d in dims) == [2, 3]:
            return True
        run = sorted({d % rank for d in dims}) if rank else []
        return bool(run) and run == list(range(run[0], run[-1] + 1))
    return False


def annotate_global_average(gm: GraphModule, resolve: ConfigResolver) -> None:
    for node in gm.graph.nodes:
        if not is_call(node, ops.MEAN | ops.ADAPTIVE_AVG_POOL) or is_annotated(node):
            continue
        if not (is_float_tensor(node) and is_global_average(node)):
            continue
        config = resolve(node)
        if config is None:
            continue
        annotate(node, {node.args[0]: config.activation}, output=config.activation)


def normalizes_last_dim(node: Node) -> bool:
    """layer_norm / rms_norm whose normalized_shape is the last dim alone (what LAYER_NORM computes)."""
    shape = node.args[1] if len(node.args) > 1 else node.kwargs.get("normalized_shape")
    dims = node.args[0].meta["val"].shape
    return shape is not None and len(shape) == 1 and len(dims) >= 1 and shape[0] == dims[-1]


def annotate_norm(gm: GraphModule, resolve: ConfigResolver) -> None:
    for node in gm.graph.nodes:
        if not is_call(node, ops.NORM) or is_annotated(node):
            continue
        x = node.args[0]
        if not (is_float_tensor(node) and is_float_tensor(x) and normalizes_last_dim(node)):
            continue
        config = resolve(node)
        if config is None:
            continue
        annotate(node, {x: config.activation}, output=config.activation)
