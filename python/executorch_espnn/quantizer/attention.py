"""scaled_dot_product_attention as its explicit ops, before annotation.

``nn.MultiheadAttention`` and ``nn.TransformerEncoderLayer`` call
``F.scaled_dot_product_attention``: one ATen op whose intermediate tensors
(the scores, the probabilities) no observer would see, and which ExecuTorch's
decomposition later spells with a float-only "safe softmax" (eq / full_like /
logical_not / any / where around ``_softmax``) and a ``mul.Scalar``.
Rewriting it here, before the observers are placed, into

    scores = (q @ k.transpose(-2, -1)) * scale [+ additive mask]   # scale: 1/sqrt(E) or the given one
    probs  = softmax(scores, -1)                                     # no mask
    probs  = _safe_softmax(scores.masked_fill(masked, -inf), -1)     # is_causal or a constant mask
    out    = probs @ v

gives every intermediate its own int8 observer, so the whole attention lowers
into the delegate (BATCH_MATMUL, MUL by a constant, [ADD,] SOFTMAX or
MASKED_SOFTMAX, BATCH_MATMUL) like hand-written attention.

Masks: ``is_causal=True`` (PyTorch's ``ones(L, S).tril()``), or a constant
``attn_mask`` of shape [L, S] (leading dims of size 1 allowed): a boolean one
(True attends), or a float one added to the scores, whose -inf entries mask
and whose finite entries are added (an int8 ADD of that constant). The
masked_fill + _safe_softmax pair is annotated as one int8 op (its input is the
scores' int8 value, its output the softmax's fixed 1/256 quantization; the
-inf in between is never observed) and lowered to MASKED_SOFTMAX. A row that
is masked everywhere gives 0, as PyTorch's own SDPA does (its safe softmax),
not NaN. Without a mask no row can be masked everywhere, so softmax equals
the safe softmax exactly.

Rewritten: dropout_p == 0 (eval), enable_gqa False, and a mask as above.
Anything else is left as it is (it stays on the CPU, with the reason in the
report).

ExecuTorch has a pass for this op (backends/transforms/decompose_sdpa.py,
DecomposeScaledDotProductAttention); it is not used here because it is
PyTorch's float decomposition: q and k each multiplied by sqrt(scale)
(two int8 MULs with observers of their own instead of one), identity expands
and views around bmm, and _safe_softmax, which the Edge dialect expands into
float-only ops. This pass writes the ops an int8 graph needs.
"""

from __future__ import annotations

import math

import torch
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.utils import get_new_attr_name_with_prefix

from .annotation import annotate, is_annotated, is_float_tensor
from .config import SOFTMAX_SIGMOID_OUTPUT

aten = torch.ops.aten
SDPA = aten.scaled_dot_product_attention.default
SAFE_SOFTMAX = aten._safe_softmax.default
MASKED_FILL = aten.masked_fill.Scalar


def _sdpa_args(node: Node) -> dict:
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
    defaults = dict(attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False)
    out = dict(defaults)
    out.update(zip(names, node.args))
    out.update(node.kwargs)
    return out


def _constant(gm: GraphModule, node, depth: int = 0) -> torch.Tensor | None:
    """The value of `node` when it depends on constants only: a get_attr
    (a buffer of the exported module), or ops on such values, evaluated here
    (nn.MultiheadAttention turns a boolean mask into a float one with
    masked_fill, and reshapes it); None when it depends on an input."""
    if isinstance(node, (int, float, bool, type(None), torch.dtype, torch.device, torch.layout, str)):
        return node
    if isinstance(node, (list, tuple)):
        items = [_constant(gm, a, depth) for a in node]
        return None if any(isinstance(a, Node) and i is None for a, i in zip(node, items)) else type(node)(items)
    if not isinstance(node, Node) or depth > 32:
        return None
    if node.op == "get_attr":
        value = gm
        for part in str(node.target).split("."):
            value = getattr(value, part, None)
        return value if isinstance(value, torch.Tensor) else None
    if node.op != "call_function":
        return None
    args = [_constant(gm, a, depth + 1) for a in node.args]
    kwargs = {k: _constant(gm, v, depth + 1) for k, v in node.kwargs.items()}
    if any(isinstance(a, Node) and v is None for a, v in zip(node.args, args)) or any(
            isinstance(node.kwargs[k], Node) and v is None for k, v in kwargs.items()):
        return None
    with torch.no_grad():
        try:
            value = node.target(*args, **kwargs)
        except Exception:  # noqa: BLE001 - not evaluable here: treat as not constant
            return None
    return value if isinstance(value, torch.Tensor) else None


def _mask(gm: GraphModule, node: Node, length: int, source: int):
    """(allowed [L, S] bool, additive [L, S] float or None) of an SDPA node's mask,
    None when there is no mask; ValueError saying why a mask cannot be taken."""
    a = _sdpa_args(node)
    if a["is_causal"]:
        if a["attn_mask"] is not None:
            raise ValueError("is_causal together with attn_mask")
        return torch.ones(length, source, dtype=torch.bool).tril(), None
    if a["attn_mask"] is None:
        return None
    mask = _constant(gm, a["attn_mask"])
    if mask is None:
        raise ValueError("an attention mask that is computed, not a constant")
    mask = mask.detach()
    # Leading dims (batch x heads, as MultiheadAttention expands it) are allowed when every slice is the same.
    while mask.dim() > 2 and (mask.shape[0] == 1 or bool((mask == mask[:1]).all())):
        mask = mask[0]
    if tuple(mask.shape) != (length, source):
        raise ValueError(f"an attention mask of shape {tuple(a['attn_mask'].meta['val'].shape)} "
                         f"(needs [{length}, {source}], leading dims of size 1)")
    if mask.dtype == torch.bool:
        return mask.clone(), None
    if not mask.is_floating_point():
        raise ValueError(f"an attention mask of dtype {mask.dtype}")
    allowed = ~torch.isneginf(mask)
    if torch.isnan(mask).any() or torch.isposinf(mask).any():
        raise ValueError("an attention mask with NaN or +inf")
    additive = torch.where(allowed, mask, torch.zeros_like(mask)).float()
    return allowed, (additive if bool(additive.ne(0).any()) else None)


def rewritable(node: Node, gm: GraphModule | None = None) -> str | None:
    """Why this SDPA node is not rewritten (None: it is)."""
    a = _sdpa_args(node)
    if a["attn_mask"] is not None and gm is None:
        return "an attention mask"
    if a["dropout_p"]:
        return f"dropout_p={a['dropout_p']} (export in eval mode)"
    if a["enable_gqa"]:
        return "enable_gqa=True"
    q, k, v = a["query"], a["key"], a["value"]
    if not all(isinstance(t, Node) and t.meta.get("val") is not None and t.meta["val"].dtype == torch.float32
               and t.meta["val"].dim() >= 2 for t in (q, k, v)):
        return "operands that are not float tensors of rank >= 2"
    if gm is not None:
        try:
            _mask(gm, node, q.meta["val"].shape[-2], k.meta["val"].shape[-2])
        except ValueError as e:
            return str(e)
    return None


def _emit(gm: GraphModule, target, args, like: Node) -> Node:
    """A call_function node with its meta['val'] computed on the fake tensors."""
    node = gm.graph.call_function(target, args)
    fake_args = [a.meta["val"] if isinstance(a, Node) else a for a in args]
    with like.meta["val"].fake_mode:
        node.meta["val"] = target(*fake_args)
    for key in ("nn_module_stack", "source_fn_stack", "stack_trace"):
        if key in like.meta:
            node.meta[key] = like.meta[key]
    return node


def _buffer(gm: GraphModule, prefix: str, value: torch.Tensor, like: Node) -> Node:
    """A get_attr node of a new buffer, with its fake value."""
    name = get_new_attr_name_with_prefix(prefix)(gm)
    gm.register_buffer(name, value)
    node = gm.graph.get_attr(name)
    node.meta["val"] = like.meta["val"].fake_mode.from_tensor(value, static_shapes=True)
    return node


def decompose_attention(gm: GraphModule) -> GraphModule:
    """Rewrites every rewritable scaled_dot_product_attention (see the module docstring)."""
    changed = False
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not SDPA or rewritable(node, gm) is not None:
            continue
        a = _sdpa_args(node)
        q, k, v = a["query"], a["key"], a["value"]
        scale = a["scale"] if a["scale"] is not None else 1.0 / math.sqrt(q.meta["val"].shape[-1])
        mask = _mask(gm, node, q.meta["val"].shape[-2], k.meta["val"].shape[-2])
        with gm.graph.inserting_before(node):
            const = _buffer(gm, "_espnn_attention_scale_", torch.tensor(float(scale), dtype=torch.float32), q)
            kt = _emit(gm, aten.transpose.int, (k, -2, -1), node)
            scores = _emit(gm, aten.matmul.default, (q, kt), node)
            scaled = _emit(gm, aten.mul.Tensor, (scores, const), node)
            if mask is None:
                probs = _emit(gm, aten.softmax.int, (scaled, -1), node)
            else:
                allowed, additive = mask
                if additive is not None:
                    scaled = _emit(gm, aten.add.Tensor,
                                   (scaled, _buffer(gm, "_espnn_attention_bias_", additive, q)), node)
                masked = _buffer(gm, "_espnn_attention_mask_", ~allowed, q)
                filled = _emit(gm, aten.masked_fill.Scalar, (scaled, masked, float("-inf")), node)
                probs = _emit(gm, SAFE_SOFTMAX, (filled, -1), node)
            out = _emit(gm, aten.matmul.default, (probs, v), node)
        node.replace_all_uses_with(out)
        gm.graph.erase_node(node)
        changed = True
    if changed:
        gm.graph.lint()
        gm.recompile()
    return gm


def masked_softmax_pair(node: Node) -> Node | None:
    """For a _safe_softmax node: the masked_fill(x, constant mask, -inf) that
    feeds it alone (what decompose_attention writes), else None."""
    src = node.args[0] if node.args else None
    if (not isinstance(src, Node) or src.target is not MASKED_FILL or len(src.users) != 1
            or src.args[2] != float("-inf") or not isinstance(src.args[1], Node)):
        return None
    dim = node.args[1] if len(node.args) > 1 else -1
    rank = node.meta["val"].dim() if node.meta.get("val") is not None else 0
    return src if dim in (-1, rank - 1) else None


def annotate_masked_softmax(gm: GraphModule, resolve) -> None:
    """masked_fill + _safe_softmax as one int8 op: the scores' int8 value in,
    softmax's fixed quantization out, nothing observed in between (the -inf)."""

    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is not SAFE_SOFTMAX or is_annotated(node):
            continue
        fill = masked_softmax_pair(node)
        config = resolve(node)
        if fill is None or config is None or is_annotated(fill) or not is_float_tensor(fill.args[0]):
            continue
        annotate(fill, {fill.args[0]: config.activation})
        annotate(node, output=SOFTMAX_SIGMOID_OUTPUT)
