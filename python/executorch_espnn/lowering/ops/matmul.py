"""aten.matmul / aten.bmm of two int8 tensors -> BATCH_MATMUL.

The partitioner keeps aten.matmul from decomposition (ops_to_not_decompose;
otherwise it becomes expand + view + bmm + view). Both operands are int8
per-tensor (activations or constants); batch dims broadcast as PyTorch's do,
the lower-rank operand gets leading 1s. One per-tensor requantization with
TFLite's FC recipe (float32 product of the operand scales).

The rhs layout is chosen here so that ESP-NN's FC kernel reads it in place
where it can: an rhs whose value is labelled SWAPPED_LAST2 (k.transpose(-2,
-1) over k's bytes, see ops/shape.py) or a constant (re-laid out at compile
time) is passed as [.., N, K] with rhs_transposed = 1; any other rhs
([.., K, N], as v of attn @ v) is passed as it is and the runtime transposes
one batch at a time into its scratch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...quant_params import fc_per_tensor_multiplier
from ..graph import Unsupported, check_kernel_dims, static_shape
from ..op_table import OpTableRow
from ..quant import OutputSpec, QParams, input_qparams, output_spec
from ..registry import register
from ..values import CONTIG, SWAPPED_LAST2, Value

INT32_MAX = 2**31 - 1


@dataclass
class MatmulPlan:
    lhs_q: QParams
    rhs_q: QParams
    out: OutputSpec
    mult: int
    shift: int
    lhs_shape: tuple[int, ...]
    rhs_shape: tuple[int, ...]
    out_shape: tuple[int, ...]


def _max_magnitude(zero_point: int) -> int:
    """max |q - zero_point| over int8 q."""
    return max(abs(-128 - zero_point), abs(127 - zero_point))


def analyze(node, cc) -> MatmulPlan:
    a, b = node.args[0], node.args[1]
    lhs_shape, rhs_shape, out_shape = static_shape(a), static_shape(b), static_shape(node)
    if len(lhs_shape) < 2 or len(rhs_shape) < 2:
        raise Unsupported(f"matmul of a 1-D operand ({lhs_shape} @ {rhs_shape})")
    if len(out_shape) > cc.limits["max_rank"]:
        raise Unsupported(f"output rank {len(out_shape)} > {cc.limits['max_rank']}")
    k, n = lhs_shape[-1], rhs_shape[-1]
    check_kernel_dims({"K (inner dim)": k, "N (output columns)": n}, cc.limits["max_kernel_dim"])
    lhs_q = input_qparams(a, node, cc, allow_constant=True)
    rhs_q = input_qparams(b, node, cc, allow_constant=True)
    if cc.constants.is_constant(a.args[0]) and cc.constants.is_constant(b.args[0]):
        raise Unsupported("matmul of two constants (constant-folded by ExecuTorch)")
    out = output_spec(node, cc)
    mult, shift = fc_per_tensor_multiplier(lhs_q.scale, rhs_q.scale, out.qparams.scale)
    if not -31 <= shift <= 30:
        raise Unsupported("lhs x rhs / output scale ratio is outside the requantization range (shift)")
    # The runtime refuses an int32 accumulator that could overflow; say so here with the shapes.
    bound = k * _max_magnitude(lhs_q.zero_point) * _max_magnitude(rhs_q.zero_point)
    if bound > INT32_MAX >> max(shift, 0):
        raise Unsupported(f"K = {k}: the int32 accumulator of BATCH_MATMUL could overflow")
    return MatmulPlan(lhs_q, rhs_q, out, mult, shift, lhs_shape, rhs_shape, out_shape)


def _padded(dims, rank: int) -> tuple[int, ...]:
    return (1,) * (rank - len(dims)) + tuple(dims)


def _rhs_tensor(ctx, rhs: Value, rank: int) -> tuple[int, int]:
    """(tensor index, rhs_transposed) of the rhs operand, viewed at the output's rank."""
    if rhs.is_constant:  # re-laid out once at compile time: [.., N, K]
        data = np.ascontiguousarray(np.swapaxes(rhs.const, -1, -2))
        return ctx.tensor(Value(None, data.shape, "INT8", rhs.qparams, CONTIG, None, data),
                          _padded(data.shape, rank)), 1
    if rhs.layout == SWAPPED_LAST2:  # k^T over k's bytes: the physical dims are [.., N, K]
        return ctx.tensor(rhs, _padded(rhs.physical, rank)), 1
    rhs = ctx.as_layout(rhs, CONTIG)
    return ctx.tensor(rhs, _padded(rhs.shape, rank)), 0


def lower(node, ctx):
    p = analyze(node, ctx)
    rank = len(p.out_shape)
    lhs = ctx.input(node.args[0], layout=CONTIG)
    lhs_tensor = ctx.tensor(lhs, _padded(p.lhs_shape, rank))
    rhs_tensor, rhs_transposed = _rhs_tensor(ctx, ctx.input(node.args[1]), rank)
    out = ctx.new_value(p.out_shape, p.out.qparams, CONTIG)
    ctx.emit("BATCH_MATMUL", [lhs_tensor, rhs_tensor], [out.tensor],
             lhs_offset=-p.lhs_q.zero_point, rhs_offset=-p.rhs_q.zero_point,
             output_offset=p.out.qparams.zero_point, mult=p.mult, shift=p.shift,
             act_min=p.out.act_min, act_max=p.out.act_max, rhs_transposed=rhs_transposed)
    ctx.finish(node, p.out, out)


register("aten.matmul.default", analyze=analyze, lower=lower, fuses_activation=True, preserve=True)
register("aten.bmm.default", analyze=analyze, lower=lower, fuses_activation=True)


# This module's rows of docs/lowering.md's op table (scripts/gen_lowering_table.py writes the table from them).
OP_TABLE_ROWS = (
    OpTableRow(120,
               pytorch=("matmul, bmm of two int8 tensors (attention's `q @ k^T`, `attn @ v`; batch dims "
                        "broadcast; aten.matmul kept whole)"),
               xts3=("BATCH_MATMUL on ESP-NN's FC kernel: an rhs labelled SWAPPED_LAST2 (`k.transpose(-2, -1)`) "
                     "or a constant is passed as `[.., N, K]` and read in place; any other rhs as `[.., K, N]`, "
                     "transposed per batch by the runtime")),
    OpTableRow(140,
               pytorch=("scaled_dot_product_attention (what nn.MultiheadAttention and "
                        "nn.TransformerEncoderLayer call): EspNNQuantizer rewrites it before observers are "
                        "placed into `softmax((q @ k^T) * scale) @ v` (`quantizer/attention.py`), so every "
                        "intermediate gets an int8 observer; with `is_causal` or a constant mask (boolean, or "
                        "additive with -inf entries; a mask computed from constants, as MultiheadAttention's, "
                        "is evaluated at compile time) into `_safe_softmax(scores.masked_fill(masked, -inf))`, "
                        "annotated as one int8 op"),
               xts3=("BATCH_MATMUL, MUL by a constant, [ADD of the additive part,] SOFTMAX or MASKED_SOFTMAX "
                     "(the mask as a constant 0/1 input), BATCH_MATMUL"),
               also_in=("elementwise", "softmax")),
)
