"""quantize / dequantize nodes and getitem.

Inside a partition the int8 tensor is the value: a dequantize node is the
same Value as its int8 input (no op), and a quantize node is where an int8
op's output lands (the op's lowering registers it). The XTS3 QUANTIZE and
DEQUANTIZE ops appear only at float partition boundaries (a float input
quantized inside, a dequantized value leaving the partition; see
LowerContext.output_tensor), and REQUANTIZE where a quantize follows a
dequantize with other parameters.
"""

from __future__ import annotations


from ..graph import Unsupported, dtype_of, op_name
from ..op_table import OpTableRow
from ..quant import DQ_PER_CHANNEL, DQ_PER_TENSOR, Q_PER_TENSOR, dq_params, f32, q_params
from ..registry import register


def analyze_quantize(node, cc):
    qp = q_params(node)
    src = node.args[0]
    if str(dtype_of(src)) != "torch.float32":
        raise Unsupported(f"quantize {node.name} reads {dtype_of(src)}, not float32")
    return qp


def lower_quantize(node, ctx):
    qp = analyze_quantize(node, ctx)
    v = ctx.value(node.args[0])
    if v.dtype == "FLOAT32":
        out = ctx.new_value(v.shape, qp, v.layout, dims=v.dims)
        ctx.emit("QUANTIZE", [ctx.tensor(v, v.dims)], [out.tensor],
                 inv_scale_f32=f32(1.0 / float(node.args[1])), zero_point=qp.zero_point)
    else:
        out = ctx.requantize(v, qp)  # quantize(dequantize(x)) with new parameters
    ctx.set_value(node, out)


def _constant_input_users_delegated(node, cc):
    for user in node.users:
        if not cc.in_partition(user):
            raise Unsupported(f"constant {node.name} feeds {user.name} ({op_name(user)}), which is not delegated")


def analyze_dequantize(node, cc):
    src = node.args[0]
    if cc.constants.is_constant(src) and str(cc.constants.tensor(src).dtype) == "torch.int32":
        # the int32 bias of a conv/linear with per-tensor weights: read by its consumer (quant.bias)
        _constant_input_users_delegated(node, cc)
        return None
    qp = dq_params(node)
    if cc.constants.is_constant(src):
        if str(cc.constants.tensor(src).dtype) != "torch.int8":
            raise Unsupported(f"dequantize {node.name} reads a {cc.constants.tensor(src).dtype} constant")
        _constant_input_users_delegated(node, cc)
    elif str(dtype_of(src)) != "torch.int8":
        raise Unsupported(f"dequantize {node.name} reads {dtype_of(src)}, not int8")
    return qp


def lower_dequantize(node, ctx):
    qp = analyze_dequantize(node, ctx)
    src = node.args[0]
    if ctx.constants.is_constant(src):
        return  # weights / constant operands: read by the consumer (ctx.value makes a constant Value)
    v = ctx.value(src)
    if v.dtype != "INT8":
        raise Unsupported(f"dequantize {node.name} reads a {v.dtype} value")
    if not v.qparams.same(qp):
        raise Unsupported(f"dequantize {node.name} uses other parameters than its quantize")
    ctx.set_value(node, v)


def analyze_dequantize_per_channel(node, cc):
    if not cc.constants.is_constant(node.args[0]):
        raise Unsupported(f"per-channel dequantize {node.name} of an activation")
    _constant_input_users_delegated(node, cc)


def lower_nothing(node, ctx):
    analyze_dequantize_per_channel(node, ctx)  # weights: read by the consumer


def analyze_getitem(node, cc):
    src = node.args[0]
    if not cc.in_partition(src):
        raise Unsupported(f"{src.name} is not delegated")


def lower_getitem(node, ctx):
    # Multi-output lowerings register their getitem users themselves.
    raise Unsupported(f"{node.args[0].name} does not produce output {node.args[1]} inside the partition")


register(Q_PER_TENSOR, analyze=analyze_quantize, lower=lower_quantize, compute=False)
register(DQ_PER_TENSOR, analyze=analyze_dequantize, lower=lower_dequantize, compute=False)
register(DQ_PER_CHANNEL, analyze=analyze_dequantize_per_channel, lower=lower_nothing, compute=False)
register("operator.getitem", analyze=analyze_getitem, lower=lower_getitem, compute=False)


# This module's rows of docs/lowering.md's op table (scripts/gen_lowering_table.py writes the table from them).
OP_TABLE_ROWS = (
    OpTableRow(200,
               pytorch="quantize/dequantize at partition boundaries",
               xts3="QUANTIZE, DEQUANTIZE, REQUANTIZE"),
)
