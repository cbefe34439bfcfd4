"""scaled_dot_product_attention as its explicit ops, before annotation.

``nn.MultiheadAttention`` and ``nn.TransformerEncoderLayer`` (need_weights
False, the encoder's default) call ``F.scaled_dot_product_attention``: one
ATen op whose intermediate tensors (the scores, the probabilities) no
observer would see, and which ExecuTorch's decomposition later spells with a
float-only "safe softmax" (eq / full_like / logical_not / any / where around
``_softmax``) and a ``mul.Scalar``. Rewriting it here, before the observers
are placed, into

    scores = (q @ k.transpose(-2, -1)) * scale      # scale: 1/sqrt(E) or the given one
    out    = softmax(scores, -1) @ v

gives every intermediate its own int8 observer, so the whole attention lowers
into the delegate (BATCH_MATMUL, MUL by a constant, SOFTMAX, BATCH_MATMUL) like
hand-written attention. Without a mask no row can be fully masked, so this
softmax equals PyTorch's safe softmax exactly (that one differs only for rows
that are -inf everywhere).

Rewritten: dropout_p == 0 (eval), no attn_mask, is_causal False, enable_gqa
False. Anything else is left as it is (it stays on the CPU, with the reason
in the report).

ExecuTorch has a pass for this op (backends/transforms/decompose_sdpa.py,
DecomposeScaledDotProductAttention); it is not used here because it is
PyTorch's float decomposition: q and k each multiplied by sqrt(scale)
(two int8 MULs with observers of their own instead of one), identity expands
and views around bmm, and _safe_softmax, which the Edge dialect expands into
float-only ops. This pass writes the four ops an int8 graph needs.
"""

from __future__ import annotations

import math

import torch
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.utils import get_new_attr_name_with_prefix

aten = torch.ops.aten
SDPA = aten.scaled_dot_product_attention.default


def _sdpa_args(node: Node) -> dict:
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
    defaults = dict(attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False)
    out = dict(defaults)
    out.update(zip(names, node.args))
    out.update(node.kwargs)
    return out


def rewritable(node: Node) -> str | None:
    """Why this SDPA node is not rewritten (None: it is)."""
    a = _sdpa_args(node)
    if a["attn_mask"] is not None:
        return "an attention mask"
    if a["is_causal"]:
        return "is_causal=True"
    if a["dropout_p"]:
        return f"dropout_p={a['dropout_p']} (export in eval mode)"
    if a["enable_gqa"]:
        return "enable_gqa=True"
    q, k, v = a["query"], a["key"], a["value"]
    if not all(isinstance(t, Node) and t.meta.get("val") is not None and t.meta["val"].dtype == torch.float32
               and t.meta["val"].dim() >= 2 for t in (q, k, v)):
        return "operands that are not float tensors of rank >= 2"
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


def decompose_attention(gm: GraphModule) -> GraphModule:
    """Rewrites every rewritable scaled_dot_product_attention (see the module docstring)."""
    changed = False
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not SDPA or rewritable(node) is not None:
            continue
        a = _sdpa_args(node)
        q, k, v = a["query"], a["key"], a["value"]
        scale = a["scale"] if a["scale"] is not None else 1.0 / math.sqrt(q.meta["val"].shape[-1])
        name = get_new_attr_name_with_prefix("_espnn_attention_scale_")(gm)
        gm.register_buffer(name, torch.tensor(float(scale), dtype=torch.float32))
        with gm.graph.inserting_before(node):
            const = gm.graph.get_attr(name)
            const.meta["val"] = q.meta["val"].fake_mode.from_tensor(getattr(gm, name), static_shapes=True)
            kt = _emit(gm, aten.transpose.int, (k, -2, -1), node)
            scores = _emit(gm, aten.matmul.default, (q, kt), node)
            scaled = _emit(gm, aten.mul.Tensor, (scores, const), node)
            probs = _emit(gm, aten.softmax.int, (scaled, -1), node)
            out = _emit(gm, aten.matmul.default, (probs, v), node)
        node.replace_all_uses_with(out)
        gm.graph.erase_node(node)
        changed = True
    if changed:
        gm.graph.lint()
        gm.recompile()
    return gm
