"""layer_norm and rms_norm over the last dim -> LAYER_NORM.

Both ops are kept whole (``preserve=True``): to_edge would decompose
layer_norm into native_layer_norm (three outputs) and rms_norm into
pow/mean/add/rsqrt/mul. gamma (``weight``) and beta (``bias``) stay float in
the quantized graph; quant_params.layer_norm_params folds gamma with the
output scale into per-channel Q31 multipliers, beta into Q16 output units and
eps into the integer variance's units. Only the last dim may be normalised
(PyTorch's normalized_shape of length 1), in PyTorch order (CONTIG).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...quant_params import layer_norm_params
from ..graph import Unsupported, arg, op_name, static_shape
from ..op_table import OpTableRow
from ..quant import OutputSpec, QParams, input_qparams, output_spec
from ..registry import register
from ..values import CONTIG


@dataclass
class NormPlan:
    in_q: QParams
    out: OutputSpec
    shape: tuple[int, ...]
    consts: dict


def _float_constant(node, what, cc, width) -> np.ndarray | None:
    if node is None:
        return None
    if not cc.constants.is_constant(node):
        raise Unsupported(f"{what} is not a constant")
    t = cc.constants.tensor(node)
    if t.dtype != torch.float32 or tuple(t.shape) != (width,):
        raise Unsupported(f"{what} of dtype {t.dtype} and shape {tuple(t.shape)} (needs float32 [{width}])")
    return t.detach().numpy().astype(np.float64)


def analyze(node, cc) -> NormPlan:
    rms = op_name(node) == "aten.rms_norm.default"
    x = node.args[0]
    shape = static_shape(x)
    normalized = list(arg(node, 1, "normalized_shape"))
    if len(normalized) != 1 or normalized[0] != shape[-1]:
        raise Unsupported(f"normalisation over {normalized} of a {list(shape)} tensor (only the last dim)")
    width = shape[-1]
    if width > cc.limits["max_norm_width"]:
        raise Unsupported(f"normalised row of {width} > {cc.limits['max_norm_width']}")
    gamma = _float_constant(arg(node, 2, "weight"), "weight", cc, width)
    beta = None if rms else _float_constant(arg(node, 3, "bias"), "bias", cc, width)
    eps = arg(node, 3, "eps") if rms else arg(node, 4, "eps", 1e-5)
    if eps is None:  # rms_norm's default: the input dtype's machine epsilon
        eps = torch.finfo(torch.float32).eps
    in_q = input_qparams(x, node, cc)
    out = output_spec(node, cc, fuse_activation=True)
    try:
        consts = layer_norm_params(in_q.scale, out.qparams.scale, float(eps), width, gamma, beta, rms)
    except ValueError as e:
        raise Unsupported(str(e)) from e
    return NormPlan(in_q, out, shape, consts)


def lower(node, ctx):
    p = analyze(node, ctx)
    x = ctx.input(node.args[0], layout=CONTIG)
    y = ctx.new_value(p.shape, p.out.qparams, CONTIG)
    c = p.consts
    beta = ctx.constant(c["beta"]) if c["beta"] is not None else None
    ctx.emit("LAYER_NORM", [ctx.tensor(x), ctx.constant(c["gamma_mult"]), ctx.constant(c["gamma_shift"]), beta],
             [y.tensor], act_min=p.out.act_min, act_max=p.out.act_max, **c["params"])
    ctx.finish(node, p.out, y)


register("aten.layer_norm.default", "aten.rms_norm.default", analyze=analyze, lower=lower,
         fuses_activation=True, preserve=True)


# This module's rows of docs/lowering.md's op table (scripts/gen_lowering_table.py writes the table from them).
OP_TABLE_ROWS = (
    OpTableRow(160,
               pytorch=("layer_norm, rms_norm over the last dim (<= 65535; with or without weight/bias; kept "
                        "whole with `preserve=True`; gamma, beta and eps folded by "
                        "`quant_params.layer_norm_params`)"),
               xts3="LAYER_NORM"),
)
