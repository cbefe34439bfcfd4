"""Ops whose int8 kernel keeps the input quantization: data movement, max/avg pooling,
resizing, split, concat.

Single-input ops (pools, reshape/view/flatten, permute/transpose, slice/select, pad,
upsample, squeeze/unsqueeze, eval dropout/clone, and relu/relu6/hardtanh/clamp that no
conv/linear/add/mul absorbed) and split/chunk share the producer's
observer (SharedQuantizationSpec), so the int8 bytes pass through unchanged. Such an
op is quantized only when its producer's output is quantized — a shared op behind a
float producer (for example one that a ``None`` config keeps float) stays float.
One exception keeps leading layout ops on the device: a chain of these ops that starts
at a graph input and whose result is quantized by its consumer anyway is quantized
from the graph input on (``_pull_graph_input_chains``).

concat gets one observer of its own on the output and every part's edge shares it.
prepare_pt2e's implicit sharing then also puts the parts' producers in that group
(same dtype/range/qscheme), so one observer sees the union of the parts' ranges (no
part is clipped) and no part needs requantizing; only a part with fixed qparams (a
sigmoid output) keeps them and is requantized on its edge (the lowering's REQUANTIZE).

Annotation order matters: this runs after every other annotator, in topological
order, so a producer's annotation is final when its consumers look at it.
"""

from __future__ import annotations

from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.quantizer import QuantizationSpec, SharedQuantizationSpec

from . import ops
from .activations import is_global_average
from .annotation import (
    ConfigResolver,
    annotate,
    get_annotation,
    has_quantized_output,
    is_annotated,
    is_call,
    is_float_tensor,
)


def _is_training_dropout(node: Node) -> bool:
    if node.target is not ops.aten.dropout.default:
        return False
    train = node.args[2] if len(node.args) > 2 else node.kwargs.get("train", False)
    return bool(train)


def _eligible_single_input(node, resolve: ConfigResolver) -> bool:
    """An unannotated single-input shared op that may be quantized."""
    if not is_call(node, ops.SHARED_SINGLE_INPUT) or is_annotated(node):
        return False
    if not (is_float_tensor(node) and is_float_tensor(node.args[0])):
        return False
    # A (training) dropout scales its output: it cannot reuse its input's range.
    if _is_training_dropout(node):
        return False
    # adaptive_avg_pool2d to 1x1 is a mean (own observers, annotated earlier).
    if node.target in ops.ADAPTIVE_AVG_POOL and is_global_average(node):
        return False
    return resolve(node) is not None


def _annotate_split(node: Node, resolve: ConfigResolver) -> None:
    x = node.args[0]
    if is_annotated(node) or not has_quantized_output(x) or resolve(node) is None:
        return
    parts = list(node.users)
    if not parts or not all(is_call(p, {ops.GETITEM}) and is_float_tensor(p) for p in parts):
        return
    shared = SharedQuantizationSpec(x)
    # The split node yields a tuple, which cannot be observed; its parts (getitem
    # nodes) carry the shared output spec instead.
    annotate(node, {x: shared})
    for part in parts:
        annotate(part, output=shared)


def _annotate_concat(node: Node, resolve: ConfigResolver) -> None:
    parts = node.args[0]
    if is_annotated(node) or not is_float_tensor(node):
        return
    if not all(is_float_tensor(p) for p in parts) or not any(has_quantized_output(p) for p in parts):
        return
    config = resolve(node)
    if config is None:
        return
    shared = SharedQuantizationSpec(node)
    annotate(node, {p: shared for p in parts}, output=config.activation)


def _consumed_as_int8(node: Node) -> bool:
    """Some consumer already quantizes this node's output on its input edge."""
    for user in node.users:
        ann = get_annotation(user)
        if ann is not None and ann._annotated and ann.input_qspec_map.get(node) is not None:
            return True
    return False


def _pull_graph_input_chains(gm: GraphModule, resolve: ConfigResolver) -> None:
    """graph input -> reshape/permute/... -> conv: quantize the graph input instead of
    the chain's end, so the layout ops run in int8 inside the delegate. Only done when
    the chain's result is quantized anyway (no extra rounding for float consumers)."""
    for node in reversed(list(gm.graph.nodes)):
        if not _eligible_single_input(node, resolve) or not _consumed_as_int8(node):
            continue
        chain = [node]
        src = node.args[0]
        while _eligible_single_input(src, resolve):
            chain.append(src)
            src = src.args[0]
        if not (isinstance(src, Node) and src.op == "placeholder" and is_float_tensor(src)):
            continue
        chain.reverse()
        first = chain[0]
        annotate(first, {src: resolve(first).activation}, output=SharedQuantizationSpec((src, first)))
        for prev, cur in zip(chain, chain[1:]):
            annotate(cur, {prev: SharedQuantizationSpec(prev)}, output=SharedQuantizationSpec(prev))


def annotate_shared(gm: GraphModule, resolve: ConfigResolver) -> None:
    for node in gm.graph.nodes:
        if is_call(node, ops.SHARED_SPLIT):
            _annotate_split(node, resolve)
        elif is_call(node, ops.CONCAT):
            _annotate_concat(node, resolve)
        elif _eligible_single_input(node, resolve) and has_quantized_output(node.args[0]):
            x = node.args[0]
            shared = SharedQuantizationSpec(x)
            annotate(node, {x: shared}, output=shared)
    _pull_graph_input_chains(gm, resolve)


def share_producer_qparams(gm: GraphModule) -> None:
    """One tensor, one quantization: an input edge that would get a fresh observer but
    whose producer's output is already quantized reuses the producer's qparams.

    prepare_pt2e already shares an edge with its producer when both specs have the
    same dtype, range and qscheme; a producer with fixed qparams (softmax, sigmoid,
    tanh) does not qualify, so its consumer's edge would get a second observer and
    convert_pt2e a dequantize -> quantize requantization. Weight and bias edges are
    untouched (their producers are unannotated constants).
    """
    for node in gm.graph.nodes:
        ann = get_annotation(node)
        if ann is None or not ann._annotated:
            continue
        for src, spec in list(ann.input_qspec_map.items()):
            if isinstance(spec, QuantizationSpec) and src is not node and has_quantized_output(src):
                ann.input_qspec_map[src] = SharedQuantizationSpec(src)
